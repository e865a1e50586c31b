"""The regression suite's results: one case's result, the JSON report of a run, the
README table made from reports (regression.curves plots the eval curves).

A report (OUTPUT/report.json) is {"machine": machine_info(), ..., "cases": [CaseResult]};
each case result carries the t2t commit and the date of its own run, so that a run
resumed later (`run --resume`) or several runs merged (`readme --report DIR`) still say
where every number came from.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from regression.case_spec import Case
from t2t.utils import atomic_files, readme_tables

REPORT_FILE = "report.json"
BEGIN_MARKER, END_MARKER = readme_tables.markers("results")
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
INTERRUPTED = "interrupted"

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class RegressionError(Exception):
    """A usage or setup problem: printed as one line, exit status 2."""


@dataclasses.dataclass
class CaseResult:
    name: str
    problem: str
    model: str
    hparams_set: str
    hparams: str
    train_steps: int
    strategy: str
    hardware: str
    metric: str
    band: tuple[float, float]
    measured_on: str
    expected_minutes: float
    # Every checked metric -> band (the main one first), and their final values.
    bands: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    values: dict[str, float] = dataclasses.field(default_factory=dict)
    status: str = SKIP
    reason: str = ""
    value: float | None = None
    final_step: int | None = None
    minutes: float = 0.0
    datagen_minutes: float = 0.0
    curve: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    eval_results: list[dict[str, float]] = dataclasses.field(default_factory=list)
    commands: list[str] = dataclasses.field(default_factory=list)
    log: str | None = None
    plot: str | None = None
    # The t2t commit and UTC start time of the run that measured this case.
    commit: str | None = None
    date: str | None = None
    # --resume: the case continued a run found in its folder (`minutes` then counts this
    # run plus `earlier_minutes`, the time an interrupted run recorded before it).
    continued: bool = False
    earlier_minutes: float = 0.0
    # The dev metric of `curve` when the main one is measured after training (test_*).
    curve_metric: str | None = None
    # Case.recorded: {metric: (value, tolerance)} of a deterministic case (in `bands`).
    recorded: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    @classmethod
    def for_case(cls, case: Case) -> CaseResult:
        return cls(
            name=case.name, problem=case.problem, model=case.model,
            hparams_set=case.hparams_set, hparams=case.hparams, train_steps=case.train_steps,
            strategy=case.strategy, hardware=case.hardware, metric=case.metric,
            band=tuple(case.band), measured_on=case.measured_on,
            expected_minutes=case.expected_minutes, bands=case.bands(),
            curve_metric=case.curve_metric,
            recorded={k: tuple(v) for k, v in case.recorded.items()},
        )


    @classmethod
    def from_report(cls, data: dict[str, Any]) -> CaseResult:
        """A case result as a report stored it (fields this version lacks are dropped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["band"] = tuple(kwargs["band"])
        kwargs["bands"] = {k: tuple(v) for k, v in kwargs.get("bands", {}).items()}
        kwargs["recorded"] = {k: tuple(v) for k, v in kwargs.get("recorded", {}).items()}
        kwargs["curve"] = [tuple(point) for point in kwargs.get("curve", [])]
        return cls(**kwargs)


def earlier_results(path: str) -> tuple[dict[str, Any], dict[str, CaseResult]]:
    """The report at `path` ({} and {} when there is none) and its case results by name,
    each with the commit and date of its run (from the report's machine when the case
    does not say)."""
    if not os.path.exists(path):
        return {}, {}
    try:
        report = read_report(path)
        machine = report.get("machine", {})
        results = {}
        for data in report.get("cases", []):
            result = CaseResult.from_report(data)
            result.commit = result.commit or machine.get("t2t_commit")
            result.date = result.date or machine.get("date")
            results[result.name] = result
    except (ValueError, KeyError, TypeError) as e:
        raise RegressionError(f"cannot read the earlier report {path} to resume from ({e}): "
                              f"move it away to start over") from e
    return report, results


# ------------------------------------------------------------------------ reports
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _output_of(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, cwd=_REPO_ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def machine_info() -> dict[str, Any]:
    """CPU, cores, memory, GPUs and versions of the machine running the cases."""
    memory_gib = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory_gib = round(int(line.split()[1]) / 2**20, 1)
                    break
    except (OSError, ValueError, IndexError):
        pass
    gpus = _output_of(["nvidia-smi", "-L"]) if shutil.which("nvidia-smi") else None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": memory_gib,
        "gpus": gpus.splitlines() if gpus else [],
        "tensorflow": _version("tensorflow"),
        "keras": _version("keras"),
        "t2t": _version("t2t"),
        "t2t_commit": _output_of(["git", "rev-parse", "--short", "HEAD"]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def write_report(path: str, results: Sequence[CaseResult], machine: dict[str, Any],
                 **extra: Any) -> None:
    report = {"machine": machine, **extra, "cases": [dataclasses.asdict(r) for r in results]}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def read_report(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        raise RegressionError(f"no report at {path}: run `python -m regression run` first "
                              f"(or pass --report PATH)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Plain-text columns, left-aligned."""
    rows = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _number(x: float) -> str:
    return f"{x:.2f}" if round(x, 2) == x else f"{x:g}"


def band_text(band: Sequence[float]) -> str:
    return f"[{_number(band[0])}, {_number(band[1])}]"


def value_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"



def results_table(results: Sequence[CaseResult]) -> str:
    rows = [[r.name, r.metric, value_text(r.value), band_text(r.bands.get(r.metric, r.band)),
             r.status, f"{r.minutes:.1f}"]
            for r in results]
    table = format_table(["case", "metric", "value", "band", "result", "minutes"], rows)
    notes = [f"  {r.name}: {r.status} - {r.reason}" for r in results if r.reason]
    return table + ("\n" + "\n".join(notes) if notes else "")


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def merge_reports(reports: Sequence[dict[str, Any]], order: Sequence[str] = ()) -> dict[str, Any]:
    """One report of several runs' cases (a later run of a case replaces an earlier);
    each case keeps the commit and date of its run. Rows follow `order` (case names, e.g.
    the suite's), then the rest as first seen. Only the runs that still supply a row
    count: their number, their notes, and their CPUs (runs of the same suite may land on
    different CPUs); the machine is the first such run's."""
    cases: dict[str, dict[str, Any]] = {}
    source: dict[str, int] = {}  # case name -> index of the report its row comes from
    for index, report in enumerate(reports):
        machine = report.get("machine", {})
        for case in report.get("cases", []):
            cases[case["name"]] = {**case, "commit": case.get("commit") or machine.get("t2t_commit"),
                                   "date": case.get("date") or machine.get("date")}
            source[case["name"]] = index
    # A run whose every case a later run replaced says nothing about this table.
    used = [r for i, r in enumerate(reports) if i in source.values()] or list(reports[:1])
    notes = [f"{str(r['machine'].get('date', '?'))[:10]}: {r['machine']['note']}"
             for r in used if r.get("machine", {}).get("note")]
    machine = dict(used[0].get("machine", {})) if used else {}
    cpus = list(dict.fromkeys(r["machine"]["cpu"] for r in used
                              if r.get("machine", {}).get("cpu")))
    if len(cpus) > 1:
        machine["cpu"] = " or ".join(str(c) for c in cpus)
    rank = {name: i for i, name in enumerate(order)}
    rows = sorted(cases.values(), key=lambda c: rank.get(c["name"], len(rank)))  # stable
    return {"machine": machine, "cases": rows, "runs": len(used),
            "notes": notes}


def markdown_table(report: dict[str, Any]) -> str:
    """The README's results block, from a report.json (or `merge_reports` of several)."""
    m = report.get("machine", {})
    gpus = f", GPUs: {'; '.join(m['gpus'])}" if m.get("gpus") else ""
    where = (f"on {m.get('cpu', '?')} ({m.get('cores', '?')} cores{gpus}), TensorFlow "
             f"{m.get('tensorflow', '?')}, Python {m.get('python', '?')}")
    days = sorted({str(c.get("date") or m.get("date") or "?")[:10] for c in report.get("cases", [])})
    commits = {c.get("commit") or m.get("t2t_commit") for c in report.get("cases", [])
               if c["status"] != SKIP}
    if report.get("runs", 1) > 1:
        span = f"of {days[0]}" if days[0] == days[-1] else f"from {days[0]} to {days[-1]}"
        head = (f"{report['runs']} runs {span} {where}; each row says the date and t2t "
                "commit of its run.")
    elif len(commits) > 1 or len(days) > 1:
        run = (f"One run of {days[0]}, resumed (`run --resume`)," if len(days) == 1 else
               f"One run, resumed (`run --resume`), from {days[0]} to {days[-1]}")
        head = (f"{run} {where}; each row says the date and t2t commit of the part that "
                "ran its case.")
    else:
        head = f"Run {m.get('date', '?')} {where}, t2t {m.get('t2t_commit') or m.get('t2t') or '?'}."
    lines = [
        head,
        "",
        "| case | problem | model / hparams_set | steps | metric | value | band | result "
        "| minutes | date | t2t commit |",
        "|---|---|---|---:|---|---:|---|---|---:|---|---|",
    ]
    for c in report.get("cases", []):
        result = c["status"] + (f": {c['reason']}" if c.get("reason") else "")
        minutes = f"{c['minutes']:.1f}" if c["status"] != SKIP else "-"
        if c.get("continued"):
            minutes += " (resumed)"
        lines.append("| " + " | ".join(_md(x) for x in [
            c["name"], c["problem"], f"{c['model']} / {c['hparams_set']}", c["train_steps"],
            c["metric"], value_text(c.get("value")), _band_column(c), result, minutes,
            str(c.get("date") or m.get("date") or "?")[:10],
            c.get("commit") or m.get("t2t_commit") or "?",
        ]) + " |")
    lines += ["", summary_line(report.get("cases", []))]
    notes = report["notes"] if "notes" in report else [m["note"]] if m.get("note") else []
    if notes:
        for note in notes:  # a paragraph each
            lines += ["", f"Note on the run of {_md(note)}"]
    return "\n".join(lines)


def _band_column(case: dict[str, Any]) -> str:
    """The main metric's band as checked (a baseline may have lowered its high end),
    and the baselines it was checked against ("; xz_bits_per_byte 2.4633")."""
    bands = case.get("bands") or {}
    text = band_text(bands.get(case["metric"], case["band"]))
    extra = [f"{name} {value:.4f}" for name, value in (case.get("values") or {}).items()
             if name not in bands]
    return "; ".join([text, *extra])


def summary_line(cases: Sequence[dict[str, Any]]) -> str:
    """'11 PASS, 0 FAIL, 3 SKIP; the 11 cases that ran took 146.7 min (2.4 h) in all.'"""
    counts = {status: sum(c["status"] == status for c in cases) for status in (PASS, FAIL, SKIP)}
    ran = [c for c in cases if c["status"] != SKIP]
    minutes = sum(float(c.get("minutes") or 0.0) for c in ran)
    return (f"{counts[PASS]} PASS, {counts[FAIL]} FAIL, {counts[SKIP]} SKIP; the {len(ran)} "
            f"cases that ran took {minutes:.1f} min ({minutes / 60:.1f} h) in all.")


def report_paths(paths: Sequence[str]) -> list[str]:
    """`paths` with each folder replaced by its *.json reports, oldest run first."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            inside = [os.path.join(path, n) for n in os.listdir(path) if n.endswith(".json")]
            if not inside:
                raise RegressionError(f"no *.json report in the folder {path}")
            found.extend(sorted(inside, key=lambda p: (str(read_report(p).get("machine", {})
                                                           .get("date", "")), p)))
        else:
            found.append(path)
    return found


def replace_block(text: str, block: str) -> str:
    """`text` with the lines between the results marker lines replaced by `block`
    (t2t.utils.readme_tables.replace_block: the markers count only as lines of their own,
    a mention inside prose is ignored); RegressionError when they are missing or doubled.
    """
    try:
        return readme_tables.replace_block(text, block, BEGIN_MARKER, END_MARKER)
    except readme_tables.MarkerError as e:
        raise RegressionError(str(e)) from e


def rewrite_marked_file(path: str, replace: Callable[[str, str], str], block: str) -> None:
    """Rewrites the file `path` with `replace(its text, block)` (a marked README block),
    atomically and only when that changes it; RegressionError naming the file when it
    cannot be read or written or has no markers."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RegressionError(f"cannot read {path}: {e}") from e
    try:
        updated = replace(text, block)
    except RegressionError as e:
        raise RegressionError(f"{path}: {e}") from e
    if updated == text:
        return
    try:
        atomic_files.write_text(path, updated)
    except OSError as e:
        raise RegressionError(f"cannot write {path}: {e}") from e
