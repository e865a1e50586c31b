"""Xception: Tensor2Tensor's `xception` model (v1.15) as Keras 3 layers, channels-last (NHWC).

Structure, as in Tensor2Tensor's xception.py (`xception_internal`):

    image [B, H, W, C] in [0, 1]
    -> entry flow, one of:
       "xception" (T2T's xception_entry, for large images):
           conv 3x3/2, 32 -> LN -> ReLU conv 3x3, 64 -> LN
           -> 3 entry blocks of min(128, F), min(256, F) and F filters, each
              [ReLU sepconv 3x3 -> LN] x 2 -> max pool 3x3/2, plus the shortcut
              (ReLU, first block only) conv 1x1/2 -> LN
           -> [B, H/16, W/16, F]
       "small_image" (T2T's small_image_conv): conv 3x3, F -> LN -> [B, H, W, F]
    -> middle flow: num_hidden_layers residual blocks (T2T's residual_block), each
       y = [ReLU sepconv k -> LN] x 3;  x = dropout(LN(x + y))      [B, h, w, F]
    -> exit flow (T2T's xception_exit = conv_block_downsample + ReLU), with C = F:
       shortcut ReLU conv 3x3/2, 1.25C -> LN;
       [ReLU sepconv 3x3 -> LN] to C, then to 1.25C -> max pool 3x3/2, plus the shortcut
       -> sepconv 3x3, 2C -> LN -> ReLU sepconv 3x3, 2.5C -> LN -> ReLU
    -> body output [B, ceil(h/2), ceil(w/2), int(2.5 F)]   (ClassLabelModality.top
       mean-pools it and projects to the classes, as for resnet)

F = hidden_size, k = (kernel_height, kernel_width); sizes divided are rounded up (SAME
padding). "sepconv" is a depthwise-separable convolution (depth multiplier 1: a k x k
depthwise kernel per channel, then a 1x1 pointwise one). Every convolution is bias-free
and followed by a layer norm over channels (epsilon 1e-6, scale and bias), as T2T's
conv_block does by default. Dropout (hparams.dropout) is active only in training, as in
T2T, whose T2TModel zeroes the dropout hparams outside training.

Differences from Tensor2Tensor:
  - T2T picks the entry flow from the static image height: "xception" when it exceeds
    200 (ImageNet at 299x299), else "small_image". t2t picks it the same way when the
    model is built, from the problem's image_shape (no shape known: "small_image");
    the t2t hparam `xception_entry_flow` ("auto", the default, "xception" or
    "small_image") can force either, e.g. the full entry flow on small images
    (28x28 -> 2x2 before the exit flow).
  - T2T's exit flow reshapes a non-square feature map to a square one of the same area
    (a remnant of inputs flattened to [B, H*W, 1, C]; the 2017 sets also carried an
    `imagenet_use_2d` hparam for that era's ImageNet inputs, gone by v1.15). t2t image
    features are always [B, H, W, C], so the exit flow runs on the map as it is and
    non-square images work. Resizing (e.g. ImageNet's to 299x299) belongs to the
    problem's preprocessing, not to the model.
  - Kernels use the hparams initializer (xception_base: basic_params1's orthogonal, gain
    1), as T2T's variable-scope default did; each kernel (a separable conv has two) gets
    its own initializer object: a Keras 3 initializer without a SeedGenerator seed
    returns the same values on every call, so sharing one would start all same-shaped
    kernels identical.
  - `top` casts the logits to float32, so that under a mixed precision policy
    (mixed_bfloat16) the loss, metrics and decoding see float32 logits.
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

ENTRY_FLOWS = ("auto", "xception", "small_image")
LARGE_IMAGE_HEIGHT = 200  # T2T: taller images get the full Xception entry flow
LAYER_NORM_EPSILON = 1e-6  # T2T's common_layers.layer_norm default


class ConvNorm(common.Layer):
    """One step of T2T's conv_block: (ReLU) -> bias-free conv or sepconv -> layer norm.

    [B, H, W, C] -> [B, ceil(H / strides), ceil(W / strides), filters].
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int | tuple[int, int],
        hparams: HParams,
        *,
        separable: bool,
        strides: int = 1,
        relu: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.relu = relu
        if separable:
            self.conv = keras.layers.SeparableConv2D(
                filters,
                kernel_size,
                strides=strides,
                padding="same",
                use_bias=False,
                depthwise_initializer=common.initializer(hparams),
                pointwise_initializer=common.initializer(hparams),
                name="sepconv",
            )
        else:
            self.conv = keras.layers.Conv2D(
                filters,
                kernel_size,
                strides=strides,
                padding="same",
                use_bias=False,
                kernel_initializer=common.initializer(hparams),
                name="conv",
            )
        self.norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="norm")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        if self.relu:
            x = tf.nn.relu(x)
        return self.norm(self.conv(x))


def _max_pool() -> keras.layers.Layer:
    return keras.layers.MaxPooling2D(pool_size=3, strides=2, padding="same")


class EntryBlock(common.Layer):
    """T2T's xnet_resblock: [ReLU sepconv 3x3 -> LN] x 2 -> max pool 3x3/2, plus a
    (ReLU) conv 1x1/2 -> LN shortcut. [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), filters]."""

    def __init__(self, filters: int, shortcut_relu: bool, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        self.convs = [
            ConvNorm(filters, 3, hparams, separable=True, name=f"sep_conv_{i}") for i in range(2)
        ]
        self.pool = _max_pool()
        self.shortcut = ConvNorm(
            filters, 1, hparams, separable=False, strides=2, relu=shortcut_relu, name="shortcut"
        )

    def call(self, x: tf.Tensor) -> tf.Tensor:
        y = x
        for conv in self.convs:
            y = conv(y)
        return self.pool(y) + self.shortcut(x)


class EntryFlow(common.Layer):
    """T2T's xception_entry. [B, H, W, C] -> [B, ceil(H/16), ceil(W/16), hidden_size]."""

    def __init__(self, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        hidden = hparams.hidden_size
        self.conv0 = ConvNorm(32, 3, hparams, separable=False, strides=2, relu=False, name="conv0")
        self.conv1 = ConvNorm(64, 3, hparams, separable=False, name="conv1")
        self.blocks = [
            EntryBlock(min(128, hidden), True, hparams, name="block0"),
            EntryBlock(min(256, hidden), False, hparams, name="block1"),
            EntryBlock(hidden, False, hparams, name="block2"),
        ]

    def call(self, x: tf.Tensor) -> tf.Tensor:
        x = self.conv1(self.conv0(x))
        for block in self.blocks:
            x = block(x)
        return x


class ResidualBlock(common.Layer):
    """T2T's residual_block: x + [ReLU sepconv k -> LN] x 3, then LN and dropout.

    [B, H, W, hidden_size] -> same.
    """

    def __init__(self, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        kernel = (hparams.kernel_height, hparams.kernel_width)
        self.convs = [
            ConvNorm(hparams.hidden_size, kernel, hparams, separable=True, name=f"sep_conv_{i}")
            for i in range(3)
        ]
        self.norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="norm")
        self.dropout = common.Dropout(hparams.dropout)

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        y = x
        for conv in self.convs:
            y = conv(y)
        return self.dropout(self.norm(x + y), training=training)


class ExitFlow(common.Layer):
    """T2T's xception_exit (conv_block_downsample with a 3x3 kernel, stride 2), then ReLU.

    [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), int(2.5 * C)].
    """

    def __init__(self, channels: int, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        c = channels
        self.shortcut = ConvNorm(int(1.25 * c), 3, hparams, separable=False, strides=2, name="res_conv")
        self.conv0 = ConvNorm(c, 3, hparams, separable=True, name="conv0")
        self.conv1 = ConvNorm(int(1.25 * c), 3, hparams, separable=True, name="conv1")
        self.pool = _max_pool()
        self.conv2 = ConvNorm(2 * c, 3, hparams, separable=True, relu=False, name="conv2")
        self.conv3 = ConvNorm(int(2.5 * c), 3, hparams, separable=True, name="conv3")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        shortcut = self.shortcut(x)
        x = self.pool(self.conv1(self.conv0(x))) + shortcut
        return tf.nn.relu(self.conv3(self.conv2(x)))


def entry_flow_for(hparams: HParams, height: int | None) -> str:
    """The entry flow ("xception" or "small_image") for images of static `height`.

    hparams.xception_entry_flow (default "auto") forces one; "auto" follows T2T."""
    choice = hparams.get("xception_entry_flow", "auto") or "auto"
    if choice not in ENTRY_FLOWS:
        raise ValueError(
            f"xception: unknown xception_entry_flow {choice!r}; use one of {ENTRY_FLOWS}."
        )
    if choice != "auto":
        return choice
    return "xception" if height is not None and height > LARGE_IMAGE_HEIGHT else "small_image"


def _check_hparams(hp: HParams) -> None:
    if hp.hidden_size < 1 or hp.num_hidden_layers < 0:
        raise ValueError(
            f"xception needs hidden_size >= 1 and num_hidden_layers >= 0, got "
            f"hidden_size={hp.hidden_size}, num_hidden_layers={hp.num_hidden_layers}."
        )
    if hp.kernel_height < 1 or hp.kernel_width < 1:
        raise ValueError(
            f"xception needs positive kernel_height and kernel_width, got "
            f"{hp.kernel_height}x{hp.kernel_width}."
        )
    entry_flow_for(hp, None)  # checks xception_entry_flow


@registry.register_model
class Xception(t2t_model.T2TModel):
    """Xception for image classification (see the module docstring).

    body: features["inputs"] float [B, H, W, C] -> [B, h, w, int(2.5 * hidden_size)],
    h = ceil(H / 2) with the small-image entry flow, ceil(H / 32) with Xception's.
    """

    HPARAMS_VIEW = views.XceptionHParams
    SMALL_IMAGE_HPARAMS_SETS = ("xception_tiny_cpu",)

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        _check_hparams(hp)
        shape = self.problem_hparams.image_shape
        self.entry_flow = entry_flow_for(hp, shape[0] if shape else None)
        if self.entry_flow == "xception":
            self.entry = EntryFlow(hp, name="xception_entry")
        else:
            self.entry = ConvNorm(
                hp.hidden_size, 3, hp, separable=False, relu=False, name="small_image_conv"
            )
        self.middle = [ResidualBlock(hp, name=f"layer_{i}") for i in range(hp.num_hidden_layers)]
        self.exit_flow = ExitFlow(hp.hidden_size, hp, name="xception_exit")

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """features["inputs"] float [B, H, W, C] -> feature map [B, h, w, 2.5 F]."""
        x = features["inputs"]
        if len(x.shape) != 4:
            raise ValueError(f"xception needs image inputs [B, H, W, C], got shape {x.shape}.")
        x = self.entry(x)
        for block in self.middle:
            x = block(x, training=training)
        return self.exit_flow(x)

    def top(self, body_output: tf.Tensor, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """Class logits [B, 1, classes], float32 also under a mixed precision policy."""
        return tf.cast(super().top(body_output, features), tf.float32)
