"""One `python -m regression run`: the selected cases in order, each skipped, kept from
an earlier run (--resume) or run, with its curve plotted; OUTPUT/report.json rewritten
after every case and once more at the end; on an interruption, a partial report that a
--resume run continues from."""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from regression.case_run import kept_result, run_case
from regression.case_spec import Case
from regression.curves import plot_curve, plots_available
from regression.report import (
    FAIL,
    INTERRUPTED,
    REPORT_FILE,
    SKIP,
    CaseResult,
    band_text,
    earlier_results,
    machine_info,
    results_table,
    value_text,
    write_report,
)
from regression.selection import Registered, skip_reasons
from regression.tools import Execute

EXIT_INTERRUPTED = 130


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclasses.dataclass
class RegressionRun:
    """The settings of one run and what it found of an earlier one (with --resume)."""

    output_dir: str
    hardware: frozenset[str]
    registered: Registered
    execute: Execute
    selection: str  # "case", "full" or "quick"
    resume: bool = False
    trainer_args: Sequence[str] = ()
    machine: dict[str, Any] = dataclasses.field(default_factory=dict)
    started: str = ""
    earlier: dict[str, CaseResult] = dataclasses.field(default_factory=dict)
    can_plot: bool = False
    prepared: set[tuple[str, str | None]] = dataclasses.field(default_factory=set)

    @property
    def report_path(self) -> str:
        return os.path.join(self.output_dir, REPORT_FILE)

    def start(self) -> None:
        """Creates OUTPUT, reads the machine and (with --resume) the earlier report."""
        os.makedirs(self.output_dir, exist_ok=True)
        self.machine = machine_info()
        started = self.machine["date"]
        earlier_report, self.earlier = (earlier_results(self.report_path) if self.resume
                                        else ({}, {}))
        self.started = earlier_report.get("started", started) if self.earlier else started
        self.can_plot = plots_available()
        if not self.can_plot:
            print("matplotlib is not installed: plots are skipped (pip install matplotlib).")

    def write(self, results: Sequence[CaseResult], **ending: Any) -> None:
        """Rewrites report.json (`ending`: interrupted=True or finished=DATE)."""
        write_report(self.report_path, results, self.machine, selection=self.selection,
                     hardware=sorted(self.hardware), started=self.started, **ending,
                     trainer_args=self.trainer_args)

    def skipped_or_kept(self, case: Case) -> CaseResult | None:
        """The result of a case that does not run: SKIP, or the earlier run's (--resume)."""
        reasons = skip_reasons(case, self.hardware, self.registered)
        kept = kept_result(self.earlier.get(case.name), case, self.output_dir,
                           self.trainer_args)
        if reasons:
            result = CaseResult.for_case(case)
            result.status, result.reason = SKIP, "; ".join(reasons)
            print(f"[{case.name}] SKIP: {result.reason}")
            return result
        if kept is not None:
            print(f"[{case.name}] kept from the run of {str(kept.date)[:16]} (t2t "
                  f"{kept.commit}): {kept.status} {case.metric} {value_text(kept.value)} "
                  f"in {kept.minutes:.1f} min", flush=True)
        return kept

    def run_one(self, case: Case) -> tuple[CaseResult, bool]:
        """Runs `case`; returns its result and whether the run was interrupted in it."""
        print(f"[{case.name}] {case.problem} {case.model}/{case.hparams_set} "
              f"{case.train_steps} steps (about {case.expected_minutes:g} min)", flush=True)
        previous = self.earlier.get(case.name)
        earlier_minutes = (previous.minutes if previous is not None
                           and previous.reason == INTERRUPTED else 0.0)
        case_started = time.monotonic()
        date = _utc_now()
        try:
            result = run_case(case, self.output_dir, execute=self.execute,
                              prepared=self.prepared, resume=self.resume,
                              trainer_extra=self.trainer_args)
        except KeyboardInterrupt:
            result = CaseResult.for_case(case)
            result.status, result.reason = FAIL, INTERRUPTED
            result.commit, result.date = self.machine.get("t2t_commit"), date
            # Kept so that a --resume run counts the time already spent on the case.
            result.minutes = earlier_minutes + (time.monotonic() - case_started) / 60
            return result, True
        result.commit, result.date = self.machine.get("t2t_commit"), date
        if earlier_minutes:
            result.earlier_minutes = earlier_minutes
            result.minutes += earlier_minutes
            result.continued = True
        if self.can_plot and result.curve:
            plot = plot_curve(result, os.path.join(self.output_dir, case.name,
                                                   f"{case.metric}.png"))
            result.plot = os.path.relpath(plot, self.output_dir) if plot else None
        print(f"[{case.name}] {result.status} {case.metric} {value_text(result.value)} "
              f"band {band_text(result.bands.get(case.metric, case.band))} "
              f"in {result.minutes:.1f} min"
              + (f": {result.reason}" if result.reason else ""), flush=True)
        return result, False


def run_cases(run: RegressionRun, selected: Sequence[Case]) -> int:
    """Runs `selected` in order; the exit status: 0 all passed or skipped, 1 one failed,
    130 interrupted (the partial report keeps the earlier report's cases not reached)."""
    run.start()
    results: list[CaseResult] = []
    print(f"Running {len(selected)} case(s) ({run.selection}) into {run.output_dir}; "
          f"hardware: {', '.join(sorted(run.hardware))}")
    for index, case in enumerate(selected):
        result = run.skipped_or_kept(case)
        if result is None:
            result, interrupted = run.run_one(case)
            if interrupted:
                results.append(result)
                results += [run.earlier[c.name] for c in selected[index + 1:]
                            if c.name in run.earlier]
                run.write(results, interrupted=True)
                print(f"\nInterrupted during {case.name}; partial report: {run.report_path}",
                      file=sys.stderr)
                return EXIT_INTERRUPTED
        results.append(result)
        run.write(results)
    run.write(results, finished=_utc_now())
    print()
    print(results_table(results))
    print(f"\nReport: {run.report_path}")
    if all(r.status == SKIP for r in results):
        print("warning: every selected case was skipped; nothing was checked.")
    return 1 if any(r.status == FAIL for r in results) else 0
