"""Tests of t2t.data.encoders.tokenizer: Tensor2Tensor's reversible tokenizer."""

from __future__ import annotations

import pytest

from t2t.data.encoders import tokenizer

TEXTS = [
    "Dude - that's so cool.",
    "  two leading spaces, and two  inside",
    "trailing space ",
    "Ünïcödé wörds, 数字 ١٢٣ and emoji ☕!",
    "a\tb\nc",
    "",
    " ",
    "x",
    "...",
    "snake_case_names and CamelCase42",
]


def test_tensor2tensor_documented_example():
    assert tokenizer.encode("Dude - that's so cool.") == [
        "Dude", " - ", "that", "'", "s", "so", "cool", "."]


@pytest.mark.parametrize("text", TEXTS)
def test_decode_inverts_encode(text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_only_a_single_space_between_words_is_dropped():
    assert tokenizer.encode("a b") == ["a", "b"]
    assert tokenizer.encode("a  b") == ["a", "  ", "b"]
    assert tokenizer.encode(" a") == [" ", "a"]  # at the start it is kept
    assert tokenizer.encode("a . b") == ["a", " . ", "b"]
    assert tokenizer.encode("snake_case") == ["snake", "_", "case"]  # "_" is not alphanumeric
    assert tokenizer.encode("٣٤ x") == ["٣٤", "x"]  # Unicode digits are alphanumeric


def test_corpus_and_vocab_token_counts(tmp_path):
    (tmp_path / "a.txt").write_text("the cat\nthe dog\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("a cat\n", encoding="utf-8")
    counts = tokenizer.corpus_token_counts(str(tmp_path / "*.txt"), None)
    assert counts == {"the": 2, "cat": 2, "dog": 1, "a": 1}
    assert tokenizer.corpus_token_counts(str(tmp_path / "*.txt"), 1) == {"the": 1, "cat": 1}
    whole = tokenizer.corpus_token_counts(str(tmp_path / "a.txt"), None, split_on_newlines=False)
    assert whole == {"the": 2, "cat": 1, "\n": 2, "dog": 1}
    (tmp_path / "vocab.csv").write_text("the,10\n\"a,b\",3\n", encoding="utf-8")
    assert tokenizer.vocab_token_counts(str(tmp_path / "vocab.csv"), None) == {"the": 10, "a,b": 3}
    (tmp_path / "bad.csv").write_text("the;10\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.csv:1: expected 'token,count'"):
        tokenizer.vocab_token_counts(str(tmp_path / "bad.csv"), None)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        tokenizer.corpus_token_counts(str(tmp_path / "none*.txt"), None)
