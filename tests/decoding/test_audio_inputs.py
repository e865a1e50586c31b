"""Tests of t2t.decoding.audio_inputs: audio paths as decoder input lines."""

from __future__ import annotations

import numpy as np
import soundfile

from t2t.decoding import audio_inputs


def test_a_wav_path_gives_pcm_ids_and_a_bad_one_silence(tmp_path, caplog):
    samples = (np.sin(np.arange(8000) / 3.0) * 10000).astype(np.int16)
    soundfile.write(str(tmp_path / "a.wav"), samples, 16000, subtype="PCM_16")
    ids = audio_inputs.read_input(f" {tmp_path / 'a.wav'} \n", 16000, "line 1")
    np.testing.assert_array_equal(ids, samples.astype(np.int32) + 32769)
    with caplog.at_level("WARNING"):
        silence = audio_inputs.read_input(str(tmp_path / "missing.wav"), 16000, "line 2")
    assert "line 2" in caplog.text and "missing.wav" in caplog.text
    np.testing.assert_array_equal(silence, np.full(1600, 32769))


def test_the_decode_budget_grows_with_the_seconds_of_audio():
    assert audio_inputs.decode_budget(16000, 16000) == audio_inputs.CHARS_PER_SECOND
    assert audio_inputs.decode_budget(40000, 16000) == 63  # 2.5 s
