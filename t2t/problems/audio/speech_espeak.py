"""A spoken English corpus made offline: real sentences synthesized by espeak-ng.

`speech_synthetic_espeak` needs no download. Its sentences are real English: the plain
sentences of the running Python's standard-library docstrings (4-14 words of letters
only, e.g. "return the number of items in the queue"), lowercased without punctuation,
as a recognizer's transcripts usually are. Each utterance is spoken by espeak-ng (the
Debian package `espeak-ng`) with one of several voices (accent + speaker variant), a
speaking rate (words per minute) and a pitch, drawn by a seeded generator, optionally
with white noise at `noise_snr_db`, then resampled from espeak-ng's 22,050 Hz to 16 kHz.

Splits, so that recognition must generalize: sentences are dealt by a hash of their
text, 90% to training and 10% held out. `train`: the held-in sentences in the
TRAIN_VOICES. `dev`: held-out sentences in DEV_VOICES, accents and speakers never heard
in training (the unseen-voice figure). `test`: the same held-out sentences in
TRAIN_VOICES (the seen-voice figure: new sentences, known speakers).
"""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import numpy as np

from t2t import registry
from t2t.data import problem
from t2t.data.bases import speech
from t2t.problems.text import text_files
from t2t.problems.text.sentences import docstring_sentences, held_out, plain_sentences  # noqa: F401
from t2t.utils import optional_deps

# "language+variant" voices of espeak-ng (its gmw English voices and variants; "en"
# is British English: "en-gb+..." ignores the variant in espeak-ng 1.51).
TRAIN_VOICES = ("en-us+m1", "en-us+f2", "en+m3", "en+f1", "en-gb-x-rp+m2",
                "en-us+f4", "en-gb-x-gbclan+m4", "en-us-nyc+f3")
DEV_VOICES = ("en-gb-scotland+m7", "en-029+f5", "en-gb-x-gbcwmd+m5")
ESPEAK_RATE = 22050  # Hz of espeak-ng's output


class EspeakMissingError(problem.DataMissingError):
    """espeak-ng is not installed."""


def espeak_binary() -> str:
    """The espeak-ng executable, or EspeakMissingError saying how to install it."""
    found = shutil.which("espeak-ng")
    if not found:
        raise EspeakMissingError(
            "speech_synthetic_espeak needs the espeak-ng synthesizer: install it with "
            "`apt-get install espeak-ng` (Debian/Ubuntu) or `brew install espeak-ng` (macOS).")
    return found


def synthesize(text: str, voice: str, rate_wpm: int, pitch: int) -> tuple[np.ndarray, int]:
    """(int16 samples [N], Hz) of `text` spoken by espeak-ng with `voice`, `rate_wpm`
    words per minute and `pitch` (0-99)."""
    soundfile = optional_deps.require("soundfile", "speech", "speech_synthetic_espeak")
    result = subprocess.run(
        [espeak_binary(), "--stdout", "-z", "-v", voice, "-s", str(rate_wpm), "-p", str(pitch),
         text], capture_output=True, timeout=60, check=False)
    if result.returncode != 0 or not result.stdout:
        raise speech.AudioError(f"espeak-ng -v {voice}: failed on {text!r} "
                                f"({result.stderr.decode(errors='replace').strip()}).",
                                "unreadable")
    samples, rate = soundfile.read(io.BytesIO(result.stdout), dtype="int16")
    return samples, int(rate)


@registry.register_problem("speech_synthetic_espeak")
class SpeechSyntheticEspeak(speech.SpeechRecognitionProblem):
    """Real English sentences spoken by espeak-ng in 8 training voices; dev in 3 unseen."""

    num_train_utterances = 6000
    num_eval_utterances = 300  # of dev and of test
    rates_wpm = (130, 210)  # speaking rate range
    pitches = (25, 75)
    noise_snr_db: float | None = None  # white noise at this SNR; None: clean
    num_shards = 4
    max_seconds = 8.0
    stdlib: str | None = None  # another standard library folder (tests)

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (problem.SplitSpec(problem.TRAIN_SPLIT, self.num_shards),
                problem.SplitSpec(problem.DEV_SPLIT, 1),
                problem.SplitSpec(problem.TEST_SPLIT, 1))

    def sentences(self, split: str) -> list[str]:
        """Training sentences, or the held-out ones for dev and test."""
        want_held_out = split != problem.TRAIN_SPLIT
        return [s for s in docstring_sentences(self.stdlib) if held_out(s) == want_held_out]

    def generate_text_for_vocab(self, data_dir: str, tmp_dir: str) -> Iterator[str]:
        return iter(self.sentences(problem.TRAIN_SPLIT))  # no synthesis needed for text

    def generate_samples(self, data_dir: str, tmp_dir: str, dataset_split: str
                         ) -> Iterator[dict[str, Any]]:
        espeak_binary()  # fail before any shard is started
        sentences = self.sentences(dataset_split)
        if not sentences:
            raise problem.DataMissingError(
                f"{self.name}: no plain sentences found in the docstrings under "
                f"{self.stdlib or text_files.stdlib_dir()!r}.")
        voices = DEV_VOICES if dataset_split == problem.DEV_SPLIT else TRAIN_VOICES
        count = (self.num_train_utterances if dataset_split == problem.TRAIN_SPLIT
                 else self.num_eval_utterances)
        seed = {"train": 0, "dev": 1, "test": 2}[dataset_split]
        rng = np.random.default_rng(seed)
        for index in range(count):
            text = sentences[index % len(sentences)]
            voice = voices[int(rng.integers(len(voices)))]
            rate, pitch = int(rng.integers(*self.rates_wpm)), int(rng.integers(*self.pitches))
            samples, sample_rate = synthesize(text, voice, rate, pitch)
            if self.noise_snr_db is not None:
                samples = add_noise(samples, self.noise_snr_db, rng)
            yield {"waveform": samples, "sample_rate": sample_rate, "transcript": text,
                   "name": f"utterance {index} ({voice}, {rate} wpm, pitch {pitch})"}


def add_noise(samples: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """int16 samples with white noise at `snr_db` dB below the signal's power."""
    signal = samples.astype(np.float64)
    power = np.mean(signal**2) if signal.size else 0.0
    noise = rng.normal(0.0, np.sqrt(power / 10 ** (snr_db / 10)), signal.shape)
    return np.clip(np.round(signal + noise), -32768, 32767).astype(np.int16)


@registry.register_problem("speech_synthetic_espeak_test")
class SpeechSyntheticEspeakTest(SpeechSyntheticEspeak):
    """A small speech_synthetic_espeak for tests: 160 train utterances, 8 dev and test."""

    num_train_utterances = 160
    num_eval_utterances = 8
    num_shards = 1
