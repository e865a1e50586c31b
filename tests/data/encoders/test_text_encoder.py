"""Tests for t2t.data.encoders.text_encoder (no TensorFlow needed)."""

import json
import logging
import os
import pathlib
import pickle
import random
import subprocess
import sys

import numpy as np
import pytest

from t2t.data.encoders import text_encoder as te

SAMPLES = [
    "",
    "hello world",
    "  leading and trailing  ",
    "tabs\tand\nnewlines\r\n",
    "naïve café — Ünïcödé",
    "日本語のテキスト",
    "emoji 😀👍🏽 and flags 🇩🇪",
    "\x00\x7f control \u2028 line sep",
]

_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards hex "
    "naïve café bakers 日本 語 😀 music river mountain"
)
WORDS = _WORDS.split()

REPO_ROOT = str(pathlib.Path(__file__).resolve().parents[3])  # holds t2t/


def corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)
    ]


@pytest.fixture(scope="module")
def sp_dir(tmp_path_factory):
    """One trained model shared by the read-only SentencePiece tests."""
    d = tmp_path_factory.mktemp("sp")
    te.SentencePieceEncoder.train(corpus(), str(d / "spm"), vocab_size=64)
    return d


def test_reserved_ids():
    assert te.PAD_ID == 0 and te.EOS_ID == 1 and te.NUM_RESERVED_TOKENS == 2
    assert te.RESERVED_TOKENS == ["<pad>", "<EOS>"]


def test_strip_extraneous():
    assert te.strip_extraneous([5, 0, 6, 1, 7, 1]) == [5, 6]
    assert te.strip_extraneous(np.array([0, 0, 3], np.int32)) == [3]
    assert te.strip_extraneous([]) == []
    with pytest.raises(ValueError, match="1-D"):
        te.strip_extraneous([[1, 2]])
    with pytest.raises(TypeError):
        te.strip_extraneous([1.5])


def test_base_text_encoder():
    enc = te.TextEncoder()
    assert enc.encode("1 0 1 1") == [3, 2, 3, 3]
    assert enc.decode([3, 2, 3, 3, 1, 0]) == "1 0 1 1 <EOS> <pad>"
    assert enc.decode([3, 2, 1, 5], strip_extraneous=True) == "1 0"


@pytest.mark.parametrize("text", SAMPLES)
def test_byte_round_trip(text):
    enc = te.ByteTextEncoder()
    ids = enc.encode(text)
    assert all(2 <= i < 258 for i in ids)
    assert enc.decode(ids) == text
    assert enc.decode(ids + [te.EOS_ID, 0, 0], strip_extraneous=True) == text


def test_byte_encoder_details():
    enc = te.ByteTextEncoder()
    assert enc.vocab_size == 258 and enc.num_reserved_ids == 2
    assert enc.encode("A") == [ord("A") + 2]
    assert enc.decode([0, 1]) == "<pad><EOS>"
    assert enc.decode([0xFF + 2]) == "\ufffd"  # Invalid UTF-8 is replaced.
    assert enc.decode(np.array(enc.encode("hi"), dtype=np.int64)) == "hi"
    assert enc.decode_list(enc.encode("ab")) == ["a", "b"]
    with pytest.raises(ValueError, match="out of range"):
        enc.decode([258])


@pytest.mark.parametrize("text", SAMPLES)
def test_character_round_trip(text, tmp_path):
    enc = te.CharacterTextEncoder.build_from_generator(SAMPLES)
    assert enc.decode(enc.encode(text)) == text
    enc.save(tmp_path / "chars.txt")
    loaded = te.CharacterTextEncoder.load(tmp_path / "chars.txt")
    assert loaded.chars == enc.chars
    assert loaded.encode(text) == enc.encode(text)


def test_character_file_escapes_every_char(tmp_path):
    specials = ["\n", "\t", "\r", " ", "\\", "\x0b", "\x0c", "\x85", "\u2028", "\x00"]
    chars = specials + ["n", "s", "u", "a", "é", "😀", "\U0001f1e9", "\ud800"]
    enc = te.CharacterTextEncoder(chars)
    path = tmp_path / "chars.txt"
    enc.save(path)
    assert len(path.read_bytes().split(b"\n")) == 3 + len(chars) + 1
    assert te.CharacterTextEncoder.load(path).chars == chars


def test_character_vocab_order_unk_and_max_chars():
    enc = te.CharacterTextEncoder.build_from_generator(["abbccc", "c"], max_chars=2)
    assert enc.chars == ["c", "b"]  # Most frequent first.
    assert enc.vocab_size == 5
    assert enc.encode("cbaz") == [3, 4, 2, 2]
    assert enc.decode([3, 2, 1, 4], strip_extraneous=True) == "c<UNK>"
    tie = te.CharacterTextEncoder.build_from_generator(["zyxzyx"])
    assert tie.chars == ["x", "y", "z"]  # Ties: by code point.
    with pytest.raises(ValueError, match="duplicate"):
        te.CharacterTextEncoder(["a", "a"])


def test_token_encoder():
    enc = te.TokenTextEncoder(["0", "1"])
    assert enc.tokens == te.TokenTextEncoder(vocab_list=("0", "1")).tokens
    assert enc.vocab_size == 4
    assert enc.encode("1 0 1 1") == [3, 2, 3, 3]
    assert enc.encode("  1\t0\n") == [3, 2]
    assert enc.decode([3, 2, 3, 3]) == "1 0 1 1"
    assert enc.decode([3, 0, 2, 1, 3], strip_extraneous=True) == "1 0"
    assert enc.decode([3, 1]) == "1 <EOS>"
    assert enc.decode_list([2, 9]) == ["0", "ID_9"]
    with pytest.raises(ValueError, match="'2' is not in the vocabulary"):
        enc.encode("1 2")


def test_token_encoder_options_and_file(tmp_path):
    enc = te.TokenTextEncoder(vocab_list=["a", "b"], replace_oov="<unk>", reverse=True)
    assert enc.tokens == ["<pad>", "<EOS>", "a", "b", "<unk>"]
    assert enc.encode("a b zzz") == [4, 3, 2]
    assert enc.decode([4, 3, 2]) == "a b <unk>"  # Reversed back.
    path = tmp_path / "vocab.tokens"
    enc.save(path)
    assert path.read_text(encoding="utf-8").split("\n")[:2] == ["<pad>", "<EOS>"]
    assert te.TokenTextEncoder(str(path)).tokens == enc.tokens
    loaded = te.TokenTextEncoder.load(path, replace_oov="<unk>")
    assert loaded.tokens == enc.tokens and loaded.encode("a q") == [2, 4]
    with pytest.raises(ValueError, match="whitespace"):
        te.TokenTextEncoder(vocab_list=["a b"])


def test_class_label_encoder(tmp_path):
    enc = te.ClassLabelEncoder(["negative", "positive", "neutral"])
    assert enc.vocab_size == 3 and enc.num_reserved_ids == 0
    assert enc.encode("positive") == 1
    assert enc.decode(2) == enc.decode([2]) == enc.decode(np.array([[2]])) == "neutral"
    assert enc.decode_list([0, 1]) == ["negative", "positive"]
    with pytest.raises(ValueError, match="'positive'"):
        enc.encode("positve")
    with pytest.raises(ValueError, match="out of range"):
        enc.decode(3)
    enc.save(tmp_path / "labels.txt")
    assert (
        te.ClassLabelEncoder.load(tmp_path / "labels.txt").class_labels
        == enc.class_labels
    )


def test_missing_files_name_path_and_hint(tmp_path):
    missing = tmp_path / "nope.txt"
    for load in (
        te.CharacterTextEncoder.load,
        te.TokenTextEncoder.load,
        te.ClassLabelEncoder.load,
        te.SentencePieceEncoder.load,
    ):
        with pytest.raises(FileNotFoundError, match="nope.txt.*t2t-datagen"):
            load(missing)
    hint = "run `t2t-datagen --problem=foo --data_dir=/d` first"
    with pytest.raises(FileNotFoundError, match="problem=foo"):
        te.SentencePieceEncoder.load(missing, hint=hint)
    with pytest.raises(FileNotFoundError, match="problem=foo"):
        te.build_encoder(
            {"type": "sentencepiece", "model_file": "x.model"}, tmp_path, hint=hint
        )


def test_sentencepiece_round_trip(sp_dir):
    enc = te.SentencePieceEncoder.load(sp_dir / "spm.model")
    assert 10 < enc.vocab_size <= 64
    assert enc.decode_list([0, 1, 2]) == ["<pad>", "<EOS>", "<UNK>"]
    for text in ["the quick brown fox", "naïve café 日本 😀", ""]:
        ids = enc.encode(text)
        assert te.EOS_ID not in ids and te.PAD_ID not in ids
        assert enc.decode(ids) == text
        assert enc.decode(ids + [te.EOS_ID, 5, 0], strip_extraneous=True) == text
    assert (
        enc.decode(enc.encode("  the \t fox\n")) == "the fox"
    )  # Whitespace normalized.
    assert enc.encode("ж") and te.SENTENCEPIECE_UNK_ID in enc.encode("ж")
    assert enc.model_proto == (sp_dir / "spm.model").read_bytes()
    assert pickle.loads(pickle.dumps(enc)).encode("the fox") == enc.encode("the fox")
    with pytest.raises(ValueError, match="out of range"):
        enc.decode([enc.vocab_size])


def test_sentencepiece_vocab_file(sp_dir):
    lines = (sp_dir / "spm.vocab").read_text(encoding="utf-8").splitlines()
    enc = te.SentencePieceEncoder.load(sp_dir / "spm.model")
    assert len(lines) == enc.vocab_size
    assert lines[0].split("\t")[0] == "<pad>" and lines[1].startswith("<EOS>\t")


def test_sentencepiece_deterministic_and_atomic(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        te.SentencePieceEncoder.train(corpus(), str(tmp_path / d / "m"), vocab_size=64)
    assert (tmp_path / "a/m.model").read_bytes() == (
        tmp_path / "b/m.model"
    ).read_bytes()
    assert (tmp_path / "a/m.vocab").read_bytes() == (
        tmp_path / "b/m.vocab"
    ).read_bytes()
    assert sorted(os.listdir(tmp_path / "a")) == [
        "m.model",
        "m.vocab",
    ]  # No temp files.


def test_sentencepiece_max_samples(tmp_path):
    pulled = 0

    def texts():
        nonlocal pulled
        for t in corpus(1000):
            pulled += 1
            yield t

    te.SentencePieceEncoder.train(
        texts(), str(tmp_path / "m"), vocab_size=40, max_samples=200
    )
    assert pulled == 200


def test_sentencepiece_too_large_vocab(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=te.__name__):
        enc = te.SentencePieceEncoder.train(
            ["ab ab ba", "abba"], str(tmp_path / "m"), vocab_size=5000, model_type="bpe"
        )
    assert 3 < enc.vocab_size < 5000
    assert "asked for 5000" in caplog.text
    assert enc.decode(enc.encode("ab ba")) == "ab ba"


def test_sentencepiece_empty_corpus(tmp_path):
    with pytest.raises(ValueError, match="no texts"):
        te.SentencePieceEncoder.train(iter([]), str(tmp_path / "m"), vocab_size=10)
    assert not os.listdir(tmp_path)


def test_sentencepiece_failed_training_keeps_old_model(tmp_path, sp_dir):
    old = (sp_dir / "spm.model").read_bytes()
    (tmp_path / "m.model").write_bytes(old)
    with pytest.raises(ValueError):
        te.SentencePieceEncoder.train([], str(tmp_path / "m"), vocab_size=10)
    assert (tmp_path / "m.model").read_bytes() == old
    assert os.listdir(tmp_path) == ["m.model"]


def test_describe_build_round_trip(tmp_path, sp_dir):
    sp = te.SentencePieceEncoder.load(sp_dir / "spm.model")
    encoders = [
        (te.TextEncoder(), "1 0 7"),
        (te.ByteTextEncoder(), "café 😀"),
        (te.CharacterTextEncoder.build_from_generator(SAMPLES), "tabs\tcafé 😀"),
        (
            te.TokenTextEncoder(vocab_list=["0", "1"], replace_oov="1", reverse=True),
            "1 0",
        ),
        (sp, "the naïve fox"),
        (te.ClassLabelEncoder(["neg", "pos"]), "pos"),
    ]
    for enc, text in encoders:
        description = json.loads(json.dumps(enc.describe()))
        rebuilt = te.build_encoder(description, sp_dir)
        assert type(rebuilt) is type(enc)
        assert rebuilt.describe() == enc.describe()
        assert rebuilt.encode(text) == enc.encode(text)
        assert rebuilt.decode(enc.encode(text)) == text
    assert te.build_encoder(sp.describe(), sp_dir).model_proto == sp.model_proto
    assert sp.describe()["model_file"] == "spm.model"
    with pytest.raises(ValueError, match="unknown encoder type"):
        te.build_encoder({"type": "nope"}, tmp_path)
    with pytest.raises(ValueError, match="save"):
        te.SentencePieceEncoder(model_proto=sp.model_proto).describe()


def test_module_imports_no_tensorflow():
    code = "import sys, t2t.data.encoders.text_encoder; print('tensorflow' in sys.modules)"
    root = REPO_ROOT
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.stdout.strip() == "False", out.stderr


def test_public_names_stay_importable_from_text_encoder():
    from t2t.data.encoders import encoder_base, sentencepiece_encoder, vocab_encoders, vocab_files

    assert te.TextEncoder is encoder_base.TextEncoder
    assert te.ByteTextEncoder is encoder_base.ByteTextEncoder
    assert te.RESERVED_TOKENS is encoder_base.RESERVED_TOKENS
    assert te.strip_extraneous is encoder_base.strip_extraneous
    assert te.SentencePieceEncoder is sentencepiece_encoder.SentencePieceEncoder
    assert te.SENTENCEPIECE_UNK_ID == sentencepiece_encoder.SENTENCEPIECE_UNK_ID == 2
    for name in ("CharacterTextEncoder", "TokenTextEncoder", "ClassLabelEncoder"):
        assert getattr(te, name) is getattr(vocab_encoders, name)
    assert te.DEFAULT_HINT == vocab_files.DEFAULT_HINT
    assert (te.PAD_ID, te.EOS_ID, te.NUM_RESERVED_TOKENS) == (0, 1, 2)
    assert te.RESERVED_TOKENS == [te.PAD, te.EOS] == ["<pad>", "<EOS>"]


def test_encoder_modules_import_no_tensorflow():
    modules = ", ".join(
        f"t2t.data.encoders.{m}"
        for m in ("encoder_base", "vocab_encoders", "sentencepiece_encoder", "vocab_files")
    )
    code = f"import sys, {modules}; print('tensorflow' in sys.modules, 'sentencepiece' in sys.modules)"
    root = REPO_ROOT
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        check=False,
    )
    assert out.stdout.strip() == "False False", out.stderr


# ------------------------------------------- Tensor2Tensor's string and id helpers
def test_tensor2tensor_string_helpers():
    assert te.to_unicode(b"caf\xc3\xa9") == "café"
    assert te.to_unicode("café") == "café"
    with pytest.raises(UnicodeDecodeError):
        te.to_unicode(b"bad \xff")
    assert te.to_unicode_ignore_errors(b"bad \xff") == "bad "
    assert te.native_to_unicode(b"bad \xff") == "bad "
    assert te.unicode_to_native("x") == "x"


def test_strip_ids_strips_only_the_end():
    assert te.strip_ids([5, 1, 6, 1, 0, 0], [0, 1]) == [5, 1, 6]
    assert te.strip_ids([0, 0], [0]) == []
    assert te.strip_ids((4, 5), []) == [4, 5]
