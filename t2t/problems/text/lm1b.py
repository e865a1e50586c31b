"""The One Billion Word benchmark (LM1B), as Tensor2Tensor's `languagemodel_lm1b32k`.

Data: `1-billion-word-language-modeling-benchmark-r13output.tar.gz` from statmt.org
(1.79 GB; about 4 GB extracted), pinned to the size and sha256 that TensorFlow Datasets
records (`tensorflow_datasets/datasets/lm1b/checksums.tsv`). Inside its top folder:

- train: `training-monolingual.tokenized.shuffled/news.en-000{01..99}-of-00100`, 99
  files, ~30.3M sentences (~0.8G words);
- dev: `heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050`, the
  benchmark's test set (~6.1k sentences, 159,658 words counting one end of sentence
  each), as Tensor2Tensor used it.

One example per line (a tokenized, shuffled sentence), streamed from the extracted
files; empty lines are skipped. The vocabulary is SentencePiece with ~32k pieces, built
from the first `max_samples_for_vocab` = 63,000 training sentences (Tensor2Tensor's
number). Unlike Tensor2Tensor, words outside the benchmark's 793k-word list
(vocab-2016-09-10.txt, which has no recorded checksum) are not replaced by "UNK": the
subword vocabulary spells every word.

Metrics: accuracy and neg_log_perplexity, per subword token (EOS included);
perplexity = exp(-neg_log_perplexity). For a per-word perplexity comparable with
published results, scale: word log-ppl = token log-ppl * (dev tokens / dev words),
both counted with EOS (Tensor2Tensor's 32k vocabulary gave 176,884 / 159,658 = 1.1079).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.translate import archive_members
from t2t.data.generation.download import Resource

LM1B = Resource(
    url=(
        "http://www.statmt.org/lm-benchmark/"
        "1-billion-word-language-modeling-benchmark-r13output.tar.gz"
    ),
    size=1792209805,
    sha256="01ba60381110baf7f189dfd2b8374de371e8c9a340835793f190bdae9e90a34e",
)
TOP = "1-billion-word-language-modeling-benchmark-r13output"
TRAIN_FILES = tuple(
    f"{TOP}/training-monolingual.tokenized.shuffled/news.en-{i:05d}-of-00100" for i in range(1, 100)
)
DEV_FILES = (f"{TOP}/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050",)


def read_lines(path: str) -> Iterator[str]:
    """The stripped, non-empty lines of a UTF-8 text file, streamed."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


@registry.register_problem
class LanguagemodelLm1b32k(text_problems.Text2SelfProblem):
    """LM1B sentences (~30.3M train; dev = heldout-00000), ~32k SentencePiece pieces."""

    resource: Resource = LM1B
    train_files: Sequence[str] = TRAIN_FILES
    dev_files: Sequence[str] = DEV_FILES

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**15  # 32768
    max_samples_for_vocab = 63_000
    splits = (problem.SplitSpec(problem.TRAIN_SPLIT, 100), problem.SplitSpec(problem.DEV_SPLIT, 1))

    def split_files(self, split: str) -> Sequence[str]:
        if split == problem.TRAIN_SPLIT:
            return self.train_files
        if split == problem.DEV_SPLIT:
            return self.dev_files
        raise ValueError(f"{self.name} has no {split!r} split; use train or dev.")

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        members = self.split_files(split)
        for path in archive_members(self.resource, members, tmp_dir, mirror):
            for line in read_lines(path):
                yield {"targets": line}
