"""Strategy overhead: training step time and examples/s on 1 device, 2 mirrored
replicas, 2 worker processes and parameter servers, in one run.

    python -m benchmarks.distributed [--quick] [--steps N] [--hparams_set S]
        [--configs one_device,mirrored_2,workers_2,ps_1w]

Each configuration runs the real `t2t-trainer` (through `t2t-launch` for the
multi-process ones) on algorithmic_reverse_binary40_test for `--steps` steps, with
the same per-replica batch; the figures are the mean of the progress lines after the
first (which includes tracing and start-up). Per replica the batch is the same, so the
global batch grows with the replicas: examples/s counts the global batch, and
"vs 1 device" divides it by the one-device figure (2.0 would be perfect scaling where
the replicas have their own hardware). On a 2-core CPU the replicas share the same
cores, so what this shows is the cost of each strategy's machinery, not a speed-up.
Where a GPU machine exists, `--configs one_device,gpus_all` compares 1 GPU with
`--worker_gpu=-1`.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PROBLEM = "algorithmic_reverse_binary40_test"
LINE = re.compile(r"step (\d+)/\d+ loss [\d.naif]+ ([\d.]+) steps/s (?:([\d,]+) tokens/s )?([\d,.]+) examples/s")

CONFIGS = {
    "one_device": ([], []),
    "mirrored_2": ([], ["--cpu_devices=2"]),
    "workers_2": (["--num_workers=2"], []),
    "ps_1w": (["--num_workers=1", "--num_ps=1"], ["--sync=false"]),
    "gpus_all": ([], ["--worker_gpu=-1"]),
}


def _command(name: str, data_dir: str, output_dir: str, hparams_set: str, steps: int,
             log_every: int) -> list[str]:
    launch_flags, trainer_flags = CONFIGS[name]
    trainer = ["t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
               f"--hparams_set={hparams_set}", f"--train_steps={steps}",
               f"--log_every_steps={log_every}", "--schedule=train",
               f"--save_checkpoints_steps={steps}", f"--data_dir={data_dir}",
               f"--output_dir={output_dir}", *trainer_flags]
    if launch_flags:
        return [sys.executable, "-m", "t2t.bin.t2t_launch", *launch_flags, "--", *trainer]
    return [sys.executable, "-m", "t2t.bin.t2t_trainer", *trainer[1:]]


def measure(name: str, data_dir: str, work_dir: str, hparams_set: str, steps: int,
            log_every: int) -> dict[str, float]:
    """Runs one configuration; returns steps/s and examples/s (chief's lines)."""
    output_dir = os.path.join(work_dir, name)
    start = time.monotonic()
    result = subprocess.run(_command(name, data_dir, output_dir, hparams_set, steps, log_every),
                            capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - start
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-2000:]
        raise RuntimeError(f"{name} failed (exit {result.returncode}):\n{tail}")
    rows = []
    for line in result.stdout.splitlines():
        if line.startswith("[") and not line.startswith(("[worker:0]", "[chief:0]")):
            continue  # one process' view is enough: every worker runs the same steps
        match = LINE.search(line)
        if match:
            rows.append((float(match.group(2)), float(match.group(4).replace(",", ""))))
    if len(rows) < 2:
        raise RuntimeError(f"{name}: too few progress lines to measure:\n{result.stdout[-2000:]}")
    steps_per_s = statistics.mean(r[0] for r in rows[1:])
    return {"steps_per_s": steps_per_s, "step_ms": 1000 / steps_per_s,
            "examples_per_s": statistics.mean(r[1] for r in rows[1:]), "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 steps per configuration")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--configs", default="one_device,mirrored_2,workers_2,ps_1w")
    args = parser.parse_args(argv)
    steps = args.steps or (60 if args.quick else 200)
    log_every = max(steps // 6, 5)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown --configs {unknown}; choose from {', '.join(CONFIGS)}")
    with tempfile.TemporaryDirectory(prefix="t2t_bench_dist_") as work_dir:
        data_dir = os.path.join(work_dir, "data")
        subprocess.run([sys.executable, "-m", "t2t.bin.t2t_datagen", f"--problem={PROBLEM}",
                        f"--data_dir={data_dir}"], check=True, capture_output=True)
        results = {}
        for name in names:
            results[name] = measure(name, data_dir, work_dir, args.hparams_set, steps, log_every)
            print(f"  {name:<11} done in {results[name]['wall_s']:.0f}s", flush=True)
    base = results.get("one_device")
    print(f"\n{'strategy':<11} {'step ms':>9} {'steps/s':>8} {'examples/s':>11} {'vs 1 device':>12}")
    for name, r in results.items():
        ratio = f"{r['examples_per_s'] / base['examples_per_s']:.2f}x" if base else "-"
        print(f"{name:<11} {r['step_ms']:>9.1f} {r['steps_per_s']:>8.2f} "
              f"{r['examples_per_s']:>11,.0f} {ratio:>12}")
    load = os.getloadavg()
    print(f"\n{args.hparams_set}, {PROBLEM}, {steps} steps each (first progress window "
          f"excluded), per-replica batch from the hparams set; examples/s counts the global "
          f"batch. {os.cpu_count()} CPUs, load average after: {load[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
