"""Tests of languagemodel_lm1b32k, offline.

A tiny `1-billion-word-language-modeling-benchmark-r13output.tar.gz` with the real
layout (99 training files, the held-out files) is served by a local HTTP server used as
a URL-prefix mirror; the problem's resource is patched to pin the tiny file's hash.
"""

from __future__ import annotations

import os
import random

import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.text import lm1b
from tests.helpers.local_http import (
    check_real_pin_rejects,
    pinned,
    serve_folder,
    tfds_root,
    write_tar,
)

_WORDS = "the market rose 3 % on Monday , while analysts said shares of banks fell .".split()
TOP = "1-billion-word-language-modeling-benchmark-r13output"


def _sentences(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12))) for _ in range(count)]


TRAIN = {i: _sentences(i, 2) for i in range(1, 100)}  # news.en-000{01..99}-of-00100
DEV = _sentences(1000, 7)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    members = {f"{TOP}/README": b"LM1B\n"}
    for i, lines in TRAIN.items():
        text = "".join(line + "\n" for line in lines)
        if i == 5:
            text += "   \n"  # a blank line is skipped
        members[f"{TOP}/training-monolingual.tokenized.shuffled/news.en-{i:05d}-of-00100"] = (
            text.encode()
        )
    heldout = f"{TOP}/heldout-monolingual.tokenized.shuffled"
    members[f"{heldout}/news.en.heldout-00000-of-00050"] = "".join(s + "\n" for s in DEV).encode()
    members[f"{heldout}/news.en.heldout-00001-of-00050"] = b"decoy\n"
    path = os.path.join(folder, lm1b.LM1B.local_name)
    write_tar(path, members)

    with serve_folder(folder) as (url, _):
        yield url, path


def test_generate_and_read_back(monkeypatch, mirror, tmp_path):
    url, archive = mirror
    cls = lm1b.LanguagemodelLm1b32k
    monkeypatch.setattr(cls, "resource", pinned(lm1b.LM1B, archive))
    monkeypatch.setattr(cls, "approx_vocab_size", 60)
    monkeypatch.setattr(cls, "splits", (problem.SplitSpec("train", 3), problem.SplitSpec("dev", 1)))
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("languagemodel_lm1b32k")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    train = [s for i in range(1, 100) for s in TRAIN[i]]
    assert summary["train"].examples == len(train) and summary["dev"].examples == len(DEV)
    assert "vocab.languagemodel_lm1b32k.60.model" in os.listdir(data_dir)

    encoder = prob.feature_encoders(data_dir)["targets"]

    def decoded(mode):
        return [
            encoder.decode(ex["targets"], strip_extraneous=True)
            for ex in prob.dataset(mode, data_dir, deterministic=True).as_numpy_iterator()
        ]

    assert decoded(problem.EVAL) == DEV
    assert sorted(decoded(problem.TRAIN)) == sorted(train)
    hp = prob.hparams(data_dir)
    assert not hp.has_inputs and hp.vocab_size["targets"] == encoder.vocab_size <= 60
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"]
    # The samples stream in file order.
    samples = prob.generate_samples(data_dir, tmp_dir, "train", mirror=url)
    assert [s["targets"] for s in samples] == train


def test_split_files_and_pin(tmp_path):
    prob = registry.problem("languagemodel_lm1b32k")
    assert len(prob.train_files) == 99
    assert prob.train_files[0].endswith(
        "training-monolingual.tokenized.shuffled/news.en-00001-of-00100"
    )
    assert prob.train_files[-1].endswith("news.en-00099-of-00100")
    assert prob.dev_files == (
        f"{TOP}/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050",
    )
    assert [s.shards for s in prob.splits] == [100, 1] and prob.max_samples_for_vocab == 63_000
    with pytest.raises(ValueError, match="no 'test' split"):
        prob.split_files("test")

    resource = lm1b.LM1B
    check_real_pin_rejects(resource, tmp_path, b"not the benchmark")

    root = tfds_root()
    if root is not None:
        tsv = os.path.join(root, "datasets", "lm1b", "checksums.tsv")
        with open(tsv) as f:
            url, size, sha, *_ = f.readline().split("\t")
        assert (url, int(size), sha) == (resource.url, resource.size, resource.sha256)
