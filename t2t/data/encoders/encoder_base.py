"""The text encoder interface and its id conventions: `TextEncoder` (also usable as is,
for texts of integers), `ByteTextEncoder`, and the id helpers `as_ids`/`strip_extraneous`.

Ids 0 (`<pad>`) and 1 (`<EOS>`) are reserved (see t2t.features); `encode` never
appends EOS. Imports no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t.features import EOS_ID, NUM_RESERVED_TOKENS, PAD_ID
from t2t.features import RESERVED_TOKENS as _RESERVED_TOKENS

UNK = "<UNK>"
RESERVED_TOKENS = list(_RESERVED_TOKENS)


def as_ids(ids: Any) -> list[int]:
    """A 1-D sequence (list, tuple, numpy array) of ids as a list of Python ints."""
    arr = np.asarray(ids)
    if arr.size == 0:
        return []
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D sequence of ids, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"expected integer ids, got dtype {arr.dtype}")
    return [int(i) for i in arr]


def reserved_byte_lengths(num_reserved_ids: int = NUM_RESERVED_TOKENS) -> list[int]:
    """Bytes of text the reserved ids stand for: EOS 1 (a newline), the others 0."""
    return [1 if i == EOS_ID else 0 for i in range(num_reserved_ids)]


def strip_extraneous(ids: Any) -> list[int]:
    """`ids` cut at the first EOS (EOS dropped) and without PAD ids."""
    out = []
    for i in as_ids(ids):
        if i == EOS_ID:
            break
        if i != PAD_ID:
            out.append(i)
    return out


class TextEncoder:
    """Base encoder, also usable as is: text "3 4" <-> ids [5, 6] (ints offset by reserved)."""

    type_name = "text"

    def __init__(self, num_reserved_ids: int = NUM_RESERVED_TOKENS):
        self._num_reserved_ids = num_reserved_ids

    @property
    def num_reserved_ids(self) -> int:
        """Ids below this are reserved tokens (PAD, EOS)."""
        return self._num_reserved_ids

    @property
    def vocab_size(self) -> int:
        """Number of ids; every id is in [0, vocab_size)."""
        raise NotImplementedError(f"{type(self).__name__} has no fixed vocab_size")

    def encode(self, s: str) -> list[int]:
        """Text -> ids (no EOS appended)."""
        return [int(w) + self._num_reserved_ids for w in s.split()]

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        """Ids -> text; `strip_extraneous` cuts at the first EOS and drops PAD."""
        return " ".join(self.decode_list(self._prepare(ids, strip_extraneous)))

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        """Ids -> one string per id (reserved ids give their token, e.g. "<EOS>")."""
        out = []
        for i in as_ids(ids):
            if 0 <= i < self._num_reserved_ids:
                out.append(RESERVED_TOKENS[i])
            else:
                out.append(str(i - self._num_reserved_ids))
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-able {"type": ..., params}; `build_encoder` rebuilds the encoder from it."""
        return {"type": self.type_name, "num_reserved_ids": self._num_reserved_ids}

    def token_byte_lengths(self) -> list[int]:
        """UTF-8 bytes of text that each id stands for (a list of vocab_size ints), for
        the bits_per_byte metric: PAD 0, EOS 1 (the line or document end it marks).

        Encoders that cannot say raise NotImplementedError (the trainer then skips
        bits_per_byte)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot say how many bytes of text its ids stand for "
            f"(no token_byte_lengths): bits_per_byte is not available."
        )

    @staticmethod
    def _prepare(ids: Any, strip: bool) -> list[int]:
        return strip_extraneous(ids) if strip else as_ids(ids)


class ByteTextEncoder(TextEncoder):
    """UTF-8 bytes: id = byte + 2, vocab_size 258."""

    type_name = "byte"

    def __init__(self) -> None:
        super().__init__(NUM_RESERVED_TOKENS)

    @property
    def vocab_size(self) -> int:
        return 256 + self._num_reserved_ids

    def encode(self, s: str) -> list[int]:
        n = self._num_reserved_ids
        return [b + n for b in s.encode("utf-8")]

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        n = self._num_reserved_ids
        parts = []
        for i in self._prepare(ids, strip_extraneous):
            if 0 <= i < n:
                parts.append(RESERVED_TOKENS[i].encode("utf-8"))
            elif n <= i < self.vocab_size:
                parts.append(bytes([i - n]))
            else:
                raise ValueError(f"id {i} is out of range [0, {self.vocab_size})")
        return b"".join(parts).decode("utf-8", errors="replace")

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        return [self.decode([i]) for i in as_ids(ids)]

    def token_byte_lengths(self) -> list[int]:
        """PAD 0, EOS 1, then 1 for each of the 256 byte ids."""
        return reserved_byte_lengths(self._num_reserved_ids) + [1] * 256

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name}
