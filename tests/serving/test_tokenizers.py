"""The in-graph tokenizers give exactly the ids and texts of the Python encoders."""

import numpy as np
import pytest
import tensorflow as tf

from t2t.problems import text_encoder
from t2t.serving import tokenizers

TEXTS = ["", "a", "hello world", "Grüße, straße!", "über 日本語 ok", "  two  spaces ",
         "tab\there", "emoji 🙂 end", "a\\b"]


def _padded(rows, pad_to=None):
    width = max([len(r) for r in rows] + [pad_to or 0])
    out = np.zeros([len(rows), width], np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _texts(tensor):
    return [t.decode("utf-8") for t in tensor.numpy().tolist()]


def _check_round_trip(encoder, texts, extra_ids=()):
    tok = tokenizers.from_encoder(encoder)
    ids = tok.encode(tf.constant(texts))
    assert ids.to_list() == [encoder.encode(t) for t in texts]
    # Model inputs: EOS appended, 0-padded.
    model_ids = tok.encode_for_model(tf.constant(texts)).numpy()
    assert model_ids.tolist() == _padded([encoder.encode(t) + [1] for t in texts]).tolist()
    # Decoding cuts at EOS and drops padding, as decode(strip_extraneous=True).
    rows = [encoder.encode(t) + [1] + list(extra_ids) for t in texts]
    padded = _padded(rows, pad_to=3 + max(len(r) for r in rows))
    assert _texts(tok.decode(tf.constant(padded))) == [
        encoder.decode(r, strip_extraneous=True) for r in padded]
    return tok


def test_byte_tokenizer():
    tok = _check_round_trip(text_encoder.ByteTextEncoder(), TEXTS, extra_ids=[50, 60])
    # Invalid UTF-8 in the ids decodes with a replacement character, as in Python.
    ids = tf.constant([[0xC3 + 2, ord("a") + 2, 1]])
    assert _texts(tok.decode(ids)) == [text_encoder.ByteTextEncoder().decode([0xC3 + 2, 99])]


def test_character_tokenizer_with_unknown_characters():
    encoder = text_encoder.CharacterTextEncoder.build_from_generator(
        ["hello world", "Grüße straße", "日本", "\\ \t"])
    texts = TEXTS + ["xyz unknown Ω"]
    _check_round_trip(encoder, texts, extra_ids=[5])
    tok = tokenizers.from_encoder(encoder)
    assert _texts(tok.decode(tf.constant([[3, 2, 4, 0, 1, 5]]))) == [encoder.decode([3, 2, 4])]


def test_token_tokenizer_binary_and_unknown_tokens():
    encoder = text_encoder.TokenTextEncoder(["0", "1"])
    texts = ["1 0 1", "0", "", " 1  1 0 ", "0 0 0 0 1 1 1 1 0 1"]
    tok = _check_round_trip(encoder, texts, extra_ids=[2, 3])
    # Unknown tokens: the whole line becomes an empty input (as t2t's Decoder does).
    assert tok.encode(tf.constant(["1 x 0", "1 0"])).to_list() == [[], [3, 2]]
    # Ids outside the vocabulary decode as ID_<id>, like decode_list.
    assert _texts(tok.decode(tf.constant([[3, 9, 2, 1]]))) == [encoder.decode([3, 9, 2])]


def test_token_tokenizer_replace_oov_and_reverse():
    encoder = text_encoder.TokenTextEncoder(["a", "b", "c"], replace_oov="UNK", reverse=True)
    texts = ["a b c", "c x a", "", "b"]
    _check_round_trip(encoder, texts, extra_ids=[2])


def test_text_tokenizer_and_raw_integers():
    encoder = text_encoder.TextEncoder()
    _check_round_trip(encoder, ["3 4", "0", "", "10 20 30"], extra_ids=[7])
    tok = tokenizers.from_encoder(None)  # t2t's Decoder without an encoder: raw ids
    assert tok.encode(tf.constant(["5 6", "x 1"])).to_list() == [[5, 6], []]
    assert _texts(tok.decode(tf.constant([[5, 6, 1, 7]]))) == ["5 6"]


def test_class_label_tokenizer():
    encoder = text_encoder.ClassLabelEncoder(["neg", "pos", "neutral"])
    tok = tokenizers.from_encoder(encoder)
    assert _texts(tok.decode(tf.constant([[2], [0], [1]]))) == ["neutral", "neg", "pos"]
    assert _texts(tok.decode(tf.constant([1, 5]))) == ["pos", ""]
    assert tok.encode(tf.constant(["pos", "nope"])).to_list() == [[1], [-1]]


def test_sentencepiece_tokenizer(tmp_path):
    pytest.importorskip("tensorflow_text")
    corpus = [f"the {w} sat on a mat with über straße {i}" for i, w in
              enumerate(["cat", "dog", "bird", "fish", "frog"] * 8)]
    encoder = text_encoder.SentencePieceEncoder.train(iter(corpus), tmp_path / "spm", 60)
    texts = TEXTS + ["the cat sat", "unseen QQQ zzz ###"]
    tok = _check_round_trip(encoder, texts, extra_ids=[5, 6])
    assert tok.needs_tensorflow_text
    assert encoder.encode("QQQ") and 2 in encoder.encode("QQQ ###")  # UNK pieces are covered
