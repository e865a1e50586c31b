"""Speech recognition problems: audio in, text out.

A subclass yields samples {"waveform": int16 [N] (with "sample_rate") or "audio_path":
a WAV/FLAC file, "transcript": str} from `generate_samples`; the base class reads and
checks each one (mono, the problem's sample rate, or resampled to it; length in seconds
within [min_seconds, max_seconds]; a transcript), stores the audio as 16-bit PCM bytes
("audio/encoded") and the transcript as target ids (characters, or SentencePiece
pieces with vocab_type="subword"). A sample that fails a check is skipped and counted
(one warning each, a summary per split): a corpus of thousands of files is not lost to
one damaged file. Reading gives "inputs" int32 [N] PCM ids (t2t.layers.audio: sample +
32769, 0 pads) for the audio modality.

Adding a corpus of your own (a folder of WAV/FLAC files and a transcript file) is one
short subclass; see docs/how-to/speech.md.
"""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np
from absl import logging

from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.text_problems import VOCAB_CHARACTER
from t2t.features import PCM_OFFSET
from t2t.utils import optional_deps
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")



class AudioError(ValueError):
    """An audio file or waveform that cannot be used; the message names it, `reason` is
    its kind ("unreadable", "channels", "empty", "sample type", "sample rate", "length",
    "no transcript") for the skip counts."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def read_audio(path: str) -> tuple[np.ndarray, int]:
    """(int16 samples [N, channels], sample rate in Hz) of a WAV or FLAC file (soundfile)."""
    soundfile = optional_deps.require("soundfile", "speech", "Reading WAV/FLAC audio")
    try:
        samples, rate = soundfile.read(path, dtype="int16", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError, OSError) as e:
        raise AudioError(f"{path}: not a readable WAV/FLAC file ({e}).", "unreadable") from e
    return samples, int(rate)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """int16 mono samples [N] at `from_rate` -> int16 [N * to_rate / from_rate] (soxr, high
    quality; its anti-aliasing filter removes what the new rate cannot hold)."""
    if from_rate == to_rate:
        return np.asarray(samples, np.int16)
    soxr = optional_deps.require("soxr", "speech", "Resampling audio")
    return soxr.resample(np.asarray(samples, np.int16), from_rate, to_rate, quality="HQ")


def mono_at_rate(samples: np.ndarray, rate: int, want_rate: int, name: str,
                 resample_audio: bool = True) -> np.ndarray:
    """Checked int16 samples [N] at `want_rate` from samples [N] or [N, 1] at `rate`.

    Raises AudioError naming `name` for several channels, an empty signal, or another
    rate when `resample_audio` is False."""
    samples = np.asarray(samples)
    if samples.ndim == 2:
        if samples.shape[1] != 1:
            raise AudioError(f"{name}: {samples.shape[1]} channels; speech problems take mono "
                             f"audio (mix it down first, e.g. `sox in.wav -c 1 out.wav`).", "channels")
        samples = samples[:, 0]
    if samples.ndim != 1 or samples.size == 0:
        raise AudioError(f"{name}: no samples (shape {list(samples.shape)}).", "empty")
    if samples.dtype != np.int16:
        raise AudioError(f"{name}: samples of type {samples.dtype}; give 16-bit PCM (int16).", "sample type")
    if rate != want_rate:
        if not resample_audio:
            raise AudioError(f"{name}: sampled at {rate} Hz, the problem takes {want_rate} Hz "
                             f"(set resample_audio = True to resample it).", "sample rate")
        samples = resample(samples, rate, want_rate)
    return samples


class SpeechRecognitionProblem(text_problems.TextProblem):
    """Base of speech problems: mono 16-bit audio -> transcript (characters by default).

    Subclasses implement `generate_samples(data_dir, tmp_dir, dataset_split)`; set
    `sample_rate`, `min_seconds` / `max_seconds`, `vocab_type` ("character" or
    "subword" for SentencePiece) and `approx_vocab_size` as they need."""

    vocab_type = VOCAB_CHARACTER
    sample_rate = 16000
    resample_audio = True  # False: a file at another rate is skipped, named
    min_seconds = 0.1
    max_seconds = 30.0
    num_shards = 10
    lowercase = False  # transcripts as they are; True lowercases them
    # Lengths (filters, buckets) count the audio's samples; targets are padded to the
    # longest in their batch, not to the audio's bucket length.
    sequence_features = ("inputs",)
    # Shuffle buffers of waveforms made 2.9 GB checkpoints on the espeak-ng corpus.
    checkpoint_input_position = False

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (problem.SplitSpec(problem.TRAIN_SPLIT, self.num_shards),
                problem.SplitSpec(problem.DEV_SPLIT, 1))

    def text_fields(self) -> tuple[str, ...]:
        return ("transcript",)

    def normalize_transcript(self, text: str) -> str:
        """The transcript as the model learns it: whitespace collapsed (and lowercased
        with `lowercase`)."""
        text = " ".join(text.split())
        return text.lower() if self.lowercase else text

    # ----------------------------------------------------------- generation
    def waveform_of(self, sample: dict[str, Any]) -> np.ndarray:
        """The checked int16 samples [N] at `sample_rate` of one sample (AudioError if not
        usable)."""
        if "audio_path" in sample:
            path = sample["audio_path"]
            samples, rate = read_audio(path)
            name = path
        else:
            samples, rate = sample["waveform"], int(sample.get("sample_rate", self.sample_rate))
            name = sample.get("name", "a generated waveform")
        samples = mono_at_rate(samples, rate, self.sample_rate, name, self.resample_audio)
        seconds = samples.size / self.sample_rate
        if not self.min_seconds <= seconds <= self.max_seconds:
            raise AudioError(f"{name}: {seconds:.2f} s, outside [{self.min_seconds}, "
                             f"{self.max_seconds}] s (min_seconds / max_seconds).", "length")
        return samples

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        """Stored examples: {"audio/encoded": PCM16 bytes, "audio/sample_rate",
        "audio/num_samples", "targets": ids + EOS}; unusable samples skipped, counted."""
        encoder = self._vocab(data_dir, tmp_dir)
        skipped: collections.Counter[str] = collections.Counter()
        kept = 0
        for sample in self._samples(data_dir, tmp_dir, dataset_split):
            transcript = self.normalize_transcript(sample.get("transcript") or "")
            try:
                if not transcript:
                    raise AudioError(f"{sample.get('audio_path') or sample.get('name', 'a sample')}"
                                     f": empty transcript.", "no transcript")
                samples = self.waveform_of(sample)
            except AudioError as e:
                skipped[e.reason] += 1
                logging.warning("%s %s: skipped %s", self.name, dataset_split, e)
                continue
            kept += 1
            yield {
                "audio/encoded": samples.astype("<i2").tobytes(),
                "audio/sample_rate": [self.sample_rate],
                "audio/num_samples": [int(samples.size)],
                "targets": self._encode_text(encoder, transcript),
            }
        if skipped:
            logging.warning("%s %s: kept %d utterances, skipped %d: %s", self.name,
                            dataset_split, kept, sum(skipped.values()),
                            "; ".join(f"{n} x {r}" for r, n in skipped.most_common()))

    # -------------------------------------------------------------- reading
    def example_reading_spec(self) -> dict[str, Any]:
        return {"audio/encoded": tf.io.FixedLenFeature((), tf.string),
                "targets": tf.io.RaggedFeature(tf.int64)}

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        """A batch of records -> {"inputs": string [B] (PCM16 bytes), "targets": ragged
        int32}; the audio is decoded per example in `preprocess_example`."""
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        return {"inputs": parsed["audio/encoded"],
                "targets": tf.cast(parsed["targets"], tf.int32)}

    def preprocess_example(self, example: dict[str, Any], mode: str, model_hparams: Any
                           ) -> dict[str, Any]:
        """PCM16 bytes -> "inputs" int32 [N] PCM ids (sample + 32769)."""
        example = dict(example)
        if example["inputs"].dtype == tf.string:
            samples = tf.io.decode_raw(example["inputs"], tf.int16, little_endian=True)
            example["inputs"] = tf.cast(samples, tf.int32) + PCM_OFFSET
        return example

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        return {"targets": self._load_vocab(data_dir)}

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        size = self.feature_encoders(data_dir)["targets"].vocab_size
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.AUDIO, "targets": problem.Modality.SYMBOL},
            vocab_size={"inputs": None, "targets": size},
            input_space_id=problem.SpaceID.AUDIO_WAV,
            target_space_id=(problem.SpaceID.EN_CHR if self.vocab_type == VOCAB_CHARACTER
                             else problem.SpaceID.EN_TOK),
            audio_sample_rate=self.sample_rate,
        )

    def eval_metrics(self) -> list[str]:
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity", "wer", "cer"]


def audio_files(folder: str, extensions: tuple[str, ...] = (".wav", ".flac")) -> list[str]:
    """The audio files under `folder` (recursively), sorted."""
    found = []
    for root, _, names in os.walk(folder):
        found += [os.path.join(root, n) for n in names if n.lower().endswith(extensions)]
    return sorted(found)


def waveform_ids(samples: np.ndarray) -> np.ndarray:
    """int16 samples [N] -> the int32 PCM ids [N] the audio modality reads."""
    return np.asarray(samples, np.int32) + PCM_OFFSET


def write_waveform_ids(path: str, ids: np.ndarray, sample_rate: int) -> None:
    """Stored PCM ids [N] (0 = padding, dropped) -> a 16-bit PCM WAV file at `path`."""
    soundfile = optional_deps.require("soundfile", "speech", "Writing WAV audio")
    ids = np.asarray(ids, np.int64)
    samples = (ids[ids > 0] - PCM_OFFSET).astype(np.int16)
    soundfile.write(path, samples, sample_rate, format="WAV", subtype="PCM_16")


def read_waveform_ids(path: str, sample_rate: int, resample_audio: bool = True) -> np.ndarray:
    """A WAV/FLAC file -> int32 PCM ids [N] at `sample_rate` (AudioError naming the file)."""
    samples, rate = read_audio(path)
    return waveform_ids(mono_at_rate(samples, rate, sample_rate, path, resample_audio))
