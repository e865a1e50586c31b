"""Every benchmark in one run, a summary of their key ratios, and the history file.

    python -m benchmarks [--quick] [--only A,B] [--skip A,B] [--history PATH]
                         [--no-history] [--args "NAME=ARGS"]...
    python -m benchmarks compare [A] [B] [--history PATH] [--list]
    python -m benchmarks report [--history PATH] [--write PAGE]

Runs training, resnet, input_pipeline, decoding, datagen, distributed, revnet_memory,
dropout, mesh_layouts, image_sampling and serving in turn in this
process (each module's main(argv), with --quick passed through; `--args
"training=--models transformer_tiny --steps 4"` adds arguments for one benchmark), each
printing its own table. A benchmark that fails is reported as FAILED in the summary and
the others still run; the exit status is then 1.

The summary gives the key figures of each result: mostly ratios, which say more than
absolute times on a shared machine (the *_figures functions say where each comes from), plus
a few throughputs. The input pipeline benchmark does not relate its throughput to
training: the suite divides its tokens/s by the t2t Trainer's tokens/s on
transformer_tiny at the largest vocabulary (training's real-text 32k row, the faster
precision: the most demanding consumer), from this run, else from the latest history
entry that has it; input_pipeline's real-text 32k stage is the one to set against it.

Each run appends one JSON line to the history (benchmarks/history.jsonl by default; see
benchmarks/history.py; with the load average at the start and end of the run), and the
summary ends with each key figure's change since the latest earlier entry with the same
--quick flag (benchmarks run with other --args then are left out; a change over 10% in
the worse direction is marked WORSE). `compare` sets two history entries side by side and
flags the regressions beyond the noise measured between repeated runs (benchmarks/compare.py);
`report` renders the history as the markdown of docs/results/benchmarks.md
(benchmarks/report.py).

The decoding benchmark sets TF_ENABLE_ONEDNN_OPTS before TensorFlow is first imported,
which in one process the earlier benchmarks have done; the suite therefore sets it to 1
(TensorFlow's x86 default, decoding's own default), unless it is set, before anything
imports TensorFlow and runs decoding with --onednn tf-default.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from benchmarks import compare, history, report, suite_figures_more
from benchmarks.figure import FLAG_CHANGE, Figure
from benchmarks.names import (
    BARE_PATH,
    BENCHMARKS,
    TORCH_COMPILED_PATH,
    TORCH_PATH,
    TORCH_RESNET_PATH,
    TRAINER_PATH,
)

Runner = Callable[[list[str]], Any]
CONSUMER_MODEL = "transformer_tiny"
PIPELINE_STAGES = {  # input_pipeline stage name prefix -> label
    "real text 32k: input_dataset": "real text 32k (bucketing)",
    "bucketing: input_dataset": "training path (bucketing)",
    "packing: input_dataset": "packed path (pack_dataset)",
}


def _module_runner(name: str) -> Runner:
    def run(argv: list[str]) -> Any:
        return importlib.import_module(f"benchmarks.{name}").main(argv)

    return run


def _run_distributed(argv: list[str]) -> dict[str, Any]:
    """benchmarks.distributed's main, which prints its table and returns an exit status:
    its figures are taken from its `measure` calls."""
    from benchmarks import distributed

    configs: dict[str, Any] = {}
    measure = distributed.measure

    def recording(name: str, *args: Any, **kwargs: Any) -> dict[str, float]:
        configs[name] = measure(name, *args, **kwargs)
        return configs[name]

    distributed.measure = recording
    try:
        code = distributed.main(argv)
    finally:
        distributed.measure = measure
    if isinstance(code, dict):  # should main come to return its figures
        return code
    if code:
        raise RuntimeError(f"benchmarks.distributed exited with {code}")
    return {"configs": configs}


RUNNERS: dict[str, Runner] = {name: _module_runner(name) for name in BENCHMARKS}
RUNNERS["distributed"] = _run_distributed


# ---------------------------------------------------------------------- figures
def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _race_figures(benchmark: str, result: dict[str, Any], measure: str, unit: str,
                  torch_path: str) -> list[Figure]:
    """Per model and precision of `result["rows"]`: the Trainer's `measure` over the bare
    tf.function's and over torch's, the Trainer's and torch's "mfu", and the Trainer's
    `measure` itself (in `unit`)."""
    figures: list[Figure] = []
    groups: dict[tuple[str, str], dict[str, dict]] = {}
    for row in result["rows"]:
        groups.setdefault((_row_model(row), row["precision"]), {})[row["path"]] = row
    for (model, precision), paths in groups.items():
        t2t, bare, torch = (paths.get(p) for p in (TRAINER_PATH, BARE_PATH, torch_path))
        compiled = paths.get(TORCH_COMPILED_PATH)

        def add(label: str, value: float | None, unit: str = "x",
                model: str = model, precision: str = precision) -> None:
            if value is not None:
                figures.append(Figure(benchmark, f"{model} {precision}: {label}", value, unit))

        if t2t:
            add(f"trainer/bare-loop {unit}", _ratio(t2t[measure], bare and bare[measure]))
            add(f"trainer/torch {unit}", _ratio(t2t[measure], torch and torch[measure]))
            add(f"trainer/torch-compiled {unit}",
                _ratio(t2t[measure], compiled and compiled[measure]))
            add("trainer MFU", t2t.get("mfu"), "%")
        if torch:
            add("torch MFU", torch.get("mfu"), "%")
        if t2t:
            add(f"trainer {unit}", t2t[measure], unit)
    return figures


def _row_model(row: dict[str, Any]) -> str:
    """A row's model, with its vocabulary where the row has one ("transformer_tiny v8192")."""
    return f"{row['model']} v{row['vocab']}" if row.get("vocab") else row["model"]


def _race_notes(result: dict[str, Any], what: str, torch_path: str) -> list[str]:
    notes = [f"ratio < 1: the t2t Trainer is slower; MFU: {what} FLOP/s / TensorFlow's dense "
             "matmul FLOP/s measured in the run."]
    if not any(row["path"] == torch_path for row in result["rows"]):
        notes.append("no torch rows (torch not installed or --no-torch): no trainer/torch "
                     "ratios.")
    return notes


def training_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """Per model and precision (training's "rows"): Trainer tokens/s over the bare
    tf.function's and over torch's ("tokens_per_s"), the Trainer's and torch's "mfu",
    and the Trainer's tokens/s."""
    return (_race_figures("training", result, "tokens_per_s", "tokens/s", TORCH_PATH),
            _race_notes(result, "model", TORCH_PATH))


def resnet_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """As training_figures, for resnet's rows: images/s ("examples_per_s") and MFU."""
    return (_race_figures("resnet", result, "examples_per_s", "images/s", TORCH_RESNET_PATH),
            _race_notes(result, "conv and dense", TORCH_RESNET_PATH))


def training_consumption(result: dict[str, Any]) -> tuple[float, str] | None:
    """The t2t Trainer's tokens/s on transformer_tiny at the largest vocabulary measured
    (the real-text 32k row by default: the most demanding consumer), the faster
    precision, and which row that is."""
    rows = [r for r in result.get("rows", ())
            if r.get("model") == CONSUMER_MODEL and r.get("path") == TRAINER_PATH]
    if not rows:
        return None
    largest = max(r.get("vocab") or 0 for r in rows)
    row = max((r for r in rows if (r.get("vocab") or 0) == largest),
              key=lambda r: r["tokens_per_s"])
    return row["tokens_per_s"], (f"v{largest} " if largest else "") + row["precision"]


def _consumption(results: dict[str, Any], entries: list[dict[str, Any]]
                 ) -> tuple[float, str] | None:
    """training_consumption of this run, else of the latest history entry with it."""
    if results.get("training") is not None:
        found = training_consumption(results["training"])
        if found:
            return found[0], f"{CONSUMER_MODEL} {found[1]} t2t Trainer, this run"
    for entry in reversed(entries):
        training = ((entry.get("results") or {}).get("training") or {}).get("figures")
        found = training and training_consumption(training)
        if found:
            return found[0], (f"{CONSUMER_MODEL} {found[1]} t2t Trainer, history entry "
                              f"{history.describe(entry)}")
    return None


def pipeline_figures(result: dict[str, Any], consumption: tuple[float, str] | None
                     ) -> tuple[list[Figure], list[str]]:
    """For input_dataset's training path and packed path: real tokens/s ("tokens_per_s")
    over the training step's consumption (computed here), tokens/s and examples/s."""
    figures: list[Figure] = []
    notes = []
    for prefix, label in PIPELINE_STAGES.items():
        stage = next((r for name, r in result.items() if name.startswith(prefix)), None)
        if stage is None:
            notes.append(f"no '{prefix}...' stage in the result.")
            continue
        if consumption:
            figures.append(Figure("input_pipeline", f"{label} tokens/s / training consumption",
                                  stage["tokens_per_s"] / consumption[0]))
        figures.append(Figure("input_pipeline", f"{label} tokens/s", stage["tokens_per_s"],
                              "tokens/s"))
        figures.append(Figure("input_pipeline", f"{label} examples/s", stage["examples_per_s"],
                              "examples/s"))
    if consumption:
        notes.append(f"Ratios computed by the suite (input_pipeline does not): non-padding "
                     f"tokens/s of the pipeline alone / tokens/s the training step consumes "
                     f"({consumption[1]}: {consumption[0]:,.0f}); well above 1: the pipeline "
                     "keeps up.")
    else:
        notes.append("No training figures in this run or the history: no supply/consumption "
                     "ratio (run training too).")
    return figures, notes


def _lengths(by_length: dict) -> list:
    return sorted(by_length, key=int)


def decoding_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """Per decoder (greedy, beam<k>): the cached/uncached speed-up at each length
    ("speedup"), cached ms/token at the longest / shortest length ("cached_flatness"),
    and cached tokens/s at each length ("results")."""
    figures: list[Figure] = []
    for decoder, by_length in result["speedup"].items():
        for length in _lengths(by_length):
            figures.append(Figure("decoding", f"{decoder} length {length}: cached/uncached "
                                  "speed-up", by_length[length]))
    lengths = result.get("config", {}).get("lengths") or []
    span = f"{max(lengths)}/{min(lengths)}" if lengths else "longest/shortest"
    for decoder, ratio in result["cached_flatness"].items():
        figures.append(Figure("decoding", f"{decoder}: cached ms/token length {span}", ratio,
                              better="lower"))
    for decoder, modes in result["results"].items():
        cached = modes.get("cached", {})
        for length in _lengths(cached):
            figures.append(Figure("decoding", f"{decoder} length {length}: cached tokens/s",
                                  cached[length]["tokens_per_s"], "tokens/s"))
    return figures, ["speed-up: uncached / cached seconds at the same length; flatness ~1: a "
                     "cached step costs the same whatever the length."]


def datagen_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """"peak_ratio" and "added_ratio" (peak memory at scale x N / at N), examples/s at
    scale x N / at N, and the larger run's examples/s and peak MiB ("runs")."""
    k = result.get("scale", 10)
    small, large = result["runs"][0], result["runs"][-1]
    figures = [
        Figure("datagen", f"peak memory {k}N/N", result["peak_ratio"], better="lower"),
        Figure("datagen", f"added memory {k}N/N", result["added_ratio"], better="lower"),
        Figure("datagen", f"examples/s {k}N/N",
               large["examples_per_s"] / small["examples_per_s"]),
        Figure("datagen", f"examples/s at {k}N", large["examples_per_s"], "examples/s"),
        Figure("datagen", f"peak at {k}N", large["peak_mib"], "MiB", "lower"),
    ]
    return figures, [f"{result.get('problem')}, N = {small['train_examples']:,}; peak ratio "
                     "~1: generation streams (memory flat as the count grows)."]


def distributed_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """Per strategy ("configs"), against "one_device": examples/s (global batch) and step
    time ratios, and one_device's examples/s."""
    configs = result["configs"]
    base = configs.get("one_device")
    figures: list[Figure] = []
    if base:
        for name, r in configs.items():
            if name == "one_device":
                continue
            figures.append(Figure("distributed", f"{name}: examples/s vs one_device",
                                  r["examples_per_s"] / base["examples_per_s"]))
            figures.append(Figure("distributed", f"{name}: step time vs one_device",
                                  r["step_ms"] / base["step_ms"], better="lower"))
        figures.append(Figure("distributed", "one_device examples/s", base["examples_per_s"],
                              "examples/s"))
    notes = ["Same per-replica batch, replicas sharing this machine's cores: the ratios show "
             "each strategy's overhead, not a speed-up."]
    if not base:
        notes.append("one_device not run: no ratios.")
    return figures, notes


def revnet_memory_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """Per model ("ratios"): one training step's peak memory at its deeper / shallower
    depth, and each row's step peak MiB ("rows")."""
    figures = [Figure("revnet_memory", f"{label}: step peak deep/shallow", ratio,
                      better="lower") for label, ratio in result["ratios"].items()]
    figures += [Figure("revnet_memory", f"{r['model']} depth {r['depth']}: step peak",
                       r["step_peak_mib"], "MiB", "lower") for r in result["rows"]]
    return figures, [f"{result.get('image')}x{result.get('image')} images, batch "
                     f"{result.get('batch')}, on {result.get('device')}; revnet's goal: "
                     "<= 1.2x while the stored variants grow with depth."]


def section(name: str, result: dict[str, Any], results: dict[str, Any] | None = None,
            entries: list[dict[str, Any]] | None = None) -> tuple[list[Figure], list[str]]:
    """The (figures, notes) of benchmark `name`'s result. input_pipeline's ratio needs
    the training result (`results["training"]`, else the history `entries`)."""
    if name == "input_pipeline":
        return pipeline_figures(result, _consumption(results or {}, entries or []))
    readers = {"training": training_figures, "resnet": resnet_figures,
               "decoding": decoding_figures,
               "datagen": datagen_figures, "distributed": distributed_figures,
               "revnet_memory": revnet_memory_figures,
               "dropout": suite_figures_more.dropout_figures,
               "mesh_layouts": suite_figures_more.mesh_layouts_figures,
               "image_sampling": suite_figures_more.image_sampling_figures,
               "serving": suite_figures_more.serving_figures}
    return readers[name](result)


def key_figures(results: dict[str, Any], entries: list[dict[str, Any]] | None = None
                ) -> dict[str, tuple[list[Figure], list[str]]]:
    """`section` of each benchmark in `results` (name -> main's value; None: failed or
    not run). Raises what reading a result raises."""
    return {name: section(name, result, results, entries)
            for name, result in results.items() if result is not None}


# ------------------------------------------------------------------------- run
def _names(value: str | None, option: str, parser: argparse.ArgumentParser) -> list[str]:
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark name(s) in {option}: {', '.join(unknown)}; valid "
                     f"names: {', '.join(BENCHMARKS)}")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0],
        epilog="python -m benchmarks compare [A] [B]: the key figures of two history entries "
               "side by side, regressions beyond the noise flagged (compare --help). "
               "python -m benchmarks report [--write PAGE]: the history as markdown "
               "(report --help).")
    parser.add_argument("--quick", action="store_true", help="every benchmark's --quick")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    parser.add_argument("--skip", help="comma-separated benchmarks not to run")
    parser.add_argument("--history", default=history.DEFAULT_PATH,
                        help="JSON-lines file each run is appended to (default %(default)s)")
    parser.add_argument("--no-history", action="store_true",
                        help="neither read nor append the history")
    parser.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                        help="extra arguments for one benchmark, e.g. "
                             "'training=--models transformer_tiny --steps 4' (repeatable)")
    args = parser.parse_args(argv)
    only = _names(args.only, "--only", parser)
    skip = _names(args.skip, "--skip", parser)
    args.selected = [n for n in BENCHMARKS if (not only or n in only) and n not in skip]
    if not args.selected:
        parser.error("no benchmark left to run")
    args.extra = {}
    for item in args.args:
        name, sep, value = item.partition("=")
        _names(name, "--args", parser)
        if not sep or not name.strip():
            parser.error(f"--args takes NAME=ARGS, got {item!r}")
        args.extra[name.strip()] = args.extra.get(name.strip(), []) + shlex.split(value)
    return args


def benchmark_argv(name: str, quick: bool, extra: list[str]) -> list[str]:
    """The argv the suite passes to a benchmark's main."""
    argv = (["--quick"] if quick else []) + list(extra)
    if name == "decoding" and not any(a.startswith("--onednn") for a in extra):
        argv += ["--onednn", "tf-default"]  # TF_ENABLE_ONEDNN_OPTS is set by the suite
    return argv


def _release_memory() -> None:
    if "keras" in sys.modules:
        try:
            sys.modules["keras"].backend.clear_session()
        except Exception:  # noqa: BLE001 - best effort between benchmarks
            pass
    gc.collect()


def run_one(name: str, argv: list[str]) -> dict[str, Any]:
    """Runs one benchmark: {"figures": main's value, "seconds"} or {"error", "traceback",
    "seconds"} if it raised (or exited). (`run` adds "argv".)"""
    start = time.perf_counter()
    try:
        figures = RUNNERS[name](argv)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - reported, the others still run
        if isinstance(e, SystemExit):
            error = f"SystemExit: exited with {e.code}"
        else:
            error = f"{type(e).__name__}: {e}"
        trace = traceback.format_exc()
        print(f"\n{name} FAILED: {error}", flush=True)
        print(trace, file=sys.stderr, flush=True)
        return {"error": error, "traceback": trace[-4000:],
                "seconds": time.perf_counter() - start}
    finally:
        _release_memory()
    return {"figures": figures, "seconds": time.perf_counter() - start}


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def format_summary(runs: dict[str, dict[str, Any]],
                   sections: dict[str, tuple[list[Figure], list[str]]],
                   summary_errors: dict[str, str], quick: bool) -> str:
    """The summary block: each benchmark's key figures and notes, or FAILED."""
    figures = [f for figs, _ in sections.values() for f in figs]
    width = max([len(f.label) for f in figures] + [40])
    lines = ["", "=" * (width + 20), f"Summary ({'--quick' if quick else 'full run'})",
             "=" * (width + 20)]
    for name, run in runs.items():
        seconds = f"{run['seconds']:.0f}s"
        if "error" in run:
            lines.append(f"{name} ({seconds}): FAILED: {_first_line(run['error'])}")
            continue
        lines.append(f"{name} ({seconds})")
        if name in summary_errors:
            lines.append(f"  SUMMARY ERROR (figures not read): {summary_errors[name]}")
            continue
        figs, notes = sections.get(name, ([], []))
        for f in figs:
            lines.append(f"  {f.label:<{width}}  {f.format():>18}")
        lines.extend(f"  ({note})" for note in notes)
    return "\n".join(lines)


def format_changes(figures: list[Figure], previous: dict[str, Any],
                   runs: dict[str, dict[str, Any]] | None = None) -> str:
    """Each key figure now vs in `previous` (a history entry), WORSE beyond FLAG_CHANGE.
    With `runs`, a benchmark run with other arguments than in `previous` is not compared."""
    before = previous.get("results") or {}
    differ = sorted(name for name, r in (runs or {}).items()
                    if name in before and before[name].get("argv") != r.get("argv"))
    by_key = {f.key: f for f in figures if f.benchmark not in differ}
    rows = history.compare({k: f.value for k, f in by_key.items()},
                           previous.get("key_figures") or {})
    header = f"Change vs the previous run with the same flags ({history.describe(previous)}):"
    skipped = (f"\n  not compared, run with other arguments then: {', '.join(differ)}"
               if differ else "")
    if not rows:
        return f"\n{header}\n  no key figure in common.{skipped}"
    width = max(len(key) for key, *_ in rows)
    lines = ["", header]
    for key, before, now, change in rows:
        figure = by_key[key]
        worse = change < -FLAG_CHANGE if figure.better == "higher" else change > FLAG_CHANGE
        lines.append(f"  {key:<{width}}  {figure.format(before):>18} -> "
                     f"{figure.format(now):>18}  {100 * change:+7.1f}%"
                     + ("  WORSE" if worse else ""))
    here, there = history.host_info()["cpu_model"], (previous.get("host") or {}).get("cpu_model")
    if there and there != here:
        lines.append(f"  (the previous run was on another CPU: {there})")
    return "\n".join(lines) + skipped


def run(selected: list[str], quick: bool = False, extra: dict[str, list[str]] | None = None,
        history_path: str | None = history.DEFAULT_PATH, argv: list[str] | None = None
        ) -> dict[str, Any]:
    """Runs the selected benchmarks, prints the summary, appends the history (unless
    `history_path` is None). Returns {"runs", "key_figures", "failed", "entry"}."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # see the module doc
    extra = extra or {}
    entries = history.read(history_path) if history_path else []
    runs: dict[str, dict[str, Any]] = {}
    start, load_start = time.perf_counter(), history.load_average()
    for i, name in enumerate(selected, 1):
        bench_argv = benchmark_argv(name, quick, extra.get(name, []))
        print(f"\n{'=' * 78}\n[{i}/{len(selected)}] python -m benchmarks.{name} "
              f"{shlex.join(bench_argv)}\n{'=' * 78}", flush=True)
        runs[name] = {"argv": bench_argv, **run_one(name, bench_argv)}
        print(f"[{name}: {runs[name]['seconds']:.0f}s]", flush=True)

    results = {name: r.get("figures") for name, r in runs.items()}
    sections: dict[str, tuple[list[Figure], list[str]]] = {}
    summary_errors: dict[str, str] = {}
    for name in runs:  # one at a time, so that one malformed result loses only its own
        if results[name] is None:
            continue
        try:
            sections[name] = section(name, results[name], results, entries)
        except Exception as e:  # noqa: BLE001 - reported in the summary
            summary_errors[name] = f"{type(e).__name__}: {e}"
    figures = [f for figs, _ in sections.values() for f in figs]
    print(format_summary(runs, sections, summary_errors, quick))
    previous = history.previous_entry(entries, quick) if history_path else None
    if previous:
        print(format_changes(figures, previous, runs))
    failed = [n for n, r in runs.items() if "error" in r] + list(summary_errors)
    entry = history.make_entry(
        quick, runs, {f.key: f.value for f in figures},
        argv=argv, selected=selected, failed=failed, summary_errors=summary_errors,
        total_seconds=time.perf_counter() - start,
        load={"start": load_start, "end": history.load_average()},  # explains noise
        key_figure_info={f.key: {"unit": f.unit, "better": f.better} for f in figures},
    )
    if history_path:
        history.append(history_path, entry)
        print(f"\nAppended to the history: {history_path} ({len(entries) + 1} entries).")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return {"runs": runs, "key_figures": figures, "failed": failed, "entry": entry}


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status (1 if a benchmark failed). `compare ...` is
    benchmarks/compare.py's command line (0: no regression, 1: one flagged, 2: usage);
    `report ...` is benchmarks/report.py's."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        return compare.main(argv[1:])
    if argv[:1] == ["report"]:
        return report.main(argv[1:])
    args = parse_args(argv)
    outcome = run(args.selected, args.quick, args.extra,
                  None if args.no_history else args.history, argv)
    return 1 if outcome["failed"] else 0
