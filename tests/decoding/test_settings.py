"""Decode settings resolved for a model, shared by the decoder and the exporter."""

import re

import pytest

from t2t.config import DecodeHParams
from t2t.data.encoders import text_encoder
from t2t.decoding import settings
from t2t.features import ProblemHParams
from t2t.hparams.hparams import HParams


class _Model:
    def __init__(self, targets="symbol", classes=None, max_length=0, **sampling):
        self.problem_hparams = ProblemHParams(
            modality={"inputs": "symbol", "targets": targets},
            vocab_size={"inputs": 8, "targets": classes or 8})
        self.hparams = HParams(max_length=max_length, **sampling)


def _random(temp=0.7, keep_top_k=-1):
    return _Model(sampling_method="random", sampling_temp=temp, sampling_keep_top_k=keep_top_k)


def test_max_input_length_comes_from_the_settings_then_the_model_then_the_default():
    assert settings.resolve(DecodeHParams(max_input_length=7), _Model(max_length=99)).max_input_length == 7
    assert settings.resolve(DecodeHParams(), _Model(max_length=99)).max_input_length == 99
    assert settings.resolve(DecodeHParams(), _Model()).max_input_length == \
        settings.DEFAULT_MAX_INPUT_LENGTH


def test_top_beams_follow_return_beams_and_the_number_of_classes():
    assert settings.resolve(DecodeHParams(beam_size=4), _Model()).top_beams == 1
    resolved = settings.resolve(DecodeHParams(beam_size=4, return_beams=True), _Model())
    assert resolved.top_beams == 4 and resolved.infer_args()["top_beams"] == 4
    classifier = _Model(targets="class_label", classes=3)
    assert settings.resolve(DecodeHParams(beam_size=4, return_beams=True), classifier).top_beams == 3
    assert settings.resolve(DecodeHParams(beam_size=1, temperature=0.5), _Model()).sampling


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="top_p=2.0"):
        settings.resolve(DecodeHParams(top_p=2.0), _Model())


def test_target_text():
    encoder = text_encoder.TokenTextEncoder(None, vocab_list=["a", "b", "c"])
    assert settings.target_text([2, 3, 4, 1, 3, 0], encoder, False) == "a b c"
    assert settings.target_text([5, 6, 1, 7], None, False) == "5 6"
    labels = text_encoder.ClassLabelEncoder(["neg", "pos"])
    assert settings.target_text([[1]], labels, True) == "pos"
    assert settings.target_text([2], None, True) == "2"


def test_the_model_hparams_sampling_is_the_default_and_decode_hparams_win():
    """T2T's sampling_method / sampling_temp / sampling_keep_top_k (t2t.hparams.basic)."""
    resolved = settings.resolve(DecodeHParams.parse(""), _random())
    assert (resolved.beam_size, resolved.temperature, resolved.top_k) == (1, 0.7, 0)
    assert resolved.sampling and resolved.infer_args()["temperature"] == 0.7
    assert settings.resolve(DecodeHParams.parse("seed=1"), _random(1.0, 20)).top_k == 20
    # Given in --decode_hparams: theirs.
    given = settings.resolve(DecodeHParams.parse("temperature=0.9,top_k=3"), _random(0.7, 20))
    assert (given.temperature, given.top_k) == (0.9, 3)
    assert settings.resolve(DecodeHParams.parse("temperature=0,beam_size=1"), _random()).temperature == 0
    beams = settings.resolve(DecodeHParams.parse("beam_size=4"), _random())  # T2T: beam search
    assert (beams.beam_size, beams.temperature) == (4, 0.0)
    # argmax (the default), or random at temperature 0: greedy / beam search as given.
    argmax = _Model(sampling_method="argmax", sampling_temp=0.7, sampling_keep_top_k=-1)
    assert settings.resolve(DecodeHParams(), argmax).temperature == 0.0
    assert settings.resolve(DecodeHParams(), _random(0.0)).beam_size == 4
    # Constructed in code (no parse): what differs from the defaults counts as given.
    assert settings.resolve(DecodeHParams(beam_size=1), _random()).temperature == 0.7
    assert settings.resolve(DecodeHParams(beam_size=1, top_k=2), _random(0.7, 9)).top_k == 2


def test_bad_model_sampling_hparams_name_the_value():
    with pytest.raises(ValueError, match="hparams.sampling_method='topk': use argmax or random"):
        settings.resolve(DecodeHParams(), _Model(sampling_method="topk", sampling_temp=1.0))
    with pytest.raises(ValueError, match="hparams.sampling_temp=-1.0: need >= 0"):
        settings.resolve(DecodeHParams(), _random(-1.0))


@pytest.mark.parametrize("text, message", [
    ("shards=2,shard_id=2", "shard_id=2 (need 0 <= shard_id < shards=2"),
    ("shard_id=-1", "shard_id=-1 (need 0 <= shard_id < shards=1"),
    ("shards=0", "shards=0 (need >= 1)"),
    ("num_decodes=0", "num_decodes=0 (need >= 1)"),
    ("beam_search_rule=hf", "beam_search_rule='hf' (use one of ('t2t', 'transformers'))"),
    ("delimiter=", "delimiter='' (need a separator"),
    ("delimiter=\\q", "delimiter=\\q: unknown escape \\q"),
])
def test_bad_decode_options_are_refused(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DecodeHParams.parse(text)


def test_delimiter_escapes_and_given_keys():
    assert DecodeHParams.parse("delimiter=;").record_delimiter == ";"
    assert DecodeHParams.parse("delimiter=\\n\\n").record_delimiter == "\n\n"
    assert DecodeHParams.parse("delimiter=\\x2c\\t").record_delimiter == ",\t"
    assert DecodeHParams().record_delimiter == "\n"  # T2T's default
    parsed = DecodeHParams.parse("beam_size=1, top_k=0")
    assert parsed.given_keys == ("beam_size", "top_k") and parsed.is_given("top_k")
    assert "given_keys" not in parsed.to_string() and DecodeHParams.parse(parsed.to_string()) == parsed
