"""transformer_moe: a Transformer whose feed-forward blocks may be mixtures of experts.

As in T2T's models/research/transformer_moe.py: the architecture is spelled by
hparams.layer_types, "ENCODER#DECODER", layers separated by "/", and each layer
"ATTENTION-FEEDFORWARD" (encoder) or "SELF-ENCDEC-FEEDFORWARD" / "SELF-FEEDFORWARD"
(decoder); a missing part takes hparams.default_att / default_ff, and without "#" the
encoder repeats the decoder's string. An empty layer_types is num_hidden_layers layers
of default_att / default_ff. Examples:
    "a/a/a-moe/a"        4 layers in encoder and decoder, experts in the third
    "a/a-moe#a/a/a"      2 encoder layers (one with experts), 3 decoder layers
    "#a/a/a-moe/a/a"     decoder only (T2T's transformer_moe_8k_lm)
Each block is pre-processed / post-processed as in the Transformer ("n" / "da": pre-norm,
residual), the stacks end with the pre-process norm, the sinusoidal timing signal and
the target-space embedding are added as in T2T's transformer_prepare_encoder/decoder.
`body` returns (decoder output, {"moe_loss": the summed load-balancing losses}), which
T2TModel turns into a loss the trainer adds to the training loss.

Layer types (anything else is refused, naming what is supported):
    a      multi-head dot-product attention (self or encoder-decoder)
    fc     dense-relu-dense (filter_size, relu_dropout)
    moe    t2t.layers.mixture_of_experts (moe_num_experts, moe_k, moe_hidden_sizes,
           moe_loss_coef)
    sep    separable convolutions of widths 3 then 31 with a relu between (encoder only:
           it sees later positions)
    sepm   the same, left-padded so that a position sees only earlier ones

Differences from Tensor2Tensor:
- T2T's "loc"/"locm" (local), "red"/"redm" (memory-compressed) and "mem" attention
  and prepend_mode (inputs prepended to a decoder-only model) are not implemented, so
  transformer_moe_prepend_8k is not registered.
- "sep" in a decoder layer is refused: T2T builds it with SAME padding, which lets the
  decoder see the targets it predicts (transformer_moe_8k and _12k, whose default_ff is
  "sep", therefore build only with a decoder spelled with "sepm" or "moe"/"fc").
- decoding is uncached (has_decode_cache False): each step re-runs the model on the
  prefix. All blocks are causal per position, so this matches teacher forcing.
- packed examples ("*_segmentation", "*_position") are supported as in t2t's
  Transformer (T2T's transformer_moe ignored them); classification problems are not.
- an input-reading model needs encoder layers: an empty encoder with inputs (which T2T
  served by prepend_mode) is refused.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality
from t2t.hparams import views
from t2t.layers import attention, common, feed_forward, mixture_of_experts, positional
from t2t.models import t2t_model, transformer

SEP_ENCODEC, SEP_LAYER, SEP_FF = "#", "/", "-"
NO_ATTENTION = "_"
ATTENTION_TYPES = ("a",)
FFN_TYPES = ("fc", "moe", "sep", "sepm")
UNIMPLEMENTED_T2T_TYPES = ("loc", "locm", "red", "redm", "mem")


def _check_type(kind: str, supported: tuple[str, ...], what: str, layer_types: str) -> None:
    if kind not in supported:
        t2t_only = " (a T2T type t2t does not implement)" if kind in UNIMPLEMENTED_T2T_TYPES else ""
        raise ValueError(
            f"Unsupported {what} type {kind!r}{t2t_only} in layer_types {layer_types!r}: "
            f"transformer_moe supports {', '.join(supported)}."
        )


def parse_layer_types(hparams: views.TransformerMoeHParams) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(encoder layers [(attention, ffn)], decoder layers [(self, encdec, ffn)]) spelled
    by hparams.layer_types (T2T's _extract_layer_types); encdec is "_" without encoder.

    ValueError for a type t2t does not implement, and for "sep" in the decoder."""
    spec = hparams.layer_types or SEP_LAYER.join([hparams.default_att] * hparams.num_hidden_layers)
    parts = spec.split(SEP_ENCODEC)
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2:
        raise ValueError(f"layer_types {spec!r} has more than one {SEP_ENCODEC!r}.")
    layers: tuple[list, list] = ([], [])
    for i, part in enumerate(parts):
        for blocks_str in part.split(SEP_LAYER):
            if not blocks_str:
                continue
            blocks = blocks_str.split(SEP_FF)
            if len(blocks) > 3 or (i == 0 and len(blocks) > 2):
                raise ValueError(f"Layer {blocks_str!r} of layer_types {spec!r} has too many blocks.")
            self_att = blocks[0] or hparams.default_att
            ende_att = hparams.default_att if parts[0] else NO_ATTENTION
            ffn = blocks[-1] if len(blocks) > 1 else hparams.default_ff
            if len(blocks) == 3:
                ende_att = blocks[1]
            _check_type(self_att, ATTENTION_TYPES, "attention", spec)
            _check_type(ffn, FFN_TYPES, "feed-forward", spec)
            if i == 0:
                layers[0].append((self_att, ffn))
                continue
            _check_type(ende_att, (*ATTENTION_TYPES, NO_ATTENTION), "encoder-decoder attention", spec)
            if ffn == "sep":
                raise ValueError(
                    f"layer_types {spec!r} puts 'sep' in the decoder, where its SAME padding "
                    f"sees the positions it predicts: use 'sepm' there."
                )
            layers[1].append((self_att, ende_att, ffn))
    return layers


def proximity_bias(length: tf.Tensor) -> tf.Tensor:
    """[1, 1, T, T] bias -log(1 + |i - j|) favouring near positions (T2T's
    attention_bias_proximal, used when hparams.proximity_bias)."""
    r = tf.cast(tf.range(length), tf.float32)
    return -tf.math.log1p(tf.abs(r[None, :] - r[:, None]))[None, None]


class SeparableConvFFN(common.Layer):
    """T2T's sep_conv_relu(_masked): [B, T, H] -> relu(sepconv_3(x)) (dropout) -> sepconv_31
    -> [B, T, H]; `masked` left-pads so that position t sees positions <= t only."""

    def __init__(self, filter_size: int, hidden_size: int, dropout: float, masked: bool,
                 kernel_initializer: Any, name: str | None = None):
        super().__init__(name=name)
        self.masked = masked

        def conv(filters: int, width: int, activation: str | None, conv_name: str):
            return keras.layers.SeparableConv1D(
                filters, width, padding="valid" if masked else "same", activation=activation,
                depthwise_initializer=common.clone_initializer(kernel_initializer),
                pointwise_initializer=common.clone_initializer(kernel_initializer), name=conv_name)

        self.conv1 = conv(filter_size, 3, "relu", "conv1")
        self.conv2 = conv(hidden_size, 31, None, "conv2")
        self.dropout = common.Dropout(dropout)

    def _pad(self, x: tf.Tensor, width: int) -> tf.Tensor:
        return tf.pad(x, [[0, 0], [width - 1, 0], [0, 0]]) if self.masked else x

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        h = self.dropout(self.conv1(self._pad(x, 3)), training=training)
        return self.conv2(self._pad(h, 31))


def _ffn(kind: str, hparams: views.TransformerMoeHParams) -> keras.layers.Layer:
    init = common.initializer(hparams)
    if kind == "fc":
        return feed_forward.DenseReluDense(hparams.filter_size, hparams.hidden_size,
                                           hparams.relu_dropout, kernel_initializer=init, name="fc")
    if kind == "moe":
        sizes = [int(s) for s in hparams.moe_hidden_sizes.split(",") if s.strip()]
        return mixture_of_experts.MixtureOfExperts(
            hparams.hidden_size, sizes or [hparams.filter_size], hparams.moe_num_experts,
            k=hparams.moe_k, loss_coef=hparams.moe_loss_coef, kernel_initializer=init, name="moe")
    return SeparableConvFFN(hparams.filter_size, hparams.hidden_size, hparams.relu_dropout,
                            masked=kind == "sepm", kernel_initializer=init, name=kind)


def _attention(hparams: views.TransformerMoeHParams, name: str) -> attention.MultiHeadAttention:
    return attention.MultiHeadAttention(
        hparams.hidden_size, hparams.num_heads, dropout=hparams.attention_dropout,
        kernel_initializer=common.initializer(hparams), key_channels=hparams.attention_key_channels,
        value_channels=hparams.attention_value_channels, name=name)


class MoeLayer(common.Layer):
    """One encoder (attention, ffn) or decoder (self, encdec or "_", ffn) layer, each block
    inside the Transformer's pre/post-processing (transformer.Sublayer)."""

    def __init__(self, hparams: views.TransformerMoeHParams, types: tuple[str, ...], name: str):
        super().__init__(name=name)
        self.types = types
        self.self_attention = transformer.Sublayer(_attention(hparams, "self_attention"),
                                                   hparams, "self_attention")
        self.encdec_attention = (
            transformer.Sublayer(_attention(hparams, "encdec_attention"), hparams,
                                 "encdec_attention")
            if len(types) == 3 and types[1] != NO_ATTENTION else None
        )
        self.ffn = transformer.Sublayer(_ffn(types[-1], hparams), hparams, "ffn")

    def call(self, x, bias, memory=None, memory_bias=None, training=None):
        """[B, T, H] -> ([B, T, H], the layer's load-balancing loss: 0 without experts)."""
        x = self.self_attention(x, training=training, bias=bias)
        if self.encdec_attention is not None:
            x = self.encdec_attention(x, training=training, memory=memory, bias=memory_bias)
        x = self.ffn(x, training=training)  # a mixture of experts: (output, its loss)
        return x if isinstance(x, tuple) else (x, tf.constant(0.0))


@registry.register_model
class TransformerMoe(t2t_model.T2TModel):
    """Encoder-decoder or decoder-only Transformer spelled by hparams.layer_types."""

    HPARAMS_VIEW = views.TransformerMoeHParams
    STRUCTURAL_HPARAMS = frozenset({
        "default_att", "default_ff", "layer_types", "moe_hidden_sizes", "moe_num_experts"})

    WEIGHT_DIMENSIONS = (
        (r"/moe/expert_kernel_0$", ("experts", "d_model", "d_ff")),
        (r"/moe/expert_kernel_1$", ("experts", "d_ff", "d_model")),
        (r"/moe/w_(gate|noise)$", ("d_model", "experts")),
        *transformer.TRANSFORMER_WEIGHT_DIMENSIONS,
    )
    MESH_BATCH_SPLIT_ERROR = (
        "its experts' dispatch scatters tokens by their index in the whole batch, which "
        "DTensor (TF 2.21) cannot split (ScatterNd: 'indices ... does not index into "
        "shape'); split the experts and heads instead, e.g. mesh_shape=model:4, "
        "layout=experts:model;heads:model")

    def __init__(self, hparams, mode=t2t_model.TRAIN, problem_hparams=None, name=None, **kwargs):
        super().__init__(hparams, mode, problem_hparams, name=name, **kwargs)
        hp = self.hparams
        if self.problem_hparams.modality.get("targets") != Modality.SYMBOL:
            raise ValueError("transformer_moe predicts symbol targets; use transformer for "
                             "classification problems.")
        encoder_types, decoder_types = parse_layer_types(hp)
        if not decoder_types:
            raise ValueError(f"layer_types {hp.layer_types!r} has no decoder layers.")
        if self.has_inputs and not encoder_types:
            raise ValueError(
                f"layer_types {hp.layer_types!r} has no encoder layers, but the problem has "
                f"inputs (T2T read them with prepend_mode, which t2t lacks): add encoder layers.")
        self.has_encoder = self.has_inputs
        if self.has_encoder:
            self.encoder_layers = [MoeLayer(hp, t, f"encoder_{i}") for i, t in enumerate(encoder_types)]
            self.encoder_norm = self._final_norm("encoder_norm")
            self.target_space_embedding = keras.layers.Embedding(32, hp.hidden_size,
                                                                 name="target_space_embedding")
        else:
            decoder_types = [(s, NO_ATTENTION, f) for s, _, f in decoder_types]
        self.decoder_layers = [MoeLayer(hp, t, f"decoder_{i}") for i, t in enumerate(decoder_types)]
        self.decoder_norm = self._final_norm("decoder_norm")
        self.input_dropout = common.Dropout(hp.layer_prepostprocess_dropout)

    def _final_norm(self, name: str) -> common.PrePostProcess:
        return common.PrePostProcess(self.hparams.layer_preprocess_sequence.replace("a", ""),
                                     self.hparams, 0.0, name)

    def _prepare(self, x: tf.Tensor, position: tf.Tensor | None, training: bool) -> tf.Tensor:
        if self.hparams.pos == "timing":
            x = positional.add_timing_signal(x, position)
        return self.input_dropout(x, training=training)

    def _self_bias(self, bias: tf.Tensor, length: tf.Tensor, segment: tf.Tensor | None) -> tf.Tensor:
        if segment is not None:
            bias += attention.segment_bias(segment, segment)
        if self.hparams.proximity_bias:
            bias += proximity_bias(length)
        return bias

    def encode(self, inputs: tf.Tensor, features: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Embedded inputs [B, S, H] -> (memory [B, S, H], its bias [B, 1, 1 or T, S], loss)."""
        nonpadding = attention.embedding_to_nonpadding(inputs)
        padding = attention.padding_bias(nonpadding)
        segment = features.get("inputs_segmentation")
        bias = self._self_bias(padding, tf.shape(inputs)[1], segment)
        space = tf.fill([1, 1], self.problem_hparams.target_space_id)
        x = inputs + tf.cast(self.target_space_embedding(space), inputs.dtype)
        x = self._prepare(x, features.get("inputs_position"), training)
        loss = tf.constant(0.0)
        for layer in self.encoder_layers:
            x, layer_loss = layer(x, bias, training=training)
            loss += layer_loss
        memory_bias = padding
        if segment is not None and "targets_segmentation" in features:
            memory_bias += attention.segment_bias(features["targets_segmentation"], segment)
        return self.encoder_norm(x, training=training), memory_bias, loss

    def decode(self, targets: tf.Tensor, memory, memory_bias, features: dict, training: bool
               ) -> tuple[tf.Tensor, tf.Tensor]:
        """Embedded targets [B, T, H] (shifted right here) -> (output [B, T, H], loss)."""
        x = tf.pad(targets, [[0, 0], [1, 0], [0, 0]])[:, :-1, :]
        position = features.get("targets_position")
        if position is not None:  # each packed example starts from the zero vector
            x *= tf.cast(tf.not_equal(position, 0), x.dtype)[..., None]
        length = tf.shape(x)[1]
        bias = self._self_bias(attention.causal_bias(length), length,
                               features.get("targets_segmentation"))
        x = self._prepare(x, position, training)
        loss = tf.constant(0.0)
        for layer in self.decoder_layers:
            x, layer_loss = layer(x, bias, memory=memory, memory_bias=memory_bias, training=training)
            loss += layer_loss
        return self.decoder_norm(x, training=training), loss

    def body(self, features, training):
        memory = memory_bias = None
        loss = tf.constant(0.0)
        if self.has_encoder:
            memory, memory_bias, loss = self.encode(features["inputs"], features, training)
        output, decoder_loss = self.decode(features["targets"], memory, memory_bias, features, training)
        return output, {"moe_loss": loss + decoder_loss}
