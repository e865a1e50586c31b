"""Real text at real sentence lengths for the benchmarks, made offline.

The docstrings of the running interpreter's standard library and of the installed
packages (TensorFlow's, NumPy's, Keras's, ...: real English prose, ~30 MB in the
project's venv) are split into sentences; each sentence and the same sentence with its
words in reverse order make a (source, target) pair, both sides tokenized with a
SentencePiece model of V pieces trained on the sentences. Lengths are those of real
prose: ~20 pieces on average, 90th percentile ~35, a long tail past 200 (cut at
`max_length` by the pipeline, as a user's hparams would). As in translation, a target is
about as long as its source (here the same number of words, a few pieces more or less);
pairing unrelated sentences instead would pad each batch to the longer of two unrelated
lengths, which no translation corpus does.

    sentences = docstring_sentences(250_000)
    problem = make_text_problem(8192, data_dir)   # writes TFRecords + the vocabulary
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
from collections.abc import Iterator
from typing import Any

import numpy as np

from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder
from t2t.problems.algorithmic_tasks import algorithmic
from t2t.problems.text import text_files

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_WORDS = 3
SENTENCE_LIMIT = 250_000  # enough text for 32k pieces; reading all of a venv takes ~60 s


@functools.lru_cache(maxsize=2)
def docstring_sentences(limit: int = SENTENCE_LIMIT) -> tuple[str, ...]:
    """The distinct sentences (>= MIN_WORDS words, whitespace collapsed) of the stdlib's
    docstrings, then the installed packages', in reading order, at most `limit`."""
    seen: dict[str, None] = {}
    roots = dict.fromkeys([text_files.stdlib_dir(), sysconfig.get_paths()["purelib"]])
    for root in roots:
        for path in text_files.stdlib_modules(root):
            for block in re.split(r"\n\s*\n", text_files.module_text(path) or ""):
                for sentence in _SENTENCE_END.split(" ".join(block.split())):
                    if len(sentence.split()) >= MIN_WORDS:
                        seen.setdefault(sentence, None)
                        if len(seen) >= limit:
                            return tuple(seen)
    return tuple(seen)


class DocstringPairs(algorithmic.AlgorithmicProblem):
    """(sentence, its words reversed) of real docstrings, as SentencePiece ids of a
    `vocab_size`-piece model kept in data_dir; EOS-terminated."""

    registered_name = "bench_docstring_pairs"
    train_shards = 1
    dev_size = 64

    def __init__(self, vocab_size: int = 8192, limit: int = SENTENCE_LIMIT):
        super().__init__()
        self.target_vocab_size = vocab_size
        self.limit = limit
        self.encoder: SentencePieceEncoder | None = None

    def dataset_filename(self) -> str:
        return f"{self.registered_name}_{self.target_vocab_size}"

    def vocab_path(self, data_dir: str) -> str:
        return os.path.join(data_dir, f"{self.dataset_filename()}.model")

    def load_encoder(self, data_dir: str) -> SentencePieceEncoder:
        """The SentencePiece model of data_dir, trained there on first use."""
        if self.encoder is None:
            path = self.vocab_path(data_dir)
            if not os.path.exists(path):
                os.makedirs(data_dir, exist_ok=True)
                SentencePieceEncoder.train(list(docstring_sentences(self.limit)), path[:-len(".model")],
                                           self.target_vocab_size, num_threads=2)
            self.encoder = SentencePieceEncoder.load(path)
        return self.encoder

    def pairs(self) -> Iterator[tuple[str, str]]:
        for sentence in docstring_sentences(self.limit):
            yield sentence, " ".join(reversed(sentence.split()))

    def num_examples(self, split: str) -> int:
        pairs = len(docstring_sentences(self.limit))
        return pairs - self.dev_size if split == problem_lib.TRAIN_SPLIT else self.dev_size

    def generate_examples(self, data_dir: str, tmp_dir: str, split: str, *,
                          mirror: str | None = None) -> Iterator[dict[str, Any]]:
        encoder = self.load_encoder(data_dir)
        # Dev: the first dev_size pairs; train: the rest, so the two never share a pair.
        train = split == problem_lib.TRAIN_SPLIT
        for index, (source, target) in enumerate(self.pairs()):
            if (index >= self.dev_size) == train:
                yield {"inputs": encoder.encode(source) + [text_encoder.EOS_ID],
                       "targets": encoder.encode(target) + [text_encoder.EOS_ID]}

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        encoder = self.load_encoder(data_dir) if data_dir else None
        return {"inputs": encoder, "targets": encoder}

    def problem_hparams(self, data_dir: str | None) -> problem_lib.ProblemHParams:
        # The model's vocabulary is the one asked for; SentencePiece gives exactly that
        # many pieces on this corpus (checked in make_text_problem).
        vocab = self.target_vocab_size
        return problem_lib.ProblemHParams(
            modality={"inputs": problem_lib.Modality.SYMBOL,
                      "targets": problem_lib.Modality.SYMBOL},
            vocab_size={"inputs": vocab, "targets": vocab},
            input_space_id=problem_lib.SpaceID.EN_TOK,
            target_space_id=problem_lib.SpaceID.EN_TOK,
        )


def make_text_problem(vocab_size: int, data_dir: str, limit: int = SENTENCE_LIMIT
                      ) -> DocstringPairs:
    """The docstring-pairs problem at `vocab_size` pieces, its data written to data_dir
    unless already there. Fails if the corpus cannot give that many pieces."""
    problem = DocstringPairs(vocab_size, limit)
    problem.generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    pieces = problem.load_encoder(data_dir).vocab_size
    if pieces != vocab_size:
        raise ValueError(
            f"SentencePiece made {pieces} pieces of the docstrings, not {vocab_size}: the "
            f"installed packages hold too little text; raise limit ({limit}) or use a "
            "smaller vocabulary.")
    return problem


def length_summary(lengths: np.ndarray) -> str:
    """'mean M, p50 A, p90 B, max C' of per-example token counts."""
    return (f"mean {lengths.mean():.1f}, p50 {np.percentile(lengths, 50):.0f}, "
            f"p90 {np.percentile(lengths, 90):.0f}, max {lengths.max()}")
