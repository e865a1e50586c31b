"""IWSLT'15 English -> Vietnamese (TED talks), as Tensor2Tensor's `translate_envi_iwslt32k`.

The data is the Stanford NMT group's preparation of IWSLT'15 En-Vi
(https://nlp.stanford.edu/projects/nmt/), six plain-text files, one sentence per line,
aligned line by line (about 20 MB in all):

| split | files                   | pairs  |
| ----- | ----------------------- | ------ |
| train | train.en / train.vi     | ~133k  |
| dev   | tst2012.en / tst2012.vi | 1,553  |
| test  | tst2013.en / tst2013.vi | 1,268  |

(Tensor2Tensor read copies of the train and tst2012 files repacked as .tgz archives on
GitHub; this reads the Stanford originals, and adds tst2013 as the test split, the set
results on this corpus are usually reported on.) The files are Moses-tokenized with
Moses' XML escapes (`&apos;`, `&quot;`, `&amp;`, ...); they are unescaped here
(`unescape_entities`), so examples, the vocabulary and decoded output hold the plain
characters. Published results on this corpus are mostly tokenized BLEU
(multi-bleu.perl against the Moses-tokenized references), which differs somewhat from
sacrebleu's BLEU that the decoder reports.

No size or sha256 of these files is recorded on this machine (TensorFlow Datasets
does not ship them), so they are fetched UNVERIFIED: `download.fetch` logs a warning.

Metrics: BLEU (sacrebleu, at decode time) besides the per-token ones. Append `_rev`
(`translate_envi_iwslt32k_rev`) for Vietnamese -> English.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from t2t import registry
from t2t.data import problem
from t2t.data.bases import translate
from t2t.data.generation import download
from t2t.data.generation.download import Resource

STANFORD_URL = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/"
# Folder of tmp_dir the files are fetched into (their names are generic: train.en ...).
DOWNLOAD_SUBDIR = "iwslt15.en-vi"


class PlainParallelFiles(NamedTuple):
    """A parallel corpus held as two plain (not archived) files, aligned line by line."""

    source: Resource
    target: Resource


def _stanford(name: str) -> Resource:
    # Unpinned: no recorded size or sha256 exists on this machine (see the docstring).
    return Resource(url=STANFORD_URL + name)


TRAIN_EN, TRAIN_VI = _stanford("train.en"), _stanford("train.vi")
TST2012_EN, TST2012_VI = _stanford("tst2012.en"), _stanford("tst2012.vi")
TST2013_EN, TST2013_VI = _stanford("tst2013.en"), _stanford("tst2013.vi")

ENVI_TRAIN_FILES = (PlainParallelFiles(TRAIN_EN, TRAIN_VI),)
ENVI_DEV_FILES = (PlainParallelFiles(TST2012_EN, TST2012_VI),)
ENVI_TEST_FILES = (PlainParallelFiles(TST2013_EN, TST2013_VI),)


@registry.register_problem
class TranslateEnviIwslt32k(translate.TranslateProblem):
    """IWSLT'15 En-Vi (~133k pairs; dev tst2012, test tst2013), ~32k shared vocab."""

    train_files: Sequence[PlainParallelFiles] = ENVI_TRAIN_FILES
    dev_files: Sequence[PlainParallelFiles] = ENVI_DEV_FILES
    test_files: Sequence[PlainParallelFiles] = ENVI_TEST_FILES
    unescape_entities: bool = True

    source_language = "en"
    target_language = "vi"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.GENERIC
    approx_vocab_size = 2**15  # 32768; ~20k pieces suffice for this corpus
    train_shards = 10
    dev_shards = 1
    test_shards = 1

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (
            problem.SplitSpec(problem.TRAIN_SPLIT, self.train_shards),
            problem.SplitSpec(problem.DEV_SPLIT, self.dev_shards),
            problem.SplitSpec(problem.TEST_SPLIT, self.test_shards),
        )

    def plain_files(self, split: str) -> Sequence[PlainParallelFiles]:
        """The file pairs of `split` (train, dev or test)."""
        tables = {
            problem.TRAIN_SPLIT: self.train_files,
            problem.DEV_SPLIT: self.dev_files,
            problem.TEST_SPLIT: self.test_files,
        }
        if split not in tables:
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        return tables[split]

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        folder = os.path.join(tmp_dir, DOWNLOAD_SUBDIR)
        for pair in self.plain_files(split):
            source = download.fetch(pair.source, folder, mirror)
            target = download.fetch(pair.target, folder, mirror)
            for sample in translate.parallel_samples(source, target):
                if self.unescape_entities:
                    sample = {k: html.unescape(v) for k, v in sample.items()}
                yield sample
