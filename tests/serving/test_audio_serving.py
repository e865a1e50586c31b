"""Tests of t2t.serving.audio_serving: WAV and PCM16 bytes to PCM ids in the graph."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile
import tensorflow as tf

from t2t.serving import audio_serving


def _wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def test_wav_samples_come_back_exactly_padded_with_zero():
    a = np.array([-32768, -1, 0, 1, 32767, 1234], np.int16)
    b = np.array([5, -5], np.int16)
    ids = audio_serving.wav_ids(tf.constant([_wav(a), _wav(b)]), 16000).numpy()
    np.testing.assert_array_equal(ids[0], a.astype(np.int32) + 32769)
    np.testing.assert_array_equal(ids[1], [32774, 32764, 0, 0, 0, 0])


def test_pcm16_bytes_as_stored_give_the_same_ids():
    a = np.array([3, -300, 30000], np.int16)
    ids = audio_serving.pcm16_ids(tf.constant([a.astype("<i2").tobytes()])).numpy()
    np.testing.assert_array_equal(ids[0], a.astype(np.int32) + 32769)


@pytest.mark.parametrize("samples, rate, message", [
    (np.zeros([100, 2], np.int16), 16000, "mono WAV"),
    (np.zeros(100, np.int16), 22050, "takes WAV at 16000 Hz"),
])
def test_stereo_or_another_rate_is_refused(samples, rate, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        audio_serving.wav_ids(tf.constant([_wav(samples, rate)]), 16000)
