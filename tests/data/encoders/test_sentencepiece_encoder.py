"""Tests for t2t.data.encoders.sentencepiece_encoder: construction from a file or from
model bytes, saving (atomic, optional vocab file) before `describe`, training options
(user-defined symbols after the reserved ids, caller options winning) and id range
errors. Round trips, determinism and corpus limits are in test_text_encoder.py."""

import os
import random

import pytest

from t2t.data.encoders import sentencepiece_encoder as se

WORDS = "the quick brown fox jumps over a lazy dog naïve café".split()


def corpus(n: int = 200) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model with one user-defined symbol, trained once for the module."""
    folder = tmp_path_factory.mktemp("spm")
    enc = se.SentencePieceEncoder.train(
        corpus(), folder / "m", vocab_size=48, user_defined_symbols=["<sep>"]
    )
    return enc, folder


def test_train_reserves_ids_then_user_symbols(trained):
    enc, folder = trained
    assert sorted(os.listdir(folder)) == ["m.model", "m.vocab"]
    assert enc.model_file == os.fspath(folder / "m.model")
    assert enc.decode_list([0, 1, 2, 3]) == ["<pad>", "<EOS>", "<UNK>", "<sep>"]
    assert se.SENTENCEPIECE_UNK_ID == 2
    ids = enc.encode("fox<sep>dog")
    assert 3 in ids and ids.count(3) == 1  # The symbol is never split.
    assert enc.decode(ids) == "fox<sep>dog"
    assert enc.decode(ids + [1, 3, 3], strip_extraneous=True) == "fox<sep>dog"


def test_extra_options_override_the_defaults(tmp_path):
    enc = se.SentencePieceEncoder.train(
        corpus(),
        str(tmp_path / "m"),
        vocab_size=48,
        extra_options={"max_sentencepiece_length": 1},
    )
    pieces = enc.decode_list(range(3, enc.vocab_size))
    assert pieces and all(len(p) == 1 for p in pieces), pieces
    assert enc.decode(enc.encode("lazy fox")) == "lazy fox"


def test_model_bytes_save_and_describe(trained, tmp_path):
    enc, _ = trained
    with pytest.raises(ValueError, match="exactly one of model_file and model_proto"):
        se.SentencePieceEncoder()
    with pytest.raises(ValueError, match="exactly one of model_file and model_proto"):
        se.SentencePieceEncoder(enc.model_file, model_proto=enc.model_proto)
    in_memory = se.SentencePieceEncoder(model_proto=enc.model_proto)
    assert in_memory.model_file is None
    assert in_memory.encode("the lazy dog") == enc.encode("the lazy dog")
    with pytest.raises(ValueError, match="save"):
        in_memory.describe()

    target = tmp_path / "sub" / "copy.model"
    target.parent.mkdir()
    target.write_bytes(b"an older model")
    in_memory.save(target)  # No vocab_file: only the model is written, over the old one.
    assert os.listdir(target.parent) == ["copy.model"]
    assert target.read_bytes() == enc.model_proto
    assert in_memory.describe() == {
        "type": "sentencepiece",
        "model_file": "copy.model",
        "vocab_size": enc.vocab_size,
    }
    loaded = se.SentencePieceEncoder.load(target)
    assert loaded.model_proto == enc.model_proto and loaded.model_file == os.fspath(target)


def test_out_of_range_ids_are_named(trained):
    enc, _ = trained
    n = enc.vocab_size
    with pytest.raises(ValueError, match=rf"ids \[-1, {n}\] are out of range \[0, {n}\)"):
        enc.decode_list([-1, 3, n])
    with pytest.raises(ValueError, match=rf"ids \[{n + 5}\] are out of range"):
        enc.decode([4, n + 5])
    assert enc.encode("") == [] and enc.decode([]) == ""
