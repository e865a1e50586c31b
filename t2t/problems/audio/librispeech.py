"""LibriSpeech (Panayotov et al. 2015): 1,000 hours of read English audiobooks, 16 kHz FLAC.

Tensor2Tensor's problems, with the archives of openslr.org pinned to the sizes and
sha256 that TensorFlow Datasets records (tensorflow_datasets/datasets/librispeech/
checksums.tsv), fetched through `download.fetch` (so `--data_mirror` / T2T_DATA_MIRROR,
a URL prefix or a local folder holding the same file names, is tried first):

  librispeech_clean_small  train-clean-100 (100 h, 6.4 GB)        dev-clean    test-clean
  librispeech_clean        train-clean-100 + 360 (460 h)          dev-clean    test-clean
  librispeech              + train-other-500 (960 h, 60 GB)       dev-clean + dev-other,
                                                                   test-clean + test-other
  librispeech_train_full_test_clean   960 h                       dev-clean    test-clean
  librispeech_train_full_test_other   960 h                       dev-other    test-other

Each archive is extracted once under tmp_dir (a marker records a complete extraction)
and its utterances are streamed chapter by chapter: one FLAC read at a time, so memory
stays flat whatever the corpus size. Transcripts are LibriSpeech's (upper case, no
punctuation but apostrophes), lowercased for the character vocabulary.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from typing import Any

from t2t import registry
from t2t.data import problem
from t2t.data.bases import speech
from t2t.data.generation import download, extract

_URL = "http://www.openslr.org/resources/12/"
# name -> (bytes, sha256), as TensorFlow Datasets records them.
_PINS = {
    "dev-clean": (337926286, "76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3"),
    "dev-other": (314305928, "12661c48e8c3fe1de2c1caa4c3e135193bfb1811584f11f569dd12645aa84365"),
    "test-clean": (346663984, "39fde525e59672dc6d1551919b1478f724438a95aa55f874b576be21967e6c23"),
    "test-other": (328757843, "d09c181bba5cf717b3dee7d4d592af11a3ee3a09e08ae025c5506f6ebe961c29"),
    "train-clean-100": (6387309499,
                        "d4ddd1d5a6ab303066f14971d768ee43278a5f2a0aa43dc716b0e64ecbbbf6e2"),
    "train-clean-360": (23049477885,
                        "146a56496217e96c14334a160df97fffedd6e0a04e66b9c5af0d40be3c792ecf"),
    "train-other-500": (30593501606,
                        "ddb22f27f96ec163645d53215559df6aa36515f26e01dd70798188350adcb6d2"),
}
RESOURCES = {name: download.Resource(f"{_URL}{name}.tar.gz", sha256=sha, size=size)
             for name, (size, sha) in _PINS.items()}


def utterances(root: str, archive: str) -> Iterator[tuple[str, str]]:
    """(FLAC path, transcript) of an extracted archive, in a fixed order: its
    LibriSpeech/<archive>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt files, whose
    lines are "<utterance id> <TRANSCRIPT>"."""
    pattern = os.path.join(root, "LibriSpeech", archive, "*", "*", "*.trans.txt")
    found = sorted(glob.glob(pattern))
    if not found:
        raise problem.DamagedDataError(
            f"No LibriSpeech transcripts under {os.path.join(root, 'LibriSpeech', archive)}: "
            f"the archive {archive}.tar.gz does not hold what LibriSpeech's does. Delete it "
            f"and {root} to fetch it again.")
    for transcripts in found:
        folder = os.path.dirname(transcripts)
        with open(transcripts, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    utterance, _, text = line.strip().partition(" ")
                    yield os.path.join(folder, f"{utterance}.flac"), text


class LibrispeechProblem(speech.SpeechRecognitionProblem):
    """LibriSpeech archives per split; subclasses choose them (Tensor2Tensor's names)."""

    train_archives: tuple[str, ...] = ("train-clean-100",)
    dev_archives: tuple[str, ...] = ("dev-clean",)
    test_archives: tuple[str, ...] = ("test-clean",)
    resources = RESOURCES  # name -> download.Resource (tests pin their own archives)
    lowercase = True
    max_seconds = 35.0  # LibriSpeech's longest utterance: 35 s
    num_shards = 100

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (problem.SplitSpec(problem.TRAIN_SPLIT, self.num_shards),
                problem.SplitSpec(problem.DEV_SPLIT, 1),
                problem.SplitSpec(problem.TEST_SPLIT, 1))

    def archives(self, split: str) -> tuple[str, ...]:
        return {problem.TRAIN_SPLIT: self.train_archives, problem.DEV_SPLIT: self.dev_archives,
                problem.TEST_SPLIT: self.test_archives}[split]

    def generate_samples(self, data_dir: str, tmp_dir: str, dataset_split: str,
                         mirror: str | None = None) -> Iterator[dict[str, Any]]:
        for archive in self.archives(dataset_split):
            path = download.fetch(self.resources[archive], tmp_dir, mirror)
            root = extract.extract(path, os.path.join(tmp_dir, f"librispeech-{archive}"))
            for audio_path, text in utterances(root, archive):
                yield {"audio_path": audio_path, "transcript": text}

    def generate_text_for_vocab(self, data_dir: str, tmp_dir: str) -> Iterator[str]:
        """The characters of LibriSpeech's transcripts: letters, apostrophe, space."""
        yield "abcdefghijklmnopqrstuvwxyz' "


@registry.register_problem("librispeech_clean_small")
class LibrispeechCleanSmall(LibrispeechProblem):
    """LibriSpeech train-clean-100 (100 h); dev-clean, test-clean."""


@registry.register_problem("librispeech_clean")
class LibrispeechClean(LibrispeechProblem):
    """LibriSpeech train-clean-100 and -360 (460 h); dev-clean, test-clean."""

    train_archives = ("train-clean-100", "train-clean-360")


@registry.register_problem("librispeech")
class Librispeech(LibrispeechProblem):
    """All of LibriSpeech's training audio (960 h); dev and test: clean and other."""

    train_archives = ("train-clean-100", "train-clean-360", "train-other-500")
    dev_archives = ("dev-clean", "dev-other")
    test_archives = ("test-clean", "test-other")


@registry.register_problem("librispeech_train_full_test_clean")
class LibrispeechTrainFullTestClean(Librispeech):
    """All 960 h of training audio; dev-clean, test-clean (the usual "test-clean" WER)."""

    dev_archives = ("dev-clean",)
    test_archives = ("test-clean",)


@registry.register_problem("librispeech_train_full_test_other")
class LibrispeechTrainFullTestOther(Librispeech):
    """All 960 h of training audio; dev-other, test-other (harder speakers)."""

    dev_archives = ("dev-other",)
    test_archives = ("test-other",)
