"""RangedHParams -> Optuna distributions, trial values -> --hparams overrides, and every
registered ranged set checked against the hparams set it is written for."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from t2t import registry
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams, HParamsError
from t2t.hparams.ranged import RangedHParams
from t2t.tuning import search_space

# Each ranged set of the library and the hparams set whose names it must use.
RANGED_SETS = {
    "basic_range1": "basic_params1",
    "transformer_base_range": "transformer_base",
    "transformer_tiny_range": "transformer_tiny",
    "lstm_seq2seq_range": "lstm_seq2seq",
    "resnet_range": "resnet_50",
    "shake_shake_range": "shakeshake_small",
    "revnet_range": "revnet_110_cifar",
    "slicenet1": "slicenet_params1",
}


def ranges() -> RangedHParams:
    rhp = RangedHParams()
    rhp.set_float("learning_rate", 0.1, 0.3, scale=rhp.LOG_SCALE)
    rhp.set_int("num_hidden_layers", 2, 5)
    rhp.set_float("dropout", 0.0, 0.5)
    rhp.set_int("warmup", 10, 1000, scale=rhp.LOG_SCALE)
    rhp.set_float("beta2", 0.9, 0.999, scale=rhp.REVERSE_LOG_SCALE)
    rhp.set_discrete("hidden_size", [128, 64])
    rhp.set_categorical("optimizer", ["adam", "sgd"])
    rhp.set_categorical("nesterov", [True, False])
    return rhp


def hparams() -> HParams:
    return HParams(learning_rate=0.2, num_hidden_layers=2, dropout=0.1, warmup=100, beta2=0.99,
                   hidden_size=64, optimizer="adam", nesterov=False, name="x")


def test_distributions():
    dists = search_space.distributions(ranges())
    assert dists == {
        "learning_rate": FloatDistribution(0.1, 0.3, log=True),
        "num_hidden_layers": IntDistribution(2, 5),
        "dropout": FloatDistribution(0.0, 0.5),
        "warmup": IntDistribution(10, 1000, log=True),
        "1-beta2": FloatDistribution(0.001, 0.1, log=True),  # not 1 - 0.999: see _one_minus
        "hidden_size": CategoricalDistribution([64, 128]),
        "optimizer": CategoricalDistribution(["adam", "sgd"]),
        "nesterov": CategoricalDistribution([True, False]),
    }


def test_suggest_maps_reverse_log_back():
    rhp = ranges()
    fixed = {"learning_rate": 0.2, "num_hidden_layers": 3, "dropout": 0.25, "warmup": 50,
             "1-beta2": 0.001, "hidden_size": 128, "optimizer": "sgd",
             "nesterov": True}
    values = search_space.suggest(optuna.trial.FixedTrial(fixed), rhp)
    assert values["beta2"] == 0.999 and values["warmup"] == 50
    assert list(values) == [r.name for r in rhp.ranges()]
    params = search_space.to_params(rhp, values)
    assert params.pop("1-beta2") == 0.001  # exactly: inside the distribution's [0.001, 0.1]
    assert params == {k: v for k, v in fixed.items() if k != "1-beta2"}
    with pytest.raises(HParamsError, match="outside its range"):
        search_space.to_params(rhp, {"dropout": 0.9})
    with pytest.raises(HParamsError, match="'zz' is not one of the ranges"):
        search_space.to_params(rhp, {"zz": 1})


def test_reverse_log_is_dense_near_high():
    """1 - x is log-uniform: half of [0.9, 0.999] lands above 0.99."""
    rhp = RangedHParams()
    rhp.set_float("beta2", 0.9, 0.999, scale=rhp.REVERSE_LOG_SCALE)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    samples = [search_space.suggest(study.ask(), rhp)["beta2"] for _ in range(400)]
    assert all(0.9 <= s <= 0.999 for s in samples)
    assert 0.4 < sum(s > 0.99 for s in samples) / len(samples) < 0.6
    for low, high, kind in ((0.5, 1.5, "float"), (1, 5, "int")):
        bad = RangedHParams()
        (bad.set_float if kind == "float" else bad.set_int)(
            "x", low, high, scale=bad.REVERSE_LOG_SCALE)
        with pytest.raises(HParamsError, match=f"'x': the reverse_log scale .* inside \\(0, 1\\), "
                           f"got {kind}"):
            search_space.distributions(bad)


def test_override_strings_round_trip():
    rhp = ranges()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        values = search_space.suggest(study.ask(), rhp)
        parsed = hparams().parse(search_space.override_string(values))
        for name, value in values.items():
            assert parsed.get(name) == value and type(parsed.get(name)) is type(value)


def test_merge_overrides_trial_values_win():
    merged = search_space.merge_overrides(
        "batch_size=1024, dropout=0.3,layers=[1,2],name=big", {"dropout": 0.1, "warmup": 7})
    assert merged == "batch_size=1024,layers=[1,2],name=big,dropout=0.1,warmup=7"
    assert search_space.merge_overrides("", {"a": True, "b": 1e-05}) == "a=True,b=1e-05"
    assert search_space.merge_overrides("a=1", {}) == "a=1"


def test_format_value_refuses_what_the_parser_cannot_read():
    assert search_space.format_value([1, 2.5, "x"]) == "[1,2.5,x]"
    with pytest.raises(HParamsError, match="'a,b' cannot be written"):
        search_space.format_value("a,b")
    with pytest.raises(HParamsError, match="non-finite"):
        search_space.format_value(float("nan"))


def test_check_ranges_names_the_bad_hparam():
    rhp = ranges()
    search_space.check_ranges(rhp, hparams())
    rhp.set_float("dropuot", 0.0, 0.5)
    with pytest.raises(HParamsError, match="'my_range' does not fit 'my_set'.*'dropuot'.*"
                       "Did you mean: dropout"):
        search_space.check_ranges(rhp, hparams(), "my_range", "my_set")
    typed = RangedHParams()
    typed.set_discrete("num_hidden_layers", [1.5, 2.5])
    with pytest.raises(HParamsError, match="num_hidden_layers"):
        search_space.check_ranges(typed, hparams())
    spaced = RangedHParams()
    spaced.set_categorical("optimizer", ["adam", "a=b"])
    with pytest.raises(HParamsError, match="'a=b' cannot be written"):
        search_space.check_ranges(spaced, hparams())


def test_load_ranges_unknown_name_lists_close_matches():
    with pytest.raises(registry.UnknownNameError, match="transformer_tiny_range"):
        search_space.load_ranges("transformer_tiny_rnage")


@pytest.mark.parametrize("range_name", sorted(RANGED_SETS))
def test_registered_ranged_set_fits_its_hparams_set(range_name):
    rhp = search_space.load_ranges(range_name)
    hp = create_hparams(RANGED_SETS[range_name])
    search_space.check_ranges(rhp, hp, range_name, RANGED_SETS[range_name])
    # Every end point and choice parses as an override of that set.
    for item in rhp.ranges():
        for value in ([item.low, item.high] if item.kind in ("float", "int") else item.values):
            parsed = hp.copy().parse(search_space.override_string({item.name: value}))
            assert parsed.get(item.name) == value
    assert search_space.distributions(rhp)


def test_every_library_ranged_set_is_checked():
    library = {name for name in registry.list_ranged_hparams()
               if registry.ranged_hparams(name).__module__.startswith("t2t.")}
    assert library == set(RANGED_SETS), "add new ranged sets to RANGED_SETS"
    assert {"transformer_tiny_range", "lstm_seq2seq_range", "resnet_range",
            "shake_shake_range"} <= library
