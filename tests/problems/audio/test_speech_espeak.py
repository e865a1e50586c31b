"""Tests of t2t.problems.audio.speech_espeak: sentences per split, voices per split, noise, and
the error without espeak-ng (sentences themselves: tests/problems/text/test_sentences.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.audio import speech_espeak

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng is not installed (apt-get install espeak-ng)")

MODULE = '''"""Tools for reading the archive.

Open the archive and return its members. See os.path.join() for paths.
"""


def read(name):
    """Read one member from the archive.

    The member's bytes are returned as they are stored.
    Raise KeyError if there is no member with that name.
    """


def close():
    """Close the archive and free its file handle."""
'''


def test_dev_voices_are_not_training_voices():
    assert not set(speech_espeak.DEV_VOICES) & set(speech_espeak.TRAIN_VOICES)


NOUNS = ("header", "member", "record", "buffer", "socket", "handle", "table", "queue")
PLACES = ("archive", "stream", "cache", "database", "message")


@pytest.fixture()
def small_espeak(tmp_path):
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "archive.py").write_text(MODULE, encoding="utf-8")
    # 40 more sentences, so that some are held out (about 10%) for dev and test
    lines = [f"Read the {noun} from the {place}." for noun in NOUNS for place in PLACES]
    (stdlib / "reader.py").write_text('"""' + "\n\n".join(lines) + '"""\n', encoding="utf-8")
    instance = registry.problem("speech_synthetic_espeak")
    instance.stdlib = str(stdlib)
    instance.num_train_utterances, instance.num_eval_utterances = 6, 2
    return instance


def test_sentences_of_a_standard_library(small_espeak):
    everything = speech_espeak.docstring_sentences(small_espeak.stdlib)
    assert "open the archive and return its members" in everything
    assert "raise key error" not in " ".join(everything)  # KeyError: code, left out
    train, dev = small_espeak.sentences("train"), small_espeak.sentences("dev")
    assert sorted(train + dev) == sorted(everything) and not set(train) & set(dev)


@needs_espeak
def test_utterances_are_spoken_by_the_splits_voices(small_espeak, tmp_path):
    samples = list(small_espeak.generate_samples(str(tmp_path), str(tmp_path), "train"))
    assert len(samples) == 6
    voices = {s["name"].split("(")[1].split(",")[0] for s in samples}
    assert voices <= set(speech_espeak.TRAIN_VOICES) and len(voices) > 1
    for sample in samples:
        assert sample["sample_rate"] == speech_espeak.ESPEAK_RATE
        assert sample["waveform"].dtype == np.int16 and sample["waveform"].size > 8000
        assert sample["transcript"] in small_espeak.sentences("train")
    again = list(small_espeak.generate_samples(str(tmp_path), str(tmp_path), "train"))
    assert [s["name"] for s in again] == [s["name"] for s in samples]  # seeded
    dev = list(small_espeak.generate_samples(str(tmp_path), str(tmp_path), "dev"))
    assert {s["name"].split("(")[1].split(",")[0] for s in dev} <= set(speech_espeak.DEV_VOICES)


@needs_espeak
def test_generated_data_reads_back_at_16_khz(small_espeak, tmp_path):
    data_dir = str(tmp_path / "data")
    small_espeak.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    examples = list(small_espeak.dataset(problem.EVAL, data_dir, deterministic=True))
    assert len(examples) == 2
    seconds = [len(e["inputs"]) / 16000 for e in examples]
    assert all(0.5 < s < 8.0 for s in seconds)


def test_noise_has_the_asked_signal_to_noise_ratio():
    rng = np.random.default_rng(0)
    signal = np.round(8000 * np.sin(np.arange(16000) / 5.0)).astype(np.int16)
    noisy = speech_espeak.add_noise(signal, 10.0, rng)
    noise = noisy.astype(np.float64) - signal
    snr = 10 * np.log10(np.mean(signal.astype(np.float64) ** 2) / np.mean(noise**2))
    assert abs(snr - 10.0) < 0.3


def test_without_espeak_the_error_says_how_to_install_it(monkeypatch, small_espeak, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(speech_espeak.EspeakMissingError, match="apt-get install espeak-ng"):
        next(small_espeak.generate_samples(str(tmp_path), str(tmp_path), "train"))
