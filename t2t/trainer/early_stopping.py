"""Stopping a run whose evaluation metric has plateaued (Tensor2Tensor's early stopping).

    rule = StoppingRule.create("bleu", steps=2000, delta=0.1, minimize=None, known=[...])
    reason = rule.check(history)   # history: eval_results.jsonl's records, oldest first

A metric has plateaued when, over the last `steps` training steps, it has not improved
by more than `delta` on the value it had `steps` steps ago (T2T's
`metrics_hook.has_metric_plateaued`, the rule behind --eval_early_stopping_steps). The
history is the run's eval_results.jsonl, so a resumed run keeps what it has seen.

Metric names are the keys an evaluation reports ("loss", "accuracy", "bleu",
"rouge_l", "wer", ...); Tensor2Tensor's event tags ("loss",
"metrics-translate_ende_wmt32k/targets/approx_bleu_score") name the same figures.
Whether a metric improves downwards is known for t2t's own (loss, wer, perplexity
...); for another the `minimize` flag says. A training run applies the rule after each
evaluation through t2t.trainer.actions.early_stopping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from t2t import registry
from t2t.utils import metrics as t2t_metric_names

# Metrics that improve downwards; every other known one improves upwards.
MINIMIZED = frozenset({"loss", "wer", "cer", "perplexity", "bits_per_byte", "bits_per_dim",
                       "rmse", "mean_absolute_error"})
MAXIMIZED = frozenset({"accuracy", "accuracy_top5", "accuracy_per_sequence",
                       "neg_log_perplexity", "bleu", "chrf", "rouge_1", "rouge_2", "rouge_l",
                       "decoded/accuracy", "decoded/accuracy_per_sequence"})


class MetricNameError(ValueError):
    """An early-stopping or best-checkpoint metric the evaluation does not report."""


def canonical_name(name: str) -> str:
    """t2t's key for a metric given by t2t's or Tensor2Tensor's name: "bleu", or T2T's
    "metrics-PROBLEM/targets/approx_bleu_score" / "approx_bleu_score" -> "bleu"."""
    name = name.strip()
    if name.startswith("metrics-") and "/" in name:
        name = name.rsplit("/", 1)[1]
    return t2t_metric_names.T2T_TO_T2T.get(name, name)


def is_minimized(name: str, minimize: bool | None) -> bool:
    """Whether `name` improves downwards: known for t2t's metrics (a contradicting
    `minimize` raises), else `minimize` (True when None: T2T's default)."""
    known = (True if name in MINIMIZED or name.endswith("/loss") else
             False if name in MAXIMIZED or name.split("/")[-1] in MAXIMIZED else None)
    if known is None:
        return True if minimize is None else bool(minimize)
    if minimize is not None and minimize != known:
        raise MetricNameError(
            f"{name} improves {'downwards' if known else 'upwards'}: it cannot be "
            f"{'minimized' if minimize else 'maximized'} (drop "
            f"--eval_early_stopping_metric_minimize, or give "
            f"--eval_early_stopping_metric_minimize={str(known).lower()}).")
    return known


def check_metric(name: str, reported: Iterable[str], flag: str) -> str:
    """`name` as t2t's key, checked against the keys the evaluation reports;
    MetricNameError naming close matches otherwise."""
    key = canonical_name(name)
    known = sorted(set(reported))
    if key not in known:
        near = registry.close_matches(key, known)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        raise MetricNameError(
            f"--{flag}={name}: the evaluation does not report {key!r}.{hint} It reports: "
            f"{', '.join(known)}.")
    return key


def has_metric_plateaued(steps: Sequence[int], values: Sequence[float], num_steps: int,
                         delta: float, decrease: bool = True) -> bool:
    """Tensor2Tensor's rule: the value has not improved (decreased when `decrease`) by
    `delta` or more, relative to its value `num_steps` steps before the last record,
    at any record since."""
    if num_steps <= 0:
        raise ValueError(f"num_steps={num_steps}: give a positive number of steps.")
    if len(steps) < 2:
        return False
    old_enough = [s for s in steps if s <= steps[-1] - num_steps]
    if not old_enough:
        return False
    start = len(old_enough) - 1
    improvements = [(values[start] - v) if decrease else (v - values[start])
                    for v in values[start:]]
    return all(change < delta for change in improvements)


@dataclasses.dataclass(frozen=True)
class StoppingRule:
    """Stop when `metric` has not improved by `delta` within `steps` training steps."""

    metric: str
    steps: int
    delta: float
    minimize: bool

    @classmethod
    def create(cls, metric: str, steps: int, delta: float, minimize: bool | None,
               reported: Iterable[str]) -> StoppingRule:
        """The rule, its metric checked against `reported` (MetricNameError)."""
        if steps < 0:
            raise MetricNameError(f"--eval_early_stopping_steps={steps}: give a number of "
                                  f"steps > 0, or 0 for no early stopping.")
        if delta < 0:
            raise MetricNameError(f"--eval_early_stopping_metric_delta={delta}: give an "
                                  f"improvement >= 0.")
        key = check_metric(metric, reported, "eval_early_stopping_metric")
        return cls(key, steps, delta, is_minimized(key, minimize))

    def check(self, history: Sequence[dict[str, Any]]) -> str | None:
        """Why to stop now (one line), or None; `history`: evaluation records
        ({"step": ..., metric: ...}), oldest first."""
        records = [r for r in history if self.metric in r]
        steps = [int(r["step"]) for r in records]
        values = [float(r[self.metric]) for r in records]
        if not has_metric_plateaued(steps, values, self.steps, self.delta, self.minimize):
            return None
        best = min(values) if self.minimize else max(values)
        return (f"Early stopping at step {steps[-1]}: {self.metric} has not "
                f"{'decreased' if self.minimize else 'increased'} by {self.delta:g} or more "
                f"in the last {self.steps} steps (now {values[-1]:.4f}, best {best:.4f}; "
                f"--eval_early_stopping_steps/--eval_early_stopping_metric_delta).")
