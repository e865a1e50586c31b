"""Tensor2Tensor's reversible tokenizer (its `tokenizer` module): text <-> tokens.

A token is a maximal run of alphanumeric characters (Unicode categories L* and N*) or of
other characters. `encode` drops a token that is one space between two alphanumeric
tokens, and `decode` puts that space back between two alphanumeric tokens, so
`decode(encode(text)) == text` for every string:

    encode("Dude - that's so cool.")
    -> ["Dude", " - ", "that", "'", "s", "so", "cool", "."]

This is the first stage of `SubwordTextEncoder` (t2t.data.encoders.subword_encoder) and of
the vocabularies Tensor2Tensor wrote (`vocab.PROBLEM.SIZE.subwords`). Imports no
TensorFlow.
"""

from __future__ import annotations

import collections
import csv
import functools
import glob
import unicodedata
from collections.abc import Iterable


@functools.lru_cache(maxsize=1 << 16)
def is_alphanumeric(c: str) -> bool:
    """Whether the character `c` is in a Unicode letter (L*) or number (N*) category."""
    return unicodedata.category(c)[0] in "LN"


def encode(text: str) -> list[str]:
    """`text` as its tokens (runs of alphanumeric / other characters; a single space
    between two alphanumeric tokens is dropped)."""
    if not text:
        return []
    tokens = []
    start = 0
    alnum = [is_alphanumeric(c) for c in text]
    for pos in range(1, len(text)):
        if alnum[pos] != alnum[pos - 1]:
            token = text[start:pos]
            if token != " " or start == 0:
                tokens.append(token)
            start = pos
    tokens.append(text[start:])
    return tokens


def decode(tokens: Iterable[str]) -> str:
    """The text of `tokens`, a space put back between two alphanumeric tokens."""
    out: list[str] = []
    previous_alnum = False
    for i, token in enumerate(tokens):
        alnum = bool(token) and is_alphanumeric(token[0])
        if i and previous_alnum and alnum:
            out.append(" ")
        out.append(token)
        previous_alnum = alnum
    return "".join(out)


def _lines(filepattern: str, max_lines: int | None, split_on_newlines: bool
           ) -> Iterable[str]:
    """Lines (or whole files) of the files matching `filepattern`, at most `max_lines`
    in all (None or 0: no limit)."""
    paths = sorted(glob.glob(filepattern))
    if not paths:
        raise FileNotFoundError(f"no file matches {filepattern!r}")
    count = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            if not split_on_newlines:
                yield f.read()
                count += 1
            else:
                for line in f:
                    yield line.strip()
                    count += 1
                    if max_lines and count >= max_lines:
                        return
        if max_lines and count >= max_lines:
            return


def corpus_token_counts(text_filepattern: str, corpus_max_lines: int | None,
                        split_on_newlines: bool = True) -> dict[str, int]:
    """Token -> count over the lines (or whole files) of the files matching the
    pattern, reading at most `corpus_max_lines` lines (Tensor2Tensor's signature)."""
    counts: collections.Counter[str] = collections.Counter()
    for text in _lines(text_filepattern, corpus_max_lines, split_on_newlines):
        counts.update(encode(text))
    return dict(counts)


def vocab_token_counts(text_filepattern: str, max_lines: int | None) -> dict[str, int]:
    """Token -> count read from "token,count" CSV lines (Tensor2Tensor's vocab files for
    `--vocab_filepattern`); a line that is not two fields with an integer count is an
    error naming it."""
    counts: dict[str, int] = {}
    paths = sorted(glob.glob(text_filepattern))
    if not paths:
        raise FileNotFoundError(f"no file matches {text_filepattern!r}")
    read = 0
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            for number, row in enumerate(csv.reader(f), 1):
                if max_lines and read >= max_lines:
                    return counts
                if len(row) != 2 or not row[1].strip().lstrip("-").isdigit():
                    raise ValueError(f"{path}:{number}: expected 'token,count', got {row!r}")
                counts[row[0]] = int(row[1])
                read += 1
    return counts
