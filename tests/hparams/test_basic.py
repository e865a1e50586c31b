"""Tests of t2t.hparams.basic: basic_params1, basic_range1 and create_hparams."""

from __future__ import annotations

import pytest

from t2t import registry
from t2t.hparams import basic
from t2t.hparams.hparams import HParams, HParamsError
from t2t.hparams.ranged import RangedHParams


def test_basic_params1_has_tensor2tensors_values():
    hp = basic.basic_params1()
    assert isinstance(hp, HParams)
    expected = {
        "batch_size": 4096,
        "optimizer": "adam",
        "optimizer_adam_beta1": 0.85,
        "optimizer_adam_beta2": 0.997,
        "optimizer_adam_epsilon": 1e-6,
        "learning_rate": 0.1,
        "label_smoothing": 0.1,
        "layer_postprocess_sequence": "dan",
        "layer_preprocess_sequence": "none",
        "min_length_bucket": 8,
        "length_bucket_step": 1.1,
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "dropout": 0.2,
        "clip_grad_norm": 2.0,
        "initializer": "orthogonal",
        "initializer_gain": 1.5,
        "weight_decay": 1e-6,
        "norm_type": "layer",
        "shared_embedding_and_softmax_weights": False,
    }
    assert {name: hp.get(name, "MISSING") for name in expected} == expected
    assert type(hp.batch_size) is int and type(hp.learning_rate) is float


def test_basic_params1_returns_a_fresh_set_each_call():
    first = basic.basic_params1()
    first.batch_size = 1
    assert basic.basic_params1().batch_size == 4096


def test_basic_params1_is_registered_under_both_names():
    assert registry.hparams("basic_params1") is basic.basic_params1
    assert registry.hparams("basic_1") is basic.basic_params1
    assert registry.REGISTRIES["hparams"].location("basic_params1").startswith(basic.__file__)


def test_create_hparams_applies_overrides():
    hp = basic.create_hparams("basic_params1", "batch_size=1024")
    assert hp.batch_size == 1024
    assert hp.learning_rate == 0.1
    assert basic.create_hparams("basic_params1") == basic.basic_params1()
    assert basic.basic_params1().diff(hp) == {"batch_size": (4096, 1024)}


def test_create_hparams_errors():
    with pytest.raises(HParamsError, match="Unknown hparam 'batch_sise'.*batch_size"):
        basic.create_hparams("basic_params1", "batch_sise=1024")
    with pytest.raises(HParamsError, match="'batch_size' is an int"):
        basic.create_hparams("basic_params1", "batch_size=big")
    with pytest.raises(registry.UnknownNameError, match="basic_params1"):
        basic.create_hparams("basic_params", "")


def test_create_hparams_refuses_a_set_that_returns_no_hparams():
    name = "zz_t2t_test_basic_returns_dict"
    registry.register_hparams(lambda: {"batch_size": 1}, name=name)
    try:
        with pytest.raises(TypeError, match=f"{name!r} returned dict, not HParams"):
            basic.create_hparams(name)
    finally:
        registry.REGISTRIES["hparams"].unregister(name)


def test_basic_range1_is_registered_and_fits_basic_params1():
    assert "basic_range1" in registry.list_ranged_hparams()
    fill = registry.ranged_hparams("basic_range1")
    assert fill is basic.basic_range1
    rhp = RangedHParams()
    fill(rhp)
    names = [r.name for r in rhp.ranges()]
    assert len(names) == 17
    assert {"batch_size", "learning_rate", "optimizer", "optimizer_adam_beta2"} <= set(names)
    assert rhp["learning_rate"].scale == rhp.LOG_SCALE
    assert rhp["batch_size"].values == (1024, 2048, 4096)
    rhp.check_against(basic.basic_params1())


def test_basic_range1_points_apply_to_basic_params1():
    rhp = RangedHParams()
    basic.basic_range1(rhp)
    point = {}
    for item in rhp.ranges():
        if item.kind in ("float", "int"):
            point[item.name] = item.high
        else:
            point[item.name] = item.values[-1]
    hp = rhp.apply(basic.basic_params1(), point)
    assert hp.batch_size == 4096 and hp.learning_rate == 2.0 and hp.optimizer == "adafactor"
    assert hp.learning_rate_decay_scheme == "exp"
