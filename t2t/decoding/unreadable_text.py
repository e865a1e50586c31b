"""Text that a model's text encoder cannot read, found once for t2t-decoder (which warns
and decodes the line as an empty input) and t2t-serve (which answers 400).

    reader = TextReader(encoder)               # a token vocabulary: <pad> <EOS> 0 1
    problem = reader.unreadable("1 2 3")
    problem.message    # "tokens '2', '3' are not in the vocabulary"
    problem.readable   # "its 4 tokens: '<pad>', '<EOS>', '0', '1'"

What cannot be read, by encoder:
  token (TokenTextEncoder) without replace_oov   a word outside the vocabulary
  text (TextEncoder; None: raw ids)              a word that is not an integer, and, given
                                                 vocab_size, an id outside [0, vocab_size)
  task_token (a multi-problem's task)            what its base encoder cannot read
Every other encoder reads any text, mapping what it does not know: byte (every UTF-8
byte is an id), character (unknown characters -> the UNK id), subword (unknown
characters are escaped as "\\NNN;"), SentencePiece (unknown pieces -> <unk>), and a
token vocabulary with replace_oov (unknown tokens -> that token).

`in_graph=True` reads words as an exported SavedModel's tokenizer does
(t2t.serving.tokenizers: split at ASCII whitespace, integers as [+-]?[0-9]+); otherwise
as the Python encoders do (str.split, int()).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

_ASCII_SPACE = re.compile(r"[ \t\n\v\f\r]+")
_GRAPH_INTEGER = re.compile(r"[+-]?[0-9]+")
SHOWN_TOKENS = 8  # vocabulary entries an explanation lists


@dataclasses.dataclass(frozen=True)
class UnreadableText:
    """Why a text cannot be read: `unknown` the distinct words (in order), `message`
    e.g. "token '7' is not in the vocabulary", `readable` what the encoder reads."""

    unknown: tuple[str, ...]
    message: str
    readable: str


def _quoted(words: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(w) for w in words[:limit])
    return shown + (f" and {len(words) - limit} more" if len(words) > limit else "")


def _distinct(words: list[str]) -> list[str]:
    return list(dict.fromkeys(words))


class TextReader:
    """Finds the words of a text that `encoder` cannot read (see the module docstring);
    `vocab_size`: the model's, for integer ids."""

    def __init__(self, encoder: Any, *, vocab_size: int | None = None, in_graph: bool = False):
        kind = "text" if encoder is None else getattr(encoder, "type_name", "")
        if kind == "task_token":
            encoder, kind = encoder.base, getattr(encoder.base, "type_name", "")
        self.kind, self.in_graph = kind, in_graph
        self.vocab_size = vocab_size
        self.tokens: list[str] = []
        self.token_set: frozenset[str] = frozenset()
        self.num_reserved_ids = 0
        if kind == "token" and encoder.describe().get("replace_oov") is None:
            self.tokens = encoder.tokens
            self.token_set = frozenset(self.tokens)
        elif kind == "token":
            self.kind = "token_replace_oov"
        elif kind == "text":
            self.num_reserved_ids = encoder.num_reserved_ids if encoder is not None else 0

    @property
    def reads_any_text(self) -> bool:
        """Whether every text is read (the encoder maps what it does not know)."""
        return self.kind not in ("token", "text")

    def words(self, text: str) -> list[str]:
        if self.in_graph:
            return [w for w in _ASCII_SPACE.split(text) if w]
        return text.split()

    def readable(self) -> str:
        """What the encoder reads, for an error message."""
        if self.kind == "token":
            more = ", ..." if len(self.tokens) > SHOWN_TOKENS else ""
            return (f"its {len(self.tokens):,} tokens: "
                    f"{', '.join(map(repr, self.tokens[:SHOWN_TOKENS]))}{more}")
        if self.kind == "text":
            top = (f" from 0 to {self.vocab_size - self.num_reserved_ids - 1}"
                   if self.vocab_size else "")
            return f"integers{top}, separated by spaces"
        return "any text"

    def unreadable(self, text: str) -> UnreadableText | None:
        """Why `text` cannot be read, or None when it can."""
        if self.kind == "token":
            unknown = _distinct([w for w in self.words(text) if w not in self.token_set])
            if not unknown:
                return None
            what = (f"token {unknown[0]!r} is" if len(unknown) == 1
                    else f"tokens {_quoted(unknown)} are")
            return UnreadableText(tuple(unknown), f"{what} not in the vocabulary",
                                  self.readable() + self._close_matches(unknown))
        if self.kind == "text":
            return self._unreadable_integers(self.words(text))
        return None

    def _unreadable_integers(self, words: list[str]) -> UnreadableText | None:
        bad, out_of_range = [], []
        for word in words:
            value = self._integer(word)
            if value is None:
                bad.append(word)
            elif self.vocab_size and not 0 <= value + self.num_reserved_ids < self.vocab_size:
                out_of_range.append(word)
        if bad:
            bad = _distinct(bad)
            what = f"word {bad[0]!r} is" if len(bad) == 1 else f"words {_quoted(bad)} are"
            return UnreadableText(tuple(bad), f"{what} not an integer", self.readable())
        if out_of_range:
            out_of_range = _distinct(out_of_range)
            return UnreadableText(tuple(out_of_range), f"{_quoted(out_of_range)} outside the "
                                  f"vocabulary of {self.vocab_size} ids", self.readable())
        return None

    def _integer(self, word: str) -> int | None:
        if self.in_graph:
            return int(word) if _GRAPH_INTEGER.fullmatch(word) else None
        try:
            return int(word)
        except ValueError:
            return None

    def _close_matches(self, unknown: list[str]) -> str:
        """"; close to 'x': 'y', 'z'" for the first unknown tokens that have any."""
        if len(self.tokens) > 40_000:  # a bounded cost per refused request
            return ""
        hints = []
        for word in unknown[:3]:
            close = difflib.get_close_matches(word, self.tokens, n=3, cutoff=0.6)
            if close and len(self.tokens) > SHOWN_TOKENS:
                hints.append(f"close to {word!r}: {', '.join(map(repr, close))}")
        return "; " + "; ".join(hints) if hints else ""
