"""Shake-Shake (Gastaldi 2017, arXiv:1705.07485): Tensor2Tensor's `shake_shake` model.

The CIFAR-10 network of the paper ("Shake-Shake-Image": one random coefficient per
example), as Tensor2Tensor v1.15 builds it, in Keras 3 layers (NHWC):

    image [B, H, W, C] in [0, 1]
    -> conv 3x3, 16 filters -> batch norm
    -> stage 1: n blocks, 16k filters, stride 1
    -> stage 2: n blocks, 32k filters, stride 2 (first block)
    -> stage 3: n blocks, 64k filters, stride 2 (first block)
    -> ReLU -> body output [B, H/4, W/4, 64k]   (rounded up; the class-label
       modality mean-pools it and projects to the classes)

with k = hidden_size / 16 and n = (num_hidden_layers - 2) / 6 (so shakeshake_small,
26 layers and hidden_size 32, is the paper's "26 2x32d").

A block sums the skip path and `shake_shake_num_branches` (2) branches, each
ReLU -> conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN -> dropout
(layer_prepostprocess_dropout). In training, branch i is scaled by a per-example random
weight a_i in the forward pass and by an independent b_i in the backward pass (uniform
draws normalized to sum to 1 over the branches), with T2T's stop-gradient trick
`x * b + stop_gradient(x * a - x * b)`; in evaluation every branch is scaled by
1 / num_branches. The skip path is the identity when the channel count is unchanged,
otherwise two strided 1x1 convs (of the input, and of the input shifted by one pixel)
with half the filters each, concatenated, then BN. With `shake_shake_concat`, the skip
path and the branches are concatenated, ReLU'd, and mixed by a 1x1 conv and BN instead
of summed.

Convolutions have biases and use the hparams initializer (a fresh one per layer: a
Keras 3 initializer object without a seed SeedGenerator returns the same values on every
call, so sharing one would give both branches identical weights and nothing to shake);
batch norm uses Keras'
defaults (T2T's tf.layers ones: momentum 0.99, epsilon 1e-3) and follows `training`.
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


def check_hparams(hparams: HParams) -> tuple[int, int]:
    """(k, n): the width multiplier hidden_size // 16 and blocks per stage.

    Raises ValueError unless (num_hidden_layers - 2) % 6 == 0 and hidden_size % 16 == 0.
    """
    layers, hidden = hparams.num_hidden_layers, hparams.hidden_size
    if layers < 2 or (layers - 2) % 6 != 0:
        raise ValueError(
            f"shake_shake needs num_hidden_layers = 6n + 2 (2, 8, 14, 20, 26, ...: three "
            f"stages of n two-conv blocks plus two), got num_hidden_layers={layers}."
        )
    if hidden < 16 or hidden % 16 != 0:
        raise ValueError(
            f"shake_shake needs hidden_size a positive multiple of 16 (the stages have "
            f"16k, 32k and 64k filters with k = hidden_size / 16), got hidden_size={hidden}."
        )
    if hparams.shake_shake_num_branches < 1:
        raise ValueError(
            f"shake_shake needs shake_shake_num_branches >= 1, got "
            f"{hparams.shake_shake_num_branches}."
        )
    return hidden // 16, (layers - 2) // 6


def shake(x: tf.Tensor, forward: tf.Tensor, backward: tf.Tensor) -> tf.Tensor:
    """x * forward in value, with the gradient of x * backward. x [B, H, W, C]; weights [B, 1, 1, 1]."""
    return x * backward + tf.stop_gradient(x * forward - x * backward)


class ShakeShakeBranch(keras.layers.Layer):
    """ReLU -> conv3x3(stride) -> BN -> ReLU -> conv3x3 -> BN. [B, H, W, C] -> [B, H', W', filters]."""

    def __init__(self, filters: int, stride: int, hparams: HParams, name: str | None = None):
        super().__init__(name=name)
        self.conv1 = keras.layers.Conv2D(
            filters,
            3,
            strides=stride,
            padding="same",
            kernel_initializer=common.initializer(hparams),
            name="conv1",
        )
        self.bn1 = common.BatchNormalization(name="bn1")
        self.conv2 = keras.layers.Conv2D(
            filters, 3, padding="same", kernel_initializer=common.initializer(hparams), name="conv2"
        )
        self.bn2 = common.BatchNormalization(name="bn2")

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = self.bn1(self.conv1(tf.nn.relu(x)), training=training)
        return self.bn2(self.conv2(tf.nn.relu(x)), training=training)


class SkipConnection(keras.layers.Layer):
    """Shake-shake's skip path (T2T's shake_shake_skip_connection).

    The identity when `in_filters == filters`; otherwise [B, H, W, C] ->
    [B, ceil(H / stride), ceil(W / stride), filters] from two half-width 1x1 convs.
    """

    def __init__(
        self, in_filters: int, filters: int, stride: int, hparams: HParams, name: str | None = None
    ):
        super().__init__(name=name)
        self.identity = in_filters == filters
        self.stride = stride
        if not self.identity:
            half = filters // 2
            self.path1_conv = keras.layers.Conv2D(
                half,
                1,
                padding="same",
                kernel_initializer=common.initializer(hparams),
                name="path1_conv",
            )
            self.path2_conv = keras.layers.Conv2D(
                half,
                1,
                padding="same",
                kernel_initializer=common.initializer(hparams),
                name="path2_conv",
            )
            self.bn = common.BatchNormalization(name="final_path_bn")

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if self.identity:
            return x
        s = self.stride
        # A 1x1 average pool with stride s (VALID) is a strided subsample.
        path1 = self.path1_conv(x[:, ::s, ::s, :])
        # Path 2 samples the pixels one down and right (zero past the border).
        shifted = tf.pad(x, [[0, 0], [0, 1], [0, 1], [0, 0]])[:, 1:, 1:, :]
        path2 = self.path2_conv(shifted[:, ::s, ::s, :])
        return self.bn(tf.concat([path1, path2], axis=-1), training=training)


class ShakeShakeBlock(keras.layers.Layer):
    """Skip path + shaken branches. [B, H, W, C] -> [B, ceil(H / stride), ceil(W / stride), filters]."""

    def __init__(
        self,
        in_filters: int,
        filters: int,
        stride: int,
        hparams: HParams,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.num_branches = int(hparams.shake_shake_num_branches)
        self.concat = bool(hparams.shake_shake_concat)
        self.branches = [
            ShakeShakeBranch(filters, stride, hparams, name=f"branch_{i}")
            for i in range(self.num_branches)
        ]
        self.dropout = common.Dropout(hparams.layer_prepostprocess_dropout)
        self.skip = SkipConnection(in_filters, filters, stride, hparams, name="skip")
        if self.concat:
            self.concat_conv = keras.layers.Conv2D(
                filters, 1, kernel_initializer=common.initializer(hparams), name="concat_1x1"
            )
            self.concat_bn = common.BatchNormalization(name="concat_bn")

    def _coefficients(self, x: tf.Tensor) -> list[tf.Tensor]:
        """num_branches per-example weights [B, 1, 1, 1], uniform draws summing to 1."""
        shape = tf.stack([tf.shape(x)[0], 1, 1, 1])
        draws = [tf.random.uniform(shape, dtype=x.dtype) for _ in range(self.num_branches)]
        total = tf.add_n(draws)
        return [draw / total for draw in draws]

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if training:
            forward, backward = self._coefficients(x), self._coefficients(x)
        outputs = []
        for i, branch in enumerate(self.branches):
            b = branch(x, training=training)
            if training:
                b = shake(b, forward[i], backward[i])
            else:
                b = b * (1.0 / self.num_branches)
            outputs.append(self.dropout(b, training=training))
        res = self.skip(x, training=training)
        if self.concat:
            mixed = tf.nn.relu(tf.concat([res, *outputs], axis=-1))
            return self.concat_bn(self.concat_conv(mixed), training=training)
        return res + tf.add_n(outputs)


@registry.register_model
class ShakeShake(t2t_model.T2TModel):
    """Shake-Shake for image classification (see the module docstring).

    body: features["inputs"] float [B, H, W, C] -> [B, ceil(H/4), ceil(W/4), 4 * hidden_size].
    """

    HPARAMS_VIEW = views.ShakeShakeHParams
    STRUCTURAL_HPARAMS = frozenset({"shake_shake_num_branches"})
    SMALL_IMAGE_HPARAMS_SETS = ("shakeshake_small", "shake_shake_quick")

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        k, n = check_hparams(hp)
        self.init_conv = keras.layers.Conv2D(
            16, 3, padding="same", kernel_initializer=common.initializer(hp), name="init_conv"
        )
        self.init_bn = common.BatchNormalization(name="init_bn")
        self.blocks: list[ShakeShakeBlock] = []
        in_filters = 16
        for stage, (filters, stride) in enumerate([(16 * k, 1), (32 * k, 2), (64 * k, 2)]):
            for i in range(n):
                self.blocks.append(
                    ShakeShakeBlock(
                        in_filters,
                        filters,
                        stride if i == 0 else 1,
                        hp,
                        name=f"L{stage + 1}_layer_{i}",
                    )
                )
                in_filters = filters

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """features["inputs"] float [B, H, W, C] -> [B, h, w, 64k] (after the final ReLU)."""
        x = features["inputs"]
        if len(x.shape) != 4:
            raise ValueError(f"shake_shake needs image inputs [B, H, W, C], got shape {x.shape}.")
        x = self.init_bn(self.init_conv(x), training=training)
        for block in self.blocks:
            x = block(x, training=training)
        return tf.nn.relu(x)
