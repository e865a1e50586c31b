"""Tests of t2t.trainer.learning_rate: every factor against hand-computed values."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.hparams.basic import basic_params1
from t2t.trainer import learning_rate as lr_lib


def _hp(schedule: str, **overrides):
    hp = basic_params1()
    hp.learning_rate_schedule = schedule
    for name, value in overrides.items():
        setattr(hp, name, value)  # adds names basic_params1 lacks (train_steps, ...)
    return hp


def _lr(hp, step, train_steps=None) -> float:
    return float(lr_lib.learning_rate_schedule(hp, step, train_steps))


def _transformer_base(step: float) -> float:
    return 2.0 * min(1.0, step / 8000) / math.sqrt(max(step, 8000)) / math.sqrt(512)


def test_transformer_base_schedule():
    hp = _hp(
        "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size",
        learning_rate_constant=2.0,
        learning_rate_warmup_steps=8000,
        hidden_size=512,
    )
    assert _lr(hp, 0) == 0.0
    assert _lr(hp, 8000) == pytest.approx(9.882e-4, rel=1e-4)  # the peak
    for step in (1, 100, 4000, 7999, 8000, 8001, 32000, 1_000_000):
        assert _lr(hp, step) == pytest.approx(_transformer_base(step), rel=1e-5), step
    assert _lr(hp, 4000) == pytest.approx(_lr(hp, 32000), rel=1e-5)  # 0.5 * peak both


@pytest.mark.parametrize(
    ("schedule", "overrides", "expected"),
    [
        ("constant", {"learning_rate_constant": 2.5}, {0: 2.5, 10_000: 2.5}),
        ("linear_warmup", {"learning_rate_warmup_steps": 100}, {0: 0.0, 25: 0.25, 200: 1.0}),
        (
            "linear_decay",
            {"learning_rate_decay_steps": 200, "train_steps": 1000},
            {0: 1.0, 700: 1.0, 900: 0.5, 1000: 0.0, 1100: 0.0},
        ),
        (
            "cosdecay",
            {"learning_rate_warmup_steps": 100, "learning_rate_decay_steps": 1000},
            {50: 1.0, 100: 1.0, 500: 0.5, 1000: 0.0},
        ),
        (
            "single_cycle_cos_decay",
            {"learning_rate_warmup_steps": 100, "train_steps": 1100},
            {0: 1.0, 100: 1.0, 600: 0.5, 1100: 0.0},
        ),
        (
            "multi_cycle_cos_decay",
            {"learning_rate_warmup_steps": 100, "learning_rate_decay_steps": 500},
            {50: 1.0, 350: 0.5, 600: 0.0, 1100: 1.0},
        ),
        ("rsqrt_decay", {"learning_rate_warmup_steps": 100}, {0: 0.1, 50: 0.1, 400: 0.05}),
        (
            "rsqrt_normalized_decay",
            {"learning_rate_warmup_steps": 100},
            {50: 1.0, 100: 1.0, 400: 0.5},
        ),
        (
            "exp_decay",
            {
                "learning_rate_warmup_steps": 100,
                "learning_rate_decay_steps": 1000,
                "learning_rate_decay_rate": 0.5,
            },
            {50: 1.0, 100: 1.0, 1100: 0.5, 2100: 0.25, 600: 0.5**0.5},
        ),
        ("rsqrt_hidden_size", {"hidden_size": 64}, {0: 0.125, 5: 0.125}),
    ],
)
def test_each_factor(schedule, overrides, expected):
    hp = _hp(schedule, **overrides)
    for step, value in expected.items():
        assert _lr(hp, step) == pytest.approx(value, rel=1e-5, abs=1e-7), (schedule, step)


def test_exp_decay_staircase():
    hp = _hp(
        "exp_decay",
        learning_rate_warmup_steps=100,
        learning_rate_decay_steps=1000,
        learning_rate_decay_rate=0.5,
        learning_rate_decay_staircase=True,
    )
    assert _lr(hp, 1099) == 1.0
    assert _lr(hp, 1100) == pytest.approx(0.5)


def test_train_steps_argument_and_errors():
    hp = _hp("linear_decay", learning_rate_decay_steps=200)
    assert _lr(hp, 900, train_steps=1000) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="train_steps"):
        _lr(hp, 900)
    hp = _hp("single_cycle_cos_decay", learning_rate_warmup_steps=100)
    with pytest.raises(ValueError, match="train_steps > learning_rate_warmup_steps"):
        _lr(hp, 10, train_steps=100)


def test_product_of_factors_and_spaces():
    hp = _hp(" constant * rsqrt_hidden_size ", learning_rate_constant=3.0, hidden_size=16)
    assert _lr(hp, 7) == pytest.approx(0.75)


def test_unknown_factor_lists_valid_names():
    hp = _hp("constant*linear_warmpu")
    with pytest.raises(ValueError, match="linear_warmpu") as err:
        _lr(hp, 1)
    for name in ("constant", "linear_warmup", "rsqrt_decay", "legacy", "cosdecay"):
        assert name in str(err.value)
    with pytest.raises(ValueError, match="linear_warmpu"):
        lr_lib.LearningRateSchedule(hp)


def test_accumulation_leaves_the_schedule_in_updates():
    # T2T divided its micro-batch step by N; t2t's steps count updates already.
    hp = _hp("rsqrt_decay", learning_rate_warmup_steps=100, optimizer_multistep_accumulate_steps=4)
    assert _lr(hp, 1600) == pytest.approx(0.025)
    assert _lr(hp, 1600) == _lr(_hp("rsqrt_decay", learning_rate_warmup_steps=100), 1600)


# ------------------------------------------------------------------------- legacy
def test_legacy_noam():
    hp = _hp(
        "legacy",
        learning_rate_decay_scheme="noam",
        learning_rate_warmup_steps=4000,
        hidden_size=512,
        learning_rate=0.1,
        optimizer="adam",
    )

    def noam(step):
        s = step + 1.0
        return 5000.0 / math.sqrt(512) * min(s * 4000**-1.5, s**-0.5) * 0.002 * 0.1

    for step in (0, 1, 1000, 3999, 4000, 16000):
        assert _lr(hp, step) == pytest.approx(noam(step), rel=1e-5)
    assert _lr(hp, 3999) == pytest.approx(6.988e-4, rel=1e-3)  # transformer_base_v1's peak


def test_legacy_default_exp_warmup_and_adam_correction():
    hp = basic_params1()  # legacy, decay none, warmup 100, learning_rate 0.1, adam
    assert _lr(hp, 0) == pytest.approx(0.01 * 0.002 * 0.1, rel=1e-5)
    assert _lr(hp, 50) == pytest.approx(0.1 * 0.002 * 0.1, rel=1e-5)  # 0.01 ** 0.5
    assert _lr(hp, 100) == pytest.approx(0.002 * 0.1, rel=1e-5)
    assert _lr(hp, 10_000) == pytest.approx(0.002 * 0.1, rel=1e-5)
    hp.optimizer = "sgd"
    assert _lr(hp, 100) == pytest.approx(0.1, rel=1e-6)
    hp.optimizer = "Adam"  # either spelling gets the correction
    assert _lr(hp, 100) == pytest.approx(0.0002, rel=1e-5)


def test_legacy_linear_warmup_option():
    hp = _hp("legacy", optimizer="sgd", learning_rate=1.0, learning_rate_warmup_schedule="linear")
    assert _lr(hp, 0) == pytest.approx(0.35)
    assert _lr(hp, 50) == pytest.approx(0.35 + 0.65 * 0.5)


@pytest.mark.parametrize(
    ("scheme", "extra", "expected"),
    [
        ("none", {}, {100: 1.0, 5000: 1.0}),
        ("sqrt", {}, {100: 500.0, 200: 50.0, 2600: 10.0}),
        (
            "exp",
            {"learning_rate_decay_steps": 1000, "learning_rate_decay_rate": 0.5},
            {100: 1.0, 1100: 0.5, 2100: 0.25},
        ),
        (
            "cosine",
            {"learning_rate_cosine_cycle_steps": 1000},
            {500: 0.5, 1000: 0.0, 1500: 0.5, 2000: 1.0},
        ),
        ("cyclelinear10x", {}, {100: 3.3, 150: 1.8, 200: 0.3, 300: 3.3}),
    ],
)
def test_legacy_decay_schemes(scheme, extra, expected):
    hp = _hp(
        "legacy",
        learning_rate_decay_scheme=scheme,
        learning_rate_warmup_steps=100,
        learning_rate=1.0,
        optimizer="sgd",  # no 0.002 correction: the value is the decay itself
        **extra,
    )
    for step, value in expected.items():
        assert _lr(hp, step) == pytest.approx(value, rel=1e-5, abs=1e-6), (scheme, step)
    # Below warmup_steps the exp warmup applies whatever the scheme.
    assert _lr(hp, 0) == pytest.approx(0.01, rel=1e-5)


def test_legacy_exp_staircase_and_bad_scheme():
    hp = _hp(
        "legacy",
        learning_rate_decay_scheme="exp",
        learning_rate_decay_staircase=True,
        learning_rate_decay_steps=1000,
        learning_rate_decay_rate=0.5,
        learning_rate=1.0,
        optimizer="sgd",
    )
    assert _lr(hp, 1099) == 1.0
    hp.learning_rate_decay_scheme = "piecewise"
    with pytest.raises(ValueError, match="piecewise"):
        _lr(hp, 200)


# ------------------------------------------------------------- graph and Keras use
def test_in_tf_function_with_variable_step():
    hp = _hp(
        "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size",
        learning_rate_constant=2.0,
        learning_rate_warmup_steps=8000,
        hidden_size=512,
    )
    step = tf.Variable(0, dtype=tf.int64)
    fn = tf.function(lambda: lr_lib.learning_rate_schedule(hp, step))
    values = []
    for s in (4000, 8000, 32000):
        step.assign(s)
        values.append(fn())
    assert all(v.dtype == tf.float32 and v.shape == () for v in values)
    np.testing.assert_allclose(
        [float(v) for v in values], [_transformer_base(s) for s in (4000, 8000, 32000)], rtol=1e-5
    )


def test_keras_schedule_follows_optimizer_iterations_and_serializes():
    hp = _hp("linear_warmup", learning_rate_warmup_steps=10)
    schedule = lr_lib.LearningRateSchedule(hp, train_steps=50)
    optimizer = keras.optimizers.SGD(learning_rate=schedule)
    var = keras.Variable(np.zeros(2, np.float32))
    optimizer.build([var])

    @tf.function
    def step():
        optimizer.apply_gradients([(tf.ones(2), var)])

    for _ in range(3):
        step()
    # Updates used lr 0, 0.1, 0.2 (iterations 0, 1, 2).
    np.testing.assert_allclose(var.numpy(), [-0.3, -0.3], rtol=1e-6)
    assert float(optimizer.learning_rate) == pytest.approx(0.3)

    config = schedule.get_config()
    assert config["train_steps"] == 50
    assert config["hparams"]["learning_rate_warmup_steps"] == 10
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone._learning_rate, lr_lib.LearningRateSchedule)
    assert clone._learning_rate.train_steps == 50
    restored = lr_lib.LearningRateSchedule.from_config(config)
    assert float(restored(5)) == pytest.approx(0.5)
