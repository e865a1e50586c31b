"""RevNet: Tensor2Tensor's `revnet` model (v1.15), a reversible residual network, NHWC.

Structure, as in Tensor2Tensor's revnet.py (after the RevNet paper, arXiv:1707.04585,
and its authors' code, renmengye/revnet-public):

    image [B, H, W, C] in [0, 1]
    -> init: conv k x k (init_kernel_size), num_channels_init_block, stride init_stride
       -> BN -> ReLU -> (init_maxpool) max pool 3x3, stride init_stride, VALID
       -> split the channels in two halves x1, x2
    -> one unit per entry of num_layers_per_block (i = 0, 1, ...), each
       - a downsampling layer (not reversible; its activations are kept):
             y1 = h(x1) + f(x2)        f with strides[i], first BN if first_batch_norm[i]
             y2 = h(x2) + g(y1)        g with stride 1
         h: "bottleneck" conv 1x1 (stride) to depth2; else average pool (stride) and
            zero-padding of the channels up to depth2
       - num_layers_per_block[i] reversible layers (T2T's rev_block):
             y1 = x1 + f(x2);  y2 = x2 + g(y1)
    -> final block: concat(x1, x2) -> BN -> ReLU
    -> body output [B, h, w, 2 * depth2]   (ClassLabelModality.top mean-pools h, w and
       projects to the classes: T2T's final_block mean pool followed by its modality)

depth = num_channels[i]; bottleneck: depth1 = depth, depth2 = 4 * depth; else both depth.
Residual functions f and g (each with its own weights; T2T's `f`):
  "bottleneck": [BN-ReLU] conv 1x1 depth1 (stride) -> BN-ReLU conv 3x3 depth1
                -> BN-ReLU conv 1x1 depth2
  residual:     [BN-ReLU] conv 3x3 depth2 (stride) -> BN-ReLU conv 3x3 depth2
Convolutions are SAME-padded, have a bias and T2T's He initializer (variance scaling,
factor 2, fan_out, truncated normal); batch norm has Keras's (= tf.layers') defaults,
momentum 0.99 and epsilon 1e-3.

Memory: in training, each sequence of reversible layers runs under `tf.custom_gradient`.
The forward pass keeps only the sequence's output; the backward pass walks the layers
from the last, rebuilding each layer's inputs from its outputs (x2 = y2 - g(y1), then
x1 = y1 - f(x2)) while recomputing f and g on a GradientTape, and gets from that tape
the gradients of the layer's inputs and of f's and g's weights. Activation memory then
grows with the number of units (downsampling layers), not with num_layers_per_block
(benchmarks/revnet_memory.py, CPU, 32x32 images, batch 64: one training step's peak
of RevNet-110 / RevNet-38 0.97x; 2.60x for the same nets storing their activations,
3.21x for ResNet-110 / ResNet-32).
  - Batch norm recomputes with the batch statistics of the reconstructed inputs (equal
    to the forward's up to float rounding); the recomputation runs inside a
    `keras.StatelessScope`, which collects its moving-average assignments and drops
    them, so each training step updates the moving averages once, in the forward pass.
  - In graph mode (tf.function, as the trainer runs) the recomputation of a layer waits
    for the gradient of its outputs (a data dependency, which XLA keeps too), so only
    one layer's recomputed activations are alive at a time. In eager mode TF's
    custom_gradient lets an outer GradientTape record the forward's operations as well,
    which keeps their activations until the tape is released: the saving is for
    tf.function steps.
  - No dropout anywhere (as T2T), so the recomputation is deterministic.
  - Under mixed precision (mixed_bfloat16) f, g and h compute in bfloat16, but the two
    halves x1, x2 and the additions of the coupling stay float32, so that subtracting
    in the backward pass gives back the inputs to float32 precision.

Differences from Tensor2Tensor:
  - T2T's non-bottleneck `f` discards its first convolution (its second batch norm
    reads the input `x` again, not the convolution's output) and gives the stride to
    the second convolution: in effect BN-ReLU-conv 3x3 (stride) on `x` whatever
    first_batch_norm says, plus an unused kernel. t2t builds the intended
    two-convolution function above (as in the paper and its authors' code), so
    RevNet-38/110 have 38/110 layers and the paper's parameter counts.
  - The residual `h` average-pools SAME, not VALID, and pads odd channel differences
    one more after than before: the same as T2T for even sizes and even differences,
    where T2T gets shapes that do not add up otherwise.
  - Only 2-D images (`dim` "2d"); T2T's "3d" variant is not implemented.
  - T2T's body returned the pooled [B, 1, 1, C] features; here the body returns the
    feature map and the class-label modality pools it (the same mean).
  - `top` casts the logits to float32 (for mixed precision, as xception).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.models import t2t_model

STREAM_DTYPE = tf.float32  # the coupling's dtype, whatever the layers compute in


def _conv(filters: int, kernel_size: int, strides: int, name: str) -> keras.layers.Conv2D:
    """T2T's CONFIG["2d"]["conv"]: SAME, with bias, He (fan_out) initializer.

    A fresh initializer per layer: an unseeded Keras 3 initializer object repeats its
    values, so sharing one would start same-shaped kernels identical."""
    return keras.layers.Conv2D(
        filters,
        kernel_size,
        strides=strides,
        padding="same",
        kernel_initializer=keras.initializers.VarianceScaling(
            2.0, mode="fan_out", distribution="truncated_normal"
        ),
        name=name,
    )


class ResidualFn(keras.layers.Layer):
    """T2T's residual function `f` (used for f and g). [B, H, W, C] -> [B, H', W', depth2],
    H' = ceil(H / strides); output in the layer's compute dtype."""

    def __init__(
        self,
        depth1: int,
        depth2: int,
        strides: int,
        first_batch_norm: bool,
        bottleneck: bool,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.first_bn = keras.layers.BatchNormalization(name="bn0") if first_batch_norm else None
        if bottleneck:
            self.convs = [
                _conv(depth1, 1, strides, "conv1"),
                _conv(depth1, 3, 1, "conv2"),
                _conv(depth2, 1, 1, "conv3"),
            ]
        else:
            self.convs = [_conv(depth2, 3, strides, "conv1"), _conv(depth2, 3, 1, "conv2")]
        # A BN-ReLU between consecutive convolutions.
        self.bns = [
            keras.layers.BatchNormalization(name=f"bn{i + 1}") for i in range(len(self.convs) - 1)
        ]

    def build(self, input_shape: tuple) -> None:
        # Explicit, so that every weight exists before a custom-gradient function runs.
        shape = tuple(input_shape)
        if self.first_bn is not None:
            self.first_bn.build(shape)
        for i, conv in enumerate(self.convs):
            conv.build(shape)
            shape = tuple(conv.compute_output_shape(shape))
            if i < len(self.bns):
                self.bns[i].build(shape)
        self.built = True

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if self.first_bn is not None:
            x = tf.nn.relu(self.first_bn(x, training=training))
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i < len(self.bns):
                x = tf.nn.relu(self.bns[i](x, training=training))
        return x


class Downsample(keras.layers.Layer):
    """T2T's `h`: bottleneck conv 1x1 (strides), or average pool (strides) and zero
    channel padding. float32 [B, H, W, C] -> float32 [B, ceil(H / strides), ..., channels]."""

    def __init__(self, channels: int, strides: int, bottleneck: bool, name: str | None = None):
        super().__init__(name=name)
        self.channels = channels
        self.strides = strides
        self.conv = _conv(channels, 1, strides, "conv") if bottleneck else None

    def build(self, input_shape: tuple) -> None:
        if self.conv is not None:
            self.conv.build(tuple(input_shape))
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        if self.conv is not None:
            return tf.cast(self.conv(x), STREAM_DTYPE)
        # Pool and pad in float32: no weights here, and the stream stays exact.
        x = tf.cast(x, STREAM_DTYPE)
        if self.strides > 1:
            x = tf.nn.avg_pool2d(x, self.strides, self.strides, "SAME")
        diff = self.channels - x.shape[-1]
        if diff:
            x = tf.pad(x, [[0, 0], [0, 0], [0, 0], [diff // 2, diff - diff // 2]])
        return x


def _after(signal: tf.Tensor, *tensors: tf.Tensor) -> list[tf.Tensor]:
    """`tensors` made to wait for `signal` through a data dependency (an added zero).

    Graph executors run an op once its inputs are ready; without this, the whole chain of
    reconstructions (which needs only the outputs) could run ahead of the gradients and
    keep every layer's recomputed activations alive. XLA ignores control dependencies,
    hence data (as tf.recompute_grad does). bool(NaN) is True, so the zero is exact."""
    first = tf.reduce_max(tf.reshape(signal, [-1])[:1])
    flag = tf.cast(first, tf.bool)
    zero = tf.where(tf.equal(flag, flag), 0.0, 1.0)
    return [t + tf.cast(zero, t.dtype) for t in tensors]


def _accumulate(total: list, grads: list) -> list:
    return [a if b is None else b if a is None else a + b for a, b in zip(total, grads, strict=True)]


class RevBlock(keras.layers.Layer):
    """T2T's rev_block: `num_layers` reversible layers y1 = x1 + f(x2), y2 = x2 + g(y1).

    (x1, x2) float32 [B, H, W, C] each -> (y1, y2) of the same shape. In training (with
    `recompute`) the backward pass rebuilds activations instead of storing them; see the
    module docstring."""

    def __init__(
        self,
        num_layers: int,
        depth1: int,
        depth2: int,
        bottleneck: bool,
        recompute: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.recompute = recompute
        self.f = [ResidualFn(depth1, depth2, 1, True, bottleneck, f"f_{i}") for i in range(num_layers)]
        self.g = [ResidualFn(depth1, depth2, 1, True, bottleneck, f"g_{i}") for i in range(num_layers)]

    def build(self, x1_shape: tuple, x2_shape: tuple | None = None) -> None:
        for fn in self.f + self.g:
            fn.build(tuple(x1_shape))
        self.built = True

    def _layer(self, f: ResidualFn, g: ResidualFn, x1, x2, training: bool):
        y1 = x1 + tf.cast(f(x2, training=training), STREAM_DTYPE)
        y2 = x2 + tf.cast(g(y1, training=training), STREAM_DTYPE)
        return y1, y2

    def call(self, x1: tf.Tensor, x2: tf.Tensor, training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        x1, x2 = tf.cast(x1, STREAM_DTYPE), tf.cast(x2, STREAM_DTYPE)
        if not self.f:
            return x1, x2
        if not (training and self.recompute):
            for f, g in zip(self.f, self.g, strict=True):
                x1, x2 = self._layer(f, g, x1, x2, training)
            return x1, x2

        @tf.custom_gradient
        def reversible(x1, x2):
            y1, y2 = x1, x2
            for f, g in zip(self.f, self.g, strict=True):
                y1, y2 = self._layer(f, g, y1, y2, True)

            def grad(dy1, dy2, variables=None):
                return self._backward(y1, y2, dy1, dy2, list(variables or []))

            return (y1, y2), grad

        return reversible(x1, x2)

    def _backward(self, y1, y2, dy1, dy2, variables: list) -> tuple:
        """Gradients of the inputs and of `variables` (the tf.Variables that the forward
        read, as custom_gradient hands them over) from the outputs and their gradients."""
        var_grads: list = [None] * len(variables)
        eager = tf.executing_eagerly()
        for f, g in reversed(list(zip(self.f, self.g, strict=True))):
            if not eager:
                y1, y2 = _after(dy1, y1, y2)
            # x2 = y2 - g(y1): recompute g(y1) on a tape (no moving-average updates).
            with tf.GradientTape() as g_tape, keras.StatelessScope():
                g_tape.watch(y1)
                gy1 = g(y1, training=True)
            x2 = y2 - tf.cast(gy1, STREAM_DTYPE)
            with tf.GradientTape() as f_tape, keras.StatelessScope():
                f_tape.watch(x2)
                fx2 = f(x2, training=True)
            x1 = y1 - tf.cast(fx2, STREAM_DTYPE)
            # y2 = x2 + g(y1): dL/dy1 in all = dy1 + (dg/dy1)^T dy2; g's weights get dy2.
            grads = g_tape.gradient(gy1, [y1, *variables], output_gradients=tf.cast(dy2, gy1.dtype))
            dx1 = dy1 + grads[0]
            var_grads = _accumulate(var_grads, grads[1:])
            # y1 = x1 + f(x2): dL/dx2 = dy2 + (df/dx2)^T dx1; f's weights get dx1.
            grads = f_tape.gradient(fx2, [x2, *variables], output_gradients=tf.cast(dx1, fx2.dtype))
            dx2 = dy2 + grads[0]
            var_grads = _accumulate(var_grads, grads[1:])
            y1, y2, dy1, dy2 = x1, x2, dx1, dx2
        return (dy1, dy2), var_grads

    def reconstruct(self, y1: tf.Tensor, y2: tf.Tensor, training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        """The inputs (x1, x2) whose outputs are (y1, y2), as the backward pass rebuilds
        them (for tests and inspection; no moving-average updates)."""
        with keras.StatelessScope():
            for f, g in reversed(list(zip(self.f, self.g, strict=True))):
                y2 = y2 - tf.cast(g(y1, training=training), STREAM_DTYPE)
                y1 = y1 - tf.cast(f(y2, training=training), STREAM_DTYPE)
        return y1, y2


class RevUnit(keras.layers.Layer):
    """T2T's `unit`: a downsampling layer, then a RevBlock.

    (x1, x2) [B, H, W, C] each -> (y1, y2) float32 [B, ceil(H / strides), ..., depth2] each."""

    def __init__(
        self,
        depth: int,
        num_layers: int,
        first_batch_norm: bool,
        strides: int,
        bottleneck: bool,
        recompute: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        depth1, depth2 = (depth, 4 * depth) if bottleneck else (depth, depth)
        self.h1 = Downsample(depth2, strides, bottleneck, name="h_x1")
        self.h2 = Downsample(depth2, strides, bottleneck, name="h_x2")
        self.f = ResidualFn(depth1, depth2, strides, first_batch_norm, bottleneck, name="f")
        self.g = ResidualFn(depth1, depth2, 1, True, bottleneck, name="g")
        self.block = RevBlock(num_layers, depth1, depth2, bottleneck, recompute, name="rev_block")

    def build(self, x1_shape: tuple, x2_shape: tuple | None = None) -> None:
        self.built = True  # the sub-layers build on their first call, outside any custom gradient

    def call(self, x1: tf.Tensor, x2: tf.Tensor, training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        y1 = self.h1(x1) + tf.cast(self.f(x2, training=training), STREAM_DTYPE)
        y2 = self.h2(x2) + tf.cast(self.g(y1, training=training), STREAM_DTYPE)
        return self.block(y1, y2, training=training)


def _check_hparams(hp: HParams) -> None:
    n = len(hp.num_layers_per_block)
    lists = {"num_channels": hp.num_channels, "first_batch_norm": hp.first_batch_norm,
             "strides": hp.strides}
    for name, values in lists.items():
        if len(values) < n:
            raise ValueError(
                f"revnet: {name} needs an entry per unit ({n}, as num_layers_per_block), "
                f"got {list(values)}."
            )
    if hp.dim != "2d":
        raise ValueError(f"revnet: only dim '2d' is implemented, got {hp.dim!r}.")
    if hp.num_channels_init_block % 2:
        raise ValueError(
            f"revnet: num_channels_init_block must be even (split in two), got "
            f"{hp.num_channels_init_block}."
        )
    if any(layers < 0 for layers in hp.num_layers_per_block):
        raise ValueError(f"revnet: negative num_layers_per_block {hp.num_layers_per_block}.")
    if not hp.bottleneck:
        channels = hp.num_channels_init_block // 2
        for depth in hp.num_channels[:n]:
            if depth < channels:
                raise ValueError(
                    f"revnet: without bottleneck, h pads channels and cannot shrink them: "
                    f"num_channels {list(hp.num_channels)} after {channels} input channels."
                )
            channels = depth


@registry.register_model(name="revnet")
class RevNet(t2t_model.T2TModel):
    """Reversible residual network for image classification (see the module docstring).

    body: features["inputs"] float [B, H, W, C] -> [B, h, w, 2 * depth2 of the last unit].
    `recompute=False` (or setting `model.recompute`) trains the ordinary way, keeping
    every activation: the same function and gradients, more memory.
    """

    HPARAMS_VIEW = views.RevNetHParams
    STRUCTURAL_HPARAMS = frozenset({
        "bottleneck", "dim", "init_kernel_size", "init_maxpool",
        "init_stride", "num_channels", "num_channels_init_block", "num_layers_per_block", "strides"})

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        recompute: bool = True,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        _check_hparams(hp)
        stride = hp.init_stride
        self.init_conv = _conv(hp.num_channels_init_block, hp.init_kernel_size, stride, "init_conv")
        self.init_bn = keras.layers.BatchNormalization(name="init_bn")
        self.init_pool = (
            keras.layers.MaxPooling2D(pool_size=3, strides=stride, padding="valid", name="init_pool")
            if hp.init_maxpool
            else None
        )
        self.units = [
            RevUnit(
                hp.num_channels[i],
                hp.num_layers_per_block[i],
                bool(hp.first_batch_norm[i]),
                hp.strides[i],
                bool(hp.bottleneck),
                recompute,
                name=f"unit_{i}",
            )
            for i in range(len(hp.num_layers_per_block))
        ]
        self.final_bn = keras.layers.BatchNormalization(name="final_bn")

    @property
    def recompute(self) -> bool:
        """Whether training recomputes the reversible layers' activations."""
        return all(unit.block.recompute for unit in self.units)

    @recompute.setter
    def recompute(self, value: bool) -> None:
        for unit in self.units:
            unit.block.recompute = bool(value)

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """features["inputs"] float [B, H, W, C] -> feature map [B, h, w, F]."""
        x = features["inputs"]
        if len(x.shape) != 4:
            raise ValueError(f"revnet needs image inputs [B, H, W, C], got shape {x.shape}.")
        x = tf.nn.relu(self.init_bn(self.init_conv(x), training=training))
        if self.init_pool is not None:
            x = self.init_pool(x)
        x1, x2 = tf.split(tf.cast(x, STREAM_DTYPE), 2, axis=-1)
        for unit in self.units:
            x1, x2 = unit(x1, x2, training=training)
        return tf.nn.relu(self.final_bn(tf.concat([x1, x2], axis=-1), training=training))

    def top(self, body_output: tf.Tensor, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """Class logits [B, 1, classes], float32 also under a mixed precision policy."""
        return tf.cast(super().top(body_output, features), tf.float32)
