"""LSTM sequence-to-sequence models (Tensor2Tensor's `models/lstm.py`).

    lstm_seq2seq                        encoder LSTM stack -> final states -> decoder stack
    lstm_seq2seq_attention              + Luong or Bahdanau attention with input feeding
    lstm_seq2seq_bidirectional_encoder  forward + backward encoder, decoder of 2x units
    lstm_seq2seq_attention_bidirectional_encoder

Shapes (B batch, S input length, T target length, H = hparams.hidden_size):
the body gets embedded inputs [B, S, H] and embedded targets [B, T, H] and returns
[B, T, H]. It shifts the targets right by one step itself, so output t depends only on
targets < t (the base class's greedy decoding re-runs the body on a growing prefix).

As in T2T, the unidirectional encoder reads each input reversed (only its non-padded
part, `tf.reverse_sequence`), every LSTM layer's input gets dropout (hparams.dropout,
training only, independently per step), and padding is recovered from the embeddings
(padded ids embed to exactly zero). The encoder masks padded steps, so they never
update its state: padding inputs with more zeros changes nothing. Padding is assumed
to be at the end (T2T assumes the same through its sequence lengths).

Encoder and plain decoder are `keras.layers.LSTM` layers, which run cuDNN's fused
kernel on a GPU (the mask is built from lengths, so it is right-padded as cuDNN
requires). The attention decoder feeds the previous attention vector into the next
step (AttentionWrapper's input feeding), so it is a step loop (`tf.while_loop`) over
its own LSTM weights; the targets' share of the first layer's input projection is
computed for all steps at once.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import common
from t2t.models import t2t_model

State = list[tuple[tf.Tensor, tf.Tensor]]  # per layer (h, c), each [B, units]

MECHANISMS = ("bahdanau", "luong")


def shift_right(x: tf.Tensor) -> tf.Tensor:
    """[B, T, H] -> [B, T, H]: one zero step in front, the last step dropped."""
    return tf.pad(x, [[0, 0], [1, 0], [0, 0]])[:, :-1, :]


def lengths_from_embedding(x: tf.Tensor) -> tf.Tensor:
    """int32 [B]: the number of non-padding steps of embedded x [B, S, H]."""
    return tf.reduce_sum(tf.cast(tf.reduce_any(tf.not_equal(x, 0), axis=-1), tf.int32), axis=-1)


def _reverse(x: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """Reverses the first lengths[b] steps of each x[b] ([B, S, ...]); padding stays put."""
    return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)


class LSTMStack(keras.layers.Layer):
    """num_layers `keras.layers.LSTM` layers, dropout on each layer's input.

    call(x [B, T, D], steps_mask [B, T] bool or None, initial_state per layer (h, c) or None)
    -> (outputs [B, T, units], final state per layer (h, c) [B, units]). Masked steps
    keep the state unchanged; their outputs are unspecified (zero them if they matter).
    """

    def __init__(
        self, units: int, num_layers: int, dropout: float, hparams: HParams, name: str | None = None
    ):
        super().__init__(name=name)
        self.units = units
        self.lstms = [
            keras.layers.LSTM(
                units,
                return_sequences=True,
                return_state=True,
                kernel_initializer=common.initializer(hparams),
                recurrent_initializer=common.initializer(hparams),
                name=f"lstm_{i}",
            )
            for i in range(num_layers)
        ]
        self.dropouts = [
            common.Dropout(dropout, name=f"dropout_{i}") for i in range(num_layers)
        ]

    def call(
        self,
        x: tf.Tensor,
        steps_mask: tf.Tensor | None = None,
        initial_state: State | None = None,
        training: bool = False,
    ) -> tuple[tf.Tensor, State]:
        states = []
        for i, (lstm, dropout) in enumerate(zip(self.lstms, self.dropouts, strict=True)):
            x = dropout(x, training=training)
            init = None if initial_state is None else list(initial_state[i])
            x, h, c = lstm(x, mask=steps_mask, initial_state=init, training=training)
            states.append((h, c))
        return x, states


class LSTMEncoder(keras.layers.Layer):
    """Encodes embedded inputs [B, S, D] with padding (all-zero steps) at the end.

    call -> (outputs [B, S, units] in input order, zero at padding; final state per layer
    (h, c); mask [B, S] bool of the non-padding steps). Unidirectional: a stack of
    `units` reads each input reversed (as T2T). Bidirectional: a forward and a backward
    stack of `units` each; outputs and states are their concatenations (2 * units).
    """

    def __init__(
        self,
        units: int,
        num_layers: int,
        dropout: float,
        hparams: HParams,
        bidirectional: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.bidirectional = bidirectional
        self.output_size = units * (2 if bidirectional else 1)
        self.stack = LSTMStack(
            units, num_layers, dropout, hparams, name="forward" if bidirectional else "stack"
        )
        self.backward = (
            LSTMStack(units, num_layers, dropout, hparams, name="backward")
            if bidirectional
            else None
        )

    def call(self, inputs: tf.Tensor, training: bool = False) -> tuple[tf.Tensor, State, tf.Tensor]:
        lengths = lengths_from_embedding(inputs)
        mask = tf.sequence_mask(lengths, maxlen=tf.shape(inputs)[1])
        # cuDNN refuses fully masked rows: an empty input runs one step on its zero pad.
        lstm_mask = tf.sequence_mask(tf.maximum(lengths, 1), maxlen=tf.shape(inputs)[1])
        reversed_inputs = _reverse(inputs, lengths)
        if not self.bidirectional:
            outputs, states = self.stack(reversed_inputs, steps_mask=lstm_mask, training=training)
            outputs = _reverse(outputs, lengths)
        else:
            forward, forward_states = self.stack(inputs, steps_mask=lstm_mask, training=training)
            backward, backward_states = self.backward(
                reversed_inputs, steps_mask=lstm_mask, training=training
            )
            outputs = tf.concat([forward, _reverse(backward, lengths)], axis=-1)
            states = [
                (tf.concat([fh, bh], -1), tf.concat([fc, bc], -1))
                for (fh, fc), (bh, bc) in zip(forward_states, backward_states, strict=True)
            ]
        outputs *= tf.cast(mask, outputs.dtype)[..., None]
        return outputs, states, mask


def _lstm_cell(z: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One LSTM update from the gate pre-activations z [B, 4U] (i, f, g, o) and cell c."""
    i, f, g, o = tf.split(z, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c), c


class AttentionDecoder(keras.layers.Layer):
    """LSTM stack wrapped in attention over a memory (tf.contrib.seq2seq.AttentionWrapper).

    Each step t: the first layer reads concat(input_t, attention_{t-1}) (attention_0 = 0);
    the top layer's output h_t is the query; alignments a_t [B, S] = softmax of the
    scores over unmasked memory steps; context_t = sum_s a_t[s] * memory[s] [B, D];
    attention_t = concat(h_t, context_t) @ W (no bias; num_heads * attention_layer_size
    wide); the step outputs attention_t if output_attention else h_t.
      bahdanau: score_s = v . tanh(memory_s @ W_m + h_t @ W_q)  (units wide, no biases)
      luong:    score_s = h_t . (memory_s @ W_m)                (unscaled)
    With num_heads > 1 the heads share the mechanism (as T2T's `[mechanism] * num_heads`)
    and differ in their attention layers, i.e. one layer num_heads times as wide.
    """

    def __init__(
        self,
        units: int,
        num_layers: int,
        input_size: int,
        memory_size: int,
        mechanism: str,
        attention_layer_size: int,
        num_heads: int,
        output_attention: bool,
        dropout: float,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        if mechanism not in MECHANISMS:
            raise ValueError(f"Unknown attention_mechanism {mechanism!r}: use luong or bahdanau.")
        self.units = units
        self.num_layers = num_layers
        self.input_size = input_size
        self.mechanism = mechanism
        self.attention_size = attention_layer_size * num_heads
        self.output_attention = bool(output_attention)
        self.output_size = self.attention_size if self.output_attention else units
        self.dropout_rate = dropout
        self.input_dropout = common.Dropout(dropout, name="input_dropout")
        self.mask_dropout = common.Dropout(dropout, name="state_dropout")

        def weight(name: str, shape: tuple[int, ...], initializer: Any = None) -> keras.Variable:
            return self.add_weight(
                name=name, shape=shape, initializer=initializer or common.initializer(hparams)
            )

        def unit_forget_bias(shape: tuple[int, ...], dtype: Any = None) -> tf.Tensor:
            bias = tf.concat([tf.zeros([units]), tf.ones([units]), tf.zeros([2 * units])], 0)
            return tf.cast(bias, dtype or "float32")

        self.kernels, self.recurrent_kernels, self.biases = [], [], []
        for i in range(num_layers):
            layer_input = input_size + self.attention_size if i == 0 else units
            self.kernels.append(weight(f"lstm_{i}_kernel", (layer_input, 4 * units)))
            self.recurrent_kernels.append(weight(f"lstm_{i}_recurrent_kernel", (units, 4 * units)))
            self.biases.append(weight(f"lstm_{i}_bias", (4 * units,), unit_forget_bias))
        self.memory_kernel = weight("memory_layer", (memory_size, units))
        if mechanism == "bahdanau":
            self.query_kernel = weight("query_layer", (units, units))
            self.attention_v = weight("attention_v", (units,))
        self.attention_kernel = weight(
            "attention_layer", (units + memory_size, self.attention_size)
        )

    def _dropout_masks(self, steps: tf.Tensor, batch: tf.Tensor, dtype: Any) -> list[tf.Tensor]:
        """Dropout masks [T, B, n] of the fed-back attention and of the upper layers' inputs."""
        widths = [self.attention_size] + [self.units] * (self.num_layers - 1)
        return [self.mask_dropout(tf.ones([steps, batch, w], dtype), training=True)
                for w in widths]

    def _scorer(self, keys: tf.Tensor, cast: Any) -> Any:
        """query [B, U] -> attention scores [B, S] over `keys` [B, S, U] (the mechanism's)."""
        if self.mechanism == "bahdanau":
            query_kernel, attention_v = cast(self.query_kernel), cast(self.attention_v)
            return lambda query: tf.reduce_sum(
                attention_v * tf.tanh(keys + tf.matmul(query, query_kernel)[:, None, :]), axis=-1)
        return lambda query: tf.einsum("bu,bsu->bs", query, keys)

    def call(
        self,
        inputs: tf.Tensor,
        initial_state: State,
        memory: tf.Tensor,
        memory_mask: tf.Tensor,
        training: bool = False,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """inputs [B, T, input_size], memory [B, S, D] (0 at padding), memory_mask [B, S]
        -> (outputs [B, T, output_size], alignments [B, T, S])."""
        dtype = inputs.dtype
        cast = lambda v: tf.cast(v, dtype)
        kernels = [cast(k) for k in self.kernels]
        recurrent = [cast(k) for k in self.recurrent_kernels]
        biases = [cast(b) for b in self.biases]
        attention_kernel = cast(self.attention_kernel)
        memory = tf.cast(memory, dtype)
        keys = tf.einsum("bsd,du->bsu", memory, cast(self.memory_kernel))
        score = self._scorer(keys, cast)
        batch, steps = tf.shape(inputs)[0], tf.shape(inputs)[1]
        dropping = bool(training) and self.dropout_rate > 0

        # The targets' share of the first layer's gates, for every step at once: [T, B, 4U].
        x = self.input_dropout(inputs, training=training) if dropping else inputs
        projected = tf.transpose(
            tf.einsum("bti,ig->btg", x, kernels[0][: self.input_size]) + biases[0], [1, 0, 2]
        )
        feed_kernel = kernels[0][self.input_size :]
        masks = self._dropout_masks(steps, batch, dtype) if dropping else []
        score_mask = tf.cast(memory_mask, tf.bool)

        def step(t, hs, cs, attention, outputs, alignments):
            feed = attention * masks[0][t] if dropping else attention
            z = projected[t] + tf.matmul(feed, feed_kernel) + tf.matmul(hs[0], recurrent[0])
            new_hs, new_cs = [], []
            h, c = _lstm_cell(z, cs[0])
            new_hs.append(h)
            new_cs.append(c)
            for i in range(1, self.num_layers):
                below = h * masks[i][t] if dropping else h
                z = tf.matmul(below, kernels[i]) + tf.matmul(hs[i], recurrent[i]) + biases[i]
                h, c = _lstm_cell(z, cs[i])
                new_hs.append(h)
                new_cs.append(c)
            query = h
            scores = tf.where(score_mask, tf.cast(score(query), tf.float32), -1e9)
            align = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
            context = tf.einsum("bs,bsd->bd", align, memory)
            attention = tf.matmul(tf.concat([query, context], axis=-1), attention_kernel)
            output = attention if self.output_attention else query
            return [
                t + 1,
                new_hs,
                new_cs,
                attention,
                outputs.write(t, output),
                alignments.write(t, align),
            ]

        hs = [tf.cast(h, dtype) for h, _ in initial_state]
        cs = [tf.cast(c, dtype) for _, c in initial_state]
        attention = tf.zeros([batch, self.attention_size], dtype)
        outputs = tf.TensorArray(dtype, size=steps, element_shape=[None, self.output_size])
        alignments = tf.TensorArray(dtype, size=steps, element_shape=[None, None])
        _, _, _, _, outputs, alignments = tf.while_loop(
            lambda t, *_: t < steps,
            step,
            [tf.constant(0), hs, cs, attention, outputs, alignments],
            maximum_iterations=steps,  # lets XLA size the loop's gradient accumulators
        )
        return tf.transpose(outputs.stack(), [1, 0, 2]), tf.transpose(alignments.stack(), [1, 0, 2])


class _LSTMSeq2seqBase(t2t_model.T2TModel):
    """Shared structure: optional encoder, a decoder, a projection to hidden_size if needed."""

    HPARAMS_VIEW = views.LSTMHParams

    bidirectional: bool = False
    attention: bool = False

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        name: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, name=name, **kwargs)
        hp = self.hparams
        hidden, layers, dropout = hp.hidden_size, hp.num_hidden_layers, hp.dropout
        if self.attention and not self.has_inputs:
            raise ValueError(f"{self.name} attends over the inputs: the problem must have inputs.")
        self.encoder = (
            LSTMEncoder(
                hidden, layers, dropout, hp, bidirectional=self.bidirectional, name="encoder"
            )
            if self.has_inputs
            else None
        )
        # A bidirectional encoder's concatenated states start a decoder twice as wide.
        units = hidden * (2 if self.bidirectional else 1)
        if self.attention:
            num_heads = hp.num_heads
            self.decoder = AttentionDecoder(
                units,
                layers,
                input_size=hidden,
                memory_size=self.encoder.output_size,
                mechanism=hp.attention_mechanism,
                attention_layer_size=hp.attention_layer_size,
                num_heads=num_heads,
                output_attention=hp.output_attention,
                dropout=dropout,
                hparams=hp,
                name="decoder",
            )
            out_size = self.decoder.output_size
            # T2T projects multi-head attention back to the decoder's width.
            project = out_size != hidden or (self.decoder.output_attention and num_heads > 1)
        else:
            self.decoder = LSTMStack(units, layers, dropout, hp, name="decoder")
            project = units != hidden
        # T2T's top sized its softmax by the body output; t2t's is hidden_size wide.
        self.projection = keras.layers.Dense(hidden, name="output_projection") if project else None

    def _decode(
        self, features: dict[str, tf.Tensor], training: bool
    ) -> tuple[tf.Tensor, tf.Tensor | None]:
        """(body output [B, T, H], alignments [B, T, S] or None)."""
        decoder_inputs = shift_right(features["targets"])
        alignments = None
        if self.encoder is None:
            outputs, _ = self.decoder(decoder_inputs, training=training)
        else:
            memory, states, mask = self.encoder(features["inputs"], training=training)
            if self.attention:
                outputs, alignments = self.decoder(
                    decoder_inputs, states, memory, mask, training=training
                )
            else:
                outputs, _ = self.decoder(decoder_inputs, initial_state=states, training=training)
        if self.projection is not None:
            outputs = self.projection(outputs)
        return outputs, alignments

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """inputs [B, S, H] (optional), targets [B, T, H] embedded -> [B, T, H]."""
        return self._decode(features, training)[0]


@registry.register_model("lstm_seq2seq")
class LSTMSeq2seq(_LSTMSeq2seqBase):
    """Encoder final states initialize the decoder (T2T's lstm_seq2seq).

    Without inputs in the problem it is an LSTM language model over the targets.
    """


@registry.register_model("lstm_seq2seq_bidirectional_encoder")
class LSTMSeq2seqBidirectionalEncoder(_LSTMSeq2seqBase):
    """Forward and backward encoders; their concatenated states start a 2H-unit decoder."""

    bidirectional = True


class _AttentionModel(_LSTMSeq2seqBase):
    attention = True
    HPARAMS_VIEW = views.LSTMAttentionHParams
    STRUCTURAL_HPARAMS = frozenset({
        "attention_layer_size", "attention_mechanism", "output_attention"})

    def attention_weights(
        self, features: dict[str, tf.Tensor], training: bool = False
    ) -> tf.Tensor:
        """Alignments [B, T, S] of each target step over the input positions (0 at padding).

        features: "inputs" [B, S] and "targets" [B, T] ids.
        """
        transformed = self.bottom(features, training)
        return self._decode(transformed, training)[1]


@registry.register_model("lstm_seq2seq_attention")
class LSTMSeq2seqAttention(_AttentionModel):
    """Decoder attends over the encoder outputs (hparams.attention_mechanism)."""


@registry.register_model("lstm_seq2seq_attention_bidirectional_encoder")
class LSTMSeq2seqAttentionBidirectionalEncoder(_AttentionModel):
    """Attention over a bidirectional encoder's outputs; decoder of 2H units."""

    bidirectional = True
