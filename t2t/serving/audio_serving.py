"""Audio in exported SavedModels: WAV bytes or stored PCM16 bytes -> the audio modality's
PCM ids, with stock TensorFlow ops only (a serving client needs nothing else).

`wav_ids` checks what t2t-decoder checks when it reads a file: 16-bit PCM WAV, one
channel, the problem's sample rate (the export does not resample: a request at another
rate fails with an InvalidArgument error naming both rates). A WAV file's samples come
back exactly (decode_wav gives s / 32768), so the export sees the ids t2t-decoder reads.
"""

from __future__ import annotations

import tensorflow as tf

from t2t.features import PCM_OFFSET

_RAGGED_IDS = tf.RaggedTensorSpec([None], tf.int32, ragged_rank=0)


def _ids(samples: tf.Tensor) -> tf.Tensor:
    return tf.cast(samples, tf.int32) + PCM_OFFSET


def pcm16_ids(encoded: tf.Tensor) -> tf.Tensor:
    """Little-endian PCM16 bytes [B] -> int32 PCM ids [B, N] padded with 0."""
    def one(data):
        return _ids(tf.io.decode_raw(data, tf.int16, little_endian=True))

    return tf.map_fn(one, encoded, fn_output_signature=_RAGGED_IDS).to_tensor(0)


def wav_ids(wav_bytes: tf.Tensor, sample_rate: int) -> tf.Tensor:
    """WAV files' bytes [B] (16-bit mono at `sample_rate`) -> int32 PCM ids [B, N]."""
    def one(data):
        audio, rate = tf.audio.decode_wav(data)
        tf.debugging.assert_equal(
            tf.shape(audio)[1], 1,
            message="speech requests must be mono WAV (one channel); mix it down first")
        tf.debugging.assert_equal(
            rate, sample_rate,
            message=f"the model takes WAV at {sample_rate} Hz; resample the request to it")
        samples = tf.clip_by_value(tf.round(audio[:, 0] * 32768.0), -32768.0, 32767.0)
        return _ids(samples)

    return tf.map_fn(one, wav_bytes, fn_output_signature=_RAGGED_IDS).to_tensor(0)
