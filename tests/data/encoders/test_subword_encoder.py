"""Tests of t2t.data.encoders.subword_encoder: Tensor2Tensor's SubwordTextEncoder, checked
against its documented rules (escaping, `_` word ends, unknown characters, greedy
longest match, the quoted `.subwords` file with `<pad>_` and `<EOS>_` first)."""

from __future__ import annotations

import inspect
import json
import pathlib

import pytest

from t2t.data.encoders import subword_encoder, text_encoder
from t2t.data.encoders.subword_encoder import SubwordTextEncoder, escape_token, unescape_token

DIGITS = "0123456789"
# A vocabulary as Tensor2Tensor writes it: the reserved tokens, longer pieces, then the
# alphabet (here "dehlorw" and the escape characters).
HAND_VOCAB = ["<pad>_", "<EOS>_", "hello_", "hell", "wor", "ld_", "o", "_", "\\", "u",
              ";", *DIGITS, "d", "e", "h", "l", "r", "w"]


def real_text() -> list[str]:
    """Real English: the docstrings of a few standard-library modules, a line each."""
    import collections
    import csv
    import difflib
    import textwrap

    lines = []
    for module in (collections, csv, difflib, json, textwrap, inspect):
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj) if callable(obj) else None
            if doc:
                lines += [line for line in doc.splitlines() if line.strip()]
    return lines


@pytest.fixture(scope="module")
def hand_file(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("subwords") / "vocab.hand.subwords"
    path.write_text("".join(f"'{s}'\n" for s in HAND_VOCAB), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built() -> SubwordTextEncoder:
    return SubwordTextEncoder.build_from_generator(real_text(), 400)


# ------------------------------------------------------------------- escaping
def test_escaping_rules():
    alphabet = set("abc") | set(subword_encoder.ESCAPE_CHARS)
    assert escape_token("abc", alphabet) == "abc_"  # "_" ends every word
    assert escape_token("a_b", alphabet) == "a\\ub_"  # "_" inside a word -> \u
    assert escape_token("a\\b", alphabet) == "a\\\\b_"  # "\" -> "\\"
    assert escape_token("é", alphabet) == "\\233;_"  # outside the alphabet: \code point;
    assert escape_token("a\nb", alphabet | {"\n"}) == "a\\10;b_"  # newlines always
    for token in ["abc", "a_b", "a\\b", "é", "a\nb", "\\u", "_", "12;"]:
        assert unescape_token(escape_token(token, alphabet)) == token
    assert unescape_token("\\99999999999;_") == subword_encoder.UNDEFINED_CHARACTER


# --------------------------------------------------------- a hand-made file
def test_loads_a_tensor2tensor_file_with_its_ids(hand_file):
    encoder = SubwordTextEncoder(hand_file)
    assert encoder.vocab_size == len(HAND_VOCAB)
    assert encoder.all_subtoken_strings[:3] == ("<pad>_", "<EOS>_", "hello_")
    # "hello world" -> tokens "hello", "world" -> "hello_" | "wor" "ld_" (longest first)
    assert encoder.encode("hello world") == [2, 4, 5]
    assert encoder.decode_list([2, 4, 5]) == ["hello_", "wor", "ld_"]
    # "hell" alone: "hell" then the word end "_" (not "hello_": no "o").
    assert encoder.encode("hell") == [3, 7]
    assert encoder.decode([2, 4, 5]) == "hello world"


def test_unknown_characters_are_escaped_and_come_back(hand_file):
    encoder = SubwordTextEncoder(hand_file)
    ids = encoder.encode("hello, world")  # ", " is not in the alphabet: \44;\32;_
    pieces = encoder.decode_list(ids)
    assert pieces == ["hello_", "\\", "4", "4", ";", "\\", "3", "2", ";", "_", "wor", "ld_"]
    assert encoder.decode(ids) == "hello, world"
    assert encoder.decode(encoder.encode("héllo wörld\n")) == "héllo wörld\n"


def test_decode_ignores_ids_outside_and_strips_trailing_reserved(hand_file):
    encoder = SubwordTextEncoder(hand_file)
    assert encoder.decode([2, 999, 4, 5]) == "hello world"
    assert encoder.decode([2, 4, 5, 1, 0, 0], strip_extraneous=True) == "hello world"
    assert encoder.decode([2, 1], strip_extraneous=False) == "hello<EOS>"


def test_missing_file_and_vocabulary_without_alphabet(tmp_path):
    with pytest.raises(FileNotFoundError, match="subword vocabulary not found: .*none.subwords"):
        SubwordTextEncoder(tmp_path / "none.subwords")
    with pytest.raises(ValueError, match="no vocabulary"):
        SubwordTextEncoder().encode("x")


# ----------------------------------------------------------- building one
def test_built_vocabulary_round_trips_real_text_and_unseen_characters(built):
    assert abs(built.vocab_size - 400) <= 40
    assert built.all_subtoken_strings[:2] == ("<pad>_", "<EOS>_")
    for line in real_text()[:300] + ["naïve café ☕ 数字\u3000 tab\there", "  ", "_under_"]:
        ids = built.encode(line)
        assert all(2 <= i < built.vocab_size for i in ids)
        assert built.decode(ids) == line
    # Frequent words became one piece each: fewer ids than characters.
    text = " ".join(real_text()[:200])
    assert len(built.encode(text)) < 0.6 * len(text)


def test_store_and_load_give_the_same_encoder(built, tmp_path):
    path = tmp_path / "vocab.test.400.subwords"
    built.store_to_file(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["'<pad>_'", "'<EOS>_'"] and all(
        line.startswith("'") and line.endswith("'") for line in lines)
    loaded = SubwordTextEncoder(path)
    assert loaded.all_subtoken_strings == built.all_subtoken_strings
    for line in real_text()[:100]:
        assert loaded.encode(line) == built.encode(line)
    rebuilt = text_encoder.build_encoder(built.describe(), tmp_path)
    assert isinstance(rebuilt, SubwordTextEncoder)
    assert rebuilt.encode("json.dumps") == built.encode("json.dumps")


def test_build_to_target_size_and_reserved_tokens_are_checked():
    counts = {"alpha": 5, "beta": 3, "alphabet": 2}
    small = SubwordTextEncoder.build_to_target_size(30, counts, 1, 10)
    assert small.decode(small.encode("alphabet beta")) == "alphabet beta"
    with pytest.raises(ValueError, match="min_val 5 > max_val 1"):
        SubwordTextEncoder.build_to_target_size(30, counts, 5, 1)
    with pytest.raises(ValueError, match="reserved_tokens must start with"):
        SubwordTextEncoder().build_from_token_counts(counts, 1, reserved_tokens=["<EOS>"])
