"""A case's verdict: its final evaluation (and what was measured after training) read
against its bands."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from regression.report import FAIL, PASS, CaseResult, band_text

EVAL_RESULTS_FILE = "eval_results.jsonl"  # t2t.trainer.run_dir.EVAL_RESULTS_FILE


def in_band(value: float | None, band: Sequence[float]) -> bool:
    """low <= value <= high (a missing or NaN value is never in the band)."""
    low, high = band
    return value is not None and low <= value <= high


def read_eval_results(case_dir: str, split: str = "dev") -> list[dict[str, float]]:
    """The run's evaluations of `split`, oldest first (a torn last line is ignored)."""
    name = EVAL_RESULTS_FILE if split == "dev" else f"eval_results_{split}.jsonl"
    path = os.path.join(case_dir, name)
    if not os.path.exists(path):
        return []
    results = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return results


def _recorded_note(result: CaseResult, name: str) -> str:
    """Why a band is narrower than the case's own, where a recorded figure made it so."""
    if name not in result.recorded:
        return ""
    value, tolerance = result.recorded[name]
    return (f" (recorded {value:.4f} +- {tolerance:g} for this deterministic run: the change "
            f"learns differently; if that is intended, measure again and update the record)")


def judge(result: CaseResult, eval_results: list[dict[str, float]], returncode: int,
          after: dict[str, float] | None = None, after_error: str = "") -> None:
    """Fills values, curve and PASS/FAIL from the evaluations, the trainer's status and
    what was measured after training (`after`: bleu, chrf, export_parity; `after_error`:
    why a post-training step failed)."""
    metric = result.metric
    result.eval_results = eval_results
    curve_metric = result.curve_metric or metric
    result.curve = [(int(r["step"]), float(r[curve_metric])) for r in eval_results
                    if curve_metric in r]
    last = eval_results[-1] if eval_results else None
    final = {k: float(v) for k, v in (last or {}).items() if k != "step"}
    final.update(after or {})
    result.values = {name: final[name] for name in result.bands if name in final}
    result.value = result.values.get(metric)
    if last is not None:
        result.final_step = int(last.get("step", -1))
    missing = [name for name in result.bands if name not in final]
    outside = [f"{name} {final[name]:.4f} outside {band_text(band)}" + _recorded_note(result, name)
               for name, band in result.bands.items()
               if name in final and not in_band(final[name], band)]
    if returncode != 0:
        result.status, result.reason = FAIL, f"t2t-trainer exited with status {returncode}"
    elif last is None:
        result.status, result.reason = FAIL, f"no evaluation in {EVAL_RESULTS_FILE}"
    elif result.final_step != result.train_steps:
        result.status = FAIL
        result.reason = (f"final evaluation at step {result.final_step}, "
                         f"not at train_steps {result.train_steps}")
    elif after_error:
        result.status, result.reason = FAIL, after_error
    elif missing:
        keys = ", ".join(sorted(final))
        result.status = FAIL
        result.reason = (f"metric {', '.join(repr(m) for m in missing)} not in the final "
                         f"evaluation (it has: {keys})")
    elif outside:
        result.status, result.reason = FAIL, "; ".join(outside)
    else:
        result.status, result.reason = PASS, ""
