"""Tests of sentiment_imdb, offline, and of --inspect on its data.

A tiny `aclImdb_v1.tar.gz` with the real layout (`aclImdb/{train,test}/{pos,neg}/
<id>_<stars>.txt`, `train/unsup/`, the vocabulary and feature files) is served by a
local HTTP server used as a URL-prefix mirror; the problem's resource is patched to pin
the tiny file's hash.
"""

from __future__ import annotations

import os
import random

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.inspection import inspect_data
from t2t.problems.text import imdb
from tests.helpers.local_http import (
    check_real_pin_rejects,
    pinned,
    serve_folder,
    tfds_root,
    write_tar,
)

_GOOD = "a wonderful film with great acting and a moving story".split()
_BAD = "a terrible film with awful acting and a boring story".split()


def _reviews(seed: int, words: list[str], count: int) -> list[tuple[str, str]]:
    """(file name, raw text) pairs; raw text has the corpus' <br /> line breaks."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        first = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9)))
        second = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        stars = rng.choice([7, 8, 9, 10] if words is _GOOD else [1, 2, 3, 4])
        out.append((f"{i * 7 % count}_{stars}.txt", f"{first}.<br /><br />{second}!  "))
    return out


REVIEWS = {
    ("train", "pos"): _reviews(1, _GOOD, 12),
    ("train", "neg"): _reviews(2, _BAD, 10),
    ("test", "pos"): _reviews(3, _GOOD, 4),
    ("test", "neg"): _reviews(4, _BAD, 4),
}


def _expected(split: str) -> list[tuple[str, str]]:
    """(cleaned text, label) in the problem's order: by id, pos and neg alternating."""
    by_label = []
    for label in ("pos", "neg"):
        ordered = sorted(REVIEWS[(split, label)], key=lambda nt: int(nt[0].split("_")[0]))
        by_label.append([(" ".join(t.replace("<br />", " ").split()), label) for _, t in ordered])
    out = []
    for i in range(max(map(len, by_label))):
        out += [reviews[i] for reviews in by_label if i < len(reviews)]
    return out


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    path = os.path.join(folder, "aclImdb_v1.tar.gz")
    members = {
        "aclImdb/README": b"Large Movie Review Dataset v1.0\n",
        "aclImdb/imdb.vocab": b"the\n",
    }
    for (split, label), reviews in REVIEWS.items():
        for name, text in reviews:
            members[f"aclImdb/{split}/{label}/{name}"] = text.encode()
        members[f"aclImdb/{split}/labeledBow.feat"] = b"9 0:9\n"
        members[f"aclImdb/{split}/urls_{label}.txt"] = b"http://www.imdb.com/title/tt0453418/\n"
    members["aclImdb/train/unsup/0_0.txt"] = b"unlabelled decoy"
    write_tar(path, members)

    with serve_folder(folder) as (url, _):
        yield url, path


def test_generate_read_back_and_inspect(monkeypatch, mirror, tmp_path):
    url, archive = mirror
    monkeypatch.setattr(imdb.SentimentImdb, "resource", pinned(imdb.ACL_IMDB, archive))
    monkeypatch.setattr(imdb.SentimentImdb, "approx_vocab_size", 60)
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("sentiment_imdb")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False, num_shards=2)
    assert summary["train"].examples == 22 and summary["dev"].examples == 8
    assert "vocab.sentiment_imdb.60.model" in os.listdir(data_dir)

    samples = list(prob.generate_samples(data_dir, tmp_dir, "train", mirror=url))
    assert [(s["inputs"], "pos" if s["label"] else "neg") for s in samples] == _expected("train")

    encoders = prob.feature_encoders(data_dir)
    assert encoders["targets"].class_labels == ["neg", "pos"]
    dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True)
    decoded = [
        (
            encoders["inputs"].decode(ex["inputs"], strip_extraneous=True),
            encoders["targets"].decode(ex["targets"]),
        )
        for ex in dataset.as_numpy_iterator()
    ]
    assert decoded == _expected("test")
    assert all("<br" not in text for text, _ in decoded)
    hp = prob.hparams(data_dir)
    assert hp.modality["targets"] == problem.Modality.CLASS_LABEL and hp.vocab_size["targets"] == 2
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity"]

    report = inspect_data.inspect_problem(prob, data_dir, "train", num_examples=2)
    assert report.examples_read == 22 and report.label_counts == {"pos": 12, "neg": 10}
    assert report.lengths["inputs"].count == 22
    text = report.format()
    assert "label balance" in text and "pos" in text and "sentiment_imdb [train]" in text


def test_clean_review():
    assert (
        imdb.clean_review("Great.<br /><br />Really<br/>good  \n film") == "Great. Really good film"
    )


def test_real_pin(tmp_path):
    resource = imdb.ACL_IMDB
    assert registry.problem("sentiment_imdb").resource == resource
    check_real_pin_rejects(resource, tmp_path, b"not the reviews")
    root = tfds_root()
    if root is not None:
        tsv = os.path.join(root, "datasets", "imdb_reviews", "checksums.tsv")
        with open(tsv) as f:
            url, size, sha, *_ = f.readline().split("\t")
        assert (url, int(size), sha) == (resource.url, resource.size, resource.sha256)
