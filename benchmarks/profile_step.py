"""Where a training step's time goes: TensorFlow's profiler over a few steps of one
benchmarks.training row, summed by op type and by op.

    python -m benchmarks.profile_step [--model transformer_tiny] [--vocab 8192]
        [--precision float32|bfloat16] [--path trainer|bare] [--steps 3] [--top 25]
    python -m benchmarks.profile_step --model resnet_cifar_15 --precision bfloat16

Runs the row's path (as benchmarks.training or benchmarks.resnet builds it), warms it up, records `--steps`
steps with `tf.profiler.experimental`, then reads the trace (the XSpace protobuf the
profiler writes; no TensorBoard needed) and prints per step: the wall time, the op time
of every op type (kernel time summed over TensorFlow's compute threads, so up to
threads x the wall time), and the `--top` most expensive single ops. "dropout RNG" groups
the random-number ops of dropout masks, "casts" every Cast.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import tempfile
import time
from typing import Any

from benchmarks import resnet, training

# Container events of the executor and of the eager call: not ops, they hold the ops.
_CONTAINERS = re.compile(r"^(ExecutorState::|ParallelFor|EagerExecute|EagerLocalExecute|"
                         r"EagerKernelExecute|KernelAndDeviceFunc|TFE_Py|train_step|"
                         r"__inference|Iterator::|MemoryAllocation)")


def op_times(xspace_path: str) -> tuple[collections.Counter, collections.Counter]:
    """(milliseconds by op type, milliseconds by op name) of the host-CPU op events of
    one profiler trace (`name:Type` events on TensorFlow's threads)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as f:
        space.ParseFromString(f.read())
    by_type: collections.Counter = collections.Counter()
    by_op: collections.Counter = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or _CONTAINERS.match(name):
                    continue
                op, kind = name.rsplit(":", 1)
                milliseconds = event.duration_ps / 1e9
                by_type[category(op, kind)] += milliseconds
                by_op[name] += milliseconds
    return by_type, by_op


def category(op: str, kind: str) -> str:
    """The row an op is summed into: its type, with dropout's random ops together."""
    if "dropout" in op and ("random" in op or "Random" in kind):
        return "dropout RNG"
    return kind


def profile(step: Any, steps: int, logdir: str) -> tuple[float, str]:
    """Wall ms per step over `steps` profiled steps, and the trace file written."""
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    wall = (time.perf_counter() - start) / steps * 1000
    tf.profiler.experimental.stop()
    return wall, sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]


def build_step(args: argparse.Namespace, tmp: str) -> Any:
    """The row's `path` step, as benchmarks.training (or benchmarks.resnet, for a resnet
    set; --vocab is then unused) builds it."""
    if args.model in resnet.MODELS:
        size, batch = resnet.MODELS[args.model][:2]
        problem = resnet.make_problem(size, os.path.join(tmp, "images"), max(4 * batch, 64))
        if args.path == "bare":
            return resnet.bare_step(problem.problem_hparams(None), args.model, batch, size,
                                    args.precision)
        return resnet.trainer_step(problem, os.path.join(tmp, "images"), os.path.join(tmp, "run"),
                                   args.model, batch, args.precision)
    data_dir = os.path.join(tmp, f"data-{args.vocab}")
    row = argparse.Namespace(tokens=args.tokens, max_length=args.max_length, batch=args.batch,
                             length=args.length, fixed_lengths=False)
    problem = training.workload(args.vocab, data_dir, row)
    hp = training.row_hparams(args.model, args.vocab, row)
    if args.path == "bare":
        batches = training.sample_batches(problem, data_dir, hp, args.steps + 3)
        return training.bare_step(problem.hparams(data_dir), hp, batches, args.precision)
    return training.trainer_step(problem, data_dir, os.path.join(tmp, "run"), hp,
                                 args.precision)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="transformer_tiny")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--precision", choices=training.PRECISIONS, default="float32")
    parser.add_argument("--path", choices=("trainer", "bare"), default="bare")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps={args.steps}: profile at least 1 step.")

    with tempfile.TemporaryDirectory() as tmp:
        step = build_step(args, tmp)
        for _ in range(3):  # trace and warm up
            step()
        wall, trace = profile(step, args.steps, os.path.join(tmp, "profile"))
        by_type, by_op = op_times(trace)
    total = sum(by_type.values()) / args.steps
    print(f"{args.model}, vocab {args.vocab}, {args.precision}, {args.path}: {wall:.1f} ms a "
          f"step (wall), {total:.1f} ms of op time a step (over the compute threads).")
    print(f"\n{'op type':<40} {'ms/step':>9} {'share':>6}")
    for kind, ms in by_type.most_common(args.top):
        print(f"{kind[:40]:<40} {ms / args.steps:9.2f} {100 * ms / args.steps / total:5.1f}%")
    print(f"\n{'op':<100} {'ms/step':>9}")
    for name, ms in by_op.most_common(args.top):
        print(f"{name[-100:]:<100} {ms / args.steps:9.2f}")
    return {"wall_ms": wall, "op_ms": total,
            "by_type": {k: v / args.steps for k, v in by_type.items()}}


if __name__ == "__main__":
    main()
