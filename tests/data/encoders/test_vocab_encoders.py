"""Tests for t2t.data.encoders.vocab_encoders: the fixed-vocabulary encoders' reserved and
unknown ids, the validation of their vocabularies and vocabulary files (errors name the
bad value), and saving over an existing file. Basic encode/decode and save/load round
trips are in test_text_encoder.py."""

import os

import pytest

from t2t.data.encoders import vocab_encoders as ve


def test_character_ids_reserved_unk_and_range():
    enc = ve.CharacterTextEncoder("ab")
    assert enc.UNK_ID == 2 and enc.vocab_size == 5
    assert enc.encode("") == [] and enc.decode([]) == ""
    assert enc.encode("bza") == [4, 2, 3]
    assert enc.decode_list([0, 1, 2, 3, 4]) == ["<pad>", "<EOS>", "<UNK>", "a", "b"]
    with pytest.raises(ValueError, match=r"id 5 is out of range \[0, 5\)"):
        enc.decode([5])
    with pytest.raises(ValueError, match="single character"):
        ve.CharacterTextEncoder(["ab"])


def test_character_load_rejects_bad_files(tmp_path):
    no_unk = tmp_path / "no_unk.txt"
    no_unk.write_text("<pad>\n<EOS>\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no_unk\.txt.*does not start with"):
        ve.CharacterTextEncoder.load(no_unk)
    bad_line = tmp_path / "bad_line.txt"
    bad_line.write_text("<pad>\n<EOS>\n<UNK>\na\nxy\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad character vocabulary line 'xy'"):
        ve.CharacterTextEncoder.load(bad_line)


def test_token_vocabulary_validation(tmp_path):
    with pytest.raises(ValueError, match="exactly one of vocab and vocab_list"):
        ve.TokenTextEncoder()
    with pytest.raises(ValueError, match="exactly one of vocab and vocab_list"):
        ve.TokenTextEncoder(["a"], vocab_list=["a"])
    with pytest.raises(ValueError, match="duplicate tokens"):
        ve.TokenTextEncoder(["a", "b", "a"])
    with pytest.raises(ValueError, match="whitespace"):
        ve.TokenTextEncoder([""])
    # Reserved tokens in a list are moved to the front, not duplicated.
    assert ve.TokenTextEncoder(["<EOS>", "a", "<pad>"]).tokens == ["<pad>", "<EOS>", "a"]

    headless = tmp_path / "headless.txt"
    headless.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"headless\.txt.*must start with"):
        ve.TokenTextEncoder(headless)
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"<pad>\r\n<EOS>\r\nx\r\ny\r\n")
    enc = ve.TokenTextEncoder.load(crlf)
    assert enc.tokens == ["<pad>", "<EOS>", "x", "y"] and enc.encode("y x") == [3, 2]
    with pytest.raises(ValueError, match="replace_oov token '<unk>' is not in"):
        ve.TokenTextEncoder(crlf, replace_oov="<unk>")


def test_token_save_overwrites_atomically(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("old contents\n", encoding="utf-8")
    enc = ve.TokenTextEncoder(["x", "y"])
    enc.store_to_file(path)  # Tensor2Tensor's name for save.
    assert path.read_text(encoding="utf-8") == "<pad>\n<EOS>\nx\ny\n"
    assert os.listdir(tmp_path) == ["vocab.txt"]
    assert ve.TokenTextEncoder.load(path).encode("") == []


def test_class_labels(tmp_path):
    with pytest.raises(ValueError, match="exactly one of class_labels"):
        ve.ClassLabelEncoder()
    with pytest.raises(ValueError, match="duplicate class labels"):
        ve.ClassLabelEncoder(["a", "a"])
    enc = ve.ClassLabelEncoder(["very good", "bad", "café"])
    with pytest.raises(ValueError, match="unknown class label 'zzz'$"):
        enc.encode("zzz")  # No close match: no suggestion.
    with pytest.raises(ValueError, match=r"expected one class id, got \[0, 1\]"):
        enc.decode([0, 1])
    with pytest.raises(ValueError, match=r"class id -1 is out of range \[0, 3\)"):
        enc.decode(-1)
    # Labels may hold spaces and non-ASCII characters, one per line.
    enc.save(tmp_path / "labels.txt")
    loaded = ve.ClassLabelEncoder.load(tmp_path / "labels.txt")
    assert loaded.class_labels == ["very good", "bad", "café"]
    assert [loaded.encode(x) for x in enc.class_labels] == [0, 1, 2]
    # A label that cannot be one line is refused before anything is written.
    with pytest.raises(ValueError, match="line breaks"):
        ve.ClassLabelEncoder(["a\nb"]).save(tmp_path / "broken.txt")
    assert sorted(os.listdir(tmp_path)) == ["labels.txt"]
