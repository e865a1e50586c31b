"""token_byte_lengths() of every text encoder: the bytes of text each id stands for
(the denominator of the bits_per_byte metric). The ids of a text and its EOS add up to
the UTF-8 bytes of the text plus one (the line end EOS marks)."""

import re

import pytest

from t2t.data.encoders import text_encoder

# Real English sentences (the opening of "A Tale of Two Cities" and of "Pride and
# Prejudice"), a few with non-ASCII characters.
SENTENCES = [
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "It was the epoch of belief, it was the epoch of incredulity.",
    "It was the season of Light, it was the season of Darkness.",
    "It was the spring of hope, it was the winter of despair.",
    "We had everything before us, we had nothing before us.",
    "We were all going direct to Heaven, we were all going direct the other way.",
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "However little known the feelings or views of such a man may be on his first "
    "entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families.",
    "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that "
    "Netherfield Park is let at last?\"",
    "Mr. Bennet replied that he had not.",
    "The café served a naïve crème brûlée to a jury of déjà vu enthusiasts.",
]
HELD_OUT = [
    "It was the best of wives and the worst of cooks.",
    "We had a season of hope for a single lady in the neighbourhood.",
]


def _total(lengths, ids):
    return sum(lengths[i] for i in ids)


def _check_texts(encoder, texts, extra=0):
    lengths = encoder.token_byte_lengths()
    assert len(lengths) == encoder.vocab_size
    assert lengths[text_encoder.PAD_ID] == 0
    for text in texts:
        ids = encoder.encode(text) + [text_encoder.EOS_ID]
        assert _total(lengths, ids) == len(text.encode("utf-8")) + 1 + extra, text


def test_byte_encoder_counts_one_per_byte_and_eos():
    encoder = text_encoder.ByteTextEncoder()
    lengths = encoder.token_byte_lengths()
    assert lengths[:2] == [0, 1] and set(lengths[2:]) == {1} and len(lengths) == 258
    _check_texts(encoder, SENTENCES + HELD_OUT + ["", "日本語"])


@pytest.fixture(scope="module")
def sentencepiece(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    return text_encoder.SentencePieceEncoder.train(SENTENCES * 4, folder / "m", 120)


def test_sentencepiece_counts_pieces_as_they_appear_in_the_text(sentencepiece):
    lengths = sentencepiece.token_byte_lengths()
    assert sentencepiece.adds_dummy_prefix()  # SentencePiece's default
    # PAD, EOS and UNK: control and unknown pieces; the dummy prefix's "▁" counts the
    # line end, so EOS counts 0 here.
    assert lengths[:3] == [0, 0, 0]
    pieces = sentencepiece.decode_list(range(sentencepiece.vocab_size))
    for piece, length in zip(pieces[3:], lengths[3:], strict=True):
        assert length == len(piece.replace("\u2581", " ").encode("utf-8")), piece
    assert any("\u2581" in p for p in pieces) and any(n > 1 for n in lengths)
    _check_texts(sentencepiece, SENTENCES + HELD_OUT)


def test_sentencepiece_without_dummy_prefix_and_with_byte_fallback(tmp_path):
    encoder = text_encoder.SentencePieceEncoder.train(
        SENTENCES * 4, tmp_path / "m", 400,
        extra_options={"add_dummy_prefix": False, "byte_fallback": True,
                       "character_coverage": 0.99})
    assert not encoder.adds_dummy_prefix()
    lengths = encoder.token_byte_lengths()
    assert lengths[text_encoder.EOS_ID] == 1
    pieces = encoder.decode_list(range(encoder.vocab_size))
    byte_ids = [i for i, p in enumerate(pieces) if re.fullmatch(r"<0x[0-9A-F]{2}>", p)]
    assert len(byte_ids) == 256 and {lengths[i] for i in byte_ids} == {1}
    # Characters outside the vocabulary fall back to byte pieces: one byte each.
    _check_texts(encoder, SENTENCES + HELD_OUT + ["Zürich's Ω-ohm"])


def test_character_encoder_counts_utf8_of_each_character():
    encoder = text_encoder.CharacterTextEncoder.build_from_generator(SENTENCES)
    lengths = encoder.token_byte_lengths()
    assert lengths[:3] == [0, 1, 0]  # PAD, EOS, UNK
    assert lengths[encoder.encode("é")[0]] == 2 and lengths[encoder.encode("a")[0]] == 1
    _check_texts(encoder, SENTENCES + HELD_OUT)


def test_token_encoder_counts_each_word_and_its_separating_space():
    words = sorted({w for s in SENTENCES for w in s.split()})
    encoder = text_encoder.TokenTextEncoder(words)
    lengths = encoder.token_byte_lengths()
    assert lengths[:2] == [0, 0]
    assert lengths[encoder.encode("café")[0]] == len("café ".encode())
    for text in SENTENCES:
        # Every word with the space after it (the last word's stands for the line end,
        # so EOS adds nothing): the same total as the other encoders and --score_file.
        ids = encoder.encode(text)
        assert _total(lengths, ids) == len(text.encode("utf-8")) + 1
        assert _total(lengths, ids + [text_encoder.EOS_ID]) == len(text.encode("utf-8")) + 1


def test_encoders_that_cannot_say_raise_not_implemented():
    with pytest.raises(NotImplementedError, match="ClassLabelEncoder.*bits_per_byte"):
        text_encoder.ClassLabelEncoder(["neg", "pos"]).token_byte_lengths()
    with pytest.raises(NotImplementedError, match="TextEncoder"):
        text_encoder.TextEncoder().token_byte_lengths()
