"""Tests of translate_envi_iwslt32k, offline.

Six tiny plain files named and formatted like the Stanford IWSLT'15 En-Vi release
(Moses-tokenized, with Moses' XML escapes) are served by a local HTTP server used as
a URL-prefix mirror. The real resources are unpinned (no recorded checksums), so the
test uses them as they are and checks that the fetch warns about it.
"""

from __future__ import annotations

import logging
import os
import random

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.generation import download
from t2t.problems.translation import translate_envi
from tests.helpers.local_http import serve_folder

_EN = "i want to tell you a story about the world &apos;s oceans , &quot; and life &quot; .".split()
_VI = "tôi muốn kể cho các bạn một câu chuyện về đại dương &amp; sự sống của thế giới .".split()


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(2, 10)
        out.append(
            (
                " ".join(rng.choice(_EN) for _ in range(n)),
                " ".join(rng.choice(_VI) for _ in range(n)),
            )
        )
    return out


SPLITS = {"train": _pairs(1, 80), "tst2012": _pairs(2, 10), "tst2013": _pairs(3, 8)}


def _plain(text: str) -> str:
    return text.replace("&apos;", "'").replace("&quot;", '"').replace("&amp;", "&")


_REQUESTS: list[str] = []  # paths the mirror served


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    for name, pairs in SPLITS.items():
        for side, lang in ((0, "en"), (1, "vi")):
            with open(os.path.join(folder, f"{name}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(p[side] + "\n" for p in pairs)
    with serve_folder(folder, _REQUESTS) as (url, _):
        yield url


def _decoded(prob: problem.Problem, data_dir: str, split: str) -> list[tuple[str, str]]:
    encoders = prob.feature_encoders(data_dir)
    dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True, split=split)
    return [
        (
            encoders["inputs"].decode(ex["inputs"], strip_extraneous=True),
            encoders["targets"].decode(ex["targets"], strip_extraneous=True),
        )
        for ex in dataset.as_numpy_iterator()
    ]


def test_generate_and_read_back(monkeypatch, mirror, tmp_path, caplog):
    monkeypatch.setattr(translate_envi.TranslateEnviIwslt32k, "approx_vocab_size", 120)
    monkeypatch.setattr(translate_envi.TranslateEnviIwslt32k, "train_shards", 2)
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    _REQUESTS.clear()
    prob = registry.problem("translate_envi_iwslt32k")
    with caplog.at_level(logging.WARNING):
        summary = prob.generate_data(data_dir, tmp_dir, mirror=mirror, progress=False)
    assert "UNVERIFIED" in caplog.text  # the real resources pin nothing
    assert {k: v.examples for k, v in summary.items()} == {"train": 80, "dev": 10, "test": 8}
    assert sorted(set(_REQUESTS)) == sorted(
        f"/{n}.{lang}" for n in SPLITS for lang in ("en", "vi")
    )
    assert sorted(os.listdir(os.path.join(tmp_dir, "iwslt15.en-vi"))) == sorted(
        f"{n}.{lang}" for n in SPLITS for lang in ("en", "vi")
    )
    files = os.listdir(data_dir)
    assert "translate_envi_iwslt32k-test-00000-of-00001" in files
    unescaped = [(_plain(e), _plain(v)) for e, v in SPLITS["tst2013"]]
    assert any("'" in e and '"' in e for e, _ in unescaped)  # the escapes were exercised
    assert _decoded(prob, data_dir, "test") == unescaped
    assert _decoded(prob, data_dir, "dev") == [(_plain(e), _plain(v)) for e, v in SPLITS["tst2012"]]
    assert "bleu" in prob.eval_metrics()

    rev = registry.problem("translate_envi_iwslt32k_rev")
    assert _decoded(rev, data_dir, "test") == [(v, e) for e, v in unescaped]
    assert rev.languages == ("vi", "en")


def test_escapes_kept_when_asked(monkeypatch, mirror, tmp_path):
    monkeypatch.setattr(translate_envi.TranslateEnviIwslt32k, "unescape_entities", False)
    prob = registry.problem("translate_envi_iwslt32k")
    samples = list(prob.generate_samples("", str(tmp_path), "test", mirror=mirror))
    assert [(s["inputs"], s["targets"]) for s in samples] == SPLITS["tst2013"]
    with pytest.raises(ValueError, match="no 'valid' split"):
        list(prob.generate_samples("", str(tmp_path), "valid", mirror=mirror))


def test_real_resources():
    prob = registry.problem("translate_envi_iwslt32k")
    assert [s.name for s in prob.splits] == ["train", "dev", "test"]
    pairs = [*prob.train_files, *prob.dev_files, *prob.test_files]
    urls = [r.url for pair in pairs for r in pair]
    base = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/"
    assert urls == [
        base + n
        for n in ("train.en", "train.vi", "tst2012.en", "tst2012.vi", "tst2013.en", "tst2013.vi")
    ]
    # No recorded checksums exist for these files: they are fetched unverified.
    assert all(r.size is None and r.sha256 is None for pair in pairs for r in pair)
    assert all(isinstance(r, download.Resource) for pair in pairs for r in pair)
