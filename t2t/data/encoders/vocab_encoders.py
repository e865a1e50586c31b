"""Encoders with a fixed vocabulary: Unicode characters (`CharacterTextEncoder`),
whitespace-separated tokens (`TokenTextEncoder`) and class labels (`ClassLabelEncoder`).

Each saves its vocabulary as a text file (one entry per line, written atomically) and
loads it back. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import difflib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from t2t.data.encoders.encoder_base import (
    RESERVED_TOKENS,
    UNK,
    TextEncoder,
    as_ids,
    reserved_byte_lengths,
)
from t2t.data.encoders.vocab_files import PathLike, read_lines, write_lines
from t2t.features import EOS_ID, NUM_RESERVED_TOKENS

_CHAR_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", " ": "\\s"}
_CHAR_UNESCAPES = {v: k for k, v in _CHAR_ESCAPES.items()}


def _escape_char(c: str) -> str:
    """One character as a one-line, whitespace-free string (inverse: `_unescape_char`)."""
    if c in _CHAR_ESCAPES:
        return _CHAR_ESCAPES[c]
    if c.isprintable() and not c.isspace():
        return c
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def _unescape_char(line: str) -> str:
    if line in _CHAR_UNESCAPES:
        return _CHAR_UNESCAPES[line]
    if (
        len(line) == 6
        and line.startswith("\\u")
        or len(line) == 10
        and line.startswith("\\U")
    ):
        return line.encode("ascii").decode("unicode_escape")
    if len(line) != 1:
        raise ValueError(f"bad character vocabulary line {line!r}")
    return line


class CharacterTextEncoder(TextEncoder):
    """Unicode characters from a fixed vocabulary; ids: 0 PAD, 1 EOS, 2 UNK, 3.. characters."""

    type_name = "character"
    UNK_ID = NUM_RESERVED_TOKENS

    def __init__(self, chars: Iterable[str]):
        super().__init__(NUM_RESERVED_TOKENS)
        self._chars = list(chars)
        offset = self.UNK_ID + 1
        self._char_to_id = {c: i + offset for i, c in enumerate(self._chars)}
        if any(len(c) != 1 for c in self._chars):
            raise ValueError("every vocabulary entry must be a single character")
        if len(self._char_to_id) != len(self._chars):
            raise ValueError("duplicate characters in the vocabulary")

    @classmethod
    def build_from_generator(
        cls, texts: Iterable[str], max_chars: int | None = None
    ) -> CharacterTextEncoder:
        """Keeps the `max_chars` most frequent characters (ties: lower code point first)."""
        counts: collections.Counter[str] = collections.Counter()
        for text in texts:
            counts.update(text)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if max_chars is not None:
            ranked = ranked[:max_chars]
        return cls(c for c, _ in ranked)

    @property
    def chars(self) -> list[str]:
        """The vocabulary characters, in id order (ids start at 3)."""
        return list(self._chars)

    @property
    def vocab_size(self) -> int:
        return self.UNK_ID + 1 + len(self._chars)

    def encode(self, s: str) -> list[int]:
        get = self._char_to_id.get
        return [get(c, self.UNK_ID) for c in s]

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        return "".join(self.decode_list(self._prepare(ids, strip_extraneous)))

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        out = []
        for i in as_ids(ids):
            if 0 <= i < self._num_reserved_ids:
                out.append(RESERVED_TOKENS[i])
            elif i == self.UNK_ID:
                out.append(UNK)
            elif self.UNK_ID < i < self.vocab_size:
                out.append(self._chars[i - self.UNK_ID - 1])
            else:
                raise ValueError(f"id {i} is out of range [0, {self.vocab_size})")
        return out

    def token_byte_lengths(self) -> list[int]:
        """PAD 0, EOS 1, UNK 0 (its character is unknown), then each character's UTF-8
        length."""
        return [*reserved_byte_lengths(self._num_reserved_ids), 0,
                *(len(c.encode("utf-8")) for c in self._chars)]

    def save(self, path: PathLike) -> None:
        """Writes reserved tokens, then one (escaped) character per line, atomically."""
        write_lines(
            path, [*RESERVED_TOKENS, UNK, *(_escape_char(c) for c in self._chars)]
        )

    @classmethod
    def load(cls, path: PathLike, *, hint: str | None = None) -> CharacterTextEncoder:
        """Reads a file written by `save`."""
        lines = read_lines(path, "character vocabulary", hint)
        header = [*RESERVED_TOKENS, UNK]
        if lines[: len(header)] != header:
            raise ValueError(f"{os.fspath(path)!r} does not start with {header}")
        return cls(_unescape_char(line) for line in lines[len(header) :])

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "chars": self.chars}


class TokenTextEncoder(TextEncoder):
    """Whitespace-separated tokens from a fixed vocabulary (e.g. "1 0 1 1" -> [4, 3, 4, 4])."""

    type_name = "token"

    def __init__(
        self,
        vocab: PathLike | Sequence[str] | None = None,
        reverse: bool = False,
        vocab_list: Sequence[str] | None = None,
        replace_oov: str | None = None,
        num_reserved_ids: int = NUM_RESERVED_TOKENS,
        *,
        hint: str | None = None,
    ):
        """`vocab`: a list of tokens, or a file path (as in T2T, `vocab_list=` also works;
        the positional order is T2T's: vocab_filename, reverse, vocab_list, replace_oov,
        num_reserved_ids, which must be 2: <pad> and <EOS>).

        A file has one token per line, reserved tokens first (as `save` writes); a list
        gets the reserved tokens put in front. `replace_oov`: a token that stands in for
        unknown ones (appended to a list if missing); without it unknown tokens raise
        ValueError. `reverse`: token order is reversed in encode and decode.
        """
        if num_reserved_ids != NUM_RESERVED_TOKENS:
            raise ValueError(f"num_reserved_ids={num_reserved_ids}: t2t's vocabularies "
                             f"reserve {NUM_RESERVED_TOKENS} ids ({RESERVED_TOKENS}).")
        super().__init__(NUM_RESERVED_TOKENS)
        if (vocab is None) == (vocab_list is None):
            raise ValueError("give exactly one of vocab and vocab_list")
        if isinstance(vocab, str | os.PathLike):
            tokens = read_lines(vocab, "token vocabulary", hint)
            if tokens[:NUM_RESERVED_TOKENS] != RESERVED_TOKENS:
                raise ValueError(
                    f"{os.fspath(vocab)!r} must start with {RESERVED_TOKENS}"
                )
        else:
            given = vocab_list if vocab is None else vocab
            rest = [t for t in given if t not in RESERVED_TOKENS]  # type: ignore[union-attr]
            if replace_oov is not None and replace_oov not in rest:
                rest.append(replace_oov)
            tokens = [*RESERVED_TOKENS, *rest]
        bad = [t for t in tokens if not t or any(c.isspace() for c in t)]
        if bad:
            raise ValueError(
                f"tokens must be non-empty and without whitespace: {bad[:5]}"
            )
        self._id_to_token = tokens
        self._token_to_id = {t: i for i, t in enumerate(tokens)}
        if len(self._token_to_id) != len(tokens):
            raise ValueError("duplicate tokens in the vocabulary")
        if replace_oov is not None and replace_oov not in self._token_to_id:
            raise ValueError(
                f"replace_oov token {replace_oov!r} is not in the vocabulary"
            )
        self._replace_oov = replace_oov
        self._reverse = reverse

    @classmethod
    def load(cls, path: PathLike, **kwargs: Any) -> TokenTextEncoder:
        """Reads a vocabulary file written by `save` (kwargs as for the constructor)."""
        return cls(path, **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order, reserved ones included."""
        return list(self._id_to_token)

    def encode(self, s: str) -> list[int]:
        tokens = s.split()
        if self._replace_oov is not None:
            tokens = [
                t if t in self._token_to_id else self._replace_oov for t in tokens
            ]
        try:
            ids = [self._token_to_id[t] for t in tokens]
        except KeyError as e:
            raise ValueError(f"token {e.args[0]!r} is not in the vocabulary") from None
        return ids[::-1] if self._reverse else ids

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        seq = as_ids(ids)
        seq = seq[::-1] if self._reverse else seq
        n = len(self._id_to_token)
        return [self._id_to_token[i] if 0 <= i < n else f"ID_{i}" for i in seq]

    def token_byte_lengths(self) -> list[int]:
        """PAD 0, then each token's UTF-8 length plus 1 (the space that separates it
        from the next; the last word's stands for the line end, so EOS counts 0): a
        line's ids + EOS sum to its UTF-8 length + 1, as for the other encoders."""
        reserved = reserved_byte_lengths(self._num_reserved_ids)
        if len(reserved) > EOS_ID:
            reserved[EOS_ID] = 0
        rest = self._id_to_token[len(reserved):]
        return reserved + [len(token.encode("utf-8")) + 1 for token in rest]

    def save(self, path: PathLike) -> None:
        """Writes all tokens (reserved ones first), one per line, atomically."""
        write_lines(path, self._id_to_token)

    store_to_file = save  # Tensor2Tensor's name.

    def describe(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "vocab": self.tokens,
            "replace_oov": self._replace_oov,
            "reverse": self._reverse,
        }


class ClassLabelEncoder(TextEncoder):
    """Class label strings <-> ints in [0, number of labels); no reserved ids."""

    type_name = "class_label"

    def __init__(
        self,
        class_labels: Sequence[str] | None = None,
        class_labels_fname: PathLike | None = None,
        *,
        hint: str | None = None,
    ):
        """Give the labels as a list or as a file with one label per line."""
        super().__init__(num_reserved_ids=0)
        if (class_labels is None) == (class_labels_fname is None):
            raise ValueError("give exactly one of class_labels and class_labels_fname")
        if class_labels_fname is not None:
            class_labels = read_lines(class_labels_fname, "class label file", hint)
        self._labels = list(class_labels)  # type: ignore[arg-type]
        self._label_to_id = {label: i for i, label in enumerate(self._labels)}
        if len(self._label_to_id) != len(self._labels):
            raise ValueError("duplicate class labels")

    @classmethod
    def load(cls, path: PathLike, *, hint: str | None = None) -> ClassLabelEncoder:
        """Reads a file with one label per line."""
        return cls(class_labels_fname=path, hint=hint)

    @property
    def class_labels(self) -> list[str]:
        """The labels in id order."""
        return list(self._labels)

    @property
    def vocab_size(self) -> int:
        return len(self._labels)

    def encode(self, s: str) -> int:  # type: ignore[override]
        """Label -> its id; unknown labels raise ValueError naming close matches."""
        try:
            return self._label_to_id[s]
        except KeyError:
            close = difflib.get_close_matches(s, self._labels, n=3)
            did = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"unknown class label {s!r}{did}") from None

    def decode(self, ids: Any, strip_extraneous: bool = False) -> str:
        """An id (int, 0-d/1-element array or 1-element list) -> its label."""
        del strip_extraneous  # Labels have no padding or EOS.
        seq = as_ids(np.squeeze(np.asarray(ids)))
        if len(seq) != 1:
            raise ValueError(f"expected one class id, got {seq}")
        return self.decode_list(seq)[0]

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        n = len(self._labels)
        out = []
        for i in as_ids(ids):
            if not 0 <= i < n:
                raise ValueError(f"class id {i} is out of range [0, {n})")
            out.append(self._labels[i])
        return out

    def save(self, path: PathLike) -> None:
        """Writes one label per line, atomically."""
        if any("\n" in label or "\r" in label for label in self._labels):
            raise ValueError(
                "class labels with line breaks cannot be saved one per line"
            )
        write_lines(path, self._labels)

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "class_labels": self.class_labels}


class TaskTokenEncoder(TextEncoder):
    """A multi-problem's shared encoder with one task's token in front of what it
    encodes (and dropped from what it decodes): what decoding that task uses
    (t2t.data.multi_problem)."""

    type_name = "task_token"

    def __init__(self, base: Any, task_id: int, num_tasks: int):
        super().__init__(base.num_reserved_ids)
        self.base, self.task_id, self.num_tasks = base, task_id, num_tasks

    @property
    def vocab_size(self) -> int:
        return self.base.vocab_size + self.num_tasks

    def encode(self, s: str) -> list[int]:
        return [self.task_id, *self.base.encode(s)]

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        return self.base.decode([i for i in ids if i < self.base.vocab_size], strip_extraneous)

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        return self.base.decode_list([i for i in ids if i < self.base.vocab_size])

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "base": self.base.describe(), "task_id": self.task_id,
                "num_tasks": self.num_tasks, "shared_vocab_size": self.base.vocab_size}
