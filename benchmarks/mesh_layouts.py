"""Model parallelism on a DTensor mesh: bytes per device and step time of each layout.

    python -m benchmarks.mesh_layouts [--quick] [--hparams_set transformer_tiny] [--steps 20]

For each layout, in a fresh process (the CPU is split into 4 logical devices first):
  one device        the default strategy;
  4-way DP          MirroredStrategy over 4 logical CPUs (every replica holds all);
  2x2 mesh          mesh_shape=batch:2;model:2, layout batch:batch + vocab, d_ff, heads
                    on "model";
  1x4 mesh          mesh_shape=model:4, vocab, d_ff and heads on "model" (no batch split).
it builds the run as t2t-trainer does (transformer on algorithmic_reverse_binary40_test,
data generated in a temporary folder) and prints, per device: the bytes of parameters
and of optimizer variables, the bytes of the weights the layout splits, their ratio to
one device's (the model axis must divide them by its size), and the median step time
over --steps steps of one repeated batch (--gin overfit_batches=1: one shape, so one
DTensor expansion) after 3 warm-up steps, with its ratio to one device. The logical
devices share the machine's cores: the times show the layouts' overhead, not a
speed-up. `--quick`: 5 timed steps (a smoke test, not a figure). main returns
{"rows": one dict per layout (layout, params, optimizer, split_weights in bytes,
step_s), "hparams_set", "steps"}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

SPLIT = "vocab:model;d_ff:model;heads:model"
LAYOUTS = {
    "one device": ("", 0),
    "4-way DP": ("", 4),
    "2x2 mesh": ("mesh_shape=batch:2;model:2,layout=batch:batch;" + SPLIT, 0),
    "1x4 mesh": ("mesh_shape=model:4,layout=" + SPLIT, 0),
}


def _bytes(trainer: Any, variables: list[Any]) -> int:
    """Bytes of `variables` on one device (a replica holds them whole)."""
    import numpy as np
    import tensorflow as tf

    from t2t.parallel import sharding

    if trainer.runtime.mesh is not None:
        return sharding.bytes_per_device(variables)
    return sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in variables)


def measure(layout: str, data_dir: str, hparams_set: str, steps: int) -> dict[str, Any]:
    """Runs in the fresh process: the figures of one layout."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.models.transformer import TRANSFORMER_WEIGHT_DIMENSIONS
    from t2t.parallel import sharding
    from t2t.trainer.trainer import Trainer

    extra, cpu_devices = LAYOUTS[layout]
    if cpu_devices:
        from t2t.trainer.strategy import split_cpu

        split_cpu(cpu_devices)
    hparams = create_hparams(hparams_set, extra)
    trainer = Trainer(registry.problem("algorithmic_reverse_binary40_test"), "transformer",
                      hparams, data_dir, tempfile.mkdtemp(),
                      TrainerConfig(train_steps=10_000, overfit_batches=1, decode_summaries=0,
                                    layer_summaries=False, log_every_steps=10_000),
                      RuntimeConfig(random_seed=1, cpu_devices=cpu_devices))
    model, optimizer = trainer.model, trainer.optimizer
    named = [v for v in model.variables if any(
        sharding.weight_dimensions(v.path, len(v.shape), TRANSFORMER_WEIGHT_DIMENSIONS)[i]
        in ("vocab", "d_ff", "heads") for i in range(len(v.shape)))]
    figures = {"layout": layout, "params": _bytes(trainer, model.variables),
               "optimizer": _bytes(trainer, optimizer.variables),
               "split_weights": _bytes(trainer, named)}
    times = []
    for i in range(3 + steps):
        start = time.perf_counter()
        trainer.loop._run_steps(10_000)
        if i >= 3:
            times.append(time.perf_counter() - start)
    figures["step_s"] = statistics.median(times)
    return figures


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table; ratios against the first row (one device)."""
    base = rows[0]
    lines = ["| layout | params MB/device | optimizer MB/device | split weights MB/device | "
             "split weights / one device | step ms | step / one device |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(
            f"| {row['layout']} | {row['params'] / 1e6:.3f} | {row['optimizer'] / 1e6:.3f} | "
            f"{row['split_weights'] / 1e6:.3f} | "
            f"{row['split_weights'] / base['split_weights']:.2f} | "
            f"{row['step_s'] * 1e3:.0f} | {row['step_s'] / base['step_s']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Command line; returns {"rows", "hparams_set", "steps"} (None in a --measure worker,
    which prints its layout's figures as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 timed steps")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 20)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the fresh process's job
    parser.add_argument("--data_dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.steps = args.steps or (5 if args.quick else 20)
    if args.measure:
        print(json.dumps(measure(args.measure, args.data_dir, args.hparams_set, args.steps)))
        return None
    from t2t import registry

    data_dir = tempfile.mkdtemp()
    registry.problem("algorithmic_reverse_binary40_test").generate_data(
        data_dir, os.path.join(data_dir, "tmp"), progress=False)
    rows = []
    for layout in LAYOUTS:
        run = subprocess.run(
            [sys.executable, "-m", "benchmarks.mesh_layouts", "--measure", layout,
             "--data_dir", data_dir, "--hparams_set", args.hparams_set,
             "--steps", str(args.steps)], capture_output=True, text=True, check=False)
        if run.returncode:
            raise SystemExit(f"{layout}: {run.stderr[-3000:]}")
        rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"{args.hparams_set}, {args.steps} timed steps of one repeated batch, 4 logical CPUs")
    print(format_table(rows))
    return {"rows": rows, "hparams_set": args.hparams_set, "steps": args.steps}


if __name__ == "__main__":
    main()
