"""The in-graph tokenizers give exactly the ids and texts of the Python encoders."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from t2t.data.encoders import text_encoder
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


# ------------------------------------------------------------ subword (T2T .subwords)
SUBWORD_TEXTS = TEXTS + [
    " ", "   ", " lead", "trail ", "a  b   c", " two words ", "!!! ... ???", "--a--b--",
    "snake_case __dunder__ _", "back\\slash \\\\ \\u \\12; \\", "12 345 6.7 1e10",
    "é ß 日本 ok", "e\u0301t", "emoji 🙂🙂 end", "\U0001F600", "tab\there\nnew line\r\n",
    "<pad> <EOS> <pad>_", "ª ² ½ Ⅻ", "x" * 150, "ü" * 120 + " " + "日" * 80, "€" * 40 + "!",
    "no_such_word_in_vocab_" * 8]


@pytest.fixture(scope="module")
def subword_encoder():
    pytest.importorskip("tensorflow_text")
    from t2t.data.encoders.subword_encoder import SubwordTextEncoder
    from t2t.problems.text import sentences

    corpus = sentences.docstring_sentences(lowercase=False)[:600] + ["Grüße aus Köln, 日本"]
    return SubwordTextEncoder.build_from_generator(corpus, 500)


def _sentences_for_subword():
    from t2t.problems.text import sentences

    return sentences.docstring_sentences(lowercase=False)[600:800]


def test_subword_tokenizer_equals_subword_encoder(subword_encoder):
    texts = SUBWORD_TEXTS + _sentences_for_subword()
    tok = _check_round_trip(subword_encoder, texts)
    assert isinstance(tok, tokenizers.SubwordTokenizer) and tok.needs_tensorflow_text
    assert tok.max_subtoken_length == max(len(s) for s in subword_encoder.all_subtoken_strings)
    assert all(subword_encoder.decode(subword_encoder.encode(t)) == t for t in texts)
    # Out-of-alphabet characters really were escaped (\NNN;) and long tokens cut.
    assert "\\128512;" in "".join(subword_encoder.decode_list(subword_encoder.encode("\U0001F600")))


def _subword_id(encoder, string):
    return encoder.all_subtoken_strings.index(string)


def _expected_decode(encoder, ids):
    """Python's decode of the ids before EOS, a lone surrogate (from a \\NNN; escape of one)
    as U+FFFD: the one documented difference, since a surrogate is no UTF-8."""
    import re

    from t2t.data.encoders.encoder_base import strip_extraneous

    return re.sub("[\ud800-\udfff]", "\ufffd", encoder.decode(strip_extraneous(ids)))


def test_subword_tokenizer_decodes_any_ids_like_python(subword_encoder):
    encoder = subword_encoder
    tok = tokenizers.from_encoder(encoder)
    sid = {s: _subword_id(encoder, s) for s in ["\\", "u", ";", "_", *"0123456789"]}
    digits = [sid[d] for d in "0123456789"]

    def escape(number):
        return [sid["\\"], *[sid[d] for d in number], sid[";"]]

    rows = [
        escape("65") + escape("0000233") + escape("0") + escape("26085"),  # A é NUL 日
        escape("1114111") + escape("1114112") + escape("99999999999999999999999"),
        escape("55296") + escape(""),  # a surrogate; "\;" is no escape
        [sid["\\"], sid["u"], sid["\\"], sid["\\"], sid["\\"], sid["_"], sid["\\"]],
        [sid["_"], sid["_"], sid["_"]], [sid["\\"], digits[1], digits[2]], [],
        [2, 3, encoder.vocab_size, encoder.vocab_size + 7, -4, 5, 0, 9],  # ids out of range
    ]
    rng = np.random.default_rng(7)
    pool = list(sid.values()) + list(range(2, 40)) + [encoder.vocab_size - 1, 0]
    rows += [list(rng.choice(pool, size=int(rng.integers(0, 30)))) for _ in range(300)]
    rows += [list(rng.integers(-2, encoder.vocab_size + 3, size=20)) for _ in range(100)]
    padded = _padded([r + [1, 7, 9] for r in rows])
    expected = [_expected_decode(encoder, r) for r in padded]
    assert _texts(tok.decode(tf.constant(padded))) == expected
    assert expected[0] == "Aé\x00日" and expected[1] == "\U0010ffff\u3013\u3013"
    assert expected[2] == "\ufffd\\;"


def _write_subwords(path, strings):
    path.write_text("".join(f"'{s}'\n" for s in strings), encoding="utf-8")
    return str(path)


def test_subword_wordpiece_is_greedy_longest_match_first(tmp_path):
    """WordpieceTokenizer with an empty suffix indicator cuts as SubwordTextEncoder: the
    longest subtoken from the left, even where a shorter first cut gives fewer pieces;
    a repeated string keeps its last id; a token the vocabulary cannot cut (Python
    raises) makes its line an empty input."""
    pytest.importorskip("tensorflow_text")
    from t2t.data.encoders.subword_encoder import ESCAPE_CHARS, SubwordTextEncoder

    strings = ["<pad>_", "<EOS>_", "ab", "abc", "bcd_", "cd_", "ab", "xy_", "zzzzzzz",
               *"abcdz<>EOSpd", *sorted(ESCAPE_CHARS)]
    path = _write_subwords(tmp_path / "vocab.subwords", strings)
    encoder = SubwordTextEncoder(path)
    tok = tokenizers.SubwordTokenizer.from_file(path)
    texts = ["abcd", "abcd ab", "bcd", "zzzzzzzzzzzzzzz", "a_b\\c", "dcba", "é"]
    expected = [encoder.encode(t) for t in texts]
    assert tok.encode(tf.constant(texts)).to_list() == expected
    assert encoder.decode_list(encoder.encode("abcd")) == ["abc", "d", "_"]  # not ab + cd_
    assert encoder.encode("ab") == [6, strings.index("_")]
    with pytest.raises(ValueError, match="not in the subword vocabulary"):
        encoder.encode("yx")  # 'y' is in the alphabet (of "xy_") but no subtoken
    assert tok.encode(tf.constant(["yx", "ab yx", "ab xy"])).to_list() == [
        [], [], encoder.encode("ab xy")]


def test_subword_from_description_and_saved_model(subword_encoder, tmp_path):
    from t2t.data.encoders.subword_encoder import SubwordTextEncoder
    from t2t.serving import export as export_lib

    with pytest.raises(ValueError, match="no vocabulary file"):
        subword_encoder.describe()
    vocab = tmp_path / "vocab.test.subwords"
    copy.copy(subword_encoder).store_to_file(str(vocab))
    encoder = SubwordTextEncoder(str(vocab))  # as a data dir's vocabulary loads
    description = encoder.describe()
    assert description == {"type": "subword", "vocab_file": "vocab.test.subwords"}
    with pytest.raises(ValueError, match="subtoken strings"):
        tokenizers.from_description(description)
    # The export's asset (a copy: the encoder keeps its own file) rebuilds the tokenizer.
    assets = tmp_path / "assets"
    assets.mkdir()
    paths = export_lib.write_vocab_assets({"inputs": encoder, "targets": None}, str(assets))
    assert paths == [str(assets / "inputs.subwords")] and encoder.filename == str(vocab)
    strings = SubwordTextEncoder(paths[0]).all_subtoken_strings
    assert strings == encoder.all_subtoken_strings
    tok = tokenizers.from_description(description, subtoken_strings=strings)

    module = tf.Module()
    module.tokenizer = tok
    module.encode = tf.function(lambda texts: tok.encode_for_model(texts),
                                input_signature=[tf.TensorSpec([None], tf.string)])
    module.decode = tf.function(lambda ids: tok.decode(ids),
                                input_signature=[tf.TensorSpec([None, None], tf.int32)])
    tf.saved_model.save(module, str(tmp_path / "model"))
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    texts = SUBWORD_TEXTS + _sentences_for_subword()[:20]
    ids = loaded.encode(tf.constant(texts)).numpy()
    assert ids.tolist() == _padded([encoder.encode(t) + [1] for t in texts]).tolist()
    assert _texts(loaded.decode(tf.constant(ids))) == texts


def test_utf8_characters_encode_every_plane_like_python():
    # every 1-4 byte boundary, the noncharacters TF 2.19's unicode_encode replaced, and
    # the surrogates (U+FFFD, as Python's decode with "replace")
    codes = [*range(0, 0x900, 5), *range(0x800, 0x10000, 251), *range(0x10000, 0x110000, 4099),
             0x7F, 0x80, 0x7FF, 0xFDD0, 0xFFFE, 0xFFFF, 0x10000, 0x10FFFE, 0x10FFFF,
             0xD800, 0xDBFF, 0xDFFF]
    encoded = tokenizers.utf8_characters(tf.constant(codes, tf.int32)).numpy()
    assert [e.decode("utf-8") for e in encoded] == [
        "\ufffd" if 0xD800 <= c <= 0xDFFF else chr(c) for c in codes]
