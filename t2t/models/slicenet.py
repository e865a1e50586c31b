"""SliceNet: Tensor2Tensor's `slicenet` model (v1.15), the depthwise-separable
convolutional seq2seq of Kaiser, Gomez & Chollet, "Depthwise Separable Convolutions for
Neural Machine Translation" (arXiv:1706.03059).

Structure, as in Tensor2Tensor's slicenet.py and common_layers (subseparable_conv_block,
simple_attention, add_timing_signal):

    inputs ids [B, S] -> symbol modality -> [B, S, H], viewed as [B, S, 1, H]
    mask [B, S, 1, 1] = 1 at input positions whose embedding is not all zeros (padding)
    encoded = conv_stack(inputs + timing, SAME, int(1.5 * num_hidden_layers) layers, mask)
    (class-label targets: the body output is `encoded`; the class modality pools it)
    shifted = [target space embedding, targets[:, :-1]]          (shift right)
    attended = attention(shifted, encoded)       (zeros for attention_type "none")
    start = conv_block(concat(attended, shifted), kernel_height x 1, LEFT, separability 4)
    decoded = conv_stack(start, LEFT, num_hidden_layers layers, attending to encoded)
    body output = decoded                                  -> logits [B, T, V]

    conv_stack(x): for each layer
        y = block1(x)                       (the first two (dilation, kernel) pairs)
        x = x + block2(x + y) + y           (the other pairs)
        x = x + attention(x, encoded)       (decoder; not for attention_type "none")
        x = x * mask                        (encoder)
      then dropout(x)
    block(x): for each (dilation, kernel, separability): x = norm(subsep_conv(relu(x) * mask))
        (bias-free convolutions of hidden_size filters; the mask only in the encoder)
    attention(x, memory):
        timed = block(x + timing, [(1, 5x1), (4, 5x1)], LEFT)
        "simple":      norm(x + softmax(timed . memory^T / sqrt(H) + padding bias) . memory)
        "transformer": encdec_attention(self_attention(timed, causal), memory), multi-head
    subsep_conv by separability s: 0 a depthwise-separable conv; s > 0: s groups of plain
        convs, then a 1x1 conv with bias mixing them when s > 1; s < 0: |s| groups of
        separable convs, concatenated.
    timing: T2T's common_layers.add_timing_signal, 16 sine and 16 cosine timescales
        (1 .. 1e4) in the first 32 channels.

The kernel pairs come from kernel_scheme and dilation_scheme ("3.7.15.31" and "1.1.1.1":
3x1 and 7x1, then 15x1 and 31x1); with a negative separability s the first block's
groups are s - 1, s and the second's s - n + 1 .. s. Padding "LEFT" is T2T's causal
padding (see t2t.models.bytenet.pad_for_conv): decoder position t reads shifted targets
<= t, i.e. targets < t, so the decoder is causal and the uncached decoding of T2TModel
applies.

Differences from Tensor2Tensor:
  - attention_type "transformer" hides the inputs' padding from the encoder-decoder
    attention (T2T passed a zero bias there, so an output depended on how much its batch
    was padded) and sizes keys and values by attention_key_channels /
    attention_value_channels (0: hidden_size; T2T always used hidden_size, the same for
    every T2T set, which has them 0).
  - kernel_scheme and dilation_scheme must name schemes of T2T's tables, or one of them
    be "" or "none" to select T2T's other pattern (kernel_height x kernel_width twice,
    then large_kernel_size x 1 at dilations 1 and 4); T2T fell back to that pattern for
    any unknown name, so a misspelt scheme went unnoticed. attention_type must be
    "simple", "transformer" or "none" (T2T crashed on other values).
  - norm_type "layer", "batch" or "none" (t2t's norms; T2T also had group, noam, l2).
  - Inputs must be symbols (T2T projected inputs of another depth, e.g. images, with a
    3x3 conv): problems with image inputs are refused. Targets are symbols or a class
    label. Packed datasets are refused (the convolutions would mix examples).
  - hidden_size must be at least 32 (the timing signal's channels; T2T failed in
    tf.pad) and divisible by the separabilities' group counts (T2T silently made fewer
    channels and failed later); the errors say so.
  - `top` casts the logits to float32 (mixed_bfloat16 runs score float32 logits).
  - T2T's similarity loss was a constant 0 and is left out, with the hparams
    `sim_loss_mult` and `audio_compression` that T2T's slicenet never read, and
    `num_sampled_classes` (t2t has no sampled softmax).
As in T2T, dropout acts only in training, the kernels and the target space embedding
(32 x hidden_size) take the hparams initializer, each kernel its own initializer object,
and norms use hparams.norm_epsilon.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import attention, common, positional
from t2t.models import t2t_model
from t2t.models.bytenet import check_kernel, pad_for_conv

KERNEL_SCHEMES = {
    "3.3.3.3": [(3, 1), (3, 1), (3, 1), (3, 1)],
    "3.7.7.7": [(3, 1), (7, 1), (7, 1), (7, 1)],
    "3.7.15.15": [(3, 1), (7, 1), (15, 1), (15, 1)],
    "3.7.15.31": [(3, 1), (7, 1), (15, 1), (31, 1)],
    "3.7.15.31.63": [(3, 1), (7, 1), (15, 1), (31, 1), (63, 1)],
}
DILATION_SCHEMES = {
    "1.1.1.1.1": [(1, 1), (1, 1), (1, 1), (1, 1), (1, 1)],
    "1.1.1.1": [(1, 1), (1, 1), (1, 1), (1, 1)],
    "1.1.1.2": [(1, 1), (1, 1), (1, 1), (2, 1)],
    "1.1.2.4": [(1, 1), (1, 1), (2, 1), (4, 1)],
    "1.2.4.8": [(1, 1), (2, 1), (4, 1), (8, 1)],
}
NO_SCHEME = ("", "none")  # selects T2T's kernel_height / large_kernel_size pattern
ATTENTION_TYPES = ("simple", "transformer", "none")
TIMING_TIMESCALES = 16  # T2T's common_layers.add_timing_signal default
TARGET_SPACES = 32  # rows of T2T's target space embedding
MERGE_SEPARABILITY = 4  # T2T's targets_merge block

Spec = tuple[tuple[int, int], tuple[int, int], int]  # (dilation, kernel, separability)


def add_timing_signal(x: tf.Tensor) -> tf.Tensor:
    """x [B, L, 1, H] plus T2T's common_layers timing signal: sines then cosines of 16
    timescales from 1 to 1e4 in channels 0..31, zeros in the others (needs H >= 32)."""
    channels = 2 * TIMING_TIMESCALES
    signal = positional.timing_signal_from_positions(tf.range(tf.shape(x)[1]), channels)
    signal = tf.pad(signal, [[0, 0], [0, x.shape[-1] - channels]])
    return x + tf.cast(signal, x.dtype)[None, :, None, :]


def simple_attention(target: tf.Tensor, source: tf.Tensor, bias: tf.Tensor | None = None
                     ) -> tf.Tensor:
    """T2T's common_layers.simple_attention: parameter-free dot-product attention.

    target [B, T, H], source [B, S, H], bias [B, 1, S] (added to the logits) -> [B, T, H]:
    softmax(target . source^T / sqrt(H) + bias) . source, the softmax in float32."""
    logits = tf.matmul(target, source, transpose_b=True)
    logits = tf.cast(logits, tf.float32) * float(target.shape[-1]) ** -0.5
    if bias is not None:
        logits += tf.cast(bias, tf.float32)
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.matmul(tf.cast(weights, source.dtype), source)


def separabilities(separability: int, count: int, first: bool) -> list[int]:
    """T2T's group counts for a block of `count` convs: all `separability`, or for a
    negative one s: s - 1, s (first block) and s - count + 1 .. s (the others)."""
    if separability >= 0:
        return [separability] * count
    if first:
        return [separability - 1, separability][:count]
    return [separability - i for i in reversed(range(count))]


def conv_specs(hparams: HParams) -> tuple[list[Spec], list[Spec]]:
    """The (dilation, kernel, separability) lists of a conv_stack layer's two blocks."""
    kernels, dilations = hparams.kernel_scheme, hparams.dilation_scheme
    if kernels in NO_SCHEME or dilations in NO_SCHEME:
        kernel = (hparams.kernel_height, hparams.kernel_width)
        large = (hparams.large_kernel_size, 1)
        pairs1 = [((1, 1), kernel), ((1, 1), kernel)]
        pairs2 = [((1, 1), large), ((4, 4), large)]
    else:
        if kernels not in KERNEL_SCHEMES:
            raise ValueError(f"Unknown kernel_scheme {kernels!r}: use one of "
                             f"{sorted(KERNEL_SCHEMES)}, or 'none' for large_kernel_size.")
        if dilations not in DILATION_SCHEMES:
            raise ValueError(f"Unknown dilation_scheme {dilations!r}: use one of "
                             f"{sorted(DILATION_SCHEMES)}, or 'none' for large_kernel_size.")
        # The shorter scheme sets the count, as in T2T ("3.7.15.31.63" with "1.1.1.1": 4).
        pairs = list(zip(DILATION_SCHEMES[dilations], KERNEL_SCHEMES[kernels], strict=False))
        pairs1, pairs2 = pairs[:2], pairs[2:]
    for _, (height, width) in pairs1 + pairs2:
        if height % 2 == 0 or width != 1:
            raise ValueError(
                f"slicenet needs odd x 1 kernels (causal padding), got {height}x{width}.")
    seps1 = separabilities(hparams.separability, len(pairs1), first=True)
    seps2 = separabilities(hparams.separability, len(pairs2), first=False)
    return ([(d, k, s) for (d, k), s in zip(pairs1, seps1, strict=True)],
            [(d, k, s) for (d, k), s in zip(pairs2, seps2, strict=True)])


class SubseparableConv(common.Layer):
    """T2T's common_layers.subseparable_conv, VALID (the caller pads).

    [B, L + pad, 1, C] -> [B, L, 1, filters]; separability s: see the module docstring.
    """

    def __init__(self, filters: int, kernel: tuple[int, int], dilation: tuple[int, int],
                 separability: int, hparams: HParams, use_bias: bool = False,
                 name: str | None = None):
        super().__init__(name=name)
        self.groups = abs(separability) or 1
        if filters % self.groups:
            raise ValueError(f"slicenet: {filters} filters do not split into {self.groups} "
                             f"groups (separability {separability}); change hidden_size.")

        def conv(units: int, name: str, separable: bool) -> keras.layers.Layer:
            common_args = dict(dilation_rate=dilation, padding="valid", use_bias=use_bias,
                               name=name)
            if separable:
                return keras.layers.SeparableConv2D(
                    units, kernel, depthwise_initializer=common.initializer(hparams),
                    pointwise_initializer=common.initializer(hparams), **common_args)
            return keras.layers.Conv2D(
                units, kernel, kernel_initializer=common.initializer(hparams), **common_args)

        if self.groups == 1:
            self.parts = [conv(filters, "conv", separable=separability <= 0)]
        else:
            self.parts = [conv(filters // self.groups, f"part_{i}", separable=separability < 0)
                          for i in range(self.groups)]
        # T2T mixes positive groups with a 1x1 conv (tf.layers default: with a bias).
        self.mix = None
        if separability > 1:
            self.mix = keras.layers.Conv2D(
                filters, (1, 1), kernel_initializer=common.initializer(hparams), name="mix")

    def build(self, input_shape: Any) -> None:
        if input_shape[-1] % self.groups:
            raise ValueError(f"slicenet: {input_shape[-1]} input channels do not split into "
                             f"{self.groups} groups; change hidden_size.")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """x [B, L + pad, 1, C] (already padded) -> [B, L, 1, filters]."""
        if self.groups == 1:
            y = self.parts[0](x)
        else:
            splits = tf.split(x, self.groups, axis=-1)
            y = tf.concat([part(s) for part, s in zip(self.parts, splits, strict=True)], axis=-1)
        return self.mix(y) if self.mix is not None else y


class ConvBlock(common.Layer):
    """T2T's subseparable_conv_block with normalizer_fn (so bias-free convs).

    For each (dilation, kernel, separability): ReLU -> times the mask (if given) ->
    pad ("SAME" or causal "LEFT") -> subseparable conv -> norm (hparams.norm_type).
    [B, L, 1, C] -> [B, L, 1, hidden_size].
    """

    def __init__(self, hparams: HParams, specs: list[Spec], padding: str, name: str | None = None):
        super().__init__(name=name)
        self.specs, self.padding = list(specs), padding
        self.convs = [SubseparableConv(hparams.hidden_size, kernel, dilation, separability, hparams,
                                       name=f"conv_{i}")
                      for i, (dilation, kernel, separability) in enumerate(self.specs)]
        self.norms = [common.make_norm(hparams, f"norm_{i}") for i in range(len(self.specs))]

    def call(self, x: tf.Tensor, nonpadding: tf.Tensor | None = None,
             training: bool | None = None) -> tf.Tensor:
        """x [B, L, 1, C], nonpadding [B, L, 1, 1] or None -> [B, L, 1, hidden_size]."""
        layers = zip(self.convs, self.norms, self.specs, strict=True)
        for conv, norm, (dilation, kernel, _) in layers:
            x = tf.nn.relu(x)
            if nonpadding is not None:
                x *= tf.cast(nonpadding, x.dtype)
            x = norm(conv(pad_for_conv(x, kernel[0], dilation[0], self.padding)), training=training)
        return x


class TargetsAttention(common.Layer):
    """T2T's slicenet.attention: a causal conv block over x (+ timing), then attention.

    call(x [B, T, 1, H], memory [B, S, 1, H], memory_bias [B, 1, 1, S]) -> [B, T, 1, H]:
    "simple" returns norm(x + simple_attention), "transformer" the multi-head attention
    output alone (see the module docstring).
    """

    def __init__(self, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        self.kind = hparams.attention_type
        seps = separabilities(hparams.separability, 2, first=True)
        specs = [((1, 1), (5, 1), seps[0]), ((4, 1), (5, 1), seps[1])]
        self.targets_time = ConvBlock(hparams, specs, "LEFT", name="targets_time")
        if self.kind == "simple":
            self.attn_norm = common.make_norm(hparams, "attn_norm")
        else:
            def mha(name: str) -> attention.MultiHeadAttention:
                return attention.MultiHeadAttention(
                    hparams.hidden_size, hparams.num_heads, dropout=hparams.attention_dropout,
                    kernel_initializer=common.initializer(hparams),
                    key_channels=hparams.attention_key_channels,
                    value_channels=hparams.attention_value_channels, name=name)

            self.self_attention = mha("self_attention")
            self.encdec_attention = mha("encdec_attention")

    def call(self, x: tf.Tensor, memory: tf.Tensor, memory_bias: tf.Tensor,
             training: bool | None = None) -> tf.Tensor:
        timed = self.targets_time(add_timing_signal(x), training=training)[:, :, 0, :]
        if self.kind == "simple":
            attended = simple_attention(timed, memory[:, :, 0, :], memory_bias[:, 0])
            return self.attn_norm(x + attended[:, :, None, :], training=training)
        causal = attention.causal_bias(tf.shape(timed)[1])
        query = self.self_attention(timed, bias=causal, training=training)
        out = self.encdec_attention(query, memory=memory[:, :, 0, :], bias=memory_bias,
                                    training=training)
        return out[:, :, None, :]


class ConvResLayer(common.Layer):
    """One layer of T2T's multi_conv_res: two residual conv blocks, then (decoder) attention.

    [B, L, 1, H] -> [B, L, 1, H]; `nonpadding` (encoder) zeroes padding, `memory` is attended.
    """

    def __init__(self, hparams: HParams, padding: str, attend: bool, name: str | None = None):
        super().__init__(name=name)
        specs1, specs2 = conv_specs(hparams)
        self.residual1 = ConvBlock(hparams, specs1, padding, name="residual1")
        self.residual2 = ConvBlock(hparams, specs2, padding, name="residual2")
        self.attention = TargetsAttention(hparams, name="attention") if attend else None

    def call(self, x: tf.Tensor, nonpadding: tf.Tensor | None = None,
             memory: tf.Tensor | None = None, memory_bias: tf.Tensor | None = None,
             training: bool | None = None) -> tf.Tensor:
        y = self.residual1(x, nonpadding=nonpadding, training=training)
        x = x + self.residual2(x + y, nonpadding=nonpadding, training=training) + y
        if self.attention is not None:
            x = x + self.attention(x, memory, memory_bias, training=training)
        if nonpadding is not None:
            x *= tf.cast(nonpadding, x.dtype)
        return x


class ConvStack(common.Layer):
    """T2T's multi_conv_res: `num_layers` ConvResLayers, then dropout. [B, L, 1, H] -> same."""

    def __init__(self, hparams: HParams, padding: str, num_layers: int, attend: bool,
                 name: str | None = None):
        super().__init__(name=name)
        self.stack = [ConvResLayer(hparams, padding, attend, name=f"layer_{i}")
                      for i in range(num_layers)]
        self.dropout = common.Dropout(hparams.dropout)

    def call(self, x: tf.Tensor, nonpadding: tf.Tensor | None = None,
             memory: tf.Tensor | None = None, memory_bias: tf.Tensor | None = None,
             training: bool | None = None) -> tf.Tensor:
        for layer in self.stack:
            x = layer(x, nonpadding=nonpadding, memory=memory, memory_bias=memory_bias,
                      training=training)
        return self.dropout(x, training=training)


def _check_hparams(hparams: HParams, modality: dict[str, str]) -> None:
    """ValueError naming the first hparam or modality slicenet cannot run with."""
    t2t_model.check_modalities("slicenet", modality, inputs=(Modality.SYMBOL,),
                               targets=(Modality.SYMBOL, Modality.CLASS_LABEL))
    if hparams.attention_type not in ATTENTION_TYPES:
        raise ValueError(f"Unknown attention_type {hparams.attention_type!r}: slicenet "
                         f"supports {', '.join(ATTENTION_TYPES)}.")
    if hparams.hidden_size < 2 * TIMING_TIMESCALES:
        raise ValueError(f"slicenet needs hidden_size >= {2 * TIMING_TIMESCALES} (its timing "
                         f"signal's channels), got {hparams.hidden_size}.")
    check_kernel(hparams, "slicenet")


@registry.register_model(name="slicenet")  # default_name would say "slice_net"
class SliceNet(t2t_model.T2TModel):
    """SliceNet: separable-conv encoder, attention, causal separable-conv decoder.

    body: features "inputs" [B, S, H] and "targets" [B, T, H] (embedded) -> [B, T, H];
    for class-label targets, the encoder output [B, S, H].
    """

    HPARAMS_VIEW = views.SliceNetHParams
    STRUCTURAL_HPARAMS = frozenset({
        "attention_type", "dilation_scheme", "kernel_scheme", "large_kernel_size", "separability"})

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        _check_hparams(hp, self.problem_hparams.modality)
        self.is_classifier = self.problem_hparams.is_classifier
        self.encoder = ConvStack(hp, "SAME", int(hp.num_hidden_layers * 1.5), attend=False,
                                 name="encoder")
        if self.is_classifier:
            return  # T2T runs no decoder when it predicts a class
        space = self.problem_hparams.target_space_id
        if not 0 <= space < TARGET_SPACES:
            raise ValueError(
                f"slicenet embeds target_space_id in {TARGET_SPACES} rows, got {space}.")
        self.target_space_embedding = self.add_weight(
            name="target_space_embedding", shape=(TARGET_SPACES, hp.hidden_size),
            initializer=common.initializer(hp))
        self.middle_attention = (TargetsAttention(hp, name="middle_attention")
                                 if hp.attention_type != "none" else None)
        kernel = (hp.kernel_height, hp.kernel_width)
        self.targets_merge = ConvBlock(hp, [((1, 1), kernel, MERGE_SEPARABILITY)], "LEFT",
                                       name="targets_merge")
        self.decoder = ConvStack(hp, "LEFT", hp.num_hidden_layers,
                                 attend=hp.attention_type != "none", name="decoder")

    def bottom(self, features: dict[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        if "inputs_segmentation" in features or "targets_segmentation" in features:
            raise ValueError("slicenet does not support packed datasets (pack_dataset=False).")
        return super().bottom(features, training)

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """inputs [B, S, H], targets [B, T, H] -> [B, T, H] (a classifier: [B, S, H])."""
        inputs = features["inputs"]
        nonpadding = attention.embedding_to_nonpadding(inputs)  # [B, S] float32
        mask = tf.cast(nonpadding, inputs.dtype)[:, :, None, None]
        encoded = self.encoder(add_timing_signal(inputs[:, :, None, :]), nonpadding=mask,
                               training=training)
        if self.is_classifier:
            return encoded[:, :, 0, :]
        memory_bias = attention.padding_bias(nonpadding)  # [B, 1, 1, S]
        start = self.middle(encoded, features["targets"][:, :, None, :], memory_bias, training)
        decoded = self.decoder(start, memory=encoded, memory_bias=memory_bias, training=training)
        return decoded[:, :, 0, :]

    def middle(self, encoded: tf.Tensor, targets: tf.Tensor, memory_bias: tf.Tensor,
               training: bool) -> tf.Tensor:
        """T2T's slicenet_middle: encoded [B, S, 1, H], targets [B, T, 1, H] -> the
        decoder's input [B, T, 1, H] (shifted targets merged with their attention)."""
        space_id = self.problem_hparams.target_space_id
        space = tf.cast(self.target_space_embedding[space_id], targets.dtype)
        start = tf.tile(space[None, None, None, :], [tf.shape(targets)[0], 1, 1, 1])
        shifted = tf.concat([start, targets], axis=1)[:, :-1]  # shift right
        if self.middle_attention is None:
            attended = tf.zeros_like(shifted)
        else:
            attended = self.middle_attention(shifted, encoded, memory_bias, training=training)
        return self.targets_merge(tf.concat([attended, shifted], axis=-1), training=training)

    def top(self, body_output: tf.Tensor, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """float32 logits, whatever the compute dtype."""
        return tf.cast(super().top(body_output, features), tf.float32)
