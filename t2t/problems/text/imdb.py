"""IMDB movie-review sentiment, as Tensor2Tensor's `sentiment_imdb`.

Data: the Large Movie Review Dataset v1.0 (Maas et al. 2011), `aclImdb_v1.tar.gz`
from ai.stanford.edu (84 MB), pinned to the size and sha256 that TensorFlow Datasets
records (`tensorflow_datasets/datasets/imdb_reviews/checksums.tsv`). Inside:
`aclImdb/train/{pos,neg}/<id>_<stars>.txt` (25,000 reviews, 12,500 of each) and
`aclImdb/test/{pos,neg}/` (25,000 more). The train split is the train folder; the dev
split is the test folder, as Tensor2Tensor used it. The unlabelled
`aclImdb/train/unsup/` reviews are not read.

Labels: neg = 0, pos = 1 (`class_labels` ["neg", "pos"]). Reviews are read in order of
their numeric id, alternating pos and neg, so every shard is balanced. The review's
HTML line breaks (`<br />`) become spaces and runs of whitespace collapse to one.

Vocabulary: SentencePiece, ~8k pieces (Tensor2Tensor's size for this small data set),
built from the training reviews. Metrics: accuracy and neg_log_perplexity of the label.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.translate import archive_members
from t2t.data.generation.download import Resource

ACL_IMDB = Resource(
    url="http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
    size=84125825,
    sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
)
CLASS_LABELS = ["neg", "pos"]
SPLIT_FOLDERS = {problem.TRAIN_SPLIT: "aclImdb/train", problem.DEV_SPLIT: "aclImdb/test"}
_BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_review(text: str) -> str:
    """A review with `<br />` line breaks as spaces and whitespace collapsed."""
    return " ".join(_BR_RE.sub(" ", text).split())


def _review_key(name: str) -> tuple[int, str]:
    """`123_8.txt` sorts by its id 123 (names that do not parse sort last, by name)."""
    head = name.split("_", 1)[0]
    return (int(head), name) if head.isdigit() else (1 << 62, name)


def review_files(folder: str) -> list[str]:
    """The `.txt` files of `folder`, in order of review id."""
    names = [n for n in os.listdir(folder) if n.endswith(".txt")]
    return [os.path.join(folder, n) for n in sorted(names, key=_review_key)]


@registry.register_problem
class SentimentImdb(text_problems.Text2ClassProblem):
    """IMDB reviews -> neg / pos; train 25k, dev = the 25k test reviews."""

    resource: Resource = ACL_IMDB

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**13  # 8192
    max_samples_for_vocab = 25_000
    splits = (problem.SplitSpec(problem.TRAIN_SPLIT, 10), problem.SplitSpec(problem.DEV_SPLIT, 1))

    def class_labels(self, data_dir: str | None) -> list[str]:
        return list(CLASS_LABELS)

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, object]]:
        if split not in SPLIT_FOLDERS:
            raise ValueError(f"{self.name} has no {split!r} split; use train or dev.")
        base = SPLIT_FOLDERS[split]
        neg, pos = archive_members(self.resource, [f"{base}/neg", f"{base}/pos"], tmp_dir, mirror)
        labelled = [
            [(path, label) for path in review_files(folder)]
            for label, folder in ((1, pos), (0, neg))
        ]
        for item in itertools.chain.from_iterable(itertools.zip_longest(*labelled)):
            if item is None:
                continue
            path, label = item
            with open(path, encoding="utf-8", errors="replace") as f:
                text = clean_review(f.read())
            if text:
                yield {"inputs": text, "label": label}
