"""The tables of `python -m regression matrix`: one row per TensorFlow version from
its reports (DATE-tf-matrix.json), and the README block between its marker lines."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from regression import checkpoint_portability
from regression.report import RegressionError, band_text, rewrite_marked_file, value_text
from t2t.utils import readme_tables

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RESULTS = os.path.join(REPO_ROOT, "regression", "results")
RESULTS_SUFFIX = "-tf-matrix.json"
MATRIX_BEGIN, MATRIX_END = readme_tables.markers("tf-matrix")
NOT_INSTALLABLE = "not installable"


# --------------------------------------------------------------------- tables
def case_cell(case: Mapping[str, Any]) -> str:
    return (f"{value_text(case.get('value'))} {band_text(case['band'])} "
            f"{'PASS' if case.get('ok') else case.get('status', 'FAIL')}")


def tests_cell(tests: Mapping[str, Any] | None) -> str:
    if not tests:
        return "-"
    cell = f"{tests['passed']} passed, {tests['failed']} failed"
    if tests.get("errors"):
        cell += f", {tests['errors']} errors"
    return cell + (f", {tests['skipped']} skipped" if tests.get("skipped") else "")


def matrix_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the table: one row per version."""
    names = list(dict.fromkeys(c["name"] for v in report["versions"]
                               for c in (v.get("regression") or {}).get("cases", [])))
    header = ["TensorFlow", "Keras", "tensorflow-text", "numpy", "install", "tests", *names,
              "checkpoints", "minutes", "t2t commit"]
    loads = report.get("portability") or []
    rows = []
    for v in report["versions"]:
        cases = {c["name"]: c for c in (v.get("regression") or {}).get("cases", [])}
        resolved = v.get("resolved") or {}
        mine = [x for x in loads if x["reader"] == v["version"]]
        ckpt = ("-" if not mine else f"{sum(x['ok'] for x in mine)}/{len(mine)} load")
        install = v["install"]["status"]
        if install == NOT_INSTALLABLE:
            install += ": " + v["install"]["error"].splitlines()[-1][:80] if v["install"]["error"] \
                else ""
        rows.append([resolved.get("tensorflow") or v["version"],
                     *(resolved.get(p) or "-" for p in ("keras", "tensorflow-text", "numpy")),
                     install, tests_cell(v.get("tests")),
                     *(case_cell(cases[n]) if n in cases else "-" for n in names),
                     ckpt, f"{sum(v.get('minutes', {}).values()):.1f}", _commits(v, report)])
    return header, rows


def _commits(version: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """'5a38798' or, for phases run on different commits, 'tests 5a38798, regression df66cd3'."""
    commits = version.get("commits") or {"install": report.get("commit") or "?"}
    if len(set(commits.values())) == 1:
        return next(iter(commits.values()))[:7]
    return ", ".join(f"{phase} {commit[:7]}" for phase, commit in commits.items()
                     if phase != "install")


def markdown(report: Mapping[str, Any]) -> str:
    """The README block: heading line, table and the failing tests."""
    header, rows = matrix_rows(report)
    host = report.get("host", {})
    runs = report.get("runs", 1)
    when = (f"Run {str(report.get('date', '?'))[:10]}" if runs == 1 else
            f"{runs} runs from {str(report.get('first_date'))[:10]} to "
            f"{str(report.get('date', '?'))[:10]} (per phase the latest run)")
    lines = [f"{when} on {host.get('cpu', '?')} ({host.get('cores', '?')} cores), Python "
             f"{host.get('python', '?')}; {report.get('selection', 'quick')} regression subset"
             + (f"; {report.get('total_minutes', 0):.0f} min in all." if runs == 1 else "."), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    for v in report["versions"]:
        failures = (v.get("tests") or {}).get("failures") or []
        if failures:
            lines += ["", f"Failing under TensorFlow {v['version']}: "
                      + ", ".join(f"`{f['id']}`" for f in failures[:20])
                      + (f" and {len(failures) - 20} more" if len(failures) > 20 else "")]
    loads = report.get("portability") or []
    if report.get("note"):
        lines += ["", f"Note: {report['note']}"]
    if loads:
        lines += ["", "Checkpoint portability: "
                  + checkpoint_portability.table_text([checkpoint_portability.Load(**x)
                                                       for x in loads]) + "."]
    return "\n".join(lines)


def replace_marked(text: str, block: str, begin: str = MATRIX_BEGIN,
                   end: str = MATRIX_END) -> str:
    """`text` with the lines between the marker lines `begin` and `end` replaced
    (t2t.utils.readme_tables.replace_block); RegressionError when they are missing."""
    try:
        return readme_tables.replace_block(text, block, begin, end)
    except readme_tables.MarkerError as e:
        raise RegressionError(str(e)) from e


PHASES = ("install", "resolved", "tests", "regression")


def results_files(paths: Sequence[str]) -> list[str]:
    """The *-tf-matrix.json among `paths` (files, or folders of them), oldest run first."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            found += [os.path.join(path, n) for n in os.listdir(path) if n.endswith(RESULTS_SUFFIX)]
        elif os.path.exists(path):
            found.append(path)
    if not found:
        raise RegressionError(f"no *{RESULTS_SUFFIX} report in {', '.join(paths)}: run "
                              f"`python -m regression matrix --tf ...` first")

    def date(path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return str(json.load(f).get("date", ""))

    return sorted(found, key=lambda p: (date(p), p))


def merge(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One report of several runs, oldest first: per version, each phase (install, tests,
    regression) comes from the latest run that ran it, and `commits` says which t2t
    commit each phase ran on; portability from the latest run that checked it."""
    versions: dict[str, dict[str, Any]] = {}
    sources: dict[tuple[str, str], int] = {}  # (version, phase) -> index of the run shown
    for index, report in enumerate(reports):
        for entry in report.get("versions", []):
            row = dict(versions.get(entry["version"], {}))
            ran = [p for p in PHASES if p in entry]
            row.update({p: entry[p] for p in ran}, version=entry["version"])
            row["minutes"] = {**row.get("minutes", {}), **entry.get("minutes", {})}
            row["commits"] = {**row.get("commits", {}),
                              **{p: report.get("commit", "?") for p in ran if p != "resolved"}}
            versions[entry["version"]] = row
            sources.update({(entry["version"], p): index for p in ran})
    last = dict(reports[-1]) if reports else {}
    portability = [r for r in reports if r.get("portability")]
    # A run whose every phase a later run replaced no longer explains the table.
    shown = set(sources.values()) | ({reports.index(portability[-1])} if portability else set())
    notes = [f"{str(r.get('date', '?'))[:10]}: {r['note']}"
             for i, r in enumerate(reports) if r.get("note") and i in shown]
    return {**last, "versions": list(versions.values()), "runs": len(reports),
            "portability": portability[-1]["portability"] if portability else [],
            "note": " ".join(n.rstrip(".") + "." for n in notes), "first_date": reports[0].get("date") if reports else None}


def cmd_readme(args: argparse.Namespace) -> int:
    paths = results_files(args.report or [DEFAULT_RESULTS])
    reports = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            reports.append(json.load(f))
    block = markdown(merge(reports))
    print(block)
    if args.write:
        rewrite_marked_file(args.write, replace_marked, block)
        print(f"\nUpdated the TensorFlow matrix block of {args.write} from {len(paths)} "
              f"report(s).")
    return 0
