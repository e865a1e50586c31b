"""`python -m benchmarks report`: the benchmark history as the markdown of the results page.

    python -m benchmarks report [--history PATH] [--write PAGE]

Reads the history (benchmarks/history.jsonl by default, see history.py) and renders, for
each benchmark of the suite in its order, the latest entry of a full run (not --quick)
whose results hold that benchmark's figures (a benchmark that failed in a later full run
falls back to an earlier one): when, which commit, which machine and versions, the load
average, the exact command and its minutes; the benchmark's table (report_tables.py);
that entry's key figures. Then issue #28's targets, read from those key figures, and a
table of every entry of the history. The output depends on the history only (same
history, same bytes). Without --write it is printed; `--write PAGE` puts it between
PAGE's lines `<!-- benchmarks:begin -->` and `<!-- benchmarks:end -->` and leaves the
rest of PAGE as it was (`python -m docsite reference` runs it for
docs/results/benchmarks.md).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from benchmarks import history, names, report_tables
from benchmarks.figure import Figure
from t2t.utils import readme_tables

BEGIN, END = readme_tables.markers("benchmarks")
PAGE = "docs/results/benchmarks.md"
NOT_MEASURED = "Not measured in a full run yet (`python -m benchmarks --only {name}`)."


class ReportError(ValueError):
    """The history cannot be rendered, or the page cannot be written."""


def latest_full(entries: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The latest entry of a full run (quick false) with figures of benchmark `name`."""
    for entry in reversed(entries):
        run = (entry.get("results") or {}).get(name) or {}
        if entry.get("quick") is False and "error" not in run and run.get("figures") is not None:
            return entry
    return None


def _date(entry: dict[str, Any]) -> str:
    stamp = entry.get("timestamp")
    if not stamp:
        return "unknown date"
    moment = datetime.datetime.fromisoformat(stamp)
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _commit(entry: dict[str, Any]) -> str:
    git = entry.get("git") or {}
    dirty = " + uncommitted changes" if git.get("dirty") else ""
    return f"{git.get('commit') or 'unknown'}{dirty}"


def _load(entry: dict[str, Any]) -> str:
    """The 1-minute load average at the start -> at the end of the run."""
    load = entry.get("load") or {}

    def one(values: list[float] | None) -> str:
        return f"{values[0]:.2f}" if values else "?"

    return f"{one(load.get('start'))} -> {one(load.get('end'))}"


def _versions(entry: dict[str, Any]) -> str:
    found = entry.get("versions") or {}
    torch = found.get("torch")
    return (f"TensorFlow {found.get('tensorflow') or '?'}, "
            + (f"torch {torch}" if torch else "no torch"))


def run_line(entry: dict[str, Any], name: str) -> str:
    """Where, when and how benchmark `name` of `entry` ran, in one line."""
    host = entry.get("host") or {}
    run = entry["results"][name]
    suite_command = shlex.join(["python", "-m", "benchmarks", *(entry.get("argv") or [])])
    own = shlex.join(["python", "-m", f"benchmarks.{name}", *(run.get("argv") or [])])
    return (f"Run ended {_date(entry)}, commit {_commit(entry)}, {host.get('cpu_model', '?')} "
            f"x {host.get('cpus', '?')} CPUs, {_versions(entry)}, load average "
            f"{_load(entry)}: `{suite_command}`, which ran `{own}` in "
            f"{run.get('seconds', 0) / 60:.1f} min.")


def key_figures(entry: dict[str, Any], name: str) -> list[Figure]:
    """The entry's key figures of benchmark `name`, with their recorded units."""
    info = entry.get("key_figure_info") or {}
    prefix = f"{name}: "
    return [Figure(name, key[len(prefix):], value, **(info.get(key) or {}))
            for key, value in (entry.get("key_figures") or {}).items()
            if key.startswith(prefix) and value is not None]


# Benchmarks whose table shows every key figure of theirs (a second table would repeat it).
KEY_FIGURES_IN_TABLE = ("training", "resnet")


def key_figures_table(figures: list[Figure]) -> str:
    """The key figures as a two-column table (lower-is-better ones marked)."""
    rows = [[f.label + (" (lower is better)" if f.better == "lower" else ""), f.format()]
            for f in figures]
    return report_tables.markdown(["key figure", "value"], rows, "lr")


def benchmark_section(entries: list[dict[str, Any]], name: str) -> str:
    """The `### name` section: the latest full run's line, table and key figures."""
    heading = f"### {name} (`python -m benchmarks.{name}`)"
    entry = latest_full(entries, name)
    if entry is None:
        return f"{heading}\n\n{NOT_MEASURED.format(name=name)}"
    try:
        table = report_tables.TABLES[name](entry["results"][name]["figures"])
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise ReportError(
            f"the {name} figures of the history entry {history.describe(entry)} do not have "
            f"the shape benchmarks.{name}'s main returns ({type(e).__name__}: {e}); render "
            f"them in benchmarks/report_tables.py or drop that entry's {name} result") from e
    parts = [heading, run_line(entry, name), table]
    figures = key_figures(entry, name)
    if name in KEY_FIGURES_IN_TABLE:
        parts.append(f"Its {len(figures)} key figures (what `python -m benchmarks compare` "
                     f"compares) are the table's ratios, throughputs and MFU.")
    else:
        parts.append(f"Key figures of that run:\n\n{key_figures_table(figures)}" if figures
                     else "No key figures recorded for it.")
    return "\n\n".join(parts)


def _find(figures: dict[str, Figure], ending: str, *parts: str) -> list[Figure]:
    return [f for key, f in figures.items()
            if key.endswith(ending) and all(p in key for p in parts)]


UNMEASURED = ("not in the latest full runs", "-")


def _share(found: list[Figure], goal: float, what: str) -> tuple[str, str]:
    """How many of the ratios `found` reach `goal`, and their range."""
    if not found:
        return UNMEASURED
    values = [f.value for f in found]
    met = sum(v >= goal for v in values)
    if len(values) == 1:
        return f"{values[0]:.2f}x", "yes" if met else "no"
    text = f"{met} of {len(values)} {what} ({min(values):.2f}x-{max(values):.2f}x)"
    return text, "yes" if met == len(values) else "no"


def _base_mfu(found: list[Figure]) -> tuple[str, str]:
    """transformer_base's float32 MFU per vocabulary ("78.0% (v32768)")."""
    if not found:
        return UNMEASURED
    texts = []
    for f in found:
        row = f.label.split(":")[0].replace("transformer_base", "").replace("float32", "")
        texts.append(f"{f.format()} ({row.strip()})" if row.strip() else f.format())
    return ", ".join(texts), "yes" if all(f.value >= 0.70 for f in found) else "no"


def targets_table(entries: list[dict[str, Any]]) -> str:
    """Issue #28's targets, read from the key figures of each benchmark's latest full run."""
    figures: dict[str, Figure] = {}
    for name in ("training", "resnet", "input_pipeline"):
        entry = latest_full(entries, name)
        figures.update({f.key: f for f in key_figures(entry, name)} if entry else {})
    rows: list[tuple[str, Callable[[], tuple[str, str]]]] = [
        ("trainer / bare loop >= 0.95x, every row",
         lambda: _share(_find(figures, "trainer/bare-loop tokens/s", "training: "), 0.95,
                        "rows")),
        ("trainer / PyTorch >= 1.0x, both precisions",
         lambda: _share(_find(figures, "trainer/torch tokens/s", "training: "), 1.0, "rows")),
        ("trainer / torch.compile >= 1.0x",
         lambda: _share(_find(figures, "trainer/torch-compiled tokens/s", "training: "), 1.0,
                        "rows")),
        ("transformer_base float32 >= 70% MFU, large vocabularies included",
         lambda: _base_mfu(_find(figures, "trainer MFU", "transformer_base", "float32"))),
        ("ResNet vs PyTorch >= 1.0x, both precisions",
         lambda: _share(_find(figures, "trainer/torch images/s", "resnet: "), 1.0, "rows")),
        ("input pipeline >= 10x the training consumption at 32k on real text",
         lambda: _share(_find(figures, "real text 32k (bucketing) tokens/s / training "
                              "consumption"), 10.0, "stages")),
    ]
    lines = [[target, *make()] for target, make in rows]
    lines.append(["GPU (H100/H200), bfloat16 + XLA >= 45% MFU",
                  "not measured by the suite (CPU runs; see benchmarks/training.py)", "-"])
    return report_tables.markdown(["target", "measured", "met"], lines, "lll")


def history_table(entries: list[dict[str, Any]]) -> str:
    """Every entry of the history, oldest first."""
    lines = []
    for entry in entries:
        selected = entry.get("selected") or list(entry.get("results") or {})
        seconds = entry.get("total_seconds")
        lines.append([_date(entry), _commit(entry), "quick" if entry.get("quick") else "full",
                      ", ".join(selected), "-" if seconds is None else f"{seconds / 60:.1f}",
                      _load(entry), ", ".join(entry.get("failed") or []) or "-"])
    return report_tables.markdown(["date", "commit", "run", "benchmarks", "minutes",
                                   "load average start -> end", "failed"], lines, "llllrll")


def render(entries: list[dict[str, Any]], history_name: str = "benchmarks/history.jsonl") -> str:
    """The whole generated block: how it is made, each benchmark, the targets, the history."""
    parts = [f"Generated from `{history_name}` by `python -m benchmarks report --write {PAGE}` "
             "(run by `python -m docsite reference`; do not edit by hand). Each benchmark "
             "shows the latest full run (not `--quick`) of the suite in which it succeeded; "
             "load averages are the 1-minute figures at the start and end of that run.",
             "## Latest full run of each benchmark"]
    parts += [benchmark_section(entries, name) for name in names.BENCHMARKS]
    parts += ["## Issue #28's targets",
              "From the key figures of the training, resnet and input_pipeline sections above.",
              targets_table(entries), "## History",
              f"Every run of `python -m benchmarks` in `{history_name}`, oldest first "
              "(`python -m benchmarks compare --list` lists them with their indexes).",
              history_table(entries) if entries else "No entries yet."]
    return "\n\n".join(parts) + "\n"


def write(page: str, block: str) -> bool:
    """Puts `block` between PAGE's benchmarks markers; returns whether PAGE changed."""
    try:
        with open(page, encoding="utf-8") as f:
            lines = [line.strip() for line in f.read().splitlines()]
    except OSError as e:
        raise ReportError(f"cannot read {page}: {e.strerror or e}; give --write an existing "
                          "markdown page") from e
    missing = [marker for marker in (BEGIN, END) if marker not in lines]
    if missing:
        raise ReportError(f"{page} has no line {' and no line '.join(missing)}: add "
                          f"{BEGIN} and, below it, {END} on lines of their own where the "
                          "report goes")
    try:
        return readme_tables.write_block(page, block, BEGIN, END)
    except readme_tables.MarkerError as e:
        raise ReportError(str(e)) from e
    except OSError as e:
        raise ReportError(f"cannot write {page}: {e.strerror or e}") from e


def _display(path: str) -> str:
    """`path` relative to the repository when inside it (the same text on every machine)."""
    absolute = os.path.abspath(path)
    inside = os.path.commonpath([absolute, history.ROOT]) == history.ROOT
    return os.path.relpath(absolute, history.ROOT) if inside else path


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status (0; 1: the page cannot be written or the
    history rendered; 2: no history)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks report",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--history", default=history.DEFAULT_PATH,
                        help="the history file (default %(default)s)")
    parser.add_argument("--write", metavar="PAGE",
                        help=f"replace the text between PAGE's {BEGIN} and {END} lines")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.exists(args.history):
        print(f"python -m benchmarks report: error: no history at {args.history} (run "
              "`python -m benchmarks` first, or pass --history PATH)", file=sys.stderr)
        return 2
    try:
        block = render(history.read(args.history), _display(args.history))
        if not args.write:
            sys.stdout.write(block)
            return 0
        changed = write(args.write, block)
    except ReportError as e:
        print(f"python -m benchmarks report: error: {e}", file=sys.stderr)
        return 1
    print(f"{'Updated' if changed else 'Unchanged:'} the benchmarks block of {args.write}.")
    return 0
