"""Tests of t2t.hparams.ranged.RangedHParams: search spaces for the tuner."""

from __future__ import annotations

import dataclasses

import pytest

from t2t.hparams import ranged
from t2t.hparams.hparams import HParams, HParamsError
from t2t.hparams.ranged import Range, RangedHParams


def hparams() -> HParams:
    return HParams(learning_rate=0.1, num_layers=2, optimizer="adam", dropout=0.2, size=64,
                   unset=None)


# ------------------------------------------------------------------ setters
def test_set_float():
    rhp = RangedHParams()
    rhp.set_float("learning_rate", 1, 3, scale=rhp.LOG_SCALE)
    item = rhp["learning_rate"]
    assert item == Range("learning_rate", "float", 1.0, 3.0, scale="log")
    assert type(item.low) is float and type(item.high) is float


def test_set_int():
    rhp = RangedHParams()
    rhp.set_int("num_layers", 2.0, 5)
    item = rhp["num_layers"]
    assert item == Range("num_layers", "int", 2, 5)
    assert type(item.low) is int and item.scale == ranged.LINEAR_SCALE
    with pytest.raises(HParamsError, match="'num_layers': set_int needs integer bounds"):
        rhp.set_int("num_layers", 1.5, 3)


def test_set_discrete_sorts_values():
    rhp = RangedHParams()
    rhp.set_discrete("size", [256, 32, 64], scale=ranged.LOG_SCALE)
    assert rhp["size"].values == (32, 64, 256)
    assert rhp["size"].kind == "discrete" and rhp["size"].scale == "log"


def test_set_categorical_keeps_order():
    rhp = RangedHParams()
    rhp.set_categorical("optimizer", ["sgd", "adam", "adafactor"])
    assert rhp["optimizer"].values == ("sgd", "adam", "adafactor")
    assert rhp["optimizer"].kind == "categorical"


def test_ranges_keep_insertion_order_and_membership():
    rhp = RangedHParams()
    rhp.set_int("b", 1, 2)
    rhp.set_float("a", 0, 1)
    rhp.set_categorical("c", ["x"])
    assert [r.name for r in rhp.ranges()] == ["b", "a", "c"]
    assert "a" in rhp and "zz" not in rhp
    with pytest.raises(KeyError):
        rhp["zz"]


def test_setting_a_name_again_replaces_its_range():
    rhp = RangedHParams()
    rhp.set_int("a", 1, 2)
    rhp.set_float("a", 0.5, 0.7)
    assert len(rhp.ranges()) == 1 and rhp["a"].kind == "float"


def test_ranges_are_immutable():
    rhp = RangedHParams()
    rhp.set_int("a", 1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rhp["a"].low = 0


def test_scale_constants():
    assert ranged.SCALES == ("linear", "log", "reverse_log")
    assert RangedHParams.REVERSE_LOG_SCALE == "reverse_log"


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("setter", [
    lambda r: r.set_float("x", 0.1, 1.0, scale="cubic"),
    lambda r: r.set_int("x", 1, 4, scale="cubic"),
    lambda r: r.set_discrete("x", [1, 2], scale="cubic"),
])
def test_bad_scale_is_refused(setter):
    rhp = RangedHParams()
    with pytest.raises(HParamsError, match="unknown scale 'cubic'"):
        setter(rhp)
    assert "x" not in rhp


def test_low_above_high_is_refused():
    rhp = RangedHParams()
    with pytest.raises(HParamsError, match="'x': low 2.0 is above high 1.0"):
        rhp.set_float("x", 2, 1)
    with pytest.raises(HParamsError, match="'y': low 5 is above high 4"):
        rhp.set_int("y", 5, 4)
    rhp.set_float("z", 1, 1)  # a single point is a valid range
    assert "x" not in rhp and "y" not in rhp and "z" in rhp


@pytest.mark.parametrize("scale", [ranged.LOG_SCALE, ranged.REVERSE_LOG_SCALE])
@pytest.mark.parametrize("low", [0, -1])
def test_log_scales_need_a_positive_low(scale, low):
    rhp = RangedHParams()
    with pytest.raises(HParamsError, match=f"a {scale} scale needs low > 0"):
        rhp.set_float("x", low, 1, scale=scale)
    with pytest.raises(HParamsError, match="needs low > 0"):
        rhp.set_int("x", low, 4, scale=scale)
    rhp.set_float("x", low, 1)  # fine on a linear scale
    assert rhp["x"].low == low


def test_empty_value_lists_are_refused():
    rhp = RangedHParams()
    with pytest.raises(HParamsError, match="at least one value"):
        rhp.set_discrete("x", [])
    with pytest.raises(HParamsError, match="at least one value"):
        rhp.set_categorical("x", [])


def test_range_contains():
    assert Range("x", "float", 0.0, 1.0).contains(1.0)
    assert Range("x", "float", 0.0, 1.0).contains(0.0)
    assert not Range("x", "float", 0.0, 1.0).contains(1.01)
    assert not Range("x", "int", 2, 4).contains(1)
    assert Range("x", "discrete", values=(1, 2)).contains(2)
    assert not Range("x", "discrete", values=(1, 2)).contains(3)
    assert Range("x", "categorical", values=("a",)).contains("a")


# ------------------------------------------------------------------ apply
def test_apply_returns_a_checked_copy():
    rhp = RangedHParams()
    rhp.set_float("learning_rate", 0.01, 1.0, scale=rhp.LOG_SCALE)
    rhp.set_int("num_layers", 1, 6)
    rhp.set_categorical("optimizer", ["adam", "sgd"])
    original = hparams()
    result = rhp.apply(original, {"learning_rate": 0.5, "num_layers": 6, "optimizer": "sgd"})
    assert (result.learning_rate, result.num_layers, result.optimizer) == (0.5, 6, "sgd")
    assert original == hparams()  # untouched
    assert result.dropout == 0.2


@pytest.mark.parametrize("values", [
    {"learning_rate": 1.5},
    {"learning_rate": 0.001},
    {"num_layers": 7},
    {"optimizer": "adagrad"},
])
def test_apply_refuses_values_outside_their_range(values):
    rhp = RangedHParams()
    rhp.set_float("learning_rate", 0.01, 1.0)
    rhp.set_int("num_layers", 1, 6)
    rhp.set_categorical("optimizer", ["adam", "sgd"])
    (name, value), = values.items()
    with pytest.raises(HParamsError, match=f"{name}={value!r} is outside its range"):
        rhp.apply(hparams(), values)


def test_apply_refuses_a_name_without_a_range():
    rhp = RangedHParams()
    rhp.set_int("num_layers", 1, 6)
    with pytest.raises(HParamsError, match=r"'dropout' is not one of the ranges \['num_layers'\]"):
        rhp.apply(hparams(), {"dropout": 0.1})


def test_apply_keeps_the_hparam_type_check():
    rhp = RangedHParams()
    rhp.set_float("num_layers", 1, 6)
    with pytest.raises(HParamsError, match="'num_layers' is an int"):
        rhp.apply(hparams(), {"num_layers": 2.5})


# ------------------------------------------------------------------ check_against
def test_check_against_passes_for_matching_names_and_types():
    rhp = RangedHParams()
    rhp.set_float("learning_rate", 0.01, 1.0)
    rhp.set_int("num_layers", 1, 6)
    rhp.set_discrete("size", [32, 64])
    rhp.set_categorical("optimizer", ["adam", "sgd"])
    rhp.set_float("unset", 0.0, 1.0)  # a None hparam takes any type
    hp = hparams()
    rhp.check_against(hp)
    assert hp == hparams()  # checking changes nothing


def test_check_against_refuses_an_unknown_name_with_close_matches():
    rhp = RangedHParams()
    rhp.set_float("learning_rat", 0.01, 1.0)
    with pytest.raises(HParamsError) as info:
        rhp.check_against(hparams())
    message = str(info.value)
    assert "Unknown hparam 'learning_rat'" in message
    assert "Did you mean: learning_rate" in message


def test_check_against_refuses_a_range_of_another_type():
    rhp = RangedHParams()
    rhp.set_categorical("num_layers", ["two", "three"])
    with pytest.raises(HParamsError, match="'num_layers' is an int"):
        rhp.check_against(hparams())
    rhp = RangedHParams()
    rhp.set_float("size", 0.5, 3.0)
    with pytest.raises(HParamsError, match="'size' is an int"):
        rhp.check_against(hparams())
