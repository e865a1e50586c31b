"""What benchmarks.training and benchmarks.resnet share: interleaved timing, the
matmul peak, the Keras dtype policy, a step of the real t2t Trainer, and the
per-precision worker processes (the Keras dtype policy is process-wide)."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from t2t.hparams.hparams import HParams

TRAINER, BARE = "t2t Trainer", "bare tf.function"
WARMUP = 2  # steps before timing (the first one traces the tf.function)
ROUNDS = 4  # interleaved rounds the timed steps are split into
PRECISIONS = ("float32", "bfloat16")

Step = Callable[[], tuple[float, float]]  # one training step -> (examples, tokens)


# ------------------------------------------------------------------------- timing
def time_interleaved(steps_by_path: dict[str, Step], steps: int, warmup: int = WARMUP,
                     rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """Warms up each path (`warmup` calls, at least one), then times `steps` calls of
    each, split into `rounds` interleaved rounds (the order rotating each round).
    A step returns (examples, tokens) once its work is finished."""
    names = list(steps_by_path)
    stats = {n: {"times": [], "cpu": 0.0, "wall": 0.0, "examples": 0.0, "tokens": 0.0}
             for n in names}
    for name in names:
        start = time.perf_counter()
        for _ in range(max(warmup, 1)):
            steps_by_path[name]()
        stats[name]["warmup_s"] = time.perf_counter() - start
    rounds = max(1, min(rounds, steps))
    for r in range(rounds):
        count = steps // rounds + (1 if r < steps % rounds else 0)
        for name in names[r % len(names):] + names[: r % len(names)]:
            s, step = stats[name], steps_by_path[name]
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(count):
                t0 = time.perf_counter()
                e, t = step()
                s["times"].append(time.perf_counter() - t0)
                s["examples"] += e
                s["tokens"] += t
            s["cpu"] += time.process_time() - cpu0
            s["wall"] += time.perf_counter() - wall0
    results = {}
    for name, s in stats.items():
        total = sum(s["times"])
        results[name] = {
            "steps": len(s["times"]),
            "step_ms": 1000 * total / len(s["times"]),
            "median_step_ms": 1000 * statistics.median(s["times"]),
            "tokens_per_s": s["tokens"] / total,
            "examples_per_s": s["examples"] / total,
            "tokens_per_step": s["tokens"] / len(s["times"]),
            "cores": s["cpu"] / s["wall"],
            "cpu_ms": 1000 * s["cpu"] / len(s["times"]),
            "warmup_s": s["warmup_s"],
        }
    return results


def time_steps(step: Step, steps: int, warmup: int = WARMUP) -> dict[str, float]:
    """`time_interleaved` of one path."""
    return time_interleaved({"step": step}, steps, warmup, rounds=1)["step"]


def tf_threads() -> int:
    """Threads of TensorFlow's intra-op pool (0 in its config means one per usable core)."""
    import tensorflow as tf

    configured = tf.config.threading.get_intra_op_parallelism_threads()
    return configured or len(os.sched_getaffinity(0))


def measure_matmul(size: int = 2048, dtype: str = "float32", seconds: float = 1.0,
                   repeats: int = 3) -> float:
    """Dense [size, size] matmul FLOP/s of TensorFlow here: the best of `repeats` runs
    of about seconds / repeats each."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal([size, size]), dtype)
    b = tf.cast(tf.random.normal([size, size]), dtype)
    matmul = tf.function(lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32)))
    matmul(a, b).numpy()
    best = 0.0
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / repeats or count < 2:
            matmul(a, b).numpy()
            count += 1
        best = max(best, 2.0 * size**3 * count / elapsed)
    return best


def matmul_peaks(size: int) -> dict[str, float]:
    """Precision -> TensorFlow's dense matmul FLOP/s at size x size (measure_matmul)."""
    return {dtype: measure_matmul(size, dtype) for dtype in PRECISIONS}


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. "1.52 1.20 0.98"."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class PrecisionPolicy:
    """Sets the Keras global dtype policy for a `with` block (layers keep theirs)."""

    def __init__(self, precision: str):
        self.name = "mixed_bfloat16" if precision == "bfloat16" else "float32"

    def __enter__(self):
        import keras

        self.previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(self.name)

    def __exit__(self, *exc):
        import keras

        keras.mixed_precision.set_global_policy(self.previous)


# -------------------------------------------------------------------------- paths
def trainer_path(problem: Any, model: str, hparams: HParams, data_dir: str, output_dir: str,
                 precision: str = "float32", input_config: Any = None,
                 xla: bool = False) -> Step:
    """A step of t2t's Trainer for any problem and model: `_run_steps` on its own input
    pipeline's batches, with the per-step host work of `Trainer.train` (no logging, no
    checkpoints). Returns the Trainer's own (examples, tokens) counts of the step.
    input_config: a `t2t.config.InputConfig` (e.g. seeded, to read known batches).
    xla: compile the step with XLA (t2t-trainer --xla_compile)."""
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.trainer import runtime
    from t2t.trainer.trainer import Trainer

    config = TrainerConfig(
        train_steps=10**6, save_checkpoints_steps=10**9, log_every_steps=10**9,
        decode_summaries=0,
    )
    mixed = None if precision == "float32" else precision
    with PrecisionPolicy("float32"):  # runtime.start sets the mixed policy itself; restored after
        trainer = Trainer(problem, model, hparams, data_dir, output_dir, config,
                          runtime.start(RuntimeConfig(mixed_precision=mixed, xla_compile=xla)),
                          input_config=input_config)

    def step() -> tuple[float, float]:
        # TrainingLoop.train's per-step work: the step with the stop flag, then to host.
        _, _, counts = trainer.loop._run_steps(config.train_steps)
        examples, tokens = counts[0], counts[1]  # then positions, per-layer gradient norms
        _ = trainer.step
        return examples, tokens

    return step


# ------------------------------------------------------------------------ workers
_NOISE = re.compile(
    r"^(WARNING: All log messages before absl|I0000 |E0000 .*cuInit|W0000 .*cuda)"
)


def spawn_worker(module: str, precision: str, tmp: str, argv: list[str]) -> dict[str, Any]:
    """Runs `python -m module --worker --precision P ... argv` (a fresh process: the Keras
    dtype policy is process-wide), relaying its stderr without TensorFlow's start-up
    chatter, and returns the JSON it wrote to tmp/P.json."""
    result = os.path.join(tmp, f"{precision}.json")
    command = [sys.executable, "-m", module, "--worker", "--precision", precision,
               "--tmp", tmp, "--out", result, *argv]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch's OpenMP: see the module doc
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(command, env=env, cwd=root, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []

    def relay() -> None:  # TensorFlow's start-up chatter is dropped, the rest is shown
        for line in process.stderr:
            stderr.append(line)
            if not _NOISE.match(line):
                sys.stderr.write(line)

    relay_thread = threading.Thread(target=relay, daemon=True)
    relay_thread.start()
    code = process.wait()
    relay_thread.join()
    if code:
        raise RuntimeError(f"The {precision} worker failed ({code}):\n{''.join(stderr[-40:])}")
    with open(result) as f:
        return json.load(f)


def compare_rows(rows: list[dict[str, Any]], measure: str, models: list[str],
                 precisions: list[str], paths: tuple[str, ...],
                 vocabs: list[int] | None = None) -> None:
    """Sets each row's "ratio" (the t2t Trainer's `measure` over the row's, same model,
    vocabulary (rows with "vocab") and precision; None without a Trainer row) and sorts
    `rows` by model, vocabulary, precision, path."""
    def group(r: dict[str, Any]) -> tuple:
        return r["model"], r.get("vocab"), r["precision"]

    for r in rows:
        t2t = [x for x in rows if group(x) == group(r) and x["path"] == TRAINER]
        r["ratio"] = t2t[0][measure] / r[measure] if t2t else None
    order = {key: i for i, key in enumerate(
        (m, v, p, q) for m in models for v in (vocabs or [None]) for p in precisions
        for q in paths)}
    rows.sort(key=lambda r: order[(*group(r), r["path"])])


def add_race_arguments(parser: argparse.ArgumentParser) -> None:
    """--no-torch, --no-bf16 and the hidden arguments of a per-precision worker process
    (this module's and benchmarks/resnet.py's)."""
    parser.add_argument("--no-torch", dest="torch", action="store_false",
                        help="skip the PyTorch rows")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 rows")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--steps-json", help=argparse.SUPPRESS)


def run_worker_process(args: argparse.Namespace,
                       worker: Callable[[argparse.Namespace], dict[str, Any]]) -> dict[str, Any]:
    """In a worker process: runs `worker(args)` and writes its result to --out as JSON."""
    args.steps_for = json.loads(args.steps_json)
    out = worker(args)
    with open(args.out, "w") as f:
        json.dump(out, f)
    return out


