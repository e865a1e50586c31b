"""English -> Vietnamese from the machine's gettext catalogs: real translation offline.

Every Debian (and most Linux) systems ship the translations of their programs' messages
as compiled gettext catalogs, /usr/share/locale/LANG/LC_MESSAGES/*.mo: tens of thousands
of English messages (menu items, errors, help text) each with its human translation.
`translate_envi_gettext8k` reads the Vietnamese ones as a parallel corpus of
`translate_envi_iwslt32k`'s shape (English -> Vietnamese, a shared SentencePiece
vocabulary, BLEU at evaluation), for runs and regression cases on a machine without
internet (39k pairs from 65 catalogs on the project's machine).

- Catalogs: every *.mo under TMP_DIR/gettext/vi/LC_MESSAGES if that folder exists (a
  mirror: copy catalogs there), else under /usr/share/locale/vi/LC_MESSAGES.
- Pairs: each translated message (plural messages: the singular forms; contexts
  dropped), newlines and runs of whitespace collapsed; the header, untranslated and
  messages without a word (format fields only), and repeats of an English message
  already seen are skipped. Catalogs are read in name order.
- Splits: by a hash of the English message, so a message's split never changes as
  catalogs come and go: 3% dev, 3% test, the rest train.

Append `_rev` for Vietnamese -> English.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import struct
from collections.abc import Iterator

from t2t import registry
from t2t.data import problem
from t2t.data.bases import translate

SYSTEM_LOCALE_DIR = "/usr/share/locale"
MIRROR_SUBDIR = "gettext"  # TMP_DIR/gettext/LANG/LC_MESSAGES/*.mo, when present
DEV_FRACTION = TEST_FRACTION = 0.03
_MAGIC = {0x950412DE: "<", 0xDE120495: ">"}  # the .mo magic number, per byte order


class CatalogError(ValueError):
    """A file that is not a readable gettext catalog."""


def read_catalog(path: str) -> list[tuple[str, str]]:
    """(English message, translation) of every translated entry of a .mo file, in the
    file's order (singular forms of plurals; "context\\x04message" keeps the message)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 20 or struct.unpack("<I", data[:4])[0] not in _MAGIC:
        raise CatalogError(f"{path} is not a gettext .mo catalog (bad magic number).")
    order = _MAGIC[struct.unpack("<I", data[:4])[0]]
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    pairs = []
    for i in range(count):
        try:
            length, offset = struct.unpack(order + "2I", data[originals + 8 * i:][:8])
            source = data[offset:offset + length]
            length, offset = struct.unpack(order + "2I", data[translations + 8 * i:][:8])
            target = data[offset:offset + length]
        except struct.error:
            raise CatalogError(f"{path} is truncated (entry {i} of {count}).") from None
        source = source.split(b"\x04", 1)[-1].split(b"\x00", 1)[0]
        target = target.split(b"\x00", 1)[0]
        pairs.append((source.decode("utf-8", "replace"), target.decode("utf-8", "replace")))
    return pairs


def catalog_folder(tmp_dir: str, language: str) -> str:
    """Where the catalogs of `language` are read: the mirror under tmp_dir, else the
    system's."""
    mirror = os.path.join(tmp_dir, MIRROR_SUBDIR, language, "LC_MESSAGES")
    return mirror if os.path.isdir(mirror) else os.path.join(
        SYSTEM_LOCALE_DIR, language, "LC_MESSAGES")


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _has_words(text: str) -> bool:
    """Whether `text` has a word of two letters once printf/format fields are removed."""
    return re.search(r"[^\W\d_]{2}", re.sub(r"%[-+ #0-9.*$lhjzt]*[a-zA-Z]|\{[^}]*\}", "",
                                              text)) is not None


def catalog_pairs(folder: str) -> Iterator[tuple[str, str]]:
    """The distinct (English, translation) pairs of every catalog in `folder`."""
    paths = sorted(glob.glob(os.path.join(folder, "*.mo")))
    if not paths:
        raise problem.DataMissingError(
            f"No gettext catalogs (*.mo) in {folder}: install translated packages "
            f"(Debian ships them in /usr/share/locale) or copy catalogs to "
            f"TMP_DIR/{MIRROR_SUBDIR}/LANG/LC_MESSAGES/.")
    seen: set[str] = set()
    for path in paths:
        for source, target in read_catalog(path):
            source, target = _clean(source), _clean(target)
            if not source or not target or source in seen or not _has_words(source):
                continue
            seen.add(source)
            yield source, target


def split_of(source: str) -> str:
    """train, dev or test for an English message (a fixed hash of its text)."""
    u = int.from_bytes(hashlib.blake2b(source.encode("utf-8"), digest_size=8).digest(),
                       "big") / 2**64
    if u < DEV_FRACTION:
        return problem.DEV_SPLIT
    return problem.TEST_SPLIT if u < DEV_FRACTION + TEST_FRACTION else problem.TRAIN_SPLIT


@registry.register_problem
class TranslateEnviGettext8k(translate.TranslateProblem):
    """English -> Vietnamese messages of the machine's gettext catalogs, ~8k shared
    SentencePiece vocabulary (offline; translate_envi_iwslt32k's shape)."""

    source_language = "en"
    target_language = "vi"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.GENERIC
    approx_vocab_size = 2**13
    train_shards = 1

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (problem.SplitSpec(problem.TRAIN_SPLIT, self.train_shards),
                problem.SplitSpec(problem.DEV_SPLIT, self.dev_shards),
                problem.SplitSpec(problem.TEST_SPLIT, 1))

    def generate_samples(self, data_dir: str, tmp_dir: str, split: str, *,
                         mirror: str | None = None) -> Iterator[dict[str, str]]:
        if split not in (problem.TRAIN_SPLIT, problem.DEV_SPLIT, problem.TEST_SPLIT):
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        folder = catalog_folder(tmp_dir, self.target_language)
        for source, target in catalog_pairs(folder):
            if split_of(source) == split:
                yield {"inputs": source, "targets": target}
