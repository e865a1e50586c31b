"""Small building blocks: initializers, normalization, residual pre/post-processing."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t.hparams import views


class Layer(keras.layers.Layer):
    """A Keras layer whose sub-layers build themselves on the first call.

    Keras 3 tries to trace `call` to build a layer that has no `build` of its own and
    warns when it cannot (keyword-only call arguments); the sub-layers here need no help.
    """

    def build(self, *args: Any, **kwargs: Any) -> None:
        self.built = True


class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout (same arguments, names, seeds and checkpoints) drawing one
    16-bit random number per element instead of a float32 uniform, with a mask of its
    own on every replica.

    Two thresholds come out of each 32-bit Philox output, so a mask costs half the
    random numbers (`python -m benchmarks.dropout` prints the times; dropout was 8-15% of
    transformer_base's step, most in bfloat16: `python -m benchmarks.profile_step`). The
    drop probability is rate rounded to a multiple of 1/65536 (0.1 -> 0.100006). With a
    noise_shape the mask is TensorFlow's stateless_dropout's, from the same seed.

    Replicas: Keras' seed generator is one variable that every replica of a
    tf.distribute strategy reads alike, so Keras' own Dropout draws the same mask on
    every replica; here the replica's id is folded into the seed (`replica_seed`).
    """

    def call(self, inputs: tf.Tensor, training: bool | None = False) -> tf.Tensor:
        if not training or not 0.0 < self.rate < 1.0:
            return super().call(inputs, training=training)
        seed = replica_seed(self.seed_generator.next())
        if self.noise_shape is not None:
            shape = [tf.shape(inputs)[i] if size is None else size
                     for i, size in enumerate(self.noise_shape)]
            return tf.nn.experimental.stateless_dropout(inputs, self.rate, seed,
                                                        noise_shape=tf.stack(shape))
        return dropout_16bit(inputs, self.rate, seed)


def int32_seed(seed: tf.Tensor) -> tf.Tensor:
    """A [2] seed as the int32 that tf.random.stateless_* take (Keras keeps its seeds in
    int64 variables; the same mapping as Keras' own random ops)."""
    if seed.dtype == tf.int32:
        return seed
    return tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)


def replica_seed(seed: tf.Tensor) -> tf.Tensor:
    """`seed` [2] made the replica's own under a tf.distribute strategy of several
    replicas (the id hashed in with stateless_fold_in); unchanged with one replica."""
    seed = int32_seed(seed)
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return seed
    replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
    return tf.random.experimental.stateless_fold_in(seed, replica)


def keep_mask_16bit(shape: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """A bool keep mask of `shape` (int [rank]), each element True with probability
    1 - rate (rate to 1/65536), from 16-bit halves of stateless Philox words.

    Word j of a row gives element j its low half and element (n+1)//2 + j its high half.
    Only elementwise ops, a concat and a slice: on a DTensor mesh a tf.bitcast of a
    batch-split tensor fails SPMD expansion (TF 2.21), these expand with any layout."""
    seed = int32_seed(seed)
    width = shape[-1]
    pairs = (width + 1) // 2
    words = tf.random.stateless_uniform(tf.concat([shape[:-1], [pairs]], 0), seed,
                                        minval=None, maxval=None, dtype=tf.uint32)
    threshold = min(round(rate * 65536), 65535)
    # The cast keeps a word's low 16 bits; its high half is >= t exactly when it is >= t << 16.
    low = tf.cast(words, tf.uint16) >= tf.constant(threshold, tf.uint16)
    high = words >= tf.constant(threshold << 16, tf.uint32)
    return tf.concat([low, high], axis=-1)[..., :width]


def dropout_16bit(x: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """x with each element zeroed with probability `rate` (0 < rate < 1, to 1/65536) and
    the rest scaled by 1 / (1 - rate); `seed` [2] int, as tf.random.stateless_* take."""
    keep = keep_mask_16bit(tf.shape(x), rate, seed)
    out = tf.where(keep, x * tf.cast(1.0 / (1.0 - rate), x.dtype), tf.zeros_like(x))
    out.set_shape(x.shape)
    return out


class BatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization (same arguments, weights, names and moving-average
    updates) whose training step over the last axis runs TensorFlow's fused batch norm.

    Keras 3 normalizes with separate ops (moments as SquaredDifference/Mean, then the
    affine Mul/Sub/Add, in float32 with casts around them under mixed_bfloat16); in a
    resnet_cifar_15 bfloat16 step they were ~30% of the op time against 60% for every
    convolution (`python -m benchmarks.profile_step --model resnet_cifar_15
    --precision bfloat16`). FusedBatchNormV3 does the same in one op each way (oneDNN's
    on x86), reading bfloat16 directly. The moving variance is updated with the biased
    batch variance, as Keras does (the fused op returns the Bessel-corrected one).
    Inference, masks, renorm, synchronized statistics and other axes use Keras' own path.
    """

    def call(self, inputs: tf.Tensor, training: bool | None = None,
             mask: tf.Tensor | None = None) -> tf.Tensor:
        rank = inputs.shape.rank
        last_axis = self.axis in (-1, (rank or 0) - 1)
        if (not (training and self.trainable) or mask is not None or self.renorm
                or self.synchronized or not last_axis or rank is None or rank < 2):
            return super().call(inputs, training=training, mask=mask)
        shape = tf.shape(inputs)
        channels = inputs.shape[-1]
        x = tf.reshape(tf.cast(inputs, self.compute_dtype), [shape[0], -1, 1, channels])
        gamma = self.gamma if self.scale else tf.ones([channels], tf.float32)
        beta = self.beta if self.center else tf.zeros([channels], tf.float32)
        y, mean, unbiased, *_ = tf.raw_ops.FusedBatchNormV3(
            x=x, scale=tf.cast(gamma, tf.float32), offset=tf.cast(beta, tf.float32),
            mean=tf.zeros([0], tf.float32), variance=tf.zeros([0], tf.float32),
            epsilon=self.epsilon, data_format="NHWC", is_training=True)
        count = tf.cast(tf.size(x) // channels, tf.float32)
        variance = unbiased * (count - 1.0) / tf.maximum(count, 1.0)
        momentum = self.momentum
        self.moving_mean.assign(self.moving_mean * momentum + mean * (1.0 - momentum))
        self.moving_variance.assign(self.moving_variance * momentum
                                    + variance * (1.0 - momentum))
        out = tf.reshape(y, shape)
        out.set_shape(inputs.shape)
        return out


def initializer(hparams: views.InitializerHParams) -> keras.initializers.Initializer:
    """The weight initializer named by hparams.initializer, scaled by initializer_gain.

    "uniform_unit_scaling" is Tensor2Tensor's default for most models: variance scaling
    with fan-in and a uniform distribution (as tf.uniform_unit_scaling_initializer).
    """
    name, gain = hparams.initializer, hparams.initializer_gain
    if name == "uniform_unit_scaling":
        return keras.initializers.VarianceScaling(gain, mode="fan_avg", distribution="uniform")
    if name == "normal_unit_scaling":
        return keras.initializers.VarianceScaling(gain, mode="fan_avg", distribution="truncated_normal")
    if name == "orthogonal":
        return keras.initializers.Orthogonal(gain)
    if name == "uniform":
        return keras.initializers.RandomUniform(-gain * 0.1, gain * 0.1)
    if name == "xavier":
        return keras.initializers.GlorotUniform()
    raise ValueError(
        f"Unknown initializer {name!r}: use uniform_unit_scaling, normal_unit_scaling, "
        f"orthogonal, uniform or xavier."
    )


def clone_initializer(init: Any) -> Any:
    """A fresh copy of a Keras initializer (or its name).

    An unseeded Keras 3 initializer object returns the same values on every call, so
    one object shared by several same-shaped layers would start them identical.
    """
    if isinstance(init, keras.initializers.Initializer):
        return init.__class__.from_config(init.get_config())
    return init


def make_norm(hparams: views.NormHParams, name: str) -> keras.layers.Layer:
    """The normalization layer hparams.norm_type names ("layer", "batch", "rms", "none").

    "rms": root-mean-square normalization with a scale and no centering or bias (T5's
    layer norm): x / sqrt(mean(x^2) + norm_epsilon) * scale."""
    norm_type = hparams.norm_type
    if norm_type == "layer":
        return keras.layers.LayerNormalization(epsilon=hparams.norm_epsilon, name=name)
    if norm_type == "rms":
        return keras.layers.RMSNormalization(epsilon=hparams.norm_epsilon, name=name)
    if norm_type == "batch":
        return BatchNormalization(epsilon=hparams.norm_epsilon, name=name)
    if norm_type == "none":
        return keras.layers.Identity(name=name)
    raise ValueError(f"Unknown norm_type {norm_type!r}: use layer, batch, rms or none.")


class PrePostProcess(Layer):
    """Tensor2Tensor's layer_preprocess / layer_postprocess around a sublayer.

    A sequence string applies, in order: "n" normalize, "d" dropout, "a" add the
    residual. Pre-norm Transformers use preprocess "n" and postprocess "da".
    """

    def __init__(self, sequence: str, hparams: views.NormHParams, dropout: float,
                 name: str | None = None):
        super().__init__(name=name)
        if sequence == "none":  # Tensor2Tensor's spelling of "do nothing" (basic_params1)
            sequence = ""
        for char in sequence:
            if char not in "nda":
                raise ValueError(f"Bad pre/post-process sequence {sequence!r}: use letters n, d, a.")
        self.sequence = sequence
        self.norm = make_norm(hparams, "norm") if "n" in sequence else None
        self.dropout = Dropout(dropout) if "d" in sequence else None

    def call(self, x: tf.Tensor, residual: tf.Tensor | None = None, training: bool | None = None) -> tf.Tensor:
        for char in self.sequence:
            if char == "n":
                x = self.norm(x)
            elif char == "d":
                x = self.dropout(x, training=training)
            elif char == "a":
                x = x + residual if residual is not None else x
        return x

