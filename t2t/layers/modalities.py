"""Modalities: how a feature enters a model (bottom), leaves it (top) and is scored (loss).

A problem's hparams name one modality per feature (t2t.features.Modality);
T2TModel builds them with `create_modality`, so a model body only sees dense tensors:
  symbol       ids [B, T] -> [B, T, H];  body [B, T, H] -> logits [B, T, V]
  class_label  ids [B, 1] -> [B, 1, H];  body [B, ..., H] -> logits [B, 1, C]
  image        uint8 [B, H, W, C] -> float [B, H, W, C] in [0, 1]; as targets
               (ImageTargetModality): H*W*C sub-pixel symbols in raster order, each
               embedded by (channel, value) -> [B, H*W*C, H']; body -> logits [B, L, 256]
  real         float [B, T, D] -> [B, T, H];  body -> [B, T, D] (L2 loss)
  identity     passed through unchanged
  audio        PCM ids [B, N] -> log-mel features -> strided convolutions -> [B, N', H]
               (t2t.layers.audio; padded positions exactly 0)
Losses return (numerator, denominator): the weighted sum of per-position losses and
the sum of weights, so replicas can be averaged over the global token count.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import features
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import audio, common, vocab_ops

SYMBOL = features.Modality.SYMBOL
CLASS_LABEL = features.Modality.CLASS_LABEL
IMAGE = features.Modality.IMAGE
REAL = features.Modality.REAL
IDENTITY = features.Modality.IDENTITY
AUDIO = features.Modality.AUDIO


# Tensor2Tensor's modality names, for problems written against its API.
ModalityType = features.ModalityType


def is_pointwise(func: Any) -> Any:
    """Tensor2Tensor's decorator marking a bottom function as pointwise (it sets
    `func.pointwise = True`, which T2T read to skip padding removal)."""
    func.pointwise = True
    return func


# Re-exported: the loss every symbol-like modality uses (t2t.layers.vocab_ops).
smoothed_cross_entropy = vocab_ops.smoothed_cross_entropy


class Modality(common.Layer):
    """Base: subclasses implement bottom/top/loss for one kind of feature."""

    def __init__(self, vocab_size: int | None, hparams: views.ModalityHParams, name: str):
        super().__init__(name=name)
        self.vocab_size = vocab_size
        self.hparams = hparams
        self.hidden_size = hparams.hidden_size

    def bottom(self, x: tf.Tensor) -> tf.Tensor:
        return x

    def targets_bottom(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        return self.bottom(x, training=training)

    def top(self, body_output: tf.Tensor) -> tf.Tensor:
        return body_output

    def metric_targets(self, targets: tf.Tensor) -> tf.Tensor:
        """The targets in the shape of the logits without their last axis (for metrics)."""
        return targets

    def targets_weights(self, targets: tf.Tensor) -> tf.Tensor:
        """Weight of each target position: 1 for real tokens, 0 for padding."""
        return tf.cast(tf.not_equal(targets, 0), tf.float32)

    def loss(self, logits: tf.Tensor, targets: tf.Tensor, label_smoothing: float) -> tuple[tf.Tensor, tf.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} has no loss.")


# hparams.multiply_softmax_input_mode: "rsqrt_depth" scales the body's output by
# hidden_size**-0.5 before the softmax (T5 v1.0, whose softmax is its embedding).
SOFTMAX_INPUT_MODES = ("none", "rsqrt_depth")


class SymbolModality(Modality):
    """Token ids: an embedding matrix [V, H], optionally shared with the softmax."""

    def __init__(self, vocab_size: int, hparams: views.SymbolModalityHParams,
                 name: str = "symbol_modality",
                 with_softmax: bool = True):
        super().__init__(vocab_size, hparams, name)
        self.embedding = self.add_weight(
            name="weights",
            shape=(vocab_size, self.hidden_size),
            initializer=keras.initializers.RandomNormal(0.0, self.hidden_size**-0.5),
        )
        self.share_softmax = bool(hparams.shared_embedding_and_softmax_weights)
        # Only a targets modality projects to logits; an inputs one needs no softmax.
        if with_softmax and not self.share_softmax:
            self.softmax_weights = self.add_weight(
                name="softmax",
                shape=(vocab_size, self.hidden_size),
                initializer=keras.initializers.RandomNormal(0.0, self.hidden_size**-0.5),
            )
        self.symbol_dropout = hparams.symbol_dropout
        # A bias on the logits (Marian's final_logits_bias), with hparams.softmax_bias.
        self.softmax_bias = (
            self.add_weight(name="softmax_bias", shape=(vocab_size,), initializer="zeros")
            if with_softmax and hparams.get("softmax_bias", False) else None)
        input_mode = hparams.get("multiply_softmax_input_mode", "none")
        if input_mode not in SOFTMAX_INPUT_MODES:
            raise ValueError(f"Unknown multiply_softmax_input_mode {input_mode!r}: use one of "
                             f"{SOFTMAX_INPUT_MODES}.")
        self.softmax_input_rsqrt_depth = input_mode == "rsqrt_depth"

    def embed(self, ids: tf.Tensor) -> tf.Tensor:
        """Embeddings of int `ids` [...] -> [..., H] (scaled by hparams.multiply_embedding_mode),
        padding included: `bottom` zeroes id 0, this does not (T5's decoder starts from
        the embedding of its pad id: hparams.decoder_start_embedding "pad")."""
        out = tf.gather(tf.cast(self.embedding, self.compute_dtype), tf.cast(ids, tf.int32))
        if self.hparams.multiply_embedding_mode == "sqrt_depth":
            out *= tf.cast(self.hidden_size**0.5, out.dtype)
        return out

    def bottom(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        ids = tf.cast(x, tf.int32)
        if training and self.symbol_dropout:
            keep = tf.random.uniform(tf.shape(ids)) >= self.symbol_dropout
            ids = tf.where(keep, ids, tf.zeros_like(ids))
        out = self.embed(ids)
        # Padding positions embed to zero (Tensor2Tensor does the same).
        return out * tf.cast(tf.not_equal(ids, 0), out.dtype)[..., None]

    def top(self, body_output: tf.Tensor) -> tf.Tensor:
        weights = self.embedding if self.share_softmax else self.softmax_weights
        if self.softmax_input_rsqrt_depth:  # T5 v1.0's tied softmax
            body_output *= tf.cast(self.hidden_size**-0.5, body_output.dtype)
        # One 2-D matmul with hand-picked gradient layouts (t2t.layers.vocab_ops); an
        # einsum "...h,vh->...v" here had a gradient that built a [V, H, B, T] tensor.
        logits = vocab_ops.logits_matmul(body_output, weights)
        if self.softmax_bias is not None:
            logits += tf.cast(self.softmax_bias, logits.dtype)
        return logits

    def loss(self, logits, targets, label_smoothing):
        targets = tf.cast(targets, tf.int32)
        xent = smoothed_cross_entropy(logits, targets, self.vocab_size, label_smoothing)
        weights = self.targets_weights(targets)
        return tf.reduce_sum(xent * weights), tf.reduce_sum(weights)


class ClassLabelModality(Modality):
    """One label per example: targets [B, 1]; logits [B, 1, C] from mean-pooled body."""

    def __init__(self, vocab_size: int, hparams: views.ModalityHParams,
                 name: str = "class_label_modality"):
        super().__init__(vocab_size, hparams, name)
        self.embedding = keras.layers.Embedding(vocab_size, self.hidden_size, name="embedding")
        self.dense = keras.layers.Dense(vocab_size, name="logits")

    def bottom(self, x, training=None):
        return self.embedding(tf.reshape(tf.cast(x, tf.int32), [-1, 1]))

    def targets_bottom(self, x, training=None):
        # A classifier never reads its label: zeros, so no unused embedding is trained
        # (Tensor2Tensor's class_label_targets_bottom does the same).
        return tf.zeros([tf.shape(x)[0], 1, self.hidden_size], self.compute_dtype)

    def top(self, body_output):
        # Average over every axis between batch and depth (time, or height and width).
        rank = len(body_output.shape)
        pooled = tf.reduce_mean(body_output, axis=list(range(1, rank - 1))) if rank > 2 else body_output
        return self.dense(pooled)[:, None, :]

    def targets_weights(self, targets):
        return tf.ones_like(tf.reshape(targets, [-1, 1]), dtype=tf.float32)

    def loss(self, logits, targets, label_smoothing):
        targets = tf.reshape(tf.cast(targets, tf.int32), [-1, 1])
        xent = smoothed_cross_entropy(logits, targets, self.vocab_size, label_smoothing)
        return tf.reduce_sum(xent), tf.cast(tf.size(xent), tf.float32)


class ImageModality(Modality):
    """uint8 images [B, H, W, C] -> floats in [0, 1]; the body does the rest."""

    def bottom(self, x, training=None):
        return tf.cast(x, self.compute_dtype) / tf.cast(255.0, self.compute_dtype)


class ImageTargetModality(Modality):
    """Image targets as 256-way symbols per channel (Tensor2Tensor's default likelihood).

    An image uint8 [B, H, W, C] is the sequence of its L = H*W*C sub-pixels in raster
    order, channels interleaved (R, G, B of a pixel, then the next pixel). Each is
    embedded by its channel and value (a table [C * 256, hidden]); the top projects the
    body's [B, L, hidden] to 256 logits per sub-pixel; the loss is the cross-entropy of
    every sub-pixel (weights 1: value 0 is a colour, not padding), so its mean over
    sub-pixels in nats / ln 2 is bits per dimension.
    """

    def __init__(self, vocab_size: int | None, hparams: views.DenseModalityHParams,
                 name: str = "image_target_modality",
                 channels: int = 3):
        super().__init__(256, hparams, name)
        self.channels = channels
        self.embedding = self.add_weight(
            name="weights", shape=(channels * 256, self.hidden_size),
            initializer=keras.initializers.RandomNormal(0.0, self.hidden_size**-0.5))
        self.softmax = keras.layers.Dense(256, name="softmax",
                                          kernel_initializer=common.initializer(hparams))

    def flatten(self, images: tf.Tensor) -> tf.Tensor:
        """uint8 [B, H, W, C] -> int32 sub-pixel values [B, H*W*C]."""
        return tf.reshape(tf.cast(images, tf.int32), [tf.shape(images)[0], -1])

    def embed(self, values: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
        """Sub-pixel values int [B, T] at sequence positions int [T] -> [B, T, hidden]."""
        ids = tf.cast(values, tf.int32) + 256 * (tf.cast(positions, tf.int32) % self.channels)
        return tf.gather(tf.cast(self.embedding, self.compute_dtype), ids)

    def targets_bottom(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        values = self.flatten(x)
        return self.embed(values, tf.range(tf.shape(values)[1]))

    def top(self, body_output: tf.Tensor) -> tf.Tensor:
        return self.softmax(body_output)

    def metric_targets(self, targets: tf.Tensor) -> tf.Tensor:
        return self.flatten(targets)

    def targets_weights(self, targets: tf.Tensor) -> tf.Tensor:
        return tf.ones(tf.shape(targets), tf.float32)

    def loss(self, logits, targets, label_smoothing):
        values = self.flatten(targets)
        xent = smoothed_cross_entropy(logits, values, 256, label_smoothing)
        return tf.reduce_sum(xent), tf.cast(tf.size(values), tf.float32)


def match_target_shape(predictions: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """`predictions` reshaped to the targets' shape when their ranks differ (a body's
    [B, 1, 1, D] output for targets stored as [B, 1, D]): never broadcast one against
    the other, which would compare every example with every other."""
    if predictions.shape.rank == targets.shape.rank:
        return predictions
    per_example = [s.shape[1:].num_elements() for s in (predictions, targets)]
    if None not in per_example and per_example[0] != per_example[1]:
        return predictions  # not the same values (e.g. the stand-in batch that builds weights)
    return tf.reshape(predictions, tf.shape(targets))


class RealModality(Modality):
    """Real vectors: a dense projection in, a dense projection out, L2 loss."""

    def __init__(self, vocab_size: int | None, hparams: views.DenseModalityHParams,
                 name: str = "real_modality"):
        super().__init__(vocab_size, hparams, name)
        self.depth = vocab_size or 1
        self.inp = keras.layers.Dense(self.hidden_size, kernel_initializer=common.initializer(hparams))
        self.out = keras.layers.Dense(self.depth)

    def bottom(self, x, training=None):
        return self.inp(tf.cast(x, self.compute_dtype))

    def top(self, body_output):
        return self.out(body_output)

    def targets_weights(self, targets):
        return tf.ones(tf.shape(targets)[:-1], tf.float32)

    def loss(self, logits, targets, label_smoothing):
        logits = match_target_shape(logits, targets)
        error = tf.reduce_sum(tf.square(tf.cast(logits, tf.float32) - tf.cast(targets, tf.float32)), -1)
        weights = self.targets_weights(targets)
        return tf.reduce_sum(error * weights), tf.reduce_sum(weights)


class IdentityModality(Modality):
    """No transformation; useful for features a body consumes raw."""

    def bottom(self, x, training=None):
        return x


class AudioModality(Modality):
    """16-bit PCM ids [B, N] (t2t.layers.audio) -> [B, ceil(T / 2^L), H], zero at padding.

    Log-mel features of T frames, SpecAugment in training (seeded like dropout), then
    `audio_frontend_layers` 3x3 convolutions of stride 2 in time and frequency (each
    halves T: 10 ms frames -> 40 ms positions with 2 layers) and a projection to H."""

    def __init__(self, vocab_size: int | None, hparams: views.AudioModalityHParams,
                 name: str = "audio_modality",
                 sample_rate: int | None = None):
        super().__init__(vocab_size, hparams, name)
        audio.check_audio_hparams(hparams)
        if not sample_rate:
            raise ValueError("The audio modality needs the problem's audio_sample_rate "
                             "(ProblemHParams.audio_sample_rate); got none.")
        self.sample_rate = sample_rate
        self.convs = [
            keras.layers.Conv2D(hparams.audio_frontend_channels, 3, strides=2, padding="valid",
                                activation="relu", name=f"conv_{i}")
            for i in range(hparams.audio_frontend_layers)]
        self.project = keras.layers.Dense(hparams.hidden_size, name="project",
                                          kernel_initializer=common.initializer(hparams))
        self.seed_generator = keras.random.SeedGenerator(name="specaugment_seed")
        self.global_statistics = (audio.GlobalMeanVariance()
                                  if hparams.audio_normalization == "global" else None)

    def bottom(self, x, training=None):
        hp = self.hparams
        normalizer = None
        if self.global_statistics is not None:
            normalizer = lambda f, mask: self.global_statistics(f, mask, training=training)  # noqa: E731
        features, frames = audio.log_mel_features(x, self.sample_rate, hp, normalizer)
        if training and (hp.specaugment_time_masks or hp.specaugment_freq_masks):
            features = audio.spec_augment(
                features, frames, hp,
                lambda shape: keras.random.uniform(shape, seed=self.seed_generator))
        x = tf.cast(features, self.compute_dtype)
        for conv in self.convs:
            # One zero frame/bin each side, whatever the length ("same" padding would pad
            # odd and even lengths differently), and padded frames zeroed after each
            # convolution: a row decodes the same alone or beside a longer one.
            x = conv(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]))
            frames = (frames + 1) // 2
            x *= tf.sequence_mask(frames, tf.shape(x)[1], x.dtype)[:, :, None, None]
        x = tf.reshape(x, [tf.shape(x)[0], tf.shape(x)[1], x.shape[2] * x.shape[3]])
        x = self.project(x)
        return x * tf.sequence_mask(frames, tf.shape(x)[1], x.dtype)[..., None]

    def targets_bottom(self, x, training=None):
        raise ValueError("Audio is an input modality: speech problems have text targets.")


_MODALITIES = {
    SYMBOL: SymbolModality,
    CLASS_LABEL: ClassLabelModality,
    IMAGE: ImageModality,
    REAL: RealModality,
    IDENTITY: IdentityModality,
    AUDIO: AudioModality,
}


def create_modality(kind: str, vocab_size: int | None, hparams: HParams, feature: str,
                    with_softmax: bool | None = None, sample_rate: int | None = None,
                    image_shape: list[int] | None = None) -> Modality:
    """The modality layer for `feature` of kind `kind` (a Modality name).

    with_softmax: whether a symbol modality projects to logits (default: for targets).
    sample_rate: Hz of an audio feature (the problem's audio_sample_rate).
    image_shape: [H, W, C] of image features (image targets need C)."""
    if kind not in _MODALITIES:
        raise ValueError(f"Unknown modality {kind!r} for feature {feature!r}: use one of {sorted(_MODALITIES)}.")
    if kind in (SYMBOL, CLASS_LABEL) and not vocab_size:
        raise ValueError(f"Feature {feature!r} ({kind}) needs a vocab_size, got {vocab_size!r}.")
    name = f"{feature}_{kind}_modality"
    if kind == SYMBOL:
        if with_softmax is None:
            with_softmax = feature == "targets"
        return SymbolModality(vocab_size, hparams, name=name, with_softmax=with_softmax)
    if kind == AUDIO:
        return AudioModality(vocab_size, hparams, name=name, sample_rate=sample_rate)
    if kind == IMAGE and feature == "targets":
        channels = (image_shape or [None, None, 3])[-1] or 3
        return ImageTargetModality(vocab_size, hparams, name=name, channels=channels)
    return _MODALITIES[kind](vocab_size, hparams, name=name)
