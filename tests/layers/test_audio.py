"""Tests of t2t.layers.audio: PCM ids, log-mel features, deltas, normalization,
SpecAugment, and the audio modality's front end (t2t.layers.modalities.AudioModality)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams
from t2t.hparams.speech import add_audio_hparams
from t2t.layers import audio, modalities

RATE = 16000


def _hparams(**values) -> HParams:
    hp = add_audio_hparams(create_hparams("transformer_test"))
    return hp.override_from_dict(values) if values else hp


def _tone(hz: float, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return np.round(amplitude * 32767 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def _batch(*waves: np.ndarray) -> tf.Tensor:
    """PCM ids [B, N] of int16 waves, padded with 0."""
    longest = max(len(w) for w in waves)
    ids = np.zeros([len(waves), longest], np.int32)
    for row, wave in enumerate(waves):
        ids[row, : len(wave)] = audio.pcm16_to_ids(wave)
    return tf.constant(ids)


def test_ids_round_trip_to_the_waveform_and_its_length():
    wave = np.array([-32768, -1, 0, 1, 32767], np.int16)
    ids = audio.pcm16_to_ids(wave)
    assert ids.min() == 1 and ids.max() == 65536  # 0 stays free for padding
    waveform, lengths = audio.ids_to_waveform(_batch(wave, wave[:2]))
    np.testing.assert_allclose(waveform.numpy()[0], wave / 32768.0)
    np.testing.assert_array_equal(lengths.numpy(), [5, 2])
    assert np.all(waveform.numpy()[1, 2:] == 0)


def test_a_tone_peaks_in_the_mel_bin_of_its_frequency():
    hp = _hparams(audio_add_delta_deltas=False, audio_normalization="none", audio_preemphasis=0.0)
    features, frames = audio.log_mel_features(_batch(_tone(1000.0, 0.5)), RATE, hp)
    assert features.shape[-1] == 1 and features.shape[2] == hp.audio_num_mel_bins
    # 25 ms frames (400 samples) every 10 ms (160): 1 + (8000 - 400) // 160 = 48
    assert int(frames[0]) == 48 == features.shape[1]
    edges = np.linspace(2595 * np.log10(1 + 20 / 700), 2595 * np.log10(1 + 8000 / 700),
                        hp.audio_num_mel_bins + 2)
    centers = 700 * (10 ** (edges[1:-1] / 2595) - 1)
    peak = int(np.argmax(features.numpy()[0, 24, :, 0]))
    assert abs(centers[peak] - 1000.0) < 60.0


def test_padding_changes_nothing_and_padded_frames_are_zero():
    hp = _hparams()
    short, long = _tone(440.0, 0.3), _tone(300.0, 0.8)
    alone, alone_frames = audio.log_mel_features(_batch(short), RATE, hp)
    batched, frames = audio.log_mel_features(_batch(short, long), RATE, hp)
    n = int(alone_frames[0])
    assert int(frames[0]) == n and int(frames[1]) > n
    np.testing.assert_allclose(batched.numpy()[0, :n], alone.numpy()[0, :n], atol=1e-4)
    assert np.all(batched.numpy()[0, n:] == 0)
    assert batched.shape[-1] == 3  # features, deltas, delta-deltas


def test_per_utterance_normalization_gives_zero_mean_unit_variance():
    hp = _hparams(audio_add_delta_deltas=False)
    noise = np.random.default_rng(0).normal(0, 3000, RATE).astype(np.int16)
    features, frames = audio.log_mel_features(_batch(noise, noise[:4000]), RATE, hp)
    for row in range(2):
        valid = features.numpy()[row, : int(frames[row]), :, 0]
        np.testing.assert_allclose(valid.mean(axis=0), 0.0, atol=1e-3)
        np.testing.assert_allclose(valid.std(axis=0), 1.0, atol=1e-2)


def test_bad_normalization_and_missing_hparams_are_named():
    with pytest.raises(ValueError, match="audio_normalization='batch': use one of "
                                         "per_utterance, global, none"):
        audio.log_mel_features(_batch(_tone(440, 0.1)), RATE, _hparams(audio_normalization="batch"))
    with pytest.raises(ValueError, match="'global' needs the running statistics"):
        audio.log_mel_features(_batch(_tone(440, 0.1)), RATE, _hparams(audio_normalization="global"))
    with pytest.raises(ValueError, match="audio_num_mel_bins.*transformer_speech_tiny"):
        audio.check_audio_hparams(create_hparams("transformer_test"))


def test_global_statistics_are_those_of_every_valid_training_frame_seen():
    rng = np.random.default_rng(3)
    batches = [rng.normal(2.0, 3.0, [2, 7, 5, 1]).astype(np.float32) for _ in range(3)]
    masks = [np.ones([2, 7, 1, 1], np.float32) for _ in range(3)]
    masks[0][1, 4:] = 0  # a shorter row: its padded frames must not count
    masks[2][0, 2:] = 0
    layer = audio.GlobalMeanVariance()
    for features, mask in zip(batches, masks, strict=True):
        layer(tf.constant(features), tf.constant(mask), training=True)
    frames = np.concatenate([f[m[..., 0, 0] > 0][:, :, 0] for f, m in zip(batches, masks, strict=True)])
    assert float(layer.count.numpy()) == len(frames) == 14 + 11 + 9
    np.testing.assert_allclose(layer.mean.numpy(), frames.mean(axis=0), rtol=1e-5)
    variance = layer.squared_deviations.numpy() / layer.count.numpy()
    np.testing.assert_allclose(variance, frames.var(axis=0), rtol=1e-4)
    # Evaluation applies them and leaves them alone.
    out = layer(tf.constant(batches[1]), tf.constant(masks[1]), training=False).numpy()
    np.testing.assert_allclose(out, (batches[1] - frames.mean(axis=0)[:, None])
                               / np.sqrt(frames.var(axis=0)[:, None] + 1e-6), rtol=1e-4, atol=1e-5)
    assert float(layer.count.numpy()) == 34


def test_the_global_frame_count_stops_at_its_cap(monkeypatch):
    monkeypatch.setattr(audio, "GLOBAL_COUNT_CAP", 10.0)
    layer = audio.GlobalMeanVariance()
    for value in (0.0, 4.0):
        layer(tf.fill([1, 8, 2, 1], value), tf.ones([1, 8, 1, 1]), training=True)
    # 16 frames scaled to 10; the mean stays the exact merge (2.0).
    assert float(layer.count.numpy()) == 10.0
    np.testing.assert_allclose(layer.mean.numpy(), 2.0)


def test_a_modality_with_global_normalization_saves_its_statistics_and_ignores_padding():
    modality = _modality(audio_normalization="global", audio_add_delta_deltas=False)
    ids = _batch(_tone(440.0, 1.0), _tone(880.0, 0.5))
    modality.bottom(ids, training=True)
    names = sorted(w.path.split("/")[-1] for w in modality.non_trainable_weights)
    assert names == ["count", "mean", "squared_deviations"]
    assert float(modality.global_statistics.count.numpy()) == 98 + 48  # valid frames only
    out = modality.bottom(ids, training=False).numpy()
    alone = modality.bottom(ids[1:, :8000], training=False).numpy()
    np.testing.assert_allclose(out[1, :12], alone[0], atol=1e-4)


def test_the_delta_of_a_ramp_is_its_slope():
    ramp = tf.reshape(tf.range(10, dtype=tf.float32) * 0.5, [1, 10, 1, 1])
    delta = audio._delta(ramp, tf.constant([8])).numpy()[0, :, 0, 0]
    np.testing.assert_allclose(delta[2:6], 0.5, rtol=1e-6)
    # Past frame 8 (padding) the last valid frame repeats: the ramp flattens there.
    # (1 * (x7 - x5) + 2 * (x7 - x4)) / 10 and (1 * (x7 - x6) + 2 * (x7 - x5)) / 10
    np.testing.assert_allclose(delta[6:8], [0.4, 0.25], rtol=1e-6)


def test_spec_augment_masks_at_most_the_widest_span_per_mask():
    hp = _hparams(specaugment_time_masks=2, specaugment_time_mask_max_frames=5,
                  specaugment_freq_masks=1, specaugment_freq_mask_max_bins=4)
    features = tf.ones([3, 40, 20, 1])
    draws = iter([tf.constant([[0.99, 0.5, 0.0], [0.0, 0.5, 0.99]])] * 3)
    masked = audio.spec_augment(features, tf.constant([40, 40, 10]), hp, lambda shape: next(draws))
    zero_frames = np.all(masked.numpy()[..., 0] == 0, axis=2).sum(axis=1)
    zero_bins = np.all(masked.numpy()[..., 0] == 0, axis=1).sum(axis=1)
    # width = floor(u * 6): 5, 3 and 0 frames per time mask (both masks draw alike).
    np.testing.assert_array_equal(zero_frames, [5, 3, 0])
    np.testing.assert_array_equal(zero_bins, [4, 2, 0])  # floor(u * 5)
    # Row 2 has 10 frames: its masks stay inside them.
    assert np.all(masked.numpy()[2, 10:] == 1)


def _modality(**values):
    keras.utils.set_random_seed(0)
    hp = _hparams(hidden_size=16, **values)
    return modalities.create_modality(modalities.AUDIO, None, hp, "inputs", sample_rate=RATE)


def test_the_front_end_quarters_time_and_zeroes_padded_positions():
    modality = _modality()
    ids = _batch(_tone(440.0, 1.0), _tone(440.0, 0.5))
    out = modality.bottom(ids, training=False).numpy()
    # 98 and 48 frames -> 25 and 12 positions after two stride-2 convolutions
    assert out.shape == (2, 25, 16)
    nonzero = np.any(out != 0, axis=-1)
    assert nonzero[0].all() and nonzero[1, :12].all() and not nonzero[1, 12:].any()
    alone = modality.bottom(ids[1:, :8000], training=False).numpy()
    np.testing.assert_allclose(out[1, :12], alone[0], atol=1e-4)  # padding after it: no effect


def test_spec_augment_runs_in_training_only():
    modality = _modality(specaugment_time_masks=2, specaugment_time_mask_max_frames=30)
    ids = _batch(_tone(440.0, 1.0))
    evaluated = [modality.bottom(ids, training=False).numpy() for _ in range(2)]
    np.testing.assert_array_equal(*evaluated)
    trained = modality.bottom(ids, training=True).numpy()
    assert not np.allclose(trained, evaluated[0])


def test_the_modality_needs_the_sample_rate():
    with pytest.raises(ValueError, match="audio_sample_rate"):
        modalities.create_modality(modalities.AUDIO, None, _hparams(), "inputs")
