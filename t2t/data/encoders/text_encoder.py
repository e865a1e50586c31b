"""Text encoders: strings <-> lists of integer ids, with Tensor2Tensor conventions.

Ids 0 and 1 are reserved in every encoder except `ClassLabelEncoder`: 0 is padding
(`<pad>`) and 1 is end of sequence (`<EOS>`). `encode` never appends EOS; callers do.
Each encoder's `describe()` returns a JSON-able dict that `build_encoder` turns back
into an equal encoder, so an exporter can rebuild the tokenizer elsewhere.

This module is the public entry point; the encoders live in sibling modules:
  encoder_base           TextEncoder, ByteTextEncoder, as_ids, strip_extraneous
  vocab_encoders         CharacterTextEncoder, TokenTextEncoder, ClassLabelEncoder
  sentencepiece_encoder  SentencePieceEncoder
  subword_encoder        SubwordTextEncoder (Tensor2Tensor's .subwords vocabularies)
  vocab_files            reading and atomically writing vocabulary files

This module imports no TensorFlow; `sentencepiece` is imported only when needed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from t2t.data.encoders.encoder_base import (  # noqa: F401
    RESERVED_TOKENS,
    UNK,
    ByteTextEncoder,
    TextEncoder,
    as_ids,
    strip_extraneous,
)
from t2t.data.encoders.sentencepiece_encoder import SENTENCEPIECE_UNK_ID, SentencePieceEncoder  # noqa: F401
from t2t.data.encoders.subword_encoder import SubwordTextEncoder  # noqa: F401
from t2t.data.encoders.vocab_encoders import (  # noqa: F401
    CharacterTextEncoder,
    ClassLabelEncoder,
    TaskTokenEncoder,
    TokenTextEncoder,
)
from t2t.data.encoders.vocab_files import DEFAULT_HINT, PathLike  # noqa: F401
from t2t.features import EOS, EOS_ID, NUM_RESERVED_TOKENS, PAD, PAD_ID  # noqa: F401

logger = logging.getLogger(__name__)

def to_unicode(s: str | bytes, ignore_errors: bool = False) -> str:
    """`s` as str: bytes are decoded as UTF-8 (invalid bytes dropped with `ignore_errors`,
    else UnicodeDecodeError). Tensor2Tensor's helper, for problem code that calls it."""
    if isinstance(s, str):
        return s
    return s.decode("utf-8", errors="ignore" if ignore_errors else "strict")


def to_unicode_ignore_errors(s: str | bytes) -> str:
    """`to_unicode(s, ignore_errors=True)` (Tensor2Tensor's helper)."""
    return to_unicode(s, ignore_errors=True)


def native_to_unicode(s: str | bytes) -> str:
    """`s` as str; undecodable bytes are dropped with a warning (Tensor2Tensor's helper:
    on Python 3 the native string is already str)."""
    try:
        return to_unicode(s)
    except UnicodeDecodeError:
        logger.warning("dropped bytes that are not UTF-8 from %r", s[:64])
        return to_unicode(s, ignore_errors=True)


def unicode_to_native(s: str) -> str:
    """`s` unchanged: Python 3's native strings are str (Tensor2Tensor's helper)."""
    return s


def strip_ids(ids: Any, ids_to_strip: Any) -> list[int]:
    """`ids` without the trailing ids that are in `ids_to_strip` (Tensor2Tensor's
    strip_ids: only the end is stripped; see strip_extraneous for cutting at EOS)."""
    out = as_ids(ids)
    strip = set(as_ids(list(ids_to_strip)))
    while out and out[-1] in strip:
        out.pop()
    return out


ENCODER_TYPES = ("text", "byte", "character", "token", "sentencepiece", "subword",
                 "class_label", "task_token")


def build_encoder(
    description: Mapping[str, Any], data_dir: PathLike, *, hint: str | None = None
) -> TextEncoder:
    """Rebuilds an encoder from its `describe()` output; model files are found in data_dir."""
    kind = description.get("type")
    if kind == "text":
        return TextEncoder(
            int(description.get("num_reserved_ids", NUM_RESERVED_TOKENS))
        )
    if kind == "byte":
        return ByteTextEncoder()
    if kind == "character":
        return CharacterTextEncoder(description["chars"])
    if kind == "token":
        return TokenTextEncoder(
            vocab_list=description["vocab"],
            replace_oov=description.get("replace_oov"),
            reverse=bool(description.get("reverse", False)),
        )
    if kind == "sentencepiece":
        path = os.path.join(os.fspath(data_dir), description["model_file"])
        return SentencePieceEncoder(path, hint=hint)
    if kind == "subword":
        return SubwordTextEncoder(os.path.join(os.fspath(data_dir), description["vocab_file"]))
    if kind == "class_label":
        return ClassLabelEncoder(description["class_labels"])
    if kind == "task_token":
        return TaskTokenEncoder(build_encoder(description["base"], data_dir, hint=hint),
                                description["task_id"], description["num_tasks"])
    raise ValueError(f"unknown encoder type {kind!r}; known: {ENCODER_TYPES}")
