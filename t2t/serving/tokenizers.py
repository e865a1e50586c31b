"""In-graph versions of the text encoders (t2t/data/encoders/text_encoder.py) for SavedModels.

    tokenizer = tokenizers.from_encoder(problem.feature_encoders(data_dir)["inputs"])
    ids = tokenizer.encode_for_model(tf.constant(["1 0 1"]))   # int32 [B, L], EOS appended
    texts = tokenizer.decode(outputs)                          # string [B]

Each tokenizer is a `tf.Module` built from an encoder's `describe()` (SentencePiece: its
model bytes; subword: its subtoken strings) and uses only TensorFlow ops, except
SentencePiece and subword (Tensor2Tensor's SubwordTextEncoder), which use
`tensorflow_text` (a process that loads such a SavedModel must `import tensorflow_text`
first). On valid UTF-8 text each one gives exactly the ids and texts of its Python
encoder. Where the Python encoder raises, the in-graph one does what t2t's Decoder does
with the error: a line with a token outside a token vocabulary (and no `replace_oov`) or
a word that is not an integer (plain text encoder) encodes as an empty input; ids
outside the vocabulary decode as "ID_<id>" (token), "" (character, class label, subword)
or are dropped (byte, SentencePiece). SubwordTokenizer's own differences on unusual
input are in its docstring.

Differences on unusual input, documented rather than hidden: `tf.strings.split` splits on
ASCII whitespace only (Python's `str.split` also on Unicode spaces such as U+00A0);
invalid UTF-8 is replaced by U+FFFD per ICU's rules, which may count replacement
characters differently from Python's `errors="replace"`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from t2t.data.encoders.text_encoder import UNK  # the encoders' unknown-token text, in graph
from t2t.features import EOS_ID, PAD_ID, RESERVED_TOKENS  # noqa: F401  (re-exported)


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


_ALNUM = r"[\p{L}\p{N}]"
_TOKEN_RUNS = r"[\p{L}\p{N}]+|[^\p{L}\p{N}]+"  # tokenizer.encode's alphanumeric/other runs
_ESCAPES = r"\\u|\\\\|\\[0-9]+;"  # subword_encoder.unescape_token's escapes
_MAX_CODE_POINT = 0x10FFFF
_UNDEFINED_CHARACTER = 0x3013  # what a \NNN; that is no character decodes to


def utf8_characters(code: tf.Tensor) -> tf.Tensor:
    """[n] int32 code points (0..0x10FFFF) -> [n] strings, each that character in UTF-8;
    a surrogate (not encodable) becomes U+FFFD, as Python's decode with "replace".

    Built from bytes rather than tf.strings.unicode_encode: TensorFlow 2.19's op turns
    the noncharacters (U+FFFF, U+10FFFF, ...) into U+FFFD too, unlike Python and 2.20+."""
    code = tf.where((code >= 0xD800) & (code <= 0xDFFF), 0xFFFD, code)
    length = 1 + tf.cast(code >= 0x80, tf.int32) + tf.cast(code >= 0x800, tf.int32) + tf.cast(
        code >= 0x10000, tf.int32)
    lead_marks = tf.gather(tf.constant([0, 0, 0xC0, 0xE0, 0xF0]), length)
    positions = tf.range(4)[None, :]  # byte i of a character of n bytes: 6-bit group n-1-i
    shift = 6 * (length[:, None] - 1 - positions)
    group = tf.bitwise.right_shift(code[:, None], tf.maximum(shift, 0))
    byte = tf.where(positions == 0, lead_marks[:, None] | group, 0x80 | (group & 0x3F))
    byte_strings = tf.constant([bytes([i]) for i in range(256)])
    chars = tf.gather(byte_strings, byte)
    chars = tf.where(positions < length[:, None], chars, "")
    return tf.strings.reduce_join(chars, axis=1)


def _tensorflow_text(what: str = "subword tokenization") -> Any:
    try:
        import tensorflow_text
    except ImportError:
        raise ImportError(
            f"In-graph {what} needs tensorflow-text (pip install 't2t[export]', or "
            f"tensorflow-text matching your TensorFlow version)."
        ) from None
    return tensorflow_text


def _positions(ragged: tf.RaggedTensor) -> tf.Tensor:
    """Each flat value's index within its row (ragged rank 1)."""
    rows = ragged.value_rowids()
    return tf.range(tf.size(rows, out_type=rows.dtype)) - tf.gather(ragged.row_starts(), rows)


class SubwordTokenizer(InGraphTokenizer):
    """Tensor2Tensor's SubwordTextEncoder (`.subwords` vocabularies), through
    tensorflow_text: tokenizer.encode's runs by `regex_split`, each token escaped through
    a table of the alphabet, then cut greedily into the longest subtokens from the left by
    a `WordpieceTokenizer` with an empty suffix indicator (the same segmentation as
    SubwordTextEncoder's). Decoding joins the subtoken strings, splits them at `_`,
    unescapes each piece and puts a space between two alphanumeric tokens.

    The alphabet is the characters of the subtoken strings and the escape characters,
    as SubwordTextEncoder has it after loading the `.subwords` file (an encoder it built
    has the same one). Ids outside the vocabulary decode as "", as in Python. `decode`
    cuts each row at its first EOS and drops every PAD, as the other tokenizers do:
    Python's decode of `encoder_base.strip_extraneous(ids)`. (SubwordTextEncoder's
    `decode(ids, strip_extraneous=True)` strips only trailing PAD/EOS, as Tensor2Tensor
    did, and reads a PAD or EOS inside as "<pad>"/"<EOS>"; on model outputs, PAD after
    the EOS, the two agree.)

    Differences from the Python encoder: a token that the vocabulary cannot cut (one of
    its alphabet's characters is no subtoken: a file written by something else; Python
    raises) makes its line an empty input; "\\NNN;" with NNN a UTF-16 surrogate
    (55296-57343) decodes to U+FFFD (Python's chr gives a lone surrogate, which is no
    UTF-8); letters and digits are RE2's Unicode classes \\p{L} \\p{N}, which know a newer
    Unicode than Python 3.11's unicodedata (14.0): 4,388 characters unassigned there are
    letters or digits in graph (tokenized and joined as such), all others agree."""

    type_name = "subword"
    needs_tensorflow_text = True

    def __init__(self, subtoken_strings: Sequence[str]):
        super().__init__(name="subword_tokenizer")
        from t2t.data.encoders.subword_encoder import ESCAPE_CHARS

        tensorflow_text = _tensorflow_text("subword tokenization")

        strings = [str(s) for s in subtoken_strings]
        # As SubwordTextEncoder: the last id of a repeated string wins, "" is no subtoken.
        ids = {s: i for i, s in enumerate(strings) if s}
        max_length = max((len(s) for s in strings), default=0)
        if not ids:
            raise ValueError("a subword tokenizer needs a vocabulary: no subtoken strings given")
        self.max_subtoken_length = max_length
        self.vocab = tf.constant(strings)
        self.subtoken_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(ids)), tf.constant(list(ids.values()), tf.int64)
            ),
            default_value=-1,  # WordpieceTokenizer's "not in the vocabulary"
        )
        alphabet = sorted({c for s in strings for c in s} | set(ESCAPE_CHARS))
        kept = [c for c in alphabet if c != "\n"]  # a newline is always escaped
        self.escape_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(kept),
                tf.constant([{"\\": "\\\\", "_": "\\u"}.get(c, c) for c in kept]),
            ),
            default_value="",  # outside the alphabet: \NNN;
        )
        self.wordpiece = tensorflow_text.WordpieceTokenizer(
            self.subtoken_table, suffix_indicator="", max_bytes_per_word=1 << 30,
            max_chars_per_token=max_length, token_out_type=tf.int64, unknown_token=None)

    @classmethod
    def from_file(cls, path: str) -> SubwordTokenizer:
        """The tokenizer of a `.subwords` vocabulary file (read as SubwordTextEncoder
        reads it)."""
        from t2t.data.encoders.subword_encoder import SubwordTextEncoder

        return cls(SubwordTextEncoder(path).all_subtoken_strings)

    def _tokens(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tokenizer.encode: [B] -> ragged [B, None] tokens."""
        tokens = _tensorflow_text().regex_split(texts, _TOKEN_RUNS, _TOKEN_RUNS)
        flat = tokens.flat_values
        position = _positions(tokens)
        last = tf.gather(tokens.row_lengths(), tokens.value_rowids()) - 1
        inner_space = tf.equal(flat, " ") & (position > 0) & (position < last)
        return tf.ragged.boolean_mask(tokens, tokens.with_flat_values(~inner_space))

    def _escape(self, tokens: tf.Tensor) -> tf.Tensor:
        """subword_encoder.escape_token of each token in a 1-D string tensor."""
        chars = tf.strings.unicode_split(tokens, "UTF-8")
        codes = tf.strings.unicode_decode(tokens, "UTF-8").flat_values
        escaped = self.escape_table.lookup(chars.flat_values)
        numeric = tf.strings.join(["\\", tf.strings.as_string(codes), ";"])
        escaped = tf.where(tf.equal(escaped, ""), numeric, escaped)
        return tf.strings.reduce_join(chars.with_flat_values(escaped), axis=1) + "_"

    def encode(self, texts):
        tokens = self._tokens(valid_utf8(tf.convert_to_tensor(texts, tf.string)))
        pieces = self.wordpiece.tokenize(self._escape(tokens.flat_values))
        ids = tokens.with_flat_values(pieces).merge_dims(1, 2)
        # A token the vocabulary cannot cut (Python raises): an empty input, as t2t's Decoder.
        ids = _empty_rows(ids, tf.reduce_any(ids < 0, axis=1))
        return tf.cast(ids, tf.int32)

    def _unescape(self, pieces: tf.Tensor) -> tf.Tensor:
        """subword_encoder.unescape_token of each piece in a 1-D string tensor."""
        segments = _tensorflow_text().regex_split(pieces, _ESCAPES, _ESCAPES)
        seg = segments.flat_values
        numeric = tf.strings.regex_full_match(seg, r"\\[0-9]+;")
        digits = tf.strings.regex_replace(seg, r"^\\0*|;$", "")  # leading zeros dropped
        short = numeric & (tf.strings.length(digits) <= 7)
        number = tf.strings.to_number(
            tf.where(short & tf.not_equal(digits, ""), digits, "0"), out_type=tf.int32)
        code = tf.where(short & (number <= _MAX_CODE_POINT), number, _UNDEFINED_CHARACTER)
        out = tf.where(numeric, utf8_characters(code), seg)
        out = tf.where(tf.equal(seg, "\\\\"), "\\", out)
        out = tf.where(tf.equal(seg, "\\u"), "_", out)
        return tf.strings.reduce_join(segments.with_flat_values(out), axis=1)

    def decode(self, ids):
        stripped = strip_ids(tf.cast(ids, tf.int64))
        values = stripped.flat_values
        strings = _gather_or(self.vocab, values, tf.fill(tf.shape(values), ""))
        pieces = tf.strings.split(_join_rows(stripped.with_flat_values(strings), ""), "_")
        pieces = tf.ragged.boolean_mask(
            pieces, pieces.with_flat_values(tf.not_equal(pieces.flat_values, "")))
        tokens = self._unescape(pieces.flat_values)
        first = tf.strings.substr(tokens, 0, 1, unit="UTF8_CHAR")
        alnum = tf.strings.regex_full_match(first, _ALNUM)
        after_alnum = tf.roll(alnum, 1, axis=0) & (_positions(pieces) > 0)
        spaced = tf.strings.join([tf.where(alnum & after_alnum, " ", ""), tokens])
        return _join_rows(pieces.with_flat_values(spaced), "")


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
    token in front of each row (t2t.data.multi_problem.TaskTokenEncoder)."""

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
                     model_proto: bytes | None = None,
                     subtoken_strings: Sequence[str] | None = None) -> InGraphTokenizer:
    """The tokenizer of an encoder's `describe()` (None: t2t's Decoder's raw integers).

    SentencePiece descriptions name a model file: pass its bytes as `model_proto`.
    Subword descriptions name a `.subwords` file: pass its strings as `subtoken_strings`
    (SubwordTextEncoder(path).all_subtoken_strings; an export's copy is
    assets/FEATURE.subwords)."""
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
    if kind == "subword":
        if subtoken_strings is None:
            raise ValueError("a subword tokenizer needs the vocabulary's subtoken strings "
                             f"(subtoken_strings, from {description.get('vocab_file')!r})")
        return SubwordTokenizer(subtoken_strings)
    if kind == "class_label":
        return ClassLabelTokenizer(description["class_labels"])
    if kind == "task_token":
        base = from_description(description["base"], model_proto=model_proto,
                                subtoken_strings=subtoken_strings)
        return TaskTokenTokenizer(base,
                                  description["task_id"], description["shared_vocab_size"])
    raise ValueError(f"no in-graph tokenizer for encoder type {kind!r}")


def from_encoder(encoder: Any) -> InGraphTokenizer:
    """The in-graph tokenizer equal to a t2t text encoder (None: raw integers)."""
    if encoder is None:
        return TextTokenizer(0)
    if getattr(encoder, "type_name", None) == "sentencepiece":
        return SentencePieceTokenizer(encoder.model_proto)
    if getattr(encoder, "type_name", None) == "subword":  # also when it has no file yet
        return SubwordTokenizer(encoder.all_subtoken_strings)
    if getattr(encoder, "type_name", None) == "task_token":
        return TaskTokenTokenizer(from_encoder(encoder.base), encoder.task_id,
                                  encoder.base.vocab_size)
    return from_description(encoder.describe())
