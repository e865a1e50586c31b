"""Real English sentences found offline: the plain sentences of the standard library's
docstrings, and a hash deal of them into held-in and held-out sets.

Corpora made on this machine (spoken by espeak-ng in t2t.problems.audio.speech_espeak,
rendered with real fonts in t2t.problems.image.ocr) take their text from here, so that it is
real prose (e.g. "Return the number of items in the queue") and needs no download.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator

from t2t.problems.text import text_files

# Words of letters (an apostrophe only inside one: "module's"), a capital only first
# (camelCase identifiers are code, not prose).
_WORD = re.compile(r"^[A-Za-z][a-z]*('[a-z]+)?$")


def plain_sentences(text: str, min_words: int = 4, max_words: int = 14, *,
                    lowercase: bool = True) -> Iterator[str]:
    """The sentences of `text` made of words only (letters, an apostrophe inside a word),
    with min_words..max_words words, their final stop removed; lowercased unless
    `lowercase` is False."""
    for raw in re.split(r"(?<=[.!?])\s+|\n\s*\n", text):
        words = raw.split()
        if words:
            words[-1] = words[-1].rstrip(".!?")
        if min_words <= len(words) <= max_words and all(_WORD.match(w) for w in words):
            sentence = " ".join(words)
            yield sentence.lower() if lowercase else sentence


def docstring_sentences(stdlib: str | None = None, *, lowercase: bool = True) -> list[str]:
    """The distinct plain sentences of the standard library's docstrings, in file order."""
    return list(_docstring_sentences(stdlib or text_files.stdlib_dir(), lowercase))


@functools.lru_cache(maxsize=4)  # read once per process: ~3 s, asked for by each split
def _docstring_sentences(stdlib: str, lowercase: bool) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for path in text_files.stdlib_modules(stdlib):
        text = text_files.module_text(path)
        for sentence in plain_sentences(text or "", lowercase=lowercase):
            seen.setdefault(sentence, None)
    return tuple(seen)


def held_out(sentence: str, percent: int = 10) -> bool:
    """Whether `sentence` is one of the held-out (dev/test) sentences: by a hash of its
    lowercased text, so the deal depends neither on the corpus order nor on case."""
    digest = hashlib.sha256(sentence.lower().encode("utf-8")).hexdigest()
    return int(digest, 16) % 100 < percent
