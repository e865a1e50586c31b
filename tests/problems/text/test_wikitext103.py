"""Tests of languagemodel_wikitext103_32k, offline.

A tiny `wikitext-103-v1.zip` with the real layout (`wikitext-103/wiki.*.tokens`) and
line format (` = Title = ` headings, ` = = Section = = `, blank ` ` lines between) is
served by a local HTTP server used as a URL-prefix mirror. The real resource is
unpinned (no recorded checksum); the test pins it to the tiny file's hash.
"""

from __future__ import annotations

import os
import random
import zipfile

import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.text import wikitext103
from tests.helpers.local_http import pinned, serve_folder

_WORDS = "the game was released in Japan , and received <unk> reviews from critics @-@ .".split()


def _article(rng: random.Random, title: str) -> tuple[list[str], list[str]]:
    """(raw lines of an article in the .tokens format, its expected line examples)."""
    paragraphs = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14))) for _ in range(3)]
    raw = [" ", f" = {title} = ", " ", f" {paragraphs[0]} ", " ", " = = Reception = = ", " "]
    raw += [f" {p} " for p in paragraphs[1:]] + [" "]
    return raw, [f"= {title} =", paragraphs[0], "= = Reception = =", *paragraphs[1:]]


def _split(seed: int, titles: list[str]) -> tuple[bytes, list[list[str]]]:
    rng = random.Random(seed)
    raw, articles = [], []
    for title in titles:
        lines, examples = _article(rng, title)
        raw += lines
        articles.append(examples)
    return "".join(line + "\n" for line in raw).encode(), articles


TRAIN_RAW, TRAIN = _split(1, ["Valkyria Chronicles III", "Tower Building", "Robert Boulter"])
VALID_RAW, VALID = _split(2, ["Robert Building"])
TEST_RAW, TEST = _split(3, ["Tower Chronicles", "Boulter"])


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    path = os.path.join(folder, "wikitext-103-v1.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("wikitext-103/", b"")
        zf.writestr("wikitext-103/wiki.train.tokens", TRAIN_RAW)
        zf.writestr("wikitext-103/wiki.valid.tokens", VALID_RAW)
        zf.writestr("wikitext-103/wiki.test.tokens", TEST_RAW)

    with serve_folder(folder) as (url, _):
        yield url, path


@pytest.fixture()
def tiny(monkeypatch, mirror):
    _, path = mirror
    cls = wikitext103.LanguagemodelWikitext103_32k
    monkeypatch.setattr(cls, "resource", pinned(wikitext103.WIKITEXT_103, path))
    monkeypatch.setattr(cls, "approx_vocab_size", 70)
    return cls


def test_generate_and_read_back(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("languagemodel_wikitext103_32k")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False, num_shards=2)
    flat = lambda articles: [line for article in articles for line in article]  # noqa: E731
    assert {k: v.examples for k, v in summary.items()} == {
        "train": len(flat(TRAIN)),
        "dev": len(flat(VALID)),
        "test": len(flat(TEST)),
    }
    assert "vocab.languagemodel_wikitext103_32k.70.model" in os.listdir(data_dir)
    encoder = prob.feature_encoders(data_dir)["targets"]

    def decoded(split):
        dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True, split=split)
        return [
            encoder.decode(ex["targets"], strip_extraneous=True)
            for ex in dataset.as_numpy_iterator()
        ]

    assert decoded("dev") == flat(VALID)
    assert decoded("test") == flat(TEST)
    assert sorted(decoded("train")) == sorted(flat(TRAIN))
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"]


def test_document_examples(tiny, monkeypatch, mirror, tmp_path):
    url, _ = mirror
    monkeypatch.setattr(tiny, "example_unit", wikitext103.DOCUMENT)
    samples = registry.problem("languagemodel_wikitext103_32k").generate_samples(
        "", str(tmp_path), "train", mirror=url
    )
    assert [s["targets"] for s in samples] == [" ".join(article) for article in TRAIN]
    assert wikitext103.is_title("= Tower Building =")
    assert not wikitext103.is_title("= = Reception = =")


def test_real_resource_is_unpinned():
    res = wikitext103.WIKITEXT_103
    assert res.url == "https://wikitext.smerity.com/wikitext-103-v1.zip"
    assert res.local_name == "wikitext-103-v1.zip"
    assert res.size is None and res.sha256 is None  # not recorded anywhere: fetched unverified
    prob = registry.problem("languagemodel_wikitext103_32k")
    assert prob.approx_vocab_size == 2**15 and prob.example_unit == "line"
    assert [s.name for s in prob.splits] == ["train", "dev", "test"]
    with pytest.raises(ValueError, match="no 'valid' split"):
        next(prob.generate_samples("", "", "valid"))
