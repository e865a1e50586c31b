"""Tensor2Tensor's `SubwordTextEncoder`: its `.subwords` vocabularies, read, written and
built, and its encoding, id for id.

The algorithm (Tensor2Tensor's text_encoder.py, reimplemented here):
1. `tokenizer.encode` splits the text into tokens (runs of alphanumeric / other
   characters; a single space between two words is dropped).
2. Each token is escaped: `\\` -> `\\\\`, `_` -> `\\u`, a character outside the
   vocabulary's alphabet (and every newline) -> `\\NNN;` (its code point in decimal), and
   `_` is appended: `_` marks the end of a word.
3. The escaped token is cut greedily into the longest subtoken strings of the
   vocabulary, from the left. The alphabet and the escape characters `\\ _ u ; 0-9` are
   always in the vocabulary, so every string can be encoded.
Decoding joins the subtoken strings, splits at `_`, unescapes each piece and puts the
tokens back together with `tokenizer.decode`: `decode(encode(s)) == s` for any s.

A vocabulary file has one subtoken string per line, in single quotes: ids 0 and 1 are
`'<pad>_'` and `'<EOS>_'` (the reserved tokens, escaped), so a Tensor2Tensor data dir's
`vocab.PROBLEM.SIZE.subwords` loads with its ids unchanged. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from t2t.data.encoders import tokenizer
from t2t.data.encoders.encoder_base import RESERVED_TOKENS, TextEncoder, as_ids
from t2t.data.encoders.vocab_files import PathLike, read_lines, write_lines
from t2t.features import EOS_ID, NUM_RESERVED_TOKENS, PAD_ID

logger = logging.getLogger(__name__)

ESCAPE_CHARS = frozenset("\\_u;0123456789")
_UNESCAPE = re.compile(r"\\u|\\\\|\\([0-9]+);")
UNDEFINED_CHARACTER = "\u3013"  # what a malformed \NNN; escape decodes to, as in T2T


def escape_token(token: str, alphabet: Iterable[str]) -> str:
    """`token` escaped for a vocabulary of `alphabet`, with its word end `_` appended:
    `\\` -> `\\\\`, `_` -> `\\u`, a character not in the alphabet or a newline -> `\\NNN;`."""
    token = token.replace("\\", "\\\\").replace("_", "\\u")
    return "".join(c if c in alphabet and c != "\n" else f"\\{ord(c)};"
                   for c in token) + "_"


def unescape_token(escaped: str) -> str:
    """The inverse of `escape_token` (a trailing `_` is dropped; a `\\NNN;` that is no
    character decodes to U+3013, as in Tensor2Tensor)."""
    def replace(match: re.Match) -> str:
        if match.group(1) is None:
            return "_" if match.group(0) == "\\u" else "\\"
        try:
            return chr(int(match.group(1)))
        except (ValueError, OverflowError):
            return UNDEFINED_CHARACTER

    trimmed = escaped[:-1] if escaped.endswith("_") else escaped
    return _UNESCAPE.sub(replace, trimmed)


class SubwordTextEncoder(TextEncoder):
    """Tensor2Tensor's invertible subword encoder (see the module doc): ids 0 `<pad>`,
    1 `<EOS>`, then the vocabulary file's subtoken strings in order.

    `SubwordTextEncoder(path)` loads a `.subwords` file; `build_from_generator`,
    `build_to_target_size` and `build_from_token_counts` make a vocabulary from text, as
    Tensor2Tensor's `VocabType.SUBWORD` problems do."""

    type_name = "subword"

    def __init__(self, filename: PathLike | None = None):
        super().__init__(NUM_RESERVED_TOKENS)
        self.filename = None if filename is None else os.fspath(filename)
        self._alphabet: set[str] = set()
        self._all_subtoken_strings: list[str] = []
        self._subtoken_string_to_id: dict[str, int] = {}
        self._max_subtoken_len = 0
        self._cache: dict[str, list[int]] = {}
        if filename is not None:
            self._load_from_file(self.filename)

    # ------------------------------------------------------------ encoding
    @property
    def vocab_size(self) -> int:
        return len(self._all_subtoken_strings)

    @property
    def all_subtoken_strings(self) -> tuple[str, ...]:
        """The vocabulary: the subtoken string of each id."""
        return tuple(self._all_subtoken_strings)

    def encode(self, s: str) -> list[int]:
        """Text -> subtoken ids (no EOS appended)."""
        ids: list[int] = []
        for token in tokenizer.encode(s):
            ids.extend(self._token_to_subtoken_ids(token))
        return ids

    def encode_without_tokenizing(self, token_text: str) -> list[int]:
        """`token_text` encoded as one token (no split at word boundaries)."""
        return self._token_to_subtoken_ids(token_text)

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        """Subtoken ids -> text; `strip_extraneous` drops trailing PAD and EOS ids (as
        Tensor2Tensor's strip_ids did)."""
        ids = as_ids(ids)
        if strip_extraneous:
            while ids and ids[-1] in (PAD_ID, EOS_ID):  # as text_encoder.strip_ids does
                ids.pop()
        return tokenizer.decode(self._subtoken_ids_to_tokens(ids))

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        """Each id's subtoken string ("" for an id outside the vocabulary)."""
        return [self._subtoken_string(i) for i in as_ids(ids)]

    def describe(self) -> dict[str, Any]:
        if self.filename is None:
            raise ValueError("this SubwordTextEncoder has no vocabulary file: store_to_file "
                             "it first, then describe it.")
        return {"type": self.type_name, "vocab_file": os.path.basename(self.filename)}

    def _token_to_subtoken_ids(self, token: str) -> list[int]:
        cached = self._cache.get(token)
        if cached is None:
            escaped = escape_token(token, self._alphabet)
            cached = [self._subtoken_string_to_id[s]
                      for s in self._escaped_token_to_subtoken_strings(escaped)]
            if len(self._cache) < 1 << 20:
                self._cache[token] = cached
        return list(cached)

    def _escaped_token_to_subtoken_strings(self, escaped: str) -> list[str]:
        """Greedy longest match from the left."""
        if not self._subtoken_string_to_id:
            raise ValueError("this SubwordTextEncoder has no vocabulary: load a .subwords "
                             "file or build one first.")
        pieces = []
        start, length = 0, len(escaped)
        while start < length:
            for end in range(min(length, start + self._max_subtoken_len), start, -1):
                piece = escaped[start:end]
                if piece in self._subtoken_string_to_id:
                    pieces.append(piece)
                    start = end
                    break
            else:  # a vocabulary without its alphabet: written by something else
                raise ValueError(
                    f"{escaped[start]!r} (in the escaped token {escaped!r}) is not in the "
                    f"subword vocabulary{' ' + self.filename if self.filename else ''}: "
                    f"its alphabet and the escape characters must be in it.")
        return pieces

    def _subtoken_string(self, subtoken_id: int) -> str:
        if 0 <= subtoken_id < self.vocab_size:
            return self._all_subtoken_strings[subtoken_id]
        return ""

    def _subtoken_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        joined = "".join(self._subtoken_string(i) for i in ids)
        tokens = []
        for piece in joined.split("_"):
            if piece:
                token = unescape_token(piece + "_")
                if token:
                    tokens.append(token)
        return tokens

    # ----------------------------------------------------------- vocabulary
    def _init_subtokens_from_list(self, subtoken_strings: list[str],
                                  reserved_tokens: Sequence[str] | None = None) -> None:
        reserved = list(reserved_tokens or [])
        self._all_subtoken_strings = reserved + list(subtoken_strings)
        self._max_subtoken_len = max((len(s) for s in subtoken_strings), default=0)
        self._subtoken_string_to_id = {s: i + len(reserved)
                                       for i, s in enumerate(subtoken_strings) if s}
        self._cache = {}

    def _init_alphabet_from_tokens(self, tokens: Iterable[str]) -> None:
        self._alphabet = {c for token in tokens for c in token} | set(ESCAPE_CHARS)

    def _load_from_file(self, filename: str) -> None:
        strings = []
        for line in read_lines(filename, "subword vocabulary", None):
            s = line.rstrip()
            # Tensor2Tensor wrote each string in single quotes; older files had none.
            if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
                s = s[1:-1]
            strings.append(s)
        self._init_subtokens_from_list(strings)
        self._init_alphabet_from_tokens(strings)

    def store_to_file(self, filename: PathLike, add_single_quotes: bool = True) -> None:
        """Writes the vocabulary, one subtoken string a line (in single quotes, as
        Tensor2Tensor did), atomically; the encoder then describes itself by it."""
        quote = "'" if add_single_quotes else ""
        write_lines(filename, [f"{quote}{s}{quote}" for s in self._all_subtoken_strings])
        self.filename = os.fspath(filename)

    @classmethod
    def build_from_generator(cls, generator: Iterable[str], target_size: int,
                             max_subtoken_length: int | None = None,
                             reserved_tokens: Sequence[str] | None = None
                             ) -> SubwordTextEncoder:
        """A vocabulary of about `target_size` subtokens for the texts of `generator`."""
        counts: collections.Counter[str] = collections.Counter()
        for text in generator:
            counts.update(tokenizer.encode(text))
        return cls.build_to_target_size(target_size, counts, 1, 1000,
                                        max_subtoken_length=max_subtoken_length,
                                        reserved_tokens=reserved_tokens)

    @classmethod
    def build_to_target_size(cls, target_size: int, token_counts: Mapping[str, int],
                             min_val: int, max_val: int,
                             max_subtoken_length: int | None = None,
                             reserved_tokens: Sequence[str] | None = None,
                             num_iterations: int = 4) -> SubwordTextEncoder:
        """Bisects the minimum subtoken count in [min_val, max_val] for a vocabulary
        within 1% of `target_size` (else the closest one tried), as Tensor2Tensor did."""
        if min_val > max_val:
            raise ValueError(f"min_val {min_val} > max_val {max_val}: give min_val <= max_val.")
        if target_size < 1:
            raise ValueError(f"target_size {target_size} < 1: a vocabulary needs a size.")

        def bisect(low: int, high: int) -> SubwordTextEncoder:
            present = (low + high) // 2
            encoder = cls()
            encoder.build_from_token_counts(token_counts, present, num_iterations,
                                            reserved_tokens=reserved_tokens,
                                            max_subtoken_length=max_subtoken_length)
            if (abs(encoder.vocab_size - target_size) * 100 < target_size or low >= high
                    or present < 2):
                return encoder
            if encoder.vocab_size > target_size:
                other = bisect(present + 1, high)
            else:
                other = bisect(low, present - 1)
            if abs(other.vocab_size - target_size) < abs(encoder.vocab_size - target_size):
                return other
            return encoder

        return bisect(min_val, max_val)

    def build_from_token_counts(self, token_counts: Mapping[str, int], min_count: int,
                                num_iterations: int = 4,
                                reserved_tokens: Sequence[str] | None = None,
                                max_subtoken_length: int | None = None) -> None:
        """Builds the vocabulary from token -> count: subtoken strings seen at least
        `min_count` times, refined over `num_iterations` passes (each counts the
        substrings that start where the current segmentation cuts a token)."""
        if reserved_tokens is None:
            reserved_tokens = RESERVED_TOKENS
        elif list(reserved_tokens[:len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"reserved_tokens must start with {RESERVED_TOKENS}, got "
                             f"{list(reserved_tokens)[:len(RESERVED_TOKENS)]}.")
        self._init_alphabet_from_tokens(itertools.chain(token_counts, reserved_tokens))
        self._init_subtokens_from_list(sorted(self._alphabet), reserved_tokens=reserved_tokens)
        min_count = max(min_count, 1)
        for _ in range(num_iterations):
            counts: collections.defaultdict[str, int] = collections.defaultdict(int)
            for token, count in token_counts.items():
                escaped = escape_token(token, self._alphabet)
                start = 0
                for piece in self._escaped_token_to_subtoken_strings(escaped):
                    last = len(escaped) + 1
                    if max_subtoken_length is not None:
                        last = min(last, start + max_subtoken_length)
                    for end in range(start + 1, last):
                        counts[escaped[start:end]] += count
                    start += len(piece)
            by_length: list[set[str]] = []
            for string, count in counts.items():
                if count >= min_count:
                    while len(by_length) <= len(string):
                        by_length.append(set())
                    by_length[len(string)].add(string)
            # Longest first: a kept string's count no longer counts for its prefixes.
            chosen: list[tuple[int, str]] = []
            for length in range(len(by_length) - 1, 0, -1):
                for string in by_length[length]:
                    count = counts[string]
                    if count >= min_count:
                        if string not in self._alphabet:
                            chosen.append((count, string))
                        for prefix in range(1, length):
                            counts[string[:prefix]] -= count
            # The alphabet always, so that every string stays encodable.
            chosen.extend((counts.get(c, 0), c) for c in self._alphabet)
            chosen.sort(reverse=True)
            strings = [string for _, string in chosen]
            escaped_reserved = [escape_token(t, self._alphabet) for t in reserved_tokens]
            self._init_subtokens_from_list(escaped_reserved + strings)
        logger.info("subword vocabulary: %d subtokens (min count %d)", self.vocab_size,
                    min_count)
