"""Tests of t2t.hparams.lstm: the LSTM sets carry Tensor2Tensor's values."""

from __future__ import annotations

import pytest

from t2t import registry
from t2t.hparams import basic
from t2t.hparams import lstm as lstm_hparams

ATTENTION_SETS = [
    "lstm_attention",
    "lstm_bahdanau_attention",
    "lstm_luong_attention",
    "lstm_bahdanau_attention_multi",
    "lstm_luong_attention_multi",
]


def test_lstm_seq2seq_values():
    hp = lstm_hparams.lstm_seq2seq()
    expected = {
        "batch_size": 1024,
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "initializer": "uniform_unit_scaling",
        "initializer_gain": 1.0,
        "weight_decay": 0.0,
    }
    assert {name: hp.get(name, "MISSING") for name in expected} == expected
    assert type(hp.initializer_gain) is float and type(hp.weight_decay) is float
    # Everything else is basic_params1's.
    assert set(hp.diff(basic.basic_params1())) == set(expected)
    assert "attention_mechanism" not in hp and "daisy_chain_variables" not in hp


@pytest.mark.parametrize("name", ATTENTION_SETS)
def test_attention_sets_extend_lstm_seq2seq(name):
    hp = registry.hparams(name)()
    base = lstm_hparams.lstm_seq2seq()
    assert hp.attention_layer_size == 128 and hp.output_attention is True
    added = set(hp) - set(base)
    assert added == {"attention_layer_size", "output_attention", "num_heads", "attention_mechanism"}
    assert {key: hp.get(key) for key in base} == base.values()


def test_mechanisms_and_heads():
    mechanisms = {name: registry.hparams(name)().attention_mechanism for name in ATTENTION_SETS}
    assert mechanisms == {
        "lstm_attention": "bahdanau",
        "lstm_bahdanau_attention": "bahdanau",
        "lstm_luong_attention": "luong",
        "lstm_bahdanau_attention_multi": "bahdanau",
        "lstm_luong_attention_multi": "luong",
    }
    heads = {name: registry.hparams(name)().num_heads for name in ATTENTION_SETS}
    assert heads == {name: 4 if name.endswith("_multi") else 1 for name in ATTENTION_SETS}
    assert lstm_hparams.lstm_attention() == lstm_hparams.lstm_bahdanau_attention()


def test_registered_and_overridable():
    for name in ["lstm_seq2seq", *ATTENTION_SETS]:
        assert registry.hparams(name) is getattr(lstm_hparams, name)
    assert "lstm_attention_base" not in registry.list_hparams()  # as in T2T
    hp = basic.create_hparams("lstm_luong_attention", "hidden_size=64,attention_mechanism=bahdanau")
    assert hp.hidden_size == 64 and hp.attention_mechanism == "bahdanau"
    assert hp.attention_layer_size == 128  # fixed when the set was built, as in T2T
