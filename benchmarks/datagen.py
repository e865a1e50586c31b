"""Data generation: examples/s and peak memory at N and 10 x N examples (streaming check).

    python -m benchmarks.datagen [--quick] [--problem P] [--examples N] [--scale K]

Runs the real `Problem.generate_data` (what t2t-datagen runs) for a registered problem,
algorithmic_reverse_binary40 by default, twice: with N and with K * N (K = 10) training
examples, each in a fresh subprocess of this module, so each run's peak memory is its
own. The size is overridden on the instance: train_size = n, dev_size = n // 10 (at
least 1), so both runs write the same mix of splits (algorithmic dev examples are longer
than training ones), to the problem's own shards, without the progress line.

Reported per run:
- examples/s: examples written (all splits) / seconds inside generate_data (the Python
  and TensorFlow start-up of the subprocess is not counted); MiB/s: TFRecord bytes
  written per second;
- peak MiB: the child's peak resident memory, `ru_maxrss` of its rusage as returned by
  `os.wait4` (Linux reports KiB); base MiB: the child's own ru_maxrss just before
  generate_data (after importing TensorFlow and t2t), so peak - base is what generating
  added.
The ratio peak(K N) / peak(N) stays ~1 when generation streams (writes each example as
it is generated, keeping none); a pipeline that held every example would grow K-fold
in its peak - base.

Defaults: N = 20,000 (200,000 at 10x: about 10-40 s a run on the 2-core development
machine); --quick: N = 2,000 (20,000 at 10x: under 15 s each, most of it start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

PROBLEM = "algorithmic_reverse_binary40"
EXAMPLES = (20_000, 2_000)  # N: (full run, --quick)
SCALE = 10
MIB = 1024 * 1024
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _maxrss_bytes(ru_maxrss: int) -> int:
    """ru_maxrss in bytes (KiB on Linux, bytes on macOS)."""
    return ru_maxrss if sys.platform == "darwin" else ru_maxrss * 1024


def generate(problem_name: str, examples: int, work_dir: str) -> dict[str, Any]:
    """In this process: `generate_data` of `problem_name` with `examples` training and
    examples // 10 dev examples into work_dir; returns counts, seconds and memory."""
    from t2t import registry

    problem = registry.problem(problem_name)
    base = _maxrss_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    problem.train_size = examples
    problem.dev_size = max(1, examples // 10)
    start = time.perf_counter()
    summaries = problem.generate_data(
        os.path.join(work_dir, "data"), os.path.join(work_dir, "tmp"), progress=False
    )
    seconds = time.perf_counter() - start
    return {
        "examples": sum(s.examples for s in summaries.values()),
        "bytes": sum(s.bytes for s in summaries.values()),
        "seconds": seconds,
        "base_bytes": base,
        "self_peak_bytes": _maxrss_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
    }


def run_child(problem_name: str, examples: int, work_dir: str,
              timeout_s: float = 1800.0) -> dict[str, Any]:
    """`generate` in a fresh subprocess; adds its peak RSS (bytes) from `os.wait4`."""
    os.makedirs(work_dir, exist_ok=True)
    out = os.path.join(work_dir, "result.json")
    log_path = os.path.join(work_dir, "log.txt")
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "benchmarks.datagen", "--worker", "--problem",
               problem_name, "--examples", str(examples), "--work-dir", work_dir, "--out", out]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, cwd=_ROOT, stdout=log,
                                   stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout_s, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage
        finally:
            timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"datagen worker ({examples} examples) failed with exit "
                           f"{process.returncode}:\n{tail}")
    with open(out) as f:
        result = json.load(f)
    result["peak_bytes"] = _maxrss_bytes(usage.ru_maxrss)
    return result


def benchmark(problem_name: str = PROBLEM, examples: int = EXAMPLES[0], scale: int = SCALE,
              work_dir: str | None = None) -> dict[str, Any]:
    """Runs generation at `examples` and `scale` x `examples` training examples.

    Returns {"runs": [per run: train_examples, examples (all splits), examples_per_s,
    mib_per_s, peak_mib, base_mib, added_mib, seconds], "peak_ratio": peak of the
    larger / of the smaller, "added_ratio": the same for peak - base, "problem",
    "scale"}."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="t2t_bench_datagen_", dir=work_dir) as tmp:
        for n in (examples, scale * examples):
            r = run_child(problem_name, n, os.path.join(tmp, str(n)))
            runs.append({
                "train_examples": n,
                "examples": r["examples"],
                "seconds": r["seconds"],
                "examples_per_s": r["examples"] / r["seconds"],
                "mib_per_s": r["bytes"] / MIB / r["seconds"],
                "peak_mib": r["peak_bytes"] / MIB,
                "base_mib": r["base_bytes"] / MIB,
                "added_mib": max(r["peak_bytes"] - r["base_bytes"], 0) / MIB,
            })
    small, large = runs
    return {
        "problem": problem_name,
        "scale": scale,
        "runs": runs,
        "peak_ratio": large["peak_mib"] / small["peak_mib"],
        "added_ratio": large["added_mib"] / max(small["added_mib"], 1.0),
    }


def format_table(figures: dict[str, Any]) -> str:
    """The runs as a table, then the peak ratio."""
    lines = [f"{'train examples':>14}  {'examples':>9}  {'seconds':>7}  {'examples/s':>10}  "
             f"{'MiB/s':>6}  {'peak MiB':>8}  {'base MiB':>8}  {'added MiB':>9}"]
    for r in figures["runs"]:
        lines.append(
            f"{r['train_examples']:>14,}  {r['examples']:>9,}  {r['seconds']:>7.2f}  "
            f"{r['examples_per_s']:>10,.0f}  {r['mib_per_s']:>6.2f}  {r['peak_mib']:>8.1f}  "
            f"{r['base_mib']:>8.1f}  {r['added_mib']:>9.1f}"
        )
    lines.append(
        f"peak({figures['scale']}N) / peak(N) = {figures['peak_ratio']:.3f} "
        f"(~1: generation streams); added memory ratio {figures['added_ratio']:.2f} "
        f"(added MiB below 1 counted as 1)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line; returns `benchmark`'s figures (a worker writes its own to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"N = {EXAMPLES[1]:,}")
    parser.add_argument("--problem", default=PROBLEM, help="a registered problem")
    parser.add_argument("--examples", type=int, default=None, help="N, training examples")
    parser.add_argument("--scale", type=int, default=SCALE, help="the larger run's N multiple")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    examples = args.examples or EXAMPLES[1 if args.quick else 0]
    if args.worker:
        result = generate(args.problem, examples, args.work_dir)
        with open(args.out, "w") as f:
            json.dump(result, f)
        return result
    start = time.perf_counter()
    figures = benchmark(args.problem, examples, args.scale)
    print(format_table(figures))
    print(f"{figures['problem']} via Problem.generate_data, train_size = N, dev_size = N // 10; "
          f"each run in a fresh subprocess; {os.cpu_count()} CPUs; took "
          f"{time.perf_counter() - start:.0f}s.")
    return figures


if __name__ == "__main__":
    main()
