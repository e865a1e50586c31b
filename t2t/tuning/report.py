"""The end of a tuning run: the table of trials, the best hparams, and the plots.

Files written in the output dir:
  trials.tsv          one row per trial: number, state, objective, seconds, each hparam
  best_hparams.txt    the best trial's --hparams override string (with the user's own)
  best_hparams.json   the same as JSON, with the trial, its objective and its directory
  objective.png       objective vs trial number with the best-so-far line, and each
                      trial's evaluations vs step
  importance.png      each parameter's importance (Optuna's default evaluator); skipped,
                      with the reason printed, below 2 complete trials or 2 parameters
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from t2t.tuning import search_space
from t2t.tuning.study import is_interrupted
from t2t.utils import atomic_files, optional_deps


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return "" if value is None else str(value)


def _seconds(trial: Any) -> float | None:
    duration = trial.duration
    return None if duration is None else duration.total_seconds()


def _objective(trial: Any) -> float | None:
    """The value of a COMPLETE trial, the last evaluation of a PRUNED one (none for
    failed or running trials)."""
    from optuna.trial import TrialState

    if trial.state == TrialState.COMPLETE:
        return trial.value
    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        return trial.intermediate_values[max(trial.intermediate_values)]
    return None


def _state(trial: Any) -> str:
    return "FAIL(interrupted)" if is_interrupted(trial) else trial.state.name


def _note(trial: Any, retries: dict[int, int]) -> str:
    from optuna.trial import TrialState

    notes = []
    if "retry_of" in trial.user_attrs:
        notes.append(f"re-run of {trial.user_attrs['retry_of']}")
    if trial.number in retries:
        notes.append(f"re-run as {retries[trial.number]}")
    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        notes.append(f"pruned at step {max(trial.intermediate_values)}")
    error = trial.user_attrs.get("error", "").strip()
    if error:
        lines = error.splitlines()
        last = [line for line in lines if line.strip()][-1]
        notes.append(f"{lines[0]} ... {last.strip()}" if len(lines) > 1 else lines[0])
    return "; ".join(notes)


def hparam_values(trial: Any, rhp: Any) -> dict[str, Any]:
    return trial.user_attrs.get("hparams") or search_space.to_hparams(rhp, trial.params)


def trial_rows(study: Any, rhp: Any) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows (strings), one row per trial."""
    objective = study.user_attrs.get("objective", "objective")
    names = [r.name for r in rhp.ranges()]
    trials = study.get_trials(deepcopy=False)
    retries = {t.user_attrs["retry_of"]: t.number for t in trials if "retry_of" in t.user_attrs}
    header = ["trial", "state", objective, "seconds", *names, "note"]
    rows = []
    for t in trials:
        values = hparam_values(t, rhp)
        seconds = _seconds(t)
        rows.append([str(t.number), _state(t), _fmt(_objective(t)),
                     "" if seconds is None else f"{seconds:.0f}",
                     *(_fmt(values.get(n)) for n in names), _note(t, retries)])
    return header, rows


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def best_trial(study: Any) -> Any:
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    return study.best_trial


def write_report(study: Any, rhp: Any, output_dir: str, user_overrides: str = "") -> str:
    """Writes the table, best hparams and plots into `output_dir`; returns the text to
    print (the table, the best trial, and where the files are)."""
    header, rows = trial_rows(study, rhp)
    tsv = "\n".join("\t".join(c.replace("\t", " ") for c in r) for r in [header, *rows])
    atomic_files.write_text(os.path.join(output_dir, "trials.tsv"), tsv + "\n")
    out = [format_table(header, rows), ""]
    best = best_trial(study)
    objective = study.user_attrs.get("objective", "objective")
    if best is None:
        out.append("No COMPLETE trial yet: no best hparams.")
    else:
        values = hparam_values(best, rhp)
        override = best.user_attrs.get("hparams_override") or search_space.merge_overrides(
            user_overrides, values)
        atomic_files.write_text(os.path.join(output_dir, "best_hparams.txt"), override + "\n")
        record = {"trial": best.number, "objective": objective, "value": best.value,
                  "direction": study.direction.name.lower(),
                  "hparams_set": study.user_attrs.get("hparams_set"), "hparams": values,
                  "hparams_override": override, "output_dir": best.user_attrs.get("output_dir")}
        atomic_files.write_text(os.path.join(output_dir, "best_hparams.json"),
                      json.dumps(record, indent=2) + "\n")
        out.append(f"Best: trial {best.number}, {objective} = {best.value:.6g}")
        out.append(f"  --hparams_set={record['hparams_set']} --hparams='{override}'")
        if record["output_dir"]:
            out.append(f"  run: {record['output_dir']}")
    out.append(plot_objective(study, os.path.join(output_dir, "objective.png")))
    out.append(plot_importance(study, os.path.join(output_dir, "importance.png")))
    out.append(f"Table: {os.path.join(output_dir, 'trials.tsv')}; best hparams: "
               f"{os.path.join(output_dir, 'best_hparams.txt')} and .json")
    return "\n".join(out)


def _figure(width: float, height: float):
    backend = optional_deps.require("matplotlib.backends.backend_agg", "tuning",
                                    "t2t-tuner's plots")
    figure = optional_deps.require("matplotlib.figure", "tuning", "t2t-tuner's plots").Figure(
        figsize=(width, height), dpi=100)
    backend.FigureCanvasAgg(figure)
    return figure


def plot_objective(study: Any, path: str) -> str:
    """objective vs trial (COMPLETE dots, PRUNED crosses, best-so-far line) and each
    trial's evaluations vs step."""
    from optuna.trial import TrialState

    objective = study.user_attrs.get("objective", "objective")
    maximize = study.direction.name.lower() == "maximize"
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
    if not complete and not pruned:
        return "objective.png skipped: no trial has a result yet."
    figure = _figure(11, 4.2)
    left, right = figure.subplots(1, 2)
    left.scatter([t.number for t in complete], [t.value for t in complete], label="complete")
    if pruned:
        left.scatter([t.number for t in pruned], [_objective(t) for t in pruned], marker="x",
                     color="gray", label="pruned (last eval)")
    best_x, best_y, best = [], [], None
    for t in sorted(complete, key=lambda t: t.number):
        if best is None or (t.value > best if maximize else t.value < best):
            best = t.value
        best_x.append(t.number)
        best_y.append(best)
    if best_x:
        left.step(best_x, best_y, where="post", color="C1", label="best so far")
    from matplotlib.ticker import MaxNLocator

    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("trial")
    left.set_ylabel(objective)
    left.set_title(f"{objective} ({'higher' if maximize else 'lower'} is better)")
    left.legend(loc="best", fontsize="small")
    for t in sorted(complete + pruned, key=lambda t: t.number):
        steps = sorted(t.intermediate_values)
        right.plot(steps, [t.intermediate_values[s] for s in steps], marker=".",
                   linestyle="--" if t.state == TrialState.PRUNED else "-",
                   label=f"trial {t.number}")
    right.set_xlabel("step")
    right.set_ylabel(objective)
    right.set_title("evaluations during training")
    if len(complete) + len(pruned) <= 12:
        right.legend(loc="best", fontsize="x-small")
    figure.tight_layout()
    figure.savefig(path)
    return f"Plot: {path}"


def plot_importance(study: Any, path: str) -> str:
    """A bar per parameter: its importance for the objective (sums to 1)."""
    optuna = optional_deps.require("optuna", "tuning", "t2t-tuner")
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return (f"importance.png skipped: {len(complete)} complete trial(s); parameter "
                f"importance needs at least 2.")
    varied = {name for t in complete for name in t.params
              if len({repr(u.params.get(name)) for u in complete}) > 1}
    if len(varied) < 2:
        return (f"importance.png skipped: {len(varied)} parameter(s) vary across the complete "
                f"trials; importance compares at least 2.")
    try:
        importances = optuna.importance.get_param_importances(study, params=sorted(varied))
    except Exception as e:  # the evaluators refuse some degenerate studies
        return f"importance.png skipped: Optuna could not rank the parameters ({e})."
    names = list(importances)[::-1]
    figure = _figure(7, 0.5 * len(names) + 1.5)
    axes = figure.subplots()
    axes.barh(names, [importances[n] for n in names])
    axes.set_xlabel("importance (Optuna default evaluator, sums to 1)")
    axes.set_title(f"parameter importance for {study.user_attrs.get('objective', 'objective')}")
    figure.tight_layout()
    figure.savefig(path)
    return f"Plot: {path}"
