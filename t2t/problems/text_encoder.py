"""Text encoders: strings <-> lists of integer ids, with Tensor2Tensor conventions.

Ids 0 and 1 are reserved in every encoder except `ClassLabelEncoder`: 0 is padding
(`<pad>`) and 1 is end of sequence (`<EOS>`). `encode` never appends EOS; callers do.
Each encoder's `describe()` returns a JSON-able dict that `build_encoder` turns back
into an equal encoder, so an exporter can rebuild the tokenizer elsewhere.

This module imports no TensorFlow; `sentencepiece` is imported only when needed.
"""

from __future__ import annotations

import collections
import difflib
import io
import itertools
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

PAD = "<pad>"
EOS = "<EOS>"
UNK = "<UNK>"
RESERVED_TOKENS = [PAD, EOS]
NUM_RESERVED_TOKENS = len(RESERVED_TOKENS)
PAD_ID = RESERVED_TOKENS.index(PAD)  # 0
EOS_ID = RESERVED_TOKENS.index(EOS)  # 1
SENTENCEPIECE_UNK_ID = 2

DEFAULT_HINT = "run `t2t-datagen --problem=... --data_dir=...` first"

PathLike = str | os.PathLike[str]


def _missing(path: PathLike, what: str, hint: str | None) -> FileNotFoundError:
    """The error for a vocabulary/model file that is not there."""
    return FileNotFoundError(
        f"{what} not found: {os.fspath(path)!r}; {hint or DEFAULT_HINT}."
    )


def _atomic_write(path: PathLike, data: bytes) -> None:
    """Writes `data` to `path` via a temp file in the same folder and a rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _write_lines(path: PathLike, lines: Iterable[str]) -> None:
    _atomic_write(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))


def _read_lines(path: PathLike, what: str, hint: str | None) -> list[str]:
    if not os.path.isfile(path):
        raise _missing(path, what, hint)
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


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

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name}


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

    def save(self, path: PathLike) -> None:
        """Writes reserved tokens, then one (escaped) character per line, atomically."""
        _write_lines(
            path, [*RESERVED_TOKENS, UNK, *(_escape_char(c) for c in self._chars)]
        )

    @classmethod
    def load(cls, path: PathLike, *, hint: str | None = None) -> CharacterTextEncoder:
        """Reads a file written by `save`."""
        lines = _read_lines(path, "character vocabulary", hint)
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
        *,
        vocab_list: Sequence[str] | None = None,
        replace_oov: str | None = None,
        reverse: bool = False,
        hint: str | None = None,
    ):
        """`vocab`: a list of tokens, or a file path (as in T2T, `vocab_list=` also works).

        A file has one token per line, reserved tokens first (as `save` writes); a list
        gets the reserved tokens put in front. `replace_oov`: a token that stands in for
        unknown ones (appended to a list if missing); without it unknown tokens raise
        ValueError. `reverse`: token order is reversed in encode and decode.
        """
        super().__init__(NUM_RESERVED_TOKENS)
        if (vocab is None) == (vocab_list is None):
            raise ValueError("give exactly one of vocab and vocab_list")
        if isinstance(vocab, str | os.PathLike):
            tokens = _read_lines(vocab, "token vocabulary", hint)
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

    def save(self, path: PathLike) -> None:
        """Writes all tokens (reserved ones first), one per line, atomically."""
        _write_lines(path, self._id_to_token)

    store_to_file = save  # Tensor2Tensor's name.

    def describe(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "vocab": self.tokens,
            "replace_oov": self._replace_oov,
            "reverse": self._reverse,
        }


class SentencePieceEncoder(TextEncoder):
    """A SentencePiece model; ids 0 PAD, 1 EOS, 2 UNK as trained by `train`."""

    type_name = "sentencepiece"

    def __init__(
        self,
        model_file: PathLike | None = None,
        *,
        model_proto: bytes | None = None,
        hint: str | None = None,
    ):
        """Loads `model_file` (a `.model` file) or a serialized `model_proto`."""
        super().__init__(NUM_RESERVED_TOKENS)
        if (model_file is None) == (model_proto is None):
            raise ValueError("give exactly one of model_file and model_proto")
        if model_file is not None:
            if not os.path.isfile(model_file):
                raise _missing(model_file, "SentencePiece model", hint)
            with open(model_file, "rb") as f:
                model_proto = f.read()
        self.model_file = None if model_file is None else os.fspath(model_file)
        self.model_proto: bytes = model_proto  # type: ignore[assignment]
        import sentencepiece as spm

        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def load(cls, path: PathLike, *, hint: str | None = None) -> SentencePieceEncoder:
        """Loads a `.model` file."""
        return cls(path, hint=hint)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        model_prefix: PathLike,
        vocab_size: int,
        *,
        model_type: str = "unigram",
        max_samples: int = 1_000_000,
        character_coverage: float = 1.0,
        seed_sentencepiece_size: int = 1_000_000,
        max_sentence_length: int = 4192,
        num_threads: int = 1,
        user_defined_symbols: Sequence[str] = (),
        extra_options: Mapping[str, Any] | None = None,
    ) -> SentencePieceEncoder:
        """Trains on at most `max_samples` texts and writes `{model_prefix}.model/.vocab`.

        `vocab_size` is an upper bound: a small corpus gives fewer pieces (logged).
        Same corpus and options (including `num_threads`) give identical model bytes.
        Sentences longer than `max_sentence_length` bytes are skipped by SentencePiece.
        """
        import sentencepiece as spm

        prefix = os.fspath(model_prefix)
        pulled = 0

        def sentences() -> Iterable[str]:
            nonlocal pulled
            for text in itertools.islice(texts, max_samples):
                pulled += 1
                yield text

        writer = io.BytesIO()
        options: dict[str, Any] = {
            "model_type": model_type,
            "vocab_size": vocab_size,
            "character_coverage": character_coverage,
            "seed_sentencepiece_size": seed_sentencepiece_size,
            "max_sentence_length": max_sentence_length,
            "num_threads": num_threads,
            "pad_id": PAD_ID,
            "eos_id": EOS_ID,
            "unk_id": SENTENCEPIECE_UNK_ID,
            "bos_id": -1,
            "pad_piece": PAD,
            "eos_piece": EOS,
            "unk_piece": UNK,
            "hard_vocab_limit": False,
            "minloglevel": 1,
        }
        if user_defined_symbols:
            options["user_defined_symbols"] = list(user_defined_symbols)
        options.update(extra_options or {})
        # model_writer keeps the output path out of the model proto (it would otherwise
        # be recorded in trainer_spec.model_prefix and make the bytes path-dependent).
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences()), model_writer=writer, **options
            )
        except RuntimeError as e:
            if pulled == 0:
                raise ValueError("no texts to train SentencePiece on") from e
            raise
        encoder = cls(model_proto=writer.getvalue())
        size = encoder.vocab_size
        if size != vocab_size:
            logger.warning(
                "SentencePiece vocabulary has %d pieces (asked for %d)",
                size,
                vocab_size,
            )
        logger.info(
            "Trained SentencePiece (%d pieces) on %d texts -> %s", size, pulled, prefix
        )
        encoder.save(prefix + ".model", vocab_file=prefix + ".vocab")
        return encoder

    @property
    def vocab_size(self) -> int:
        return int(self._sp.get_piece_size())

    def encode(self, s: str) -> list[int]:
        return list(self._sp.encode(s, out_type=int))

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        seq = self._prepare(ids, strip_extraneous)
        self._check_range(seq)
        return str(self._sp.decode(seq))

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        seq = as_ids(ids)
        self._check_range(seq)
        return [str(self._sp.id_to_piece(i)) for i in seq]

    def _check_range(self, ids: list[int]) -> None:
        n = self.vocab_size
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"ids {bad[:5]} are out of range [0, {n})")

    def save(self, path: PathLike, *, vocab_file: PathLike | None = None) -> None:
        """Writes the model (and optionally a `piece<TAB>score` vocab file) atomically."""
        if vocab_file is not None:
            lines = (
                f"{self._sp.id_to_piece(i)}\t{self._sp.get_score(i):g}"
                for i in range(self.vocab_size)
            )
            _write_lines(vocab_file, lines)
        _atomic_write(path, self.model_proto)
        self.model_file = os.fspath(path)

    def describe(self) -> dict[str, Any]:
        """Names the model file by base name; `build_encoder` finds it in data_dir."""
        if self.model_file is None:
            raise ValueError(
                "save() the SentencePiece model to a file before describe()"
            )
        return {
            "type": self.type_name,
            "model_file": os.path.basename(self.model_file),
            "vocab_size": self.vocab_size,
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
            class_labels = _read_lines(class_labels_fname, "class label file", hint)
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
        _write_lines(path, self._labels)

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "class_labels": self.class_labels}


ENCODER_TYPES = ("text", "byte", "character", "token", "sentencepiece", "class_label")


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
    if kind == "class_label":
        return ClassLabelEncoder(description["class_labels"])
    raise ValueError(f"unknown encoder type {kind!r}; known: {ENCODER_TYPES}")
