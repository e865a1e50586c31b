"""RevNet vs ResNet: peak memory of one training step as the network gets deeper.

    python -m benchmarks.revnet_memory [--quick] [--batch B] [--image N]

One training step (forward, backward and the optimizer's update) of t2t's `revnet` and
`resnet` at two depths each, CIFAR layout, on random uint8 images [N, N, 3] (N = 32) with
random labels (10 classes), batch B = 64; every stage the same width in all models
(32, 64 and 128 channels; a RevNet's two halves 16, 32 and 64 each):
- revnet: revnet_110_cifar (residual units) with num_layers_per_block [2, 2, 2]
  (RevNet-38) and [8, 8, 8] (RevNet-110), activations recomputed in the backward pass;
- revnet (stored): the same networks trained the ordinary way (model.recompute =
  False), every activation kept: the saving of recomputation alone;
- resnet: resnet_cifar_15 (pre-activation residual blocks, filters [16, 32, 64, 128])
  with layer_sizes [5, 5, 5] (ResNet-32) and [18, 18, 18] (ResNet-110).
The optimizer is t2t's for the set (momentum 0.9, Nesterov), learning rate 0.1.

Method: each configuration runs in a fresh subprocess of this module, which builds the
model and optimizer, runs one step inside a tf.function (tracing, optimizer slots, the
allocator's first regions), then resets TensorFlow's allocator statistics and runs a
second step. "step peak" is the allocator's peak bytes in use during that second step
minus its bytes in use just before it (weights, optimizer slots, the batch): what the
step itself added at its high point, mostly activations and gradients, which is what
grows with depth when activations are stored. Measured with
`tf.config.experimental.get_memory_info(device)["peak"]` after `reset_memory_stats`, on
GPU:0 when there is one, else on CPU:0, whose allocator keeps those statistics only as a
BFC allocator: the parent sets TF_CPU_ALLOCATOR_USE_BFC=true for the children (the
process's resident size cannot be used instead: the allocator keeps freed memory, so it
would not fall between steps). "resident" is the bytes in use before the step.

Printed: model, depth, trainable parameters, step peak MiB, resident MiB and the step's
seconds; then, per model, step peak at the deeper / at the shallower depth (the goal for
revnet: <= 1.2x while the stored variants grow with depth). --quick: 16x16 images,
batch 32 (same models).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

MIB = 1024 * 1024
NUM_CLASSES = 10
LEARNING_RATE = 0.1
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (label, registered model, depth, hparams set, overrides, recompute)
CONFIGS = (
    ("revnet", "revnet", 38, "revnet_110_cifar", {"num_layers_per_block": [2, 2, 2]}, True),
    ("revnet", "revnet", 110, "revnet_110_cifar", {"num_layers_per_block": [8, 8, 8]}, True),
    ("revnet (stored)", "revnet", 38, "revnet_110_cifar", {"num_layers_per_block": [2, 2, 2]},
     False),
    ("revnet (stored)", "revnet", 110, "revnet_110_cifar", {"num_layers_per_block": [8, 8, 8]},
     False),
    ("resnet", "resnet", 32, "resnet_cifar_15", {"layer_sizes": [5, 5, 5]}, True),
    ("resnet", "resnet", 110, "resnet_cifar_15", {"layer_sizes": [18, 18, 18]}, True),
)
SIZES = {False: (32, 64), True: (16, 32)}  # --quick -> (image size, batch)


def measure(index: int, image: int, batch: int) -> dict[str, Any]:
    """In this process: CONFIGS[index]'s training step memory (see the module doc)."""
    import numpy as np
    import tensorflow as tf

    from t2t.features import ProblemHParams
    from t2t.hparams.basic import create_hparams
    from t2t.models import t2t_model
    from t2t.trainer import optimizers

    label, model_name, depth, hparams_set, overrides, recompute = CONFIGS[index]
    hp = create_hparams(hparams_set)
    for key, value in overrides.items():
        hp.set_hparam(key, value)
    hp.batch_size = batch
    problem = ProblemHParams(
        modality={"inputs": "image", "targets": "class_label"},
        vocab_size={"inputs": 256, "targets": NUM_CLASSES},
        batch_size_means_tokens=False,
        image_shape=[image, image, 3],
    )
    rng = np.random.default_rng(0)
    features = {
        "inputs": tf.constant(rng.integers(0, 256, [batch, image, image, 3]), tf.uint8),
        "targets": tf.constant(rng.integers(0, NUM_CLASSES, [batch, 1]), tf.int32),
    }
    model = t2t_model.create_model(model_name, hp, t2t_model.TRAIN, problem)
    model.build_for(features)
    if model_name == "revnet":
        model.recompute = recompute
    optimizer = optimizers.create_optimizer(hp, LEARNING_RATE)
    optimizer.build(model.trainable_variables)
    variables = model.trainable_variables

    @tf.function
    def train_step(features):
        with tf.GradientTape() as tape:
            numerator, denominator = model(features, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    device = "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"
    float(train_step(features))  # trace, create the slots, warm the allocator
    gc.collect()
    tf.config.experimental.reset_memory_stats(device)
    resident = tf.config.experimental.get_memory_info(device)["current"]
    start = time.perf_counter()
    loss = float(train_step(features))
    seconds = time.perf_counter() - start
    peak = tf.config.experimental.get_memory_info(device)["peak"]
    return {
        "model": label, "depth": depth, "device": device, "image": image, "batch": batch,
        "params": int(sum(np.prod(v.shape) for v in variables)),
        "step_peak_mib": (peak - resident) / MIB, "resident_mib": resident / MIB,
        "seconds": seconds, "loss": loss,
    }


def run_child(index: int, image: int, batch: int, timeout_s: float = 1200.0) -> dict[str, Any]:
    """`measure` in a fresh subprocess of this module (its allocator its own)."""
    with tempfile.TemporaryDirectory(prefix="t2t_bench_revnet_") as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        command = [sys.executable, "-m", "benchmarks.revnet_memory", "--worker", str(index),
                   "--image", str(image), "--batch", str(batch), "--out", out]
        done = subprocess.run(command, env=env, cwd=_ROOT, capture_output=True, text=True,
                              timeout=timeout_s)
        if done.returncode:
            raise RuntimeError(f"revnet_memory worker {CONFIGS[index][:3]} failed with exit "
                               f"{done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
        with open(out) as f:
            return json.load(f)


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per model: step peak at its deepest depth / at its shallowest."""
    found: dict[str, float] = {}
    for label in dict.fromkeys(r["model"] for r in rows):
        mine = sorted((r for r in rows if r["model"] == label), key=lambda r: r["depth"])
        if len(mine) > 1 and mine[0]["step_peak_mib"] > 0:
            found[label] = mine[-1]["step_peak_mib"] / mine[0]["step_peak_mib"]
    return found


def format_table(figures: dict[str, Any]) -> str:
    """The rows, then each model's deep / shallow ratio."""
    rows = figures["rows"]
    lines = [f"{'model':<16} {'depth':>5} {'params':>10} {'step peak MiB':>13} "
             f"{'resident MiB':>12} {'seconds':>7}"]
    for r in rows:
        lines.append(f"{r['model']:<16} {r['depth']:>5} {r['params']:>10,} "
                     f"{r['step_peak_mib']:>13.1f} {r['resident_mib']:>12.1f} "
                     f"{r['seconds']:>7.2f}")
    for label, ratio in figures["ratios"].items():
        depths = sorted(r["depth"] for r in rows if r["model"] == label)
        lines.append(f"{label}: step peak at depth {depths[-1]} / at {depths[0]} = {ratio:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line; returns {"rows", "ratios", "image", "batch", "device"} (a worker
    writes its row to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="16x16 images, batch 32")
    parser.add_argument("--image", type=int, default=None, help="image height and width")
    parser.add_argument("--batch", type=int, default=None, help="images a step")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    image = args.image or SIZES[args.quick][0]
    batch = args.batch or SIZES[args.quick][1]
    if args.worker is not None:
        result = measure(args.worker, image, batch)
        with open(args.out, "w") as f:
            json.dump(result, f)
        return result
    start = time.perf_counter()
    rows = [run_child(i, image, batch) for i in range(len(CONFIGS))]
    figures = {"rows": rows, "ratios": ratios(rows), "image": image, "batch": batch,
               "device": rows[0]["device"]}
    print(format_table(figures))
    print(f"One training step (t2t optimizer, lr {LEARNING_RATE}), {image}x{image}x3 images, "
          f"batch {batch}, on {figures['device']}; each row in a fresh subprocess; step peak "
          f"= allocator peak during the 2nd step - bytes in use before it; took "
          f"{time.perf_counter() - start:.0f}s.")
    return figures


if __name__ == "__main__":
    main()
