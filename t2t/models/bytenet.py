"""ByteNet: Tensor2Tensor's `bytenet` model (v1.15), the dilated-convolution
encoder-decoder of Kalchbrenner et al., "Neural Machine Translation in Linear Time"
(arXiv:1610.10099).

Structure, as in Tensor2Tensor's bytenet.py and common_layers.conv_block:

    inputs ids [B, S] -> symbol modality -> [B, S, H]; targets ids [B, T] -> [B, T, H]
    L = max(S + floor(S / 2), T) rounded up to a multiple of 50
        (the inputs get half their length again: the "dynamic unfolding" of the paper)
    inputs and targets zero-padded to L positions, viewed as [B, L, 1, H]
    encoded = residual_dilated_conv(inputs, padding SAME)
    start = conv_block(concat(encoded, shift_right(targets)), one kernel, padding LEFT)
    decoded = residual_dilated_conv(start, padding LEFT)
    body output = decoded[:, :T]                       -> logits [B, T, V]

    residual_dilated_conv(x): num_block_repeat times
        x = x + dropout(conv_block(layer_norm(x), dilations 1, 2, ..., 2^(num_hidden_layers-1)))
    conv_block(x): for each dilation d: x = layer_norm(conv(relu(x)))
        (bias-free kernel_height x 1 convolutions of hidden_size channels, dilation d)

Padding "LEFT" (T2T's causal padding) puts 2 * (kernel_height // 2) * d zeros before the
sequence and convolves VALID, so decoder position t reads shifted targets <= t only, i.e.
targets < t: the decoder is causal. The encoder reads the whole (padded) input, and the
decoder reads the encoder output at its own position and before it. As in T2T nothing
masks the padding: the layer norms' biases make padded positions non-zero, so outputs
within the receptive field of the padding depend on L (i.e. on the batch's lengths).

Differences from Tensor2Tensor:
  - The body output is cut to the targets' T positions, so the logits [B, T, V] line up
    with the targets. T2T returned all L positions and its loss padded the labels with
    zeros (weight 0), so the extra positions never counted: the loss is the same.
  - Decoding: `decode_step` runs the model on the prefix targets[:, :index + 1] of the
    decoder's buffer, as T2T's (uncached) greedy decoding grew its targets one step at a
    time. Running on the whole buffer would change L (the buffer is the decode length,
    longest input + 50 by default, longer than the training targets), hence the encoder's
    trailing padding and its outputs, so decoding would no longer see the model it was
    trained as.
  - Packed datasets (inputs_segmentation) are refused: the convolutions would mix
    examples.
  - kernel_height must be odd and kernel_width 1 (T2T asserted odd kernels for LEFT
    padding and failed inside the convolution for a width above 1); the error says so.
  - `top` casts the logits to float32 (mixed_bfloat16 runs score float32 logits).
  - T2T's `num_sampled_classes` is left out (t2t has no sampled softmax).
As in T2T, dropout acts only in training, the layer norms have epsilon 1e-6 (T2T's
layer_norm default) and learned scale and bias, and the kernels take the hparams
initializer (T2T's variable-scope default), each kernel its own initializer object.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import common
from t2t.models import t2t_model

LENGTH_MULTIPLE = 50  # T2T: inputs and targets padded to a length divisible by 50
LAYER_NORM_EPSILON = 1e-6  # T2T's common_layers.layer_norm default
PADDINGS = ("SAME", "LEFT")


def pad_for_conv(x: tf.Tensor, kernel_height: int, dilation: int, padding: str) -> tf.Tensor:
    """x [B, L, W, C] zero-padded along L so that a VALID convolution keeps L positions.

    "LEFT" (T2T's causal padding): 2 * (kernel_height // 2) * dilation zeros before
    position 0, so output t reads inputs t - 2 * (kernel_height // 2) * dilation .. t.
    "SAME": half of that on each side, as SAME padding. Padding by hand rather than
    convolving with padding "same" avoids a TF 2.21 bug: the gradient of
    tf.nn.convolution's dilated SAME path (what a Keras conv with padding "same" and a
    dilation runs), traced with an unknown length, came back with the wrong shape after
    a layer norm and a ReLU (an AddN of [B, 1, 1, C] and [B, L, 1, C] failed).
    """
    amount = 2 * (kernel_height // 2) * dilation
    before = amount if padding == "LEFT" else amount // 2
    return tf.pad(x, [[0, 0], [before, amount - before], [0, 0], [0, 0]])


def check_kernel(hparams: HParams, model: str) -> tuple[int, int]:
    """(kernel_height, kernel_width) of hparams; ValueError unless odd x 1 (causal padding)."""
    height, width = int(hparams.kernel_height), int(hparams.kernel_width)
    if height % 2 == 0 or width != 1:
        raise ValueError(
            f"{model} needs an odd kernel_height and kernel_width 1 (its decoder pads "
            f"causally along the sequence), got {height}x{width}."
        )
    return height, width


class ConvBlock(common.Layer):
    """T2T's conv_block with its default layer norm.

    For each dilation d: ReLU (not before the first conv when first_relu is False) ->
    bias-free conv (kernel, dilation d, hidden_size filters) -> layer norm.
    [B, L, 1, C] -> [B, L, 1, filters]; padding "SAME" or "LEFT" (causal).
    """

    def __init__(self, filters: int, dilations: list[int], kernel: tuple[int, int],
                 padding: str, hparams: HParams, first_relu: bool = True,
                 name: str | None = None):
        super().__init__(name=name)
        if padding not in PADDINGS:
            raise ValueError(f"Unknown padding {padding!r}: use one of {PADDINGS}.")
        self.padding, self.kernel, self.dilations = padding, kernel, list(dilations)
        self.first_relu = first_relu
        self.convs = [
            keras.layers.Conv2D(
                filters, kernel, dilation_rate=(d, 1), use_bias=False,
                padding="valid",  # padded by pad_for_conv
                kernel_initializer=common.initializer(hparams),  # a new object per kernel
                name=f"conv_{i}")
            for i, d in enumerate(self.dilations)
        ]
        self.norms = [keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=f"norm_{i}")
                      for i in range(len(self.dilations))]

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """x [B, L, 1, C] -> [B, L, 1, filters]."""
        layers = zip(self.convs, self.norms, self.dilations, strict=True)
        for i, (conv, norm, dilation) in enumerate(layers):
            if self.first_relu or i > 0:
                x = tf.nn.relu(x)
            x = pad_for_conv(x, self.kernel[0], dilation, self.padding)
            x = norm(conv(x))
        return x


class ResidualDilatedConv(common.Layer):
    """T2T's residual_dilated_conv: num_block_repeat residual conv blocks, pre-norm.

    Repeat i: x += dropout(conv_block_i(layer_norm_i(x))), the block's dilations being
    1, 2, 4, ..., 2^(num_hidden_layers - 1). [B, L, 1, H] -> [B, L, 1, H].
    """

    def __init__(self, hparams: HParams, padding: str, name: str | None = None):
        super().__init__(name=name)
        kernel = check_kernel(hparams, "bytenet")
        dilations = [2**i for i in range(hparams.num_hidden_layers)]
        repeats = range(hparams.num_block_repeat)
        self.norms = [keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=f"lnorm_{i}")
                      for i in repeats]
        self.blocks = [ConvBlock(hparams.hidden_size, dilations, kernel, padding, hparams,
                                 name=f"residual_conv_{i}") for i in repeats]
        self.dropout = common.Dropout(hparams.dropout)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """x [B, L, 1, H] -> [B, L, 1, H]."""
        for norm, block in zip(self.norms, self.blocks, strict=True):
            x = x + self.dropout(block(norm(x)), training=training)
        return x


def padded_length(input_length: tf.Tensor, target_length: tf.Tensor) -> tf.Tensor:
    """T2T's common length L: max(S + floor(S / 2), T) rounded up to a multiple of 50."""
    longest = tf.maximum(input_length + input_length // 2, target_length)
    return (longest + LENGTH_MULTIPLE - 1) // LENGTH_MULTIPLE * LENGTH_MULTIPLE


@registry.register_model(name="bytenet")  # default_name would say "byte_net"
class ByteNet(t2t_model.T2TModel):
    """ByteNet: a dilated-conv encoder over the (extended) inputs and a causal dilated-conv
    decoder over the shifted targets joined with the encoder output, position by position.

    body: features "inputs" [B, S, H] and "targets" [B, T, H] (embedded) -> [B, T, H].
    """

    HPARAMS_VIEW = views.ByteNetHParams
    STRUCTURAL_HPARAMS = frozenset({"num_block_repeat"})

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        t2t_model.check_modalities("bytenet", self.problem_hparams.modality,
                                   inputs=(Modality.SYMBOL,), targets=(Modality.SYMBOL,))
        kernel = check_kernel(hp, "bytenet")
        self.encoder = ResidualDilatedConv(hp, "SAME", name="encoder")
        self.decoder_start = ConvBlock(hp.hidden_size, [1], kernel, "LEFT", hp,
                                       name="decoder_start")
        self.decoder = ResidualDilatedConv(hp, "LEFT", name="decoder")

    def bottom(self, features: dict[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        if "inputs_segmentation" in features or "targets_segmentation" in features:
            raise ValueError("bytenet does not support packed datasets (pack_dataset=False).")
        return super().bottom(features, training)

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """inputs [B, S, H], targets [B, T, H] (embedded) -> decoder output [B, T, H]."""
        inputs, targets = features["inputs"], features["targets"]
        input_length, target_length = tf.shape(inputs)[1], tf.shape(targets)[1]
        length = padded_length(input_length, target_length)
        inputs = tf.pad(inputs, [[0, 0], [0, length - input_length], [0, 0]])[:, :, None, :]
        targets = tf.pad(targets, [[0, 0], [0, length - target_length], [0, 0]])
        shifted = tf.pad(targets, [[0, 0], [1, 0], [0, 0]])[:, :-1, None, :]  # shift right
        encoded = self.encoder(inputs, training=training)
        start = self.decoder_start(tf.concat([encoded, tf.cast(shifted, encoded.dtype)], axis=-1))
        decoded = self.decoder(start, training=training)
        return decoded[:, :target_length, 0, :]

    def top(self, body_output: tf.Tensor, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """float32 logits [B, T, V], whatever the compute dtype."""
        return tf.cast(super().top(body_output, features), tf.float32)

    def decode_step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict
                    ) -> tuple[tf.Tensor, dict]:
        """Logits [B, V] at `index`, running the model on targets[:, :index + 1] only.

        previous_ids [B] (the token at index - 1) is written into the buffer [B, L]
        first. The prefix, not the whole buffer, fixes the padded length L as in T2T's
        decoding (see the module docstring), so a decode does not depend on its buffer.
        """
        targets = t2t_model.write_previous_ids(state["targets"], previous_ids, index)
        state = {**state, "targets": targets}
        logits, _ = self({**state, "targets": targets[:, : index + 1]}, training=False)
        return tf.cast(logits[:, -1], tf.float32), state
