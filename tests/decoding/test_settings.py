"""Decode settings resolved for a model, shared by the decoder and the exporter."""

import pytest

from t2t.config import DecodeHParams
from t2t.decoding import settings
from t2t.features import ProblemHParams
from t2t.hparams.hparams import HParams
from t2t.problems import text_encoder


class _Model:
    def __init__(self, targets="symbol", classes=None, max_length=0):
        self.problem_hparams = ProblemHParams(
            modality={"inputs": "symbol", "targets": targets},
            vocab_size={"inputs": 8, "targets": classes or 8})
        self.hparams = HParams(max_length=max_length)


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
