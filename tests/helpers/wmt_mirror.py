"""Tiny WMT archives for the translate_en* tests: sentence pairs, a mirror, pinned tables."""

from __future__ import annotations

import gzip
import os
import random
from collections.abc import Sequence

from t2t.data import problem
from t2t.data.bases import translate
from tests.helpers.local_http import pinned


def word_pairs(seed: int, count: int, source_words: Sequence[str],
               target_words: Sequence[str], lengths: tuple[int, int] = (2, 9),
               numbered: bool = True) -> list[tuple[str, str]]:
    """`count` (source, target) sentences of `lengths` words drawn with `seed`, each
    ending in its index when `numbered` (so that no two are equal)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n = rng.randint(*lengths)
        source = " ".join(rng.choice(source_words) for _ in range(n))
        target = " ".join(rng.choice(target_words) for _ in range(n))
        out.append((f"{source} {i}", f"{target} {i}") if numbered else (source, target))
    return out


def lines(texts: Sequence[str]) -> bytes:
    """The texts as a UTF-8 file, one per line."""
    return "".join(text + "\n" for text in texts).encode("utf-8")


def pair_files(names: tuple[str, str], pairs: Sequence[tuple[str, str]],
               compress: bool = False) -> dict[str, bytes]:
    """Archive members {source file: its lines, target file: its lines} (gzipped if asked)."""
    texts = [lines([pair[side] for pair in pairs]) for side in (0, 1)]
    if compress:
        texts = [gzip.compress(text) for text in texts]
    return dict(zip(names, texts, strict=True))


def pin_tables(monkeypatch, cls: type, folder: str,
               train: Sequence[translate.ParallelCorpus],
               dev: Sequence[translate.ParallelCorpus], **attributes) -> type:
    """Points `cls`'s tables at the copies in `folder` (dev from dev.tgz), pinned to them.

    Each train archive is read from `folder/<its local name>`; `attributes` (e.g.
    train_shards=2) are set on `cls` too, all undone after the test.
    """
    def pin(corpus: translate.ParallelCorpus, name: str) -> translate.ParallelCorpus:
        return translate.ParallelCorpus(pinned(corpus.resource, os.path.join(folder, name)),
                                        corpus.files)

    monkeypatch.setattr(cls, "train_datasets", [pin(c, c.resource.local_name) for c in train])
    monkeypatch.setattr(cls, "dev_datasets", [pin(c, "dev.tgz") for c in dev])
    for name, value in attributes.items():
        monkeypatch.setattr(cls, name, value)
    return cls


def decoded_pairs(prob: problem.Problem, data_dir: str, mode: str) -> list[tuple[str, str]]:
    """The (inputs, targets) texts of a split as the problem's pipeline reads them back."""
    encoders = prob.feature_encoders(data_dir)
    return [
        (encoders["inputs"].decode(ex["inputs"], strip_extraneous=True),
         encoders["targets"].decode(ex["targets"], strip_extraneous=True))
        for ex in prob.dataset(mode, data_dir, deterministic=True).as_numpy_iterator()
    ]
