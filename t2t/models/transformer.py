"""The Transformer (Vaswani et al., 2017) as Tensor2Tensor built it.

Three shapes from one class, chosen by the problem's features:
- inputs and symbol targets: encoder-decoder;
- symbol targets only (language modelling): decoder only;
- inputs and a class label: encoder only, mean-pooled over non-padding positions.
Layer pre/post-processing follows hparams.layer_preprocess_sequence / _postprocess_
("n" / "da" in the transformer sets: pre-norm). Packed examples (features
"<name>_segmentation" / "<name>_position") attend only within their own segment.
hparams.self_attention_type "dot_product_relative" (transformer_relative sets) uses
relative position self-attention (t2t.layers.relative_attention), cached decoding included.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality
from t2t.hparams import views
from t2t.layers import (
    attention,
    common,
    ctc,
    feed_forward,
    positional,
    relative_attention,
    relative_buckets,
)
from t2t.models import image_encoder, t2t_model
from t2t.models.step_interface import ANCESTRY, SLOTS


def _layer_count(hparams: views.TransformerHParams, name: str) -> int:
    return getattr(hparams, name) or hparams.num_hidden_layers


class Sublayer(common.Layer):
    """preprocess -> inner layer -> postprocess (with the residual), as in T2T: every
    block of the Transformer and of the models built like it (transformer_moe).

    The inner layer returns [B, T, H], or a pair ([B, T, H], extra): then so does the
    sublayer, with the same extra (attention: its updated cache or its weights; a
    mixture of experts: its load-balancing loss). Its variables are named
    "pre.*", "inner.*" and "post.*" under the sublayer (t2t.models.variable_names)."""

    def __init__(self, inner: keras.layers.Layer, hparams: views.SublayerHParams, name: str):
        super().__init__(name=name)
        dropout = hparams.layer_prepostprocess_dropout
        self.pre = common.PrePostProcess(hparams.layer_preprocess_sequence, hparams, dropout, "pre")
        self.inner = inner
        self.post = common.PrePostProcess(hparams.layer_postprocess_sequence, hparams, dropout, "post")

    def call(self, x: tf.Tensor, training: bool | None = None, return_weights: bool = False,
             **kwargs: Any) -> Any:
        """[B, T, H] -> [B, T, H]; (output, extra) when the inner layer returns a pair:
        with a `cache` (attention), (output, updated cache); with `return_weights`
        (attention), (output, attention weights); a mixture of experts, (output, loss)."""
        if return_weights:  # a named argument: Keras refuses a bool beside tensors in kwargs
            kwargs["return_weights"] = True
        y = self.inner(self.pre(x, training=training), training=training, **kwargs)
        extra = None
        if isinstance(y, tuple):
            y, extra = y
        out = self.post(y, residual=x, training=training)
        return out if extra is None else (out, extra)


_CTC_LABELS = "targets_ctc_labels"  # target ids kept beside their embedding for the CTC loss
SELF_ATTENTION_TYPES = ("dot_product", "dot_product_relative")  # hparams.self_attention_type


def _attention(hparams: views.TransformerLayerHParams, name: str, kind: str = "dot_product"
               ) -> attention.MultiHeadAttention:
    args = dict(
        hidden_size=hparams.hidden_size,
        num_heads=hparams.num_heads,
        dropout=hparams.attention_dropout,
        kernel_initializer=common.initializer(hparams),
        key_channels=hparams.attention_key_channels,
        value_channels=hparams.attention_value_channels,
        name=name,
        use_bias=hparams.get("attention_use_bias", False),
        scale_queries=hparams.get("attention_scale_queries", True),
    )
    if kind == "dot_product":
        return attention.MultiHeadAttention(**args)
    if kind == "dot_product_relative":  # Shaw et al. (2018), T2T's transformer_relative
        return relative_attention.RelativeMultiHeadAttention(
            max_relative_position=hparams.max_relative_position, **args)
    raise ValueError(f"Unknown self_attention_type {kind!r}: use one of {SELF_ATTENTION_TYPES}.")


def _self_attention(hparams: views.TransformerLayerHParams) -> attention.MultiHeadAttention:
    return _attention(hparams, "self_attention", hparams.get("self_attention_type", "dot_product"))


def _ffn(hparams: views.TransformerLayerHParams) -> feed_forward.DenseReluDense:
    if hparams.ffn_layer not in feed_forward.FFN_LAYERS:
        raise ValueError(f"Unsupported ffn_layer {hparams.ffn_layer!r}: use one of "
                         f"{feed_forward.FFN_LAYERS}.")
    layer = (feed_forward.DenseGatedDense if hparams.ffn_layer == "dense_gated_dense"
             else feed_forward.DenseReluDense)
    return layer(
        hparams.filter_size, hparams.hidden_size, hparams.relu_dropout,
        kernel_initializer=common.initializer(hparams), name="ffn",
        activation_name=hparams.get("ffn_activation", "relu"),
        use_bias=hparams.get("ffn_use_bias", True),
    )


class EncoderLayer(common.Layer):
    def __init__(self, hparams: views.TransformerLayerHParams, name: str):
        super().__init__(name=name)
        self.self_attention = Sublayer(_self_attention(hparams), hparams, "self_attention")
        self.ffn = Sublayer(_ffn(hparams), hparams, "ffn")

    def call(self, x, bias, training=None):
        x = self.self_attention(x, training=training, bias=bias)
        return self.ffn(x, training=training)


class DecoderLayer(common.Layer):
    def __init__(self, hparams: views.TransformerLayerHParams, has_encoder: bool, name: str):
        super().__init__(name=name)
        self.self_attention = Sublayer(_self_attention(hparams), hparams, "self_attention")
        self.encdec_attention = (
            Sublayer(_attention(hparams, "encdec_attention"), hparams, "encdec_attention")
            if has_encoder else None
        )
        self.ffn = Sublayer(_ffn(hparams), hparams, "ffn")

    def call(self, x, self_bias, memory=None, memory_bias=None, training=None, cache=None,
             decode_index=None, memory_kv=None, beam_ancestry=None, return_attention=False):
        """[B, T, H] -> [B, T, H]; with a self-attention `cache`, (output, updated cache);
        with `return_attention` (no cache), (output, encoder-decoder attention weights
        float32 [B, N, T, S])."""
        if decode_index is not None:  # Keras refuses a Python int beside tensors in **kwargs
            decode_index = tf.convert_to_tensor(decode_index, tf.int32)
        if cache is None:
            x = self.self_attention(x, training=training, bias=self_bias)
        else:
            x, cache = self.self_attention(x, training=training, bias=self_bias, cache=cache,
                                           decode_index=decode_index,
                                           beam_ancestry=beam_ancestry)
        if return_attention:
            if cache is not None or self.encdec_attention is None:
                raise ValueError("return_attention needs encoder-decoder attention and no cache.")
            x, weights = self.encdec_attention(x, training=training, memory=memory,
                                               bias=memory_bias, return_weights=True)
            return self.ffn(x, training=training), weights
        if self.encdec_attention is not None:
            x = self.encdec_attention(x, training=training, memory=memory, bias=memory_bias,
                                      memory_kv=memory_kv)
        x = self.ffn(x, training=training)
        return x if cache is None else (x, cache)


POSITION_KINDS = ("timing", "sinusoid", "relative_buckets", "none")  # hparams.pos (None: none)


class Stack(common.Layer):
    """Input dropout, N layers, and the final layer_preprocess (a norm when pre-norm);
    with hparams.pos "relative_buckets", the stack's relative position bias (T5: one
    table per stack, shared by its layers' self-attention)."""

    def __init__(self, hparams: views.TransformerLayerHParams, layers: list[keras.layers.Layer],
                 name: str, bidirectional: bool = True):
        super().__init__(name=name)
        self.stack_layers = layers
        self.input_dropout = common.Dropout(hparams.layer_prepostprocess_dropout)
        self.final = common.PrePostProcess(
            hparams.layer_preprocess_sequence.replace("a", ""), hparams, 0.0, "final"
        )
        self.position_bias = None
        if hparams.get("pos") == "relative_buckets":
            self.position_bias = relative_buckets.RelativePositionBias(
                hparams.num_heads, bidirectional,
                hparams.get("relative_attention_num_buckets", 32),
                hparams.get("relative_attention_max_distance", 128))

    def self_attention_bias(self, length: tf.Tensor, positions: tf.Tensor | None = None
                            ) -> tf.Tensor | float:
        """The relative position bias [1|B, N, T, T] of T positions (per-example
        `positions` [B, T] when packed), or 0.0 without one."""
        if self.position_bias is None:
            return 0.0
        if positions is None:
            return self.position_bias.for_length(length)
        return self.position_bias(positions, positions)


# The axes of the Transformer's weights by name (the layout splits them; a head's
# columns are contiguous in the q/k/v kernels, so splitting "heads" splits whole heads).
TRANSFORMER_WEIGHT_DIMENSIONS = (
    (r"symbol_modality/(weights|softmax)$", ("vocab", "d_model")),  # embeddings, softmax
    (r"/(q|k|v)/kernel$", ("d_model", "heads")),
    (r"/(q|k|v)/bias$", ("heads",)),  # attention_use_bias (Marian)
    (r"/output_transform/kernel$", ("heads", "d_model")),
    (r"/output_transform/bias$", ("d_model",)),
    (r"/conv1(_linear)?/kernel$", ("d_model", "d_ff")),  # _linear: dense_gated_dense
    (r"/conv1/bias$", ("d_ff",)),
    (r"/conv2/kernel$", ("d_ff", "d_model")),
    (r"/norm/(gamma|beta|scale)$", ("d_model",)),  # scale: norm_type rms
    (r"/conv2/bias$", ("d_model",)),
    (r"symbol_modality/softmax_bias$", ("vocab",)),
    (r"target_space_embedding/embeddings$", (None, "d_model")),
)


def check_position_hparams(hparams: views.TransformerHParams) -> None:
    """ValueError naming a bad hparams.pos or decoder_start_embedding and the choices."""
    pos = hparams.get("pos")  # a set without it fails where the model reads it, naming it
    if (pos or "none") not in POSITION_KINDS:
        raise ValueError(f"Unknown pos {pos!r}: use one of {POSITION_KINDS}.")
    start = hparams.get("decoder_start_embedding", "zeros")
    if start not in ("zeros", "pad"):
        raise ValueError(f"Unknown decoder_start_embedding {start!r}: use 'zeros' "
                         f"(Tensor2Tensor) or 'pad' (the embedding of id 0, T5).")


@registry.register_model
class Transformer(t2t_model.T2TModel):
    """Encoder-decoder, decoder-only or encoder-only Transformer (see module doc)."""

    HPARAMS_VIEW = views.TransformerHParams
    STRUCTURAL_HPARAMS = frozenset({
        "max_relative_position", "self_attention_type", "pos", "attention_use_bias",
        "ffn_use_bias", "relative_attention_num_buckets"})

    WEIGHT_DIMENSIONS = TRANSFORMER_WEIGHT_DIMENSIONS

    ctc: ctc.CTCLoss | None = None  # with hparams.ctc_loss_weight (subclasses may skip __init__)
    image_encoder: image_encoder.ImageEncoder | None = None  # image inputs -> positions

    def __init__(self, hparams, mode=t2t_model.TRAIN, problem_hparams=None, name=None, **kwargs):
        super().__init__(hparams, mode, problem_hparams, name=name, **kwargs)
        hp = self.hparams
        self.is_classifier = self.problem_hparams.is_classifier
        self.has_encoder = self.has_inputs
        check_position_hparams(hp)
        if self.has_encoder:
            if self.problem_hparams.modality.get("inputs") == Modality.IMAGE:
                self.image_encoder = image_encoder.ImageEncoder(hp)
            self.encoder = Stack(hp, [EncoderLayer(hp, f"layer_{i}")
                                      for i in range(_layer_count(hp, "num_encoder_layers"))], "encoder")
            self.target_space_embedding = (
                keras.layers.Embedding(32, hp.hidden_size, name="target_space_embedding")
                if hp.use_target_space_embedding else None
            )
        if not self.is_classifier:
            self.decoder = Stack(hp, [DecoderLayer(hp, self.has_encoder, f"layer_{i}")
                                      for i in range(_layer_count(hp, "num_decoder_layers"))], "decoder",
                                 bidirectional=False)
        ctc_weight = hp.get("ctc_loss_weight", 0.0)
        self.ctc = None
        if ctc_weight:
            if not self.has_encoder or self.is_classifier:
                raise ValueError(f"ctc_loss_weight={ctc_weight!r} needs an encoder-decoder "
                                 "(a problem with inputs and sequence targets); set it to 0.")
            self.ctc = ctc.CTCLoss(self.problem_hparams.vocab_size["targets"], ctc_weight, hp)

    # ------------------------------------------------------------ encoder
    def encode(self, inputs: tf.Tensor, features: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Embedded inputs [B, S, H] (or images [B, H, W, C] of an image problem) ->
        (encoder output [B, S, H], its bias, nonpadding [B, S])."""
        if self.image_encoder is not None:
            inputs = self.image_encoder(inputs, training=training)
        nonpadding = attention.embedding_to_nonpadding(inputs)
        segment = features.get("inputs_segmentation")
        if segment is not None:
            bias = attention.segment_bias(segment, segment)
            bias += attention.padding_bias(nonpadding)
        else:
            bias = attention.padding_bias(nonpadding)
        x = inputs
        if self.target_space_embedding is not None:
            space = tf.fill([1, 1], self.problem_hparams.target_space_id)
            x += tf.cast(self.target_space_embedding(space), x.dtype)
        positions = features.get("inputs_position")
        x = self.add_position_signal(x, positions)
        x = self.encoder.input_dropout(x, training=training)
        bias += self.encoder.self_attention_bias(tf.shape(x)[1], positions)
        for layer in self.encoder.stack_layers:
            x = layer(x, bias, training=training)
        x = self.encoder.final(x, training=training)
        return x, bias, nonpadding

    def add_position_signal(self, x: tf.Tensor, positions: tf.Tensor | None = None,
                            start_index: int | tf.Tensor = 0) -> tf.Tensor:
        """x [B, T, H] plus hparams.pos's signal ("timing", "sinusoid"); unchanged otherwise."""
        kind = self.hparams.pos
        if kind in positional.SIGNAL_KINDS:
            return positional.add_timing_signal(x, positions, start_index, kind=kind)
        return x

    # ------------------------------------------------------------ decoder
    def decoder_start(self, like: tf.Tensor) -> tf.Tensor:
        """The first decoder input [1, 1, H] (dtype of `like`): zeros (Tensor2Tensor), or
        with hparams.decoder_start_embedding "pad" the embedding of id 0 (T5)."""
        if self.hparams.get("decoder_start_embedding", "zeros") == "pad":
            return tf.cast(self.targets_modality.embed(tf.zeros([1, 1], tf.int32)), like.dtype)
        return tf.zeros([1, 1, like.shape[-1]], like.dtype)

    def shift_right(self, targets: tf.Tensor, features: dict) -> tf.Tensor:
        """Embedded targets [B, T, H] shifted one step right (decoder_start first).

        With packing, each example's first position gets the start vector too."""
        shifted = tf.pad(targets, [[0, 0], [1, 0], [0, 0]])[:, :-1, :]
        position = features.get("targets_position")
        is_start = tf.equal(tf.range(tf.shape(shifted)[1]), 0)[None, :]
        if position is not None:
            is_start = tf.logical_or(is_start, tf.equal(position, 0))
        return tf.where(is_start[..., None], self.decoder_start(shifted), shifted)

    def decoder_self_bias(self, length: tf.Tensor, features: dict) -> tf.Tensor:
        bias = attention.causal_bias(length)
        segment = features.get("targets_segmentation")
        if segment is not None:
            bias += attention.segment_bias(segment, segment)
        return bias + self.decoder.self_attention_bias(length, features.get("targets_position"))

    def decode(self, decoder_input, memory, memory_bias, features, training,
               return_attention=False):
        """Shifted embedded targets [B, T, H] -> decoder output [B, T, H]; with
        `return_attention`, (output, encoder-decoder attention weights float32
        [B, layers, heads, T, S]): heat maps, no extra work otherwise."""
        x = self.add_position_signal(decoder_input, features.get("targets_position"))
        x = self.decoder.input_dropout(x, training=training)
        self_bias = self.decoder_self_bias(tf.shape(x)[1], features)
        weights = []
        for layer in self.decoder.stack_layers:
            if return_attention:
                x, layer_weights = layer(x, self_bias, memory=memory, memory_bias=memory_bias,
                                         training=training, return_attention=True)
                weights.append(layer_weights)
            else:
                x = layer(x, self_bias, memory=memory, memory_bias=memory_bias, training=training)
        x = self.decoder.final(x, training=training)
        return (x, tf.stack(weights, axis=1)) if return_attention else x

    @property
    def has_encdec_attention(self) -> bool:
        """Whether encdec_attention_weights applies: an encoder and Transformer decoder layers."""
        layers = getattr(getattr(self, "decoder", None), "stack_layers", [])
        return (self.has_encoder and not self.is_classifier and bool(layers)
                and all(isinstance(layer, DecoderLayer) for layer in layers))

    def encdec_attention_weights(self, features: dict) -> tf.Tensor:
        """Encoder-decoder attention of the model teacher-forced on ids
        {"inputs": [B, S], "targets": [B, T]}: float32 [B, layers, heads, T, S].

        Row t is the attention of the step that predicts targets[:, t]; padded source
        positions get 0. Raises ValueError for a model without that attention."""
        if not self.has_encdec_attention:
            raise ValueError(
                f"{type(self).__name__} has no per-layer encoder-decoder attention to show "
                f"(it needs an encoder-decoder transformer on a problem with inputs and "
                f"symbol targets, e.g. --model=transformer).")
        embedded = self.bottom(features, training=False)
        memory, _, nonpadding = self.encode(embedded["inputs"], {}, training=False)
        decoder_input = self.shift_right(embedded["targets"], {})
        _, weights = Transformer.decode(self, decoder_input, memory,
                                        self._memory_bias(nonpadding, {}), {}, False,
                                        return_attention=True)
        return weights

    def _memory_bias(self, nonpadding: tf.Tensor, features: dict) -> tf.Tensor:
        """[B, 1, T or 1, S] bias of encoder-decoder attention (padding, and segments)."""
        bias = attention.padding_bias(nonpadding)
        if "inputs_segmentation" in features and "targets_segmentation" in features:
            bias += attention.segment_bias(
                features["targets_segmentation"], features["inputs_segmentation"]
            )
        return bias

    # --------------------------------------------------------------- body
    def bottom(self, features, training):
        transformed = super().bottom(features, training)
        # Not when predicting: the uncached decoders call the model on partial targets.
        if self.ctc is not None and "targets" in features and self.mode != t2t_model.PREDICT:
            if "inputs_segmentation" in features:
                raise ValueError("The CTC loss (ctc_loss_weight) does not support packed "
                                 "examples: train with pack_dataset off.")
            transformed[_CTC_LABELS] = features["targets"]  # the ids, before embedding
        return transformed

    def body(self, features, training):
        if self.is_classifier:
            encoded, _, nonpadding = self.encode(features["inputs"], features, training)
            weights = nonpadding[..., None]
            pooled = tf.reduce_sum(encoded * tf.cast(weights, encoded.dtype), axis=1)
            pooled /= tf.cast(tf.maximum(tf.reduce_sum(weights, axis=1), 1.0), pooled.dtype)
            return pooled[:, None, :]
        memory = memory_bias = None
        if self.has_encoder:
            memory, _, nonpadding = self.encode(features["inputs"], features, training)
            memory_bias = self._memory_bias(nonpadding, features)
        decoder_input = self.shift_right(features["targets"], features)
        output = self.decode(decoder_input, memory, memory_bias, features, training)
        if _CTC_LABELS in features:
            return output, {"ctc": self.ctc(memory, nonpadding, features[_CTC_LABELS],
                                            dense_labels=self.xla_ops_only)}
        return output

    # ------------------------------------------------------- cached decoding
    @property
    def has_decode_cache(self) -> bool:  # type: ignore[override]
        return not self.is_classifier

    def decode_init_cached(self, features: dict, decode_length: tf.Tensor) -> dict:
        """Encodes the inputs once and allocates each decoder layer's key/value cache.

        State (batch-major): under `SLOTS`, so that beam search never
        copies it, the encoder-decoder bias, every layer's projected encoder keys and
        values ("memory_k/v" [B, N, S, D], the same for all beams of an example) and its
        self-attention cache ("k"/"v" [B, N, L, D], written in place position by
        position; under beam search row b is a beam slot, read through the ancestry).
        """
        inputs = features.get("inputs")
        batch_size = t2t_model.decode_batch_size(features)
        slots: dict = {}
        memory = None
        if self.has_encoder:
            embedded = self.feature_modalities["inputs"].bottom(inputs, training=False)
            memory, _, nonpadding = self.encode(embedded, {}, training=False)
            slots["memory_bias"] = self._memory_bias(nonpadding, {})
        dtype = self.compute_dtype
        for i, layer in enumerate(self.decoder.stack_layers):
            attention_layer = layer.self_attention.inner
            heads, key_depth = attention_layer.num_heads, attention_layer.key_depth
            value_depth = attention_layer.value_depth
            layer_state = {
                "k": attention.empty_cache([batch_size, heads, decode_length, key_depth], dtype),
                "v": attention.empty_cache([batch_size, heads, decode_length, value_depth], dtype),
            }
            if memory is not None:
                k, v = layer.encdec_attention.inner.project_memory(memory)
                layer_state["memory_k"], layer_state["memory_v"] = k, v
            slots[f"layer_{i}"] = layer_state
        return {SLOTS: slots}

    def decode_step_cached(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict) -> tuple[tf.Tensor, dict]:
        """Logits [B, V] at position `index` from one new position: O(1) layers of work
        per token, attention over the cached keys/values instead of recomputing them."""
        modality = self.targets_modality
        x = modality.targets_bottom(previous_ids[:, None], training=False)  # [B, 1, H]
        x = tf.where(index > 0, x, self.decoder_start(x))  # the shifted-right start
        x = self.add_position_signal(x, start_index=index)
        slots = state[SLOTS]
        length = tf.shape(slots["layer_0"]["k"])[2]
        self_bias = attention.visible_bias(length, index)
        if self.decoder.position_bias is not None:  # query `index` against the L cache slots
            self_bias += self.decoder.position_bias(tf.reshape(index, [1, 1]),
                                                    tf.range(length)[None])
        new_slots = {k: v for k, v in slots.items() if not k.startswith("layer_")}
        for i, layer in enumerate(self.decoder.stack_layers):
            cache = slots[f"layer_{i}"]
            memory_kv = (cache["memory_k"], cache["memory_v"]) if "memory_k" in cache else None
            x, cache = layer(x, self_bias, memory_bias=slots.get("memory_bias"), training=False,
                             cache=cache, decode_index=index, memory_kv=memory_kv,
                             beam_ancestry=state.get(ANCESTRY))
            new_slots[f"layer_{i}"] = cache
        x = self.decoder.final(x, training=False)
        logits = self.top(x, {})
        return tf.cast(logits[:, 0, :], tf.float32), {**state, SLOTS: new_slots}
