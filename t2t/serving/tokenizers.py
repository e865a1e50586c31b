"""In-graph versions of the text encoders (t2t/problems/text_encoder.py) for SavedModels.

    tokenizer = tokenizers.from_encoder(problem.feature_encoders(data_dir)["inputs"])
    ids = tokenizer.encode_for_model(tf.constant(["1 0 1"]))   # int32 [B, L], EOS appended
    texts = tokenizer.decode(outputs)                          # string [B]

Each tokenizer is a `tf.Module` built from an encoder's `describe()` (SentencePiece: its
model bytes) and uses only TensorFlow ops, except SentencePiece, which uses
`tensorflow_text` (a process that loads such a SavedModel must `import tensorflow_text`
first). On valid UTF-8 text each one gives exactly the ids and texts of its Python
encoder. Where the Python encoder raises, the in-graph one does what t2t's Decoder does
with the error: a line with a token outside a token vocabulary (and no `replace_oov`) or
a word that is not an integer (plain text encoder) encodes as an empty input; ids
outside the vocabulary decode as "ID_<id>" (token), "" (character, class label) or are
dropped (byte, SentencePiece).

Differences on unusual input, documented rather than hidden: `tf.strings.split` splits on
ASCII whitespace only (Python's `str.split` also on Unicode spaces such as U+00A0);
invalid UTF-8 is replaced by U+FFFD per ICU's rules, which may count replacement
characters differently from Python's `errors="replace"`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from t2t.features import EOS_ID, PAD_ID, RESERVED_TOKENS  # noqa: F401  (re-exported)
from t2t.problems.text_encoder import UNK  # the encoders' unknown-token text, in graph


# ------------------------------------------------------------------ helpers
def valid_utf8(texts: tf.Tensor) -> tf.Tensor:
    """Strings with invalid UTF-8 replaced by U+FFFD (as t2t's Decoder reads lines)."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def strip_ids(ids: tf.Tensor) -> tf.RaggedTensor:
    """[B, L] ids -> ragged [B, None]: each row cut at its first EOS, PAD ids dropped."""
    ids = tf.convert_to_tensor(ids)
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
    return tf.ragged.boolean_mask(ids, before_eos & tf.not_equal(ids, PAD_ID))


def append_eos(ids: tf.RaggedTensor, max_length: int = 0) -> tf.Tensor:
    """Ragged ids [B, None] -> int32 [B, L]: cut to max_length (if > 0), EOS appended,
    0-padded to the longest row (as t2t's Decoder prepares its inputs)."""
    ids = tf.cast(ids, tf.int32)
    if max_length > 0:
        ids = ids[:, :max_length]
    batch = ids.nrows()
    eos = tf.RaggedTensor.from_row_lengths(
        tf.fill([batch], tf.constant(EOS_ID, tf.int32)), tf.ones([batch], ids.row_splits.dtype)
    )
    return tf.concat([ids, eos], axis=1).to_tensor(PAD_ID)


def _empty_rows(ragged: tf.RaggedTensor, empty: tf.Tensor) -> tf.RaggedTensor:
    """`ragged` with the rows where `empty` is True emptied."""
    lengths = ragged.row_lengths()
    keep = tf.repeat(tf.logical_not(empty), lengths)
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ragged.flat_values, keep),
        tf.where(empty, tf.zeros_like(lengths), lengths),
    )


def _reverse_rows(ragged: tf.RaggedTensor) -> tf.RaggedTensor:
    lengths = ragged.row_lengths()
    default = "" if ragged.dtype == tf.string else 0
    padded = ragged.to_tensor(default)
    reversed_ = tf.reverse_sequence(padded, lengths, seq_axis=1, batch_axis=0)
    return tf.RaggedTensor.from_tensor(reversed_, lengths=lengths)


def _gather_or(vocab: tf.Tensor, ids: tf.Tensor, fallback: tf.Tensor) -> tf.Tensor:
    """vocab[ids] where ids are in range, else `fallback` (same shape as ids)."""
    size = tf.shape(vocab, out_type=ids.dtype)[0]
    in_range = (ids >= 0) & (ids < size)
    gathered = tf.gather(vocab, tf.clip_by_value(ids, 0, tf.maximum(size - 1, 0)))
    return tf.where(in_range, gathered, fallback)


def _join_rows(pieces: tf.RaggedTensor, separator: str) -> tf.Tensor:
    return tf.strings.reduce_join(pieces, axis=1, separator=separator)


# ----------------------------------------------------------------- tokenizers
class InGraphTokenizer(tf.Module):
    """Base class: string [B] <-> int32 ids, with t2t's PAD=0 / EOS=1 conventions."""

    type_name = "base"
    needs_tensorflow_text = False

    def encode(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """string [B] -> ragged int32 [B, None] (no EOS), like the encoder's encode."""
        raise NotImplementedError

    def decode(self, ids: tf.Tensor) -> tf.Tensor:
        """int [B, L] -> string [B], each row cut at EOS with PAD dropped (the encoder's
        decode(ids, strip_extraneous=True))."""
        raise NotImplementedError

    def encode_for_model(self, texts: tf.Tensor, max_length: int = 0) -> tf.Tensor:
        """string [B] -> int32 [B, L]: ids cut to max_length (if > 0), EOS appended."""
        return append_eos(self.encode(texts), max_length)


class TextTokenizer(InGraphTokenizer):
    """Integers separated by spaces, offset by the reserved ids ("3 4" <-> [5, 6])."""

    type_name = "text"

    def __init__(self, num_reserved_ids: int = len(RESERVED_TOKENS)):
        super().__init__(name="text_tokenizer")
        self.num_reserved_ids = int(num_reserved_ids)

    def encode(self, texts):
        words = tf.strings.split(texts)
        valid = tf.strings.regex_full_match(words.flat_values, r"[+-]?[0-9]+")
        numbers = tf.strings.to_number(
            tf.where(valid, words.flat_values, "0"), out_type=tf.int64
        )
        ids = words.with_flat_values(tf.cast(numbers + self.num_reserved_ids, tf.int32))
        bad = tf.reduce_any(words.with_flat_values(tf.logical_not(valid)), axis=1)
        return _empty_rows(ids, bad)

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int64))
        values = stripped.flat_values
        n = self.num_reserved_ids
        reserved = tf.constant(list(RESERVED_TOKENS)[:n] or [""])
        numbers = tf.strings.as_string(values - n)
        words = tf.where(values < n, _gather_or(reserved, values, numbers), numbers)
        return _join_rows(stripped.with_flat_values(words), " ")


_BYTES = [bytes([b]) for b in range(256)]


class ByteTokenizer(InGraphTokenizer):
    """UTF-8 bytes: id = byte + 2."""

    type_name = "byte"

    def __init__(self):
        super().__init__(name="byte_tokenizer")

    def encode(self, texts):
        pieces = tf.strings.bytes_split(texts)
        values = tf.reshape(tf.io.decode_raw(pieces.flat_values, tf.uint8), [-1])
        return pieces.with_flat_values(tf.cast(values, tf.int32) + len(RESERVED_TOKENS))

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int32))
        values = stripped.flat_values - len(RESERVED_TOKENS)
        keep = (values >= 0) & (values < 256)
        single = tf.gather(_BYTES, tf.boolean_mask(values, keep))
        rows = tf.RaggedTensor.from_row_lengths(
            single,
            tf.reduce_sum(tf.cast(stripped.with_flat_values(keep), tf.int64), axis=1),
        )
        return valid_utf8(_join_rows(rows, ""))


class CharacterTokenizer(InGraphTokenizer):
    """Unicode characters from a fixed vocabulary; 0 PAD, 1 EOS, 2 UNK, 3.. characters."""

    type_name = "character"
    UNK_ID = len(RESERVED_TOKENS)

    def __init__(self, chars: Sequence[str]):
        super().__init__(name="character_tokenizer")
        chars = list(chars)
        self.vocab = tf.constant([*RESERVED_TOKENS, UNK, *chars])
        offset = self.UNK_ID + 1
        keys = chars or ["\x00placeholder"]
        values = list(range(offset, offset + len(chars))) or [self.UNK_ID]
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant(values, tf.int32)
            ),
            default_value=self.UNK_ID,
        )

    def encode(self, texts):
        chars = tf.strings.unicode_split(texts, "UTF-8", errors="replace")
        return chars.with_flat_values(self.table.lookup(chars.flat_values))

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int32))
        values = stripped.flat_values
        chars = _gather_or(self.vocab, values, tf.fill(tf.shape(values), ""))
        return _join_rows(stripped.with_flat_values(chars), "")


class TokenTokenizer(InGraphTokenizer):
    """Space-separated tokens from a fixed vocabulary (e.g. "1 0 1" -> [3, 2, 3])."""

    type_name = "token"

    def __init__(self, vocab: Sequence[str], replace_oov: str | None = None,
                 reverse: bool = False):
        super().__init__(name="token_tokenizer")
        vocab = list(vocab)
        self.vocab = tf.constant(vocab)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocab), tf.range(len(vocab), dtype=tf.int32)
            ),
            default_value=-1,
        )
        self.oov_id = vocab.index(replace_oov) if replace_oov is not None else -1
        self.reverse = bool(reverse)

    def encode(self, texts):
        tokens = tf.strings.split(texts)
        ids = tokens.with_flat_values(self.table.lookup(tokens.flat_values))
        if self.oov_id >= 0:
            ids = ids.with_flat_values(
                tf.where(ids.flat_values < 0, self.oov_id, ids.flat_values)
            )
        else:  # as t2t's Decoder: a line with an unknown token is an empty input
            ids = _empty_rows(ids, tf.reduce_any(ids < 0, axis=1))
        return _reverse_rows(ids) if self.reverse else ids

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int32))
        if self.reverse:
            stripped = _reverse_rows(stripped)
        values = stripped.flat_values
        fallback = tf.strings.join(["ID_", tf.strings.as_string(values)])
        return _join_rows(stripped.with_flat_values(_gather_or(self.vocab, values, fallback)), " ")


class SentencePieceTokenizer(InGraphTokenizer):
    """A SentencePiece model, through tensorflow_text (the same C++ library as the
    Python `sentencepiece` package t2t trains and encodes with)."""

    type_name = "sentencepiece"
    needs_tensorflow_text = True

    def __init__(self, model_proto: bytes):
        super().__init__(name="sentencepiece_tokenizer")
        try:
            import tensorflow_text
        except ImportError:
            raise ImportError(
                "In-graph SentencePiece needs tensorflow-text (pip install 't2t[export]', "
                "or tensorflow-text matching your TensorFlow version)."
            ) from None
        self.sp = tensorflow_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)
        self.piece_count = int(self.sp.vocab_size())

    def encode(self, texts):
        return self.sp.tokenize(texts)

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int32))
        keep = stripped.flat_values < self.piece_count
        stripped = tf.ragged.boolean_mask(stripped, stripped.with_flat_values(keep))
        return self.sp.detokenize(stripped)


class ClassLabelTokenizer(InGraphTokenizer):
    """Class names <-> ids in [0, number of labels)."""

    type_name = "class_label"

    def __init__(self, class_labels: Sequence[str]):
        super().__init__(name="class_label_tokenizer")
        labels = list(class_labels)
        self.labels = tf.constant(labels)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(labels), tf.range(len(labels), dtype=tf.int32)
            ),
            default_value=-1,
        )

    def encode(self, texts):
        """string [B] -> ragged [B, 1] label ids (-1 for an unknown label)."""
        ids = self.table.lookup(tf.convert_to_tensor(texts))
        return tf.RaggedTensor.from_tensor(ids[:, None])

    def encode_for_model(self, texts, max_length=0):
        raise TypeError("class labels are targets, not model inputs")

    def decode(self, ids):
        """int [B] or [B, ..., 1] class ids -> label strings [B, ...] ("" if out of range)."""
        ids = tf.cast(ids, tf.int32)
        if ids.shape.rank is not None and ids.shape.rank >= 2 and ids.shape[-1] == 1:
            ids = ids[..., 0]
        return _gather_or(self.labels, ids, tf.fill(tf.shape(ids), ""))


class TaskTokenTokenizer(InGraphTokenizer):
    """One task of a multi-problem: the shared vocabulary's tokenizer with the task's
    token in front of each row (t2t.problems.multi_problem.TaskTokenEncoder)."""

    type_name = "task_token"

    def __init__(self, base: InGraphTokenizer, task_id: int, shared_vocab_size: int):
        super().__init__(name="task_token_tokenizer")
        self.base, self.task_id = base, int(task_id)
        self.shared_vocab_size = int(shared_vocab_size)
        self.needs_tensorflow_text = base.needs_tensorflow_text

    def encode(self, texts):
        ids = self.base.encode(texts)
        token = tf.fill(tf.stack([ids.nrows(), 1]), tf.constant(self.task_id, ids.dtype))
        return tf.concat([tf.RaggedTensor.from_tensor(token), ids], axis=1)

    def decode(self, ids):
        # Task tokens (ids from shared_vocab_size on) read as padding, which decode drops.
        return self.base.decode(tf.where(ids >= self.shared_vocab_size, tf.zeros_like(ids), ids))


# ------------------------------------------------------------------ factory
def from_description(description: Mapping[str, Any] | None, *,
                     model_proto: bytes | None = None) -> InGraphTokenizer:
    """The tokenizer of an encoder's `describe()` (None: t2t's Decoder's raw integers).

    SentencePiece descriptions name a model file: pass its bytes as `model_proto`."""
    if description is None:
        return TextTokenizer(0)
    kind = description.get("type")
    if kind == "text":
        return TextTokenizer(int(description.get("num_reserved_ids", len(RESERVED_TOKENS))))
    if kind == "byte":
        return ByteTokenizer()
    if kind == "character":
        return CharacterTokenizer(description["chars"])
    if kind == "token":
        return TokenTokenizer(description["vocab"], description.get("replace_oov"),
                              bool(description.get("reverse", False)))
    if kind == "sentencepiece":
        if model_proto is None:
            raise ValueError("a SentencePiece tokenizer needs the model's bytes (model_proto)")
        return SentencePieceTokenizer(model_proto)
    if kind == "class_label":
        return ClassLabelTokenizer(description["class_labels"])
    if kind == "task_token":
        return TaskTokenTokenizer(from_description(description["base"], model_proto=model_proto),
                                  description["task_id"], description["shared_vocab_size"])
    raise ValueError(f"no in-graph tokenizer for encoder type {kind!r}")


def from_encoder(encoder: Any) -> InGraphTokenizer:
    """The in-graph tokenizer equal to a t2t text encoder (None: raw integers)."""
    if encoder is None:
        return TextTokenizer(0)
    if getattr(encoder, "type_name", None) == "sentencepiece":
        return SentencePieceTokenizer(encoder.model_proto)
    if getattr(encoder, "type_name", None) == "task_token":
        return TaskTokenTokenizer(from_encoder(encoder.base), encoder.task_id,
                                  encoder.base.vocab_size)
    return from_description(encoder.describe())
