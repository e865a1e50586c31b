"""The Universal Transformer (Dehghani et al., 2018, arXiv:1807.03819), as in T2T's
models/research/universal_transformer.py and universal_transformer_util.py.

A Transformer whose encoder and decoder each hold ONE layer (self-attention, [encoder-
decoder attention,] feed-forward, each with T2T's pre/post-processing), applied again and
again in depth with shared weights. Before every step ("step_preprocess") the position
timing signal and a step ("depth") signal are added to the state. Two recurrences:
- "basic": the layer is applied num_rec_steps times (T2T's universal_transformer_basic);
- "act": Adaptive Computation Time, position-wise (T2T's universal_transformer_act_basic,
  or "accumulated" with act_type): each step a sigmoid unit gives every position a halting
  probability p; a position halts once its summed p would exceed 1 - act_epsilon (or at
  act_max_steps), and its remainder 1 - sum(p) weighs that last step. The output is
  updated as transformed * w + output * (1 - w), w being p while running, the remainder
  on the halting step, 0 after; the loop stops when every position has halted. The
  ponder cost act_loss_weight * mean(ponder_times + remainders) (encoder + decoder) is
  returned as the extra loss "act_loss".
Shapes follow the Transformer: seq2seq (inputs and symbol targets) is encoder-decoder,
a language model (targets only) decoder-only, a class-label problem encoder-only and
mean-pooled; `universal_transformer_encoder` is encoder-only for any problem with inputs.

Decoding: no cached decoder (T2T has none either: "No caching in Universal
Transformers!"); decoding re-runs the model on the prefix through T2TModel's decode_step.
The decoder is causal with ACT too: a position's output is frozen once it halts, and its
halting depends only on earlier positions.

Differences from Tensor2Tensor:
- T2T's basic ACT update reads `previous_state * 1 - update_weights` (operator precedence:
  previous - w); t2t computes the intended previous * (1 - w).
- act_max_steps forces halting with the remainder as in Graves (2016): the halting
  weights of every position sum to 1. T2T only stops the loop there, leaving positions
  that never crossed the threshold with remainder 0 and halting weights summing to < 1.
- Packed examples get their own positions ("<name>_position") in the per-step timing
  signal; T2T's add_position_timing_signal always counts from 0 along the row.
- Left out (ValueError when asked for): recurrence types highway, skip, dwa, rnn, gru,
  lstm; act_type global and random; mix_with_transformer; sepconv ffn; SRU; concat timing
  signals; position_start_index; the pad remover; expected-attention losses.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.hparams import views
from t2t.layers import attention, common, positional
from t2t.models import t2t_model, transformer

RECURRENCE_TYPES = ("basic", "act")
ACT_TYPES = ("basic", "accumulated")
STEP_SIGNAL_TYPES = ("learned", "sinusoid")

ActStats = dict[str, tf.Tensor]  # "ponder_times", "remainders", "halting_probability": [B, T]


def check_hparams(hparams: views.UniversalTransformerHParams) -> None:
    """ValueError for a recurrence or option this implementation does not have."""
    supported = {
        "recurrence_type": RECURRENCE_TYPES,
        "act_type": ACT_TYPES,
        "step_timing_signal_type": STEP_SIGNAL_TYPES,
    }
    for name, values in supported.items():
        value = getattr(hparams, name)
        if value not in values:
            raise ValueError(
                f"Unknown {name} {value!r}: t2t's universal_transformer supports "
                f"{', '.join(values)}."
            )
    for name in ("num_rec_steps", "act_max_steps"):
        if getattr(hparams, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(hparams, name)}.")


class DepthRecurrence(common.Layer):
    """One Transformer layer (`unit`) applied in depth with shared weights: T2T's
    universal_transformer_layer with step_preprocess.

    call(x [B, T, H], bias, positions [B, T] or None, memory [B, S, H] or None,
    memory_bias) -> (output [B, T, H], stats): stats is {} for "basic", and for "act"
    float32 [B, T] "ponder_times" (steps taken), "remainders" and "halting_probability"
    (1 where halted: the halting weights' sum).
    """

    def __init__(self, hparams: views.UniversalTransformerHParams, unit: keras.layers.Layer,
                 name: str):
        super().__init__(name=name)
        check_hparams(hparams)
        self.unit = unit
        self.recurrence_type = hparams.recurrence_type
        self.act_type = hparams.act_type
        is_act = self.recurrence_type == "act"
        self.num_steps = hparams.act_max_steps if is_act else hparams.num_rec_steps
        self.hidden_size = hparams.hidden_size
        self.add_position_signal = hparams.add_position_timing_signal
        self.step_signal_type = (
            hparams.step_timing_signal_type if hparams.add_step_timing_signal else None
        )
        if self.step_signal_type == "learned":  # T2T's get_layer_timing_signal_learned_1d
            self.step_embedding = self.add_weight(
                name="step_embedding",
                shape=(self.num_steps, self.hidden_size),
                initializer=keras.initializers.RandomNormal(0.0, self.hidden_size**-0.5),
            )
        if is_act:
            self.threshold = 1.0 - hparams.act_epsilon
            self.halting = keras.layers.Dense(
                1, activation="sigmoid", kernel_initializer=common.initializer(hparams),
                bias_initializer=keras.initializers.Constant(hparams.act_halting_bias_init),
                name="sigmoid_activation_for_pondering",
            )

    def step_signal(self, step: int | tf.Tensor) -> tf.Tensor:
        """[H] signal of depth step `step` (learned, or sinusoid over the steps)."""
        if self.step_signal_type == "learned":
            return tf.gather(self.step_embedding, step) * self.hidden_size**0.5
        return positional.timing_signal_from_positions(step, self.hidden_size)

    def step_preprocess(self, x: tf.Tensor, step: int | tf.Tensor,
                        positions: tf.Tensor | None) -> tf.Tensor:
        """x [B, T, H] plus the position and step timing signals of step `step`."""
        if self.add_position_signal:
            x = positional.add_timing_signal(x, positions)
        if self.step_signal_type is not None:
            x += tf.cast(self.step_signal(step), x.dtype)
        return x

    def _apply_unit(self, x, bias, memory, memory_bias, training):
        if memory is None:
            return self.unit(x, bias, training=training)
        return self.unit(x, bias, memory=memory, memory_bias=memory_bias, training=training)

    def call(self, x: tf.Tensor, bias: tf.Tensor, positions: tf.Tensor | None = None,
             memory: tf.Tensor | None = None, memory_bias: tf.Tensor | None = None,
             training: bool | None = None) -> tuple[tf.Tensor, ActStats]:
        def transform(state, step):
            state = self.step_preprocess(state, step, positions)
            return state, self._apply_unit(state, bias, memory, memory_bias, training)

        if self.recurrence_type == "basic":
            for step in range(self.num_steps):
                x = transform(x, step)[1]
            return x, {}
        return self._act(x, transform)

    def _act(self, x: tf.Tensor, transform: Any) -> tuple[tf.Tensor, ActStats]:
        """Position-wise ACT (T2T's universal_transformer_act_basic / _accumulated)."""
        threshold, max_steps = self.threshold, float(self.num_steps)

        def act_step(state, step, halting, remainders, n_updates, output):
            state, transformed = transform(state, step)
            p = tf.cast(self.halting(state)[..., 0], tf.float32)
            running = tf.cast(halting < 1.0, tf.float32)
            crossing = tf.cast(halting + p * running > threshold, tf.float32)
            last = tf.cast(n_updates + 1.0 >= max_steps, tf.float32)  # forced halt
            new_halted = tf.maximum(crossing, last) * running
            running -= new_halted
            halting += p * running
            remainders += new_halted * (1.0 - halting)
            halting += new_halted * remainders
            n_updates += running + new_halted
            weights = tf.cast((p * running + new_halted * remainders)[..., None], output.dtype)
            if self.act_type == "accumulated":
                output += transformed * weights
            else:
                output = transformed * weights + output * (1.0 - weights)
            return transformed, step + 1, halting, remainders, n_updates, output

        zeros = tf.zeros(tf.shape(x)[:2], tf.float32)
        carry = (x, tf.constant(0), zeros, zeros, zeros, tf.zeros_like(x))
        carry = act_step(*carry)  # the first step always runs (and builds the weights)
        carry = tf.while_loop(
            lambda *c: tf.reduce_any(c[2] < 1.0), act_step, carry,
            maximum_iterations=self.num_steps - 1,
        )
        _, _, halting, remainders, n_updates, output = carry
        return output, {"ponder_times": n_updates, "remainders": remainders,
                        "halting_probability": halting}


def act_loss(stats: list[ActStats], weight: float) -> tf.Tensor:
    """weight * the sum over stacks of mean(ponder_times + remainders), as in T2T."""
    return weight * tf.add_n(
        [tf.reduce_mean(s["ponder_times"] + s["remainders"]) for s in stats]
    )


@registry.register_model
class UniversalTransformer(transformer.Transformer):
    """Encoder-decoder, decoder-only or encoder-only Universal Transformer (module doc).

    `encode` and `decode` return the Transformer's results plus the ACT statistics of
    their stack ({} for "basic"), as T2T's UniversalTransformer.encode/decode do."""

    HPARAMS_VIEW = views.UniversalTransformerHParams
    STRUCTURAL_HPARAMS = frozenset({
        "add_step_timing_signal", "max_relative_position",
        "recurrence_type", "self_attention_type", "step_timing_signal_type"})

    encoder_only = False
    has_decode_cache = False  # decoding re-runs the model on the prefix (module doc)
    decode_init_cached = t2t_model.T2TModel.decode_init_cached
    decode_step_cached = t2t_model.T2TModel.decode_step_cached

    def __init__(self, hparams, mode=t2t_model.TRAIN, problem_hparams=None, name=None,
                 **kwargs):
        # Not Transformer.__init__: it builds num_hidden_layers distinct layers per stack.
        t2t_model.T2TModel.__init__(self, hparams, mode, problem_hparams, name=name, **kwargs)
        hp = self.hparams
        check_hparams(hp)
        self.is_classifier = self.problem_hparams.is_classifier
        self.has_encoder = self.has_inputs
        if self.encoder_only and not self.has_encoder:
            raise ValueError(f"{type(self).__name__} needs a problem with inputs; for a "
                             f"language model use universal_transformer.")
        self.is_encoder_only = self.is_classifier or self.encoder_only
        scope = f"universal_transformer_{hp.recurrence_type}"
        if self.has_encoder:
            unit = transformer.EncoderLayer(hp, "layer")
            self.encoder = transformer.Stack(hp, [DepthRecurrence(hp, unit, scope)], "encoder")
            self.target_space_embedding = (
                keras.layers.Embedding(32, hp.hidden_size, name="target_space_embedding")
                if hp.use_target_space_embedding else None
            )
        if not self.is_encoder_only:
            unit = transformer.DecoderLayer(hp, self.has_encoder, "layer")
            self.decoder = transformer.Stack(hp, [DepthRecurrence(hp, unit, scope)], "decoder")

    def _start_timing(self, x: tf.Tensor, positions: tf.Tensor | None) -> tf.Tensor:
        """The Transformer's one-off position signal, only when not added every step."""
        hp = self.hparams
        if hp.pos == "timing" and not hp.add_position_timing_signal:
            x = positional.add_timing_signal(x, positions)
        return x

    def encode(self, inputs: tf.Tensor, features: dict, training: bool
               ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, ActStats]:
        """Embedded inputs [B, S, H] -> (output [B, S, H], self-attention bias,
        nonpadding [B, S], ACT statistics)."""
        nonpadding = attention.embedding_to_nonpadding(inputs)
        bias = attention.padding_bias(nonpadding)
        segment = features.get("inputs_segmentation")
        if segment is not None:
            bias += attention.segment_bias(segment, segment)
        x = inputs
        if self.target_space_embedding is not None:
            space = tf.fill([1, 1], self.problem_hparams.target_space_id)
            x += tf.cast(self.target_space_embedding(space), x.dtype)
        positions = features.get("inputs_position")
        x = self.encoder.input_dropout(self._start_timing(x, positions), training=training)
        x, stats = self.encoder.stack_layers[0](x, bias, positions=positions, training=training)
        return self.encoder.final(x, training=training), bias, nonpadding, stats

    def decode(self, decoder_input: tf.Tensor, memory: tf.Tensor | None,
               memory_bias: tf.Tensor | None, features: dict, training: bool
               ) -> tuple[tf.Tensor, ActStats]:
        """Shifted embedded targets [B, T, H] -> (output [B, T, H], ACT statistics)."""
        positions = features.get("targets_position")
        x = self.decoder.input_dropout(self._start_timing(decoder_input, positions),
                                       training=training)
        self_bias = self.decoder_self_bias(tf.shape(x)[1], features)
        x, stats = self.decoder.stack_layers[0](
            x, self_bias, positions=positions, memory=memory, memory_bias=memory_bias,
            training=training,
        )
        return self.decoder.final(x, training=training), stats

    def body(self, features, training):
        """[B, T, H] decoder output ([B, 1, H] pooled for a classifier, [B, S, H] encoder
        output for universal_transformer_encoder); with ACT, also {"act_loss": scalar}."""
        stats = []
        if self.is_encoder_only:
            output, _, nonpadding, encoder_stats = self.encode(features["inputs"], features,
                                                               training)
            stats.append(encoder_stats)
            if self.is_classifier:
                weights = tf.cast(nonpadding[..., None], output.dtype)
                pooled = tf.reduce_sum(output * weights, axis=1)
                output = (pooled / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0))[:, None]
        else:
            memory = memory_bias = None
            if self.has_encoder:
                memory, _, nonpadding, encoder_stats = self.encode(features["inputs"],
                                                                   features, training)
                stats.append(encoder_stats)
                memory_bias = self._memory_bias(nonpadding, features)
            decoder_input = self.shift_right(features["targets"], features)
            output, decoder_stats = self.decode(decoder_input, memory, memory_bias,
                                                features, training)
            stats.append(decoder_stats)
        weight = self.hparams.act_loss_weight
        if self.hparams.recurrence_type == "act" and weight != 0:
            return output, {"act_loss": act_loss(stats, weight)}
        return output


@registry.register_model
class UniversalTransformerEncoder(UniversalTransformer):
    """Encoder only (T2T's UniversalTransformerEncoder): per-input-position outputs
    [B, S, H] (targets aligned with the inputs), or mean-pooled for a class label."""

    encoder_only = True
