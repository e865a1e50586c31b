"""Audio in the graph: PCM ids -> log-mel filterbank features -> a strided convolutional
front end (the "audio" modality's bottom).

Speech problems carry a waveform through the input pipeline as int32 ids, one per 16-bit
sample: id = sample + PCM_OFFSET, in [1, 65536], so that 0 is padding (as it is for
token ids) and the pipeline's length bucketing and padding apply unchanged. Everything
after that (pre-emphasis, STFT, mel matrix, log, deltas, normalization, SpecAugment in
training) runs in the model, so training, t2t-decoder and the exported SavedModel compute
the same features from the same samples.

Shapes: ids int32 [B, N] (N samples) -> features float32 [B, T, M, C] (T frames of
`audio_frame_step` ms, M mel bins, C = 3 with deltas and delta-deltas, else 1) -> front
end [B, ceil(T / 2^L), H] with padded positions exactly zero (the Transformer's encoder
reads padding from all-zero embeddings).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from t2t.features import PCM_OFFSET
from t2t.hparams import views
from t2t.hparams.hparams import HParams

PCM_SCALE = 32768.0  # int16 full scale

# The model hparams the audio modality reads (t2t.hparams.speech.add_audio_hparams sets
# their defaults; Tensor2Tensor's names where it had one).
AUDIO_HPARAMS = (
    "audio_num_mel_bins", "audio_frame_length", "audio_frame_step", "audio_lower_edge_hertz",
    "audio_upper_edge_hertz", "audio_preemphasis", "audio_add_delta_deltas",
    "audio_normalization", "audio_frontend_layers", "audio_frontend_channels",
    "specaugment_time_masks", "specaugment_time_mask_max_frames", "specaugment_freq_masks",
    "specaugment_freq_mask_max_bins",
)
NORMALIZATIONS = ("per_utterance", "global", "none")
# GlobalMeanVariance's frame count stops here (about 28 hours of 10 ms frames): beyond
# it the statistics follow the data as an average over about this many recent frames.
GLOBAL_COUNT_CAP = 1e7


def pcm16_to_ids(samples: np.ndarray) -> np.ndarray:
    """int16 samples [N] -> int32 ids [N] (sample + PCM_OFFSET)."""
    return np.asarray(samples, np.int32) + PCM_OFFSET


def ids_to_waveform(ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """ids int32 [B, N] (0 = padding, at the end of each row) -> (waveform float32 [B, N]
    in [-1, 1) with padding at 0, number of samples int32 [B])."""
    ids = tf.cast(ids, tf.int32)
    valid = ids > 0
    wave = tf.cast(ids - PCM_OFFSET, tf.float32) / PCM_SCALE
    wave = tf.where(valid, wave, tf.zeros_like(wave))
    return wave, tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)


def frame_sizes(sample_rate: int, frame_length_ms: float, frame_step_ms: float) -> tuple[int, int, int]:
    """(frame length, frame step, FFT length) in samples."""
    length = int(round(sample_rate * frame_length_ms / 1000.0))
    step = int(round(sample_rate * frame_step_ms / 1000.0))
    if length < 2 or step < 1:
        raise ValueError(f"audio_frame_length={frame_length_ms} ms / audio_frame_step="
                         f"{frame_step_ms} ms give {length} / {step} samples at {sample_rate} "
                         f"Hz: use at least 2 samples per frame and 1 per step.")
    return length, step, 2 ** math.ceil(math.log2(length))


def log_mel_features(ids: tf.Tensor, sample_rate: int, hparams: views.AudioFeatureHParams,
                     global_normalizer: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
                     ) -> tuple[tf.Tensor, tf.Tensor]:
    """ids int32 [B, N] -> (log-mel features float32 [B, T, M, C], frames int32 [B]).

    Pre-emphasis, a Hann-windowed STFT (frames that fit wholly in the signal), the power
    spectrum through `audio_num_mel_bins` triangular mel filters, log(x + 1e-6); with
    `audio_add_delta_deltas` the first and second time differences as channels 2 and 3;
    normalized (`audio_normalization`) per utterance, or "global"ly by
    `global_normalizer(features [B, T, M, 1], valid-frame mask [B, T, 1, 1])` (a
    GlobalMeanVariance); padded frames are 0."""
    wave, samples = ids_to_waveform(ids)
    length, step, fft_length = frame_sizes(sample_rate, hparams.audio_frame_length,
                                           hparams.audio_frame_step)
    if hparams.audio_preemphasis:
        wave = tf.concat([wave[:, :1], wave[:, 1:] - hparams.audio_preemphasis * wave[:, :-1]], 1)
    # At least one frame's worth of samples, so that T >= 1 for any batch.
    wave = tf.pad(wave, [[0, 0], [0, tf.maximum(length - tf.shape(wave)[1], 0)]])
    stft = tf.signal.stft(wave, length, step, fft_length, pad_end=False)
    power = tf.square(tf.abs(stft))
    upper = hparams.audio_upper_edge_hertz or sample_rate / 2.0
    mel_matrix = tf.signal.linear_to_mel_weight_matrix(
        hparams.audio_num_mel_bins, fft_length // 2 + 1, sample_rate,
        hparams.audio_lower_edge_hertz, upper)
    features = tf.math.log(tf.tensordot(power, mel_matrix, 1) + 1e-6)[..., None]
    frames = tf.maximum((samples - length) // step + 1, 0)
    mask = tf.sequence_mask(frames, tf.shape(features)[1], tf.float32)[:, :, None, None]
    if hparams.audio_normalization == "per_utterance":
        features = _normalize(features, mask)
    elif hparams.audio_normalization == "global":
        if global_normalizer is None:
            raise ValueError("audio_normalization='global' needs the running statistics of "
                             "the audio modality (a GlobalMeanVariance layer).")
        features = global_normalizer(features, mask)
    elif hparams.audio_normalization != "none":
        raise ValueError(f"audio_normalization={hparams.audio_normalization!r}: use one of "
                         f"{', '.join(NORMALIZATIONS)}.")
    if hparams.audio_add_delta_deltas:
        delta = _delta(features, frames)
        features = tf.concat([features, delta, _delta(delta, frames)], axis=-1)
    return features * mask, frames


def _normalize(features: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Zero mean, unit variance per utterance and mel bin, over the valid frames."""
    count = tf.maximum(tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)
    mean = tf.reduce_sum(features * mask, axis=1, keepdims=True) / count
    variance = tf.reduce_sum(tf.square(features - mean) * mask, axis=1, keepdims=True) / count
    return (features - mean) * tf.math.rsqrt(variance + 1e-6)


class GlobalMeanVariance(keras.layers.Layer):
    """Normalization by corpus-wide statistics: the mean and variance of each mel bin
    over every valid training frame seen so far, merged batch by batch (Chan et al.'s
    parallel update), saved with the model and applied alike in training, evaluation,
    decoding and the export. Only training updates them (the frame count stops at
    GLOBAL_COUNT_CAP); before any training they are mean 0, variance 1.

    features float32 [B, T, M, 1], mask float32 [B, T, 1, 1] -> normalized features."""

    def __init__(self, name: str = "global_mean_variance", **kwargs: Any):
        super().__init__(name=name, dtype="float32", **kwargs)

    def build(self, features_shape: Any, mask_shape: Any = None) -> None:
        bins = int(features_shape[2])
        # "mean" aggregation: with several replicas each merges its own batch and the
        # results are averaged.
        weight = dict(trainable=False, initializer="zeros", aggregation="mean")
        self.count = self.add_weight(shape=(), name="count", **weight)
        self.mean = self.add_weight(shape=(bins,), name="mean", **weight)
        self.squared_deviations = self.add_weight(shape=(bins,), name="squared_deviations",
                                                  **weight)

    def call(self, features: tf.Tensor, mask: tf.Tensor, training: bool | None = None
             ) -> tf.Tensor:
        count = tf.convert_to_tensor(self.count)
        mean = tf.convert_to_tensor(self.mean)
        squares = tf.convert_to_tensor(self.squared_deviations)
        if training:
            count, mean, squares = self._merged(features, mask, count, mean, squares)
            self.count.assign(count)
            self.mean.assign(mean)
            self.squared_deviations.assign(squares)
        variance = tf.where(count > 0, squares / tf.maximum(count, 1.0), tf.ones_like(squares))
        return (features - mean[:, None]) * tf.math.rsqrt(variance + 1e-6)[:, None]

    @staticmethod
    def _merged(features, mask, count, mean, squares):
        """The statistics with this batch's valid frames merged in."""
        batch_count = tf.reduce_sum(mask)
        batch_mean = tf.reduce_sum(features * mask, axis=[0, 1, 3]) / tf.maximum(batch_count, 1.0)
        batch_squares = tf.reduce_sum(tf.square(features - batch_mean[:, None]) * mask,
                                      axis=[0, 1, 3])
        total = count + batch_count
        delta = batch_mean - mean
        share = batch_count / tf.maximum(total, 1.0)
        mean = mean + delta * share
        squares = squares + batch_squares + tf.square(delta) * count * share
        scale = tf.minimum(1.0, GLOBAL_COUNT_CAP / tf.maximum(total, 1.0))
        return total * scale, mean, squares * scale


def _delta(features: tf.Tensor, frames: tf.Tensor) -> tf.Tensor:
    """HTK's regression delta over +-2 frames, the edge frames of each utterance repeated
    past its ends (so padding after it changes nothing): [B, T, M, C] -> the same."""
    time = tf.range(tf.shape(features)[1])[None, :]
    last = tf.maximum(frames, 1)[:, None] - 1
    delta = tf.zeros_like(features)
    for offset in (1, 2):
        ahead = tf.gather(features, tf.minimum(time + offset, last), batch_dims=1)
        behind = tf.gather(features, tf.minimum(tf.maximum(time - offset, 0), last), batch_dims=1)
        delta += float(offset) * (ahead - behind)
    return delta / 10.0


def spec_augment(features: tf.Tensor, frames: tf.Tensor, hparams: views.SpecAugmentHParams,
                 uniform: Callable[[Any], tf.Tensor]) -> tf.Tensor:
    """SpecAugment's time and frequency masking (no warping): features [B, T, M, C] with
    `specaugment_time_masks` spans of up to `specaugment_time_mask_max_frames` frames and
    `specaugment_freq_masks` bands of up to `specaugment_freq_mask_max_bins` bins set to
    0 (the normalized mean), drawn per example; `uniform(shape)` draws floats in [0, 1)."""
    shape = tf.shape(features)
    batch, time, bins = shape[0], shape[1], shape[2]
    keep = tf.ones([batch, time, bins], tf.float32)
    draws = [("time", hparams.specaugment_time_masks, hparams.specaugment_time_mask_max_frames),
             ("freq", hparams.specaugment_freq_masks, hparams.specaugment_freq_mask_max_bins)]
    for axis, count, widest in draws:
        size = frames if axis == "time" else tf.fill([batch], bins)
        positions = tf.range(time if axis == "time" else bins)
        for _ in range(count):
            draw = tf.cast(uniform([2, batch]), tf.float32)
            width = tf.cast(tf.floor(draw[0] * tf.cast(widest + 1, tf.float32)), tf.int32)
            width = tf.minimum(width, size)
            start = tf.cast(tf.floor(draw[1] * tf.cast(size - width + 1, tf.float32)), tf.int32)
            inside = ((positions[None, :] >= start[:, None])
                      & (positions[None, :] < (start + width)[:, None]))
            inside = tf.cast(inside, tf.float32)
            keep *= 1.0 - (inside[:, :, None] if axis == "time" else inside[:, None, :])
    return features * keep[..., None]


def check_audio_hparams(hparams: HParams) -> None:
    """Raises ValueError naming the audio hparams a set lacks."""
    missing = [name for name in AUDIO_HPARAMS if name not in hparams]
    if missing:
        raise ValueError(
            f"The audio modality needs hparams {', '.join(missing)}: use a speech set "
            f"(transformer_librispeech, transformer_librispeech_v1/_v2/_tpu, "
            f"transformer_speech_tiny) or call t2t.hparams.speech.add_audio_hparams(hp) "
            f"in your own set.")
