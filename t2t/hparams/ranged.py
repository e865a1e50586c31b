"""RangedHParams: search spaces over hyperparameters, for the tuner.

A ranged set is a function registered with `@registry.register_ranged_hparams` that
fills a RangedHParams:

    @registry.register_ranged_hparams
    def transformer_base_range(rhp):
        rhp.set_float("learning_rate", 0.1, 0.3, scale=rhp.LOG_SCALE)
        rhp.set_int("num_hidden_layers", 2, 5)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from t2t.hparams.hparams import HParams, HParamsError

LINEAR_SCALE = "linear"
LOG_SCALE = "log"
REVERSE_LOG_SCALE = "reverse_log"
SCALES = (LINEAR_SCALE, LOG_SCALE, REVERSE_LOG_SCALE)


@dataclasses.dataclass(frozen=True)
class Range:
    """One searchable hyperparameter.

    kind: "float" | "int" | "discrete" | "categorical". `low`/`high` bound float and
    int ranges (inclusive); `values` lists discrete points or categories.
    """

    name: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    values: tuple[Any, ...] = ()
    scale: str = LINEAR_SCALE

    def contains(self, value: Any) -> bool:
        if self.kind in ("float", "int"):
            return self.low <= value <= self.high
        return value in self.values


class RangedHParams:
    """An ordered set of Ranges, one per hyperparameter name."""

    LINEAR_SCALE = LINEAR_SCALE
    LOG_SCALE = LOG_SCALE
    REVERSE_LOG_SCALE = REVERSE_LOG_SCALE

    def __init__(self) -> None:
        self._ranges: dict[str, Range] = {}

    def _add(self, item: Range) -> None:
        if item.scale not in SCALES:
            raise HParamsError(
                f"Range {item.name!r}: unknown scale {item.scale!r}; use one of {SCALES}."
            )
        if item.kind in ("float", "int"):
            if item.low > item.high:
                raise HParamsError(
                    f"Range {item.name!r}: low {item.low} is above high {item.high}."
                )
            if item.scale != LINEAR_SCALE and item.low <= 0:
                raise HParamsError(
                    f"Range {item.name!r}: a {item.scale} scale needs low > 0, got {item.low}."
                )
        elif not item.values:
            raise HParamsError(f"Range {item.name!r}: give at least one value.")
        self._ranges[item.name] = item

    def set_float(self, name: str, low: float, high: float, scale: str = LINEAR_SCALE) -> None:
        """A float in [low, high] (inclusive), sampled on `scale`."""
        self._add(Range(name, "float", float(low), float(high), scale=scale))

    def set_int(self, name: str, low: int, high: int, scale: str = LINEAR_SCALE) -> None:
        """An int in [low, high] (inclusive)."""
        if int(low) != low or int(high) != high:
            raise HParamsError(f"Range {name!r}: set_int needs integer bounds, got {low}, {high}.")
        self._add(Range(name, "int", int(low), int(high), scale=scale))

    def set_discrete(self, name: str, values: Sequence[float | int], scale: str = LINEAR_SCALE) -> None:
        """One of the ordered numeric `values`."""
        self._add(Range(name, "discrete", values=tuple(sorted(values)), scale=scale))

    def set_categorical(self, name: str, values: Sequence[Any]) -> None:
        """One of the unordered `values` (strings, bools or numbers)."""
        self._add(Range(name, "categorical", values=tuple(values)))

    def ranges(self) -> list[Range]:
        return list(self._ranges.values())

    def __getitem__(self, name: str) -> Range:
        return self._ranges[name]

    def __contains__(self, name: str) -> bool:
        return name in self._ranges

    def check_against(self, hparams: HParams) -> None:
        """Raises if a range names an hparam that `hparams` lacks or has another type of."""
        for item in self._ranges.values():
            if item.name not in hparams:
                hparams.set_hparam(item.name, None)  # raises with close matches
            probe = item.low if item.kind in ("float", "int") else item.values[0]
            current = hparams.get(item.name)
            if current is not None:
                hparams.copy().set_hparam(item.name, probe)

    def apply(self, hparams: HParams, values: dict[str, Any]) -> HParams:
        """A copy of `hparams` with `values` (one per range) set, checking bounds."""
        result = hparams.copy()
        for name, value in values.items():
            if name not in self._ranges:
                raise HParamsError(f"{name!r} is not one of the ranges {sorted(self._ranges)}.")
            if not self._ranges[name].contains(value):
                raise HParamsError(f"{name}={value!r} is outside its range {self._ranges[name]}.")
            result.set_hparam(name, value)
        return result
