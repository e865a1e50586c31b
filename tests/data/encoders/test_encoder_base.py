"""Tests for t2t.data.encoders.encoder_base: the id helpers `as_ids`/`strip_extraneous`, the
base `TextEncoder` (ints offset by the reserved ids) and `ByteTextEncoder` over the
whole byte range. Round trips of sample texts live in test_text_encoder.py."""

import numpy as np
import pytest

from t2t.data.encoders import encoder_base as eb


def test_as_ids_returns_python_ints_from_any_1d_sequence():
    for ids in ([3, 4], (3, 4), np.array([3, 4], np.uint8), np.array([3, 4], np.int64)):
        out = eb.as_ids(ids)
        assert out == [3, 4] and all(type(i) is int for i in out), ids
    assert eb.as_ids(np.int64(7)) == [7]  # A 0-d id is one id.
    assert eb.as_ids(np.zeros((0,), np.float32)) == []  # Empty: no dtype check.
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        eb.as_ids(np.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match="float64"):
        eb.as_ids([1.0, 2.0])


def test_strip_extraneous_cuts_at_first_eos_only():
    assert eb.strip_extraneous([eb.EOS_ID, 5, 6]) == []
    assert eb.strip_extraneous([eb.PAD_ID, eb.PAD_ID]) == []
    assert eb.strip_extraneous(np.array([0, 7, 0, 8, 1, 0, 9, 1])) == [7, 8]


def test_text_encoder_offsets_by_reserved_ids_and_round_trips():
    enc = eb.TextEncoder()
    assert enc.num_reserved_ids == eb.NUM_RESERVED_TOKENS == 2
    ids = enc.encode(" 0 7\t41 ")
    assert ids == [2, 9, 43]
    assert enc.decode(ids) == "0 7 41"
    assert enc.encode("") == [] and enc.decode([]) == ""
    assert enc.decode_list([0, 1, 2]) == ["<pad>", "<EOS>", "0"]
    assert enc.describe() == {"type": "text", "num_reserved_ids": 2}
    with pytest.raises(NotImplementedError, match="TextEncoder"):
        enc.vocab_size  # noqa: B018

    unreserved = eb.TextEncoder(num_reserved_ids=0)
    assert unreserved.encode("0 5") == [0, 5]
    assert unreserved.decode([0, 1]) == "0 1"  # Ids 0 and 1 are plain numbers here.
    assert unreserved.describe()["num_reserved_ids"] == 0


def test_byte_encoder_covers_every_byte():
    enc = eb.ByteTextEncoder()
    assert enc.vocab_size == 258
    assert enc.decode(range(2, 2 + 0x80)) == "".join(map(chr, range(0x80)))
    # Every UTF-8 byte maps to its own id and back.
    text = "a\x00é€😀"
    assert enc.encode(text) == [b + 2 for b in text.encode("utf-8")]
    assert enc.decode(enc.encode(text)) == text
    # decode_list decodes id by id: a multi-byte character splits into replacements.
    assert enc.decode_list(enc.encode("é")) == ["\ufffd", "\ufffd"]
    assert (
        enc.decode(enc.encode("hi") + [eb.EOS_ID] + enc.encode("x"), strip_extraneous=True) == "hi"
    )
    assert enc.describe() == {"type": "byte"}
    with pytest.raises(ValueError, match=r"id -1 is out of range \[0, 258\)"):
        enc.decode([-1])
