"""RangedHParams as an Optuna search space, and trial values as `--hparams` overrides.

Mapping of each Range kind (see t2t.hparams.ranged):

  float / int, linear scale  ->  FloatDistribution / IntDistribution
  float / int, log scale     ->  the same with log=True
  float, reverse_log          ->  Optuna samples y = 1 - x log-uniformly in
                                 [1 - high, 1 - low] under the name "1-NAME", and the hparam
                                 is 1 - y: dense near `high`, for values close to 1 such as
                                 Adam's beta2 or a momentum ([0.9, 0.999] puts half the
                                 trials above 0.99). It needs 0 < low <= high < 1.
  discrete                   ->  CategoricalDistribution of the values (TPE treats them as
                                 unordered; CMA-ES leaves them to its independent sampler)
  categorical                ->  CategoricalDistribution of the values

Importing this module imports neither Optuna nor TensorFlow.
"""

from __future__ import annotations

import math
from typing import Any

from t2t import registry
from t2t.hparams.hparams import HParams, HParamsError, split_top_level
from t2t.hparams.ranged import LOG_SCALE, REVERSE_LOG_SCALE, Range, RangedHParams

REVERSE_LOG_PREFIX = "1-"
_FORBIDDEN_IN_STRINGS = ",=[]"


def load_ranges(name: str) -> RangedHParams:
    """The registered ranged set `name`, filled (unknown names list close matches)."""
    rhp = RangedHParams()
    registry.ranged_hparams(name)(rhp)
    if not rhp.ranges():
        raise HParamsError(f"Ranged hparams set {name!r} defines no ranges: nothing to tune.")
    return rhp


def param_name(item: Range) -> str:
    """The name Optuna stores the parameter under: the hparam's; "1-NAME" for reverse_log."""
    if item.scale == REVERSE_LOG_SCALE and item.kind in ("float", "int"):
        return REVERSE_LOG_PREFIX + item.name
    return item.name


def _one_minus(x: float) -> float:
    """1 - x to 12 significant digits: in binary floating point 1 - 0.999 is
    0.0010000000000000009, which would put the 0.001 a user writes outside the range."""
    return float(f"{1.0 - x:.12g}")


def _check_reverse_log(item: Range) -> None:
    if item.kind != "float" or not 0 < item.low <= item.high < 1:
        raise HParamsError(
            f"Range {item.name!r}: the reverse_log scale samples 1 - x on a log scale, so it "
            f"needs a float range inside (0, 1), got {item.kind} [{item.low}, {item.high}]; "
            f"use the log or linear scale for it.")


def distributions(rhp: RangedHParams) -> dict[str, Any]:
    """{optuna parameter name: optuna distribution}, one per range, in range order.
    Raises HParamsError for a reverse_log range outside (0, 1)."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    result: dict[str, Any] = {}
    for item in rhp.ranges():
        log = item.scale in (LOG_SCALE, REVERSE_LOG_SCALE)
        if item.kind in ("float", "int") and item.scale == REVERSE_LOG_SCALE:
            _check_reverse_log(item)
            dist = FloatDistribution(_one_minus(item.high), _one_minus(item.low), log=True)
        elif item.kind == "float":
            dist = FloatDistribution(float(item.low), float(item.high), log=log)
        elif item.kind == "int":
            dist = IntDistribution(int(item.low), int(item.high), log=log)
        elif item.kind in ("discrete", "categorical"):
            dist = CategoricalDistribution(list(item.values))
        else:
            raise HParamsError(f"Range {item.name!r}: unknown kind {item.kind!r}.")
        result[param_name(item)] = dist
    return result


def suggest(trial: Any, rhp: RangedHParams) -> dict[str, Any]:
    """Samples every range through `trial.suggest_*`; returns {hparam name: value}."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    params = {}
    for name, dist in distributions(rhp).items():
        if isinstance(dist, CategoricalDistribution):
            params[name] = trial.suggest_categorical(name, dist.choices)
        elif isinstance(dist, FloatDistribution):
            params[name] = trial.suggest_float(name, dist.low, dist.high, log=dist.log)
        else:
            params[name] = trial.suggest_int(name, dist.low, dist.high, log=dist.log)
    return to_hparams(rhp, params)


def to_hparams(rhp: RangedHParams, params: dict[str, Any]) -> dict[str, Any]:
    """Optuna parameter values -> {hparam name: value} (reverse_log mapped back)."""
    values = {}
    for item in rhp.ranges():
        name = param_name(item)
        if name not in params:
            continue
        value = params[name]
        if name != item.name:  # reverse_log: y = 1 - x
            value = min(max(_one_minus(value), item.low), item.high)
        values[item.name] = value
    return values


def to_params(rhp: RangedHParams, values: dict[str, Any]) -> dict[str, Any]:
    """{hparam name: value} -> Optuna parameter values (for `study.enqueue_trial`)."""
    params = {}
    for name, value in values.items():
        if name not in rhp:
            raise HParamsError(
                f"{name!r} is not one of the ranges {[r.name for r in rhp.ranges()]}."
            )
        item = rhp[name]
        if not item.contains(value):
            raise HParamsError(f"{name}={value!r} is outside its range {item}.")
        key = param_name(item)
        params[key] = _one_minus(value) if key != name else value
    return params


def format_value(value: Any) -> str:
    """One hparam value as the `--hparams` parser reads it back (exact for floats)."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise HParamsError(f"cannot write the non-finite value {value!r} as an override.")
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if not value or value != value.strip() or any(c in value for c in _FORBIDDEN_IN_STRINGS):
            raise HParamsError(
                f"the string value {value!r} cannot be written as an --hparams override (no "
                f"commas, '=', brackets or surrounding spaces): rename the choice in the range."
            )
        return value
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    raise HParamsError(f"cannot write {type(value).__name__} {value!r} as an override.")


def override_string(values: dict[str, Any]) -> str:
    """{name: value} -> "a=1,b=0.5" (in the given order)."""
    return ",".join(f"{name}={format_value(value)}" for name, value in values.items())


def merge_overrides(user_overrides: str, values: dict[str, Any]) -> str:
    """The user's `--hparams` with the trial's `values` on top (the trial's win)."""
    kept = []
    for part in split_top_level(user_overrides or ""):
        name = part.split("=", 1)[0].strip()
        if name not in values:
            kept.append(part)
    trial = override_string(values)
    return ",".join(kept + ([trial] if trial else []))


def check_ranges(rhp: RangedHParams, hparams: HParams, range_name: str = "ranges",
                 hparams_set: str = "the hparams set") -> None:
    """Raises HParamsError unless every range names an hparam of `hparams`, every end
    point and choice has its type, and every choice can be written as an override."""
    try:
        distributions(rhp)
        rhp.check_against(hparams)
        for item in rhp.ranges():
            probes = [item.low, item.high] if item.kind in ("float", "int") else item.values
            for value in probes:
                hparams.copy().parse(override_string({item.name: value}))
    except HParamsError as e:
        raise HParamsError(
            f"Ranged set {range_name!r} does not fit {hparams_set!r}: {e}"
        ) from None
