"""Tests of languagemodel_ptb10k, offline.

A tiny `simple-examples.tgz` with the real layout (`./simple-examples/data/ptb.*.txt`
beside decoys) and line format (` word word ... ` with `<unk>` and `N`) is served by a
local HTTP server used as a URL-prefix mirror. The real resource is unpinned (no
recorded checksum); the test pins it to the tiny file's hash.
"""

from __future__ import annotations

import collections
import os
import random

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.problems.text import ptb
from tests.helpers.local_http import pinned, serve_folder, write_tar

_WORDS = "the <unk> company said N shares of its stock rose in trading yesterday".split()


def _sentences(seed: int, count: int, extra: tuple[str, ...] = ()) -> list[str]:
    rng = random.Random(seed)
    words = _WORDS + list(extra)
    # Zipf-like weights so that frequencies differ.
    weights = [1.0 / (i + 1) for i in range(len(words))]
    return [" ".join(rng.choices(words, weights, k=rng.randint(3, 15))) for _ in range(count)]


TRAIN = _sentences(1, 60, extra=("rare",))
VALID = [*_sentences(2, 7), "the unseen company said rare shares"]
TEST = _sentences(3, 6)
NUM_WORDS = 8


def _lines(sentences: list[str]) -> bytes:
    return "".join(f" {s} \n" for s in sentences).encode()


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    path = os.path.join(folder, "simple-examples.tgz")
    members = {
        "./simple-examples/data/ptb.train.txt": _lines(TRAIN),
        "./simple-examples/data/ptb.valid.txt": _lines(VALID),
        "./simple-examples/data/ptb.test.txt": _lines(TEST),
        "./simple-examples/data/ptb.char.train.txt": b"a _ b\n",
        "./simple-examples/1-train/README": b"decoy\n",
    }
    write_tar(path, members, folders=("./simple-examples", "./simple-examples/data"))

    with serve_folder(folder) as (url, _):
        yield url, path


@pytest.fixture()
def tiny(monkeypatch, mirror):
    _, path = mirror
    monkeypatch.setattr(ptb.LanguagemodelPtb10k, "resource", pinned(ptb.PTB, path))
    monkeypatch.setattr(ptb.LanguagemodelPtb10k, "num_words", NUM_WORDS)
    return ptb.LanguagemodelPtb10k


def _expected_vocab() -> list[str]:
    counts = collections.Counter(w for s in TRAIN for w in s.split() if w != "<unk>")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[: NUM_WORDS - 1]] + ["<unk>"]


def _as_unk(sentence: str, vocab: list[str]) -> str:
    return " ".join(w if w in vocab else "<unk>" for w in sentence.split())


def test_generate_and_read_back(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("languagemodel_ptb10k")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False, num_shards=2)
    assert {k: v.examples for k, v in summary.items()} == {"train": 60, "dev": 8, "test": 6}

    # The word vocabulary was built from ptb.train.txt and saved in data_dir.
    vocab_path = os.path.join(data_dir, "vocab.languagemodel_ptb10k.token")
    with open(vocab_path, encoding="utf-8") as f:
        saved = f.read().split("\n")
    vocab = _expected_vocab()
    assert [t for t in saved if t] == ["<pad>", "<EOS>", *vocab]

    encoder = prob.feature_encoders(data_dir)["targets"]
    assert isinstance(encoder, text_encoder.TokenTextEncoder)
    assert encoder.vocab_size == NUM_WORDS + 2 == prob.hparams(data_dir).vocab_size["targets"]

    def decoded(split):
        dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True, split=split)
        out = []
        for ex in dataset.as_numpy_iterator():
            assert ex["targets"][-1] == text_encoder.EOS_ID
            out.append(encoder.decode(ex["targets"], strip_extraneous=True))
        return out

    assert decoded("dev") == [_as_unk(s, vocab) for s in VALID]
    assert decoded("dev")[-1] == "the <unk> company said <unk> shares"  # out of vocabulary
    assert decoded("test") == [_as_unk(s, vocab) for s in TEST]
    assert sorted(decoded("train")) == sorted(_as_unk(s, vocab) for s in TRAIN)
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"]

    # A second run reuses the saved vocabulary.
    os.remove(os.path.join(data_dir, "languagemodel_ptb10k-test-00000-of-00001"))
    with open(vocab_path, "a", encoding="utf-8") as f:
        f.write("extra\n")
    fresh = registry.problem("languagemodel_ptb10k")
    fresh.generate_data(data_dir, tmp_dir, mirror=url, progress=False, num_shards=2)
    assert fresh.feature_encoders(data_dir)["targets"].vocab_size == NUM_WORDS + 3


def test_missing_vocab_names_datagen(tmp_path):
    prob = registry.problem("languagemodel_ptb10k")
    with pytest.raises(FileNotFoundError, match="t2t-datagen --problem=languagemodel_ptb10k"):
        prob.feature_encoders(str(tmp_path))


def test_real_resource_is_unpinned():
    res = ptb.PTB
    assert res.url == "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
    assert res.size is None and res.sha256 is None  # not recorded anywhere: fetched unverified
    prob = registry.problem("languagemodel_ptb10k")
    assert prob.num_words == 10_000 and prob.vocab_type == "token"
    assert [s.name for s in prob.splits] == ["train", "dev", "test"]
