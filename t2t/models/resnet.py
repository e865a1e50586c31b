"""ResNet: Tensor2Tensor's `resnet` model (v1.15) as Keras 3 layers, channels-last (NHWC).

Structure, as in Tensor2Tensor's resnet.py (itself from cloud_tpu's resnet_model.py):

    image [B, H, W, C] in [0, 1]
    -> conv 7x7, filter_sizes[0], stride 1 if is_cifar else 2 -> batch norm -> ReLU
    -> (not is_cifar) max pool 3x3, stride 2, SAME
    -> block layer 1: filter_sizes[1], stride 1, layer_sizes[0] blocks
    -> block layer 2: filter_sizes[2], stride 2, layer_sizes[1] blocks
    -> block layer 3: filter_sizes[3], stride 2, layer_sizes[2] blocks
    -> (not is_cifar) block layer 4: filter_sizes[4], stride 2, layer_sizes[3] blocks
    -> body output [B, h, w, F]   (ClassLabelModality.top mean-pools h, w; dense to classes)

Blocks (hparams.block_fn):
  "residual"   pre-activation (v2): BN-ReLU -> conv3x3(stride) -> BN-ReLU -> conv3x3,
               plus the shortcut; F = filters.
  "bottleneck" post-activation (v1): conv1x1 -> BN-ReLU -> conv3x3(stride) -> BN-ReLU
               -> conv1x1 (ratio * filters) -> BN, plus the shortcut, then ReLU;
               F = bottleneck_ratios[i] * filters. In the last block of each layer the
               final BN's scale starts at zero (T2T's `init_zero=final_block`).
The first block of every layer has a projection shortcut (conv1x1(stride) -> BN); a
"residual" block projects its BN-ReLU'd input, a "bottleneck" block its raw input.
Strided convolutions pad explicitly by (k-1)//2, k//2 and run VALID ("fixed padding"),
so output sizes do not depend on the input's parity; stride-1 convolutions run SAME.

Batch norm: momentum 0.9, epsilon 1e-5 (T2T's BATCH_NORM_DECAY / EPSILON); it uses the
batch statistics and updates its moving averages only when `training` is true.

Differences from Tensor2Tensor:
  - Convolution kernels use the hparams initializer (resnet_base: normal_unit_scaling,
    gain 2, i.e. He-style variance scaling) where T2T hard-coded
    `tf.variance_scaling_initializer()` (scale 1, fan_in); convolutions have no bias.
    Each conv gets its own initializer object: a Keras 3 initializer without a
    SeedGenerator seed returns the same values on every call, so sharing one would give
    all same-shaped kernels identical values.
  - Always NHWC (`use_nchw` is not an hparam); targeted dropout (`use_td`) is not
    implemented.
  - With is_cifar, T2T's body computed the logits and a mean cross entropy itself; here
    the body returns the feature map and the class-label modality pools and projects
    it, which is the same computation (global mean pool, then dense).
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

BATCH_NORM_DECAY = 0.9
BATCH_NORM_EPSILON = 1e-5
BLOCK_FNS = ("residual", "bottleneck")


class BatchNormRelu(keras.layers.Layer):
    """Batch normalization over the channel axis, then an optional ReLU. [B, H, W, C] -> same."""

    def __init__(self, relu: bool = True, init_zero: bool = False, name: str | None = None):
        super().__init__(name=name)
        self.relu = relu
        self.bn = common.BatchNormalization(
            axis=-1,
            momentum=BATCH_NORM_DECAY,
            epsilon=BATCH_NORM_EPSILON,
            gamma_initializer="zeros" if init_zero else "ones",
            name="batch_norm",
        )

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = self.bn(x, training=training)
        return tf.nn.relu(x) if self.relu else x


class FixedPaddingConv2D(keras.layers.Layer):
    """Bias-free conv; strided ones pad explicitly and run VALID (T2T's conv2d_fixed_padding).

    [B, H, W, C] -> [B, ceil(H / strides), ceil(W / strides), filters].
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        strides: int,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.kernel_size = kernel_size
        self.strides = strides
        self.conv = keras.layers.Conv2D(
            filters,
            kernel_size,
            strides=strides,
            padding="same" if strides == 1 else "valid",
            use_bias=False,
            kernel_initializer=common.initializer(hparams),
            name="conv2d",
        )

    def call(self, x: tf.Tensor) -> tf.Tensor:
        if self.strides > 1:
            pad_total = self.kernel_size - 1
            pad_beg = pad_total // 2
            pad_end = pad_total - pad_beg
            x = tf.pad(x, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])
        return self.conv(x)


class Projection(keras.layers.Layer):
    """Projection shortcut: conv1x1(strides) -> BN (no ReLU). [B, H, W, C] -> [B, H', W', F]."""

    def __init__(self, filters: int, strides: int, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        self.conv = FixedPaddingConv2D(filters, 1, strides, hparams, name="conv")
        self.bn = BatchNormRelu(relu=False, name="bn")

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        return self.bn(self.conv(x), training=training)


class ResidualBlock(keras.layers.Layer):
    """Pre-activation residual block (T2T's residual_block). [B, H, W, C] -> [B, H', W', filters]."""

    def __init__(
        self,
        filters: int,
        strides: int,
        projection: bool,
        final_block: bool,
        bottleneck_ratio: int,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        del final_block, bottleneck_ratio  # same signature as BottleneckBlock
        self.bn1 = BatchNormRelu(name="bn1")
        self.projection = (
            Projection(filters, strides, hparams, name="projection") if projection else None
        )
        self.conv1 = FixedPaddingConv2D(filters, 3, strides, hparams, name="conv1")
        self.bn2 = BatchNormRelu(name="bn2")
        self.conv2 = FixedPaddingConv2D(filters, 3, 1, hparams, name="conv2")

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        shortcut = x
        x = self.bn1(x, training=training)
        if self.projection is not None:
            shortcut = self.projection(x, training=training)
        x = self.conv1(x)
        x = self.bn2(x, training=training)
        x = self.conv2(x)
        return x + shortcut


class BottleneckBlock(keras.layers.Layer):
    """Post-activation bottleneck block (T2T's bottleneck_block).

    [B, H, W, C] -> [B, H', W', bottleneck_ratio * filters].
    """

    def __init__(
        self,
        filters: int,
        strides: int,
        projection: bool,
        final_block: bool,
        bottleneck_ratio: int,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        out_filters = bottleneck_ratio * filters
        self.projection = (
            Projection(out_filters, strides, hparams, name="projection") if projection else None
        )
        self.conv1 = FixedPaddingConv2D(filters, 1, 1, hparams, name="conv1")
        self.bn1 = BatchNormRelu(name="bn1")
        self.conv2 = FixedPaddingConv2D(filters, 3, strides, hparams, name="conv2")
        self.bn2 = BatchNormRelu(name="bn2")
        self.conv3 = FixedPaddingConv2D(out_filters, 1, 1, hparams, name="conv3")
        self.bn3 = BatchNormRelu(relu=False, init_zero=final_block, name="bn3")

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        shortcut = self.projection(x, training=training) if self.projection is not None else x
        x = self.bn1(self.conv1(x), training=training)
        x = self.bn2(self.conv2(x), training=training)
        x = self.bn3(self.conv3(x), training=training)
        return tf.nn.relu(x + shortcut)


class BlockLayer(keras.layers.Layer):
    """`blocks` blocks at one resolution; the first has the projection and the stride.

    [B, H, W, C] -> [B, ceil(H / strides), ceil(W / strides), F].
    """

    def __init__(
        self,
        block_fn: str,
        filters: int,
        blocks: int,
        strides: int,
        bottleneck_ratio: int,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        block_cls = BottleneckBlock if block_fn == "bottleneck" else ResidualBlock
        self.blocks = [
            block_cls(
                filters,
                strides if i == 0 else 1,
                projection=i == 0,
                final_block=i > 0 and i + 1 == blocks,
                bottleneck_ratio=bottleneck_ratio,
                hparams=hparams,
                name=f"block_{i}",
            )
            for i in range(blocks)
        ]

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        for block in self.blocks:
            x = block(x, training=training)
        return x


def _check_hparams(hp: HParams) -> None:
    if hp.block_fn not in BLOCK_FNS:
        raise ValueError(f"resnet: unknown block_fn {hp.block_fn!r}; use one of {BLOCK_FNS}.")
    num_layers = 3 if hp.is_cifar else 4
    if len(hp.layer_sizes) < num_layers or len(hp.filter_sizes) < num_layers + 1:
        raise ValueError(
            f"resnet (is_cifar={hp.is_cifar}) needs {num_layers} layer_sizes and "
            f"{num_layers + 1} filter_sizes, got layer_sizes={hp.layer_sizes} and "
            f"filter_sizes={hp.filter_sizes}."
        )
    if hp.block_fn == "bottleneck" and len(hp.bottleneck_ratios) < num_layers:
        raise ValueError(
            f"resnet: bottleneck blocks need {num_layers} bottleneck_ratios, got "
            f"{hp.bottleneck_ratios}."
        )
    if any(size < 1 for size in hp.layer_sizes[:num_layers]):
        raise ValueError(f"resnet: every layer needs at least one block, got {hp.layer_sizes}.")


@registry.register_model
class Resnet(t2t_model.T2TModel):
    """Residual network for image classification (see the module docstring).

    body: features["inputs"] float [B, H, W, C] -> [B, h, w, F], with h = H/4 (cifar) or
    H/32 (ImageNet layout), rounded up, and F the last layer's output channels.
    """

    HPARAMS_VIEW = views.ResnetHParams
    STRUCTURAL_HPARAMS = frozenset({
        "block_fn", "bottleneck_ratios", "filter_sizes", "is_cifar", "layer_sizes"})
    SMALL_IMAGE_HPARAMS_SETS = ("resnet_cifar_15", "resnet_cifar_32")

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
        self.is_cifar = bool(hp.is_cifar)
        self.initial_conv = FixedPaddingConv2D(
            hp.filter_sizes[0], 7, 1 if self.is_cifar else 2, hp, name="initial_conv"
        )
        self.initial_bn = BatchNormRelu(name="initial_bn")
        self.initial_max_pool = (
            None
            if self.is_cifar
            else keras.layers.MaxPooling2D(
                pool_size=3, strides=2, padding="same", name="initial_max_pool"
            )
        )
        ratios = list(hp.bottleneck_ratios)
        num_layers = 3 if self.is_cifar else 4
        self.block_layers = [
            BlockLayer(
                hp.block_fn,
                filters=hp.filter_sizes[i + 1],
                blocks=hp.layer_sizes[i],
                strides=1 if i == 0 else 2,
                bottleneck_ratio=ratios[i] if i < len(ratios) else 4,
                hparams=hp,
                name=f"block_layer{i + 1}",
            )
            for i in range(num_layers)
        ]

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """features["inputs"] float [B, H, W, C] -> feature map [B, h, w, F]."""
        x = features["inputs"]
        if len(x.shape) != 4:
            raise ValueError(f"resnet needs image inputs [B, H, W, C], got shape {x.shape}.")
        x = self.initial_conv(x)
        x = self.initial_bn(x, training=training)
        if self.initial_max_pool is not None:
            x = self.initial_max_pool(x)
        for layer in self.block_layers:
            x = layer(x, training=training)
        return x
