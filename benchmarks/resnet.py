"""ResNet training throughput: t2t's Trainer vs a bare TF loop vs the same net in PyTorch.

    python -m benchmarks.resnet [--quick] [--models A,B] [--steps N] [--batch B]
                                [--no-torch] [--no-bf16]

Images/s of t2t's `resnet` model, in float32 and mixed bfloat16, on random images with
random labels (10 classes) of the size each hparams set is meant for:
resnet_cifar_15 and resnet_cifar_32 on 32x32x3 (batch 64), resnet_50 on 224x224x3
(batch 16; not with --quick). Rows per model and precision:

- t2t Trainer: `TrainingLoop._run_steps` on its own input pipeline (PNG records written to a
  temporary directory, decoded per batch), with the per-step host work of
  `TrainingLoop.train`; no logging or checkpoints.
- bare tf.function: the same t2t Resnet layer and hparams on a constant uint8 batch,
  one `tf.function` with GradientTape, the same L2 weight decay term and the same
  optimizer (t2t's `create_optimizer`: SGD, momentum 0.9, Nesterov) at a constant
  learning rate: no strategy, no input pipeline.
- torch ResNet: the same network written in PyTorch (no torchvision needed): the same
  layers, strides, fixed padding of strided convolutions, pre-activation residual or
  post-activation bottleneck blocks, batch-norm momentum and epsilon, global mean pool
  and dense top; SGD with Nesterov momentum 0.9 and weight decay 1e-4, label smoothing
  as the hparams set; channels-last memory format, which oneDNN prefers for
  convolutions on CPU; eager; bfloat16 under `torch.autocast("cpu")`;
  `torch.set_num_threads` = TensorFlow's intra-op threads. Skipped when torch is not
  installed (for benchmarking only, never a t2t dependency).

ratio = Trainer images/s / this row's; MFU = model FLOP/s over TensorFlow's dense matmul
FLOP/s measured in the run (training.measure_matmul). Model FLOPs per image = 3 x 2 x the
multiply-adds of every convolution and the dense top (forward, and twice that backward);
batch norm, ReLU, pooling and the optimizer are not counted.

Method: as benchmarks/training.py (one subprocess per precision; the paths warmed up,
then timed in interleaved rounds so that background load hits them alike).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks import harness, torch_resnet, training
from t2t.data.bases import image_problems
from t2t.hparams import resnet as _resnet_hparams  # noqa: F401  (registers the sets)
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams

PRECISIONS = training.PRECISIONS
TRAINER, BARE, TORCH = training.TRAINER, training.BARE, "torch ResNet"
PATHS = (TRAINER, BARE, TORCH)
# hparams set -> (image size, batch, timed steps (full run, --quick)).
MODELS = {
    "resnet_cifar_15": (32, 64, (20, 6)),
    "resnet_cifar_32": (32, 64, (10, 4)),
    "resnet_50": (224, 16, (6, 2)),
}
QUICK_MODELS = ("resnet_cifar_15",)
NUM_CLASSES = 10
BARE_LEARNING_RATE = 0.1


# --------------------------------------------------------------------------- data
class BenchImages(image_problems.Image2ClassProblem):
    """Random uint8 images [size, size, 3] with random labels in [0, 10)."""

    registered_name = "bench_images"
    class_labels = tuple(str(i) for i in range(NUM_CLASSES))
    train_shards = 1
    dev_shards = 1

    def __init__(self, image_size: int = 32, train_size: int = 256):
        super().__init__()
        self.image_size = image_size
        self.train_size = train_size

    def generate_images(self, data_dir, tmp_dir, split, *, mirror=None):
        rng = np.random.default_rng(0 if split == "train" else 1)
        count = self.train_size if split == "train" else 16
        for _ in range(count):
            image = rng.integers(0, 256, [self.image_size, self.image_size, 3], dtype=np.uint8)
            yield image, int(rng.integers(0, NUM_CLASSES))


def make_problem(image_size: int, data_dir: str, train_size: int = 256) -> BenchImages:
    """The benchmark problem for `image_size`, its data written to `data_dir`."""
    problem = BenchImages(image_size, train_size)
    problem.generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    return problem


def model_hparams(hparams_set: str, batch: int, overrides: str = "") -> HParams:
    hp = create_hparams(hparams_set, overrides)
    hp.batch_size = batch  # images: batch_size counts examples
    return hp


# -------------------------------------------------------------------------- FLOPs
def model_flops_per_image(hp: HParams, image_size: int, num_classes: int = NUM_CLASSES) -> float:
    """Training FLOPs of one image: 6 x the multiply-adds of every convolution and of the
    dense top, walking the layers of t2t/models/resnet.py (see the module doc)."""
    stem = hp.filter_sizes[0]
    size = -(-image_size // (1 if hp.is_cifar else 2))
    macs = size * size * 7 * 7 * 3 * stem
    if not hp.is_cifar:
        size = -(-size // 2)  # the stem's 3x3 stride-2 max pool
    channels = stem
    ratios = list(hp.get("bottleneck_ratios") or [4, 4, 4, 4])
    for i in range(3 if hp.is_cifar else 4):
        filters = hp.filter_sizes[i + 1]
        for b in range(hp.layer_sizes[i]):
            out_size = -(-size // ((1 if i == 0 else 2) if b == 0 else 1))
            area = out_size * out_size
            if hp.block_fn == "bottleneck":
                out = ratios[i] * filters
                macs += size * size * channels * filters  # 1x1, before the strided 3x3
                macs += area * (9 * filters * filters + filters * out)
            else:
                out = filters
                macs += area * 9 * (channels * filters + filters * filters)
            if b == 0:
                macs += area * channels * out  # the 1x1 projection shortcut
            size, channels = out_size, out
    return 6.0 * (macs + channels * num_classes)


# -------------------------------------------------------------------------- paths
def trainer_step(problem: BenchImages, data_dir: str, output_dir: str, hparams_set: str,
                 batch: int, precision: str = "float32") -> training.Step:
    """A step of t2t's Trainer on its input pipeline (`training.trainer_path`)."""
    trainer = training.trainer_path(problem, "resnet", model_hparams(hparams_set, batch),
                                    data_dir, output_dir, precision)

    def step() -> tuple[float, float]:
        examples, _ = trainer()
        return examples, examples  # the "tokens" of an image step: its images

    return step


def bare_step(problem_hparams: Any, hparams_set: str, batch: int, image_size: int,
              precision: str = "float32") -> training.Step:
    """A step of the same Resnet in a plain tf.function loop on a constant batch."""
    import tensorflow as tf

    from t2t.models import t2t_model
    from t2t.models.t2t_model import example_features
    from t2t.trainer import optimizers

    hp = model_hparams(hparams_set, batch)
    with harness.PrecisionPolicy(precision):
        model = t2t_model.create_model("resnet", hp, t2t_model.TRAIN, problem_hparams)
        model.build_for(example_features(problem_hparams))
        optimizer = optimizers.create_optimizer(hp, BARE_LEARNING_RATE)
        optimizer.build(model.trainable_variables)
    variables = model.trainable_variables
    rng = np.random.default_rng(0)
    features = {
        "inputs": tf.constant(rng.integers(0, 256, [batch, image_size, image_size, 3]), tf.uint8),
        "targets": tf.constant(rng.integers(0, NUM_CLASSES, [batch, 1]), tf.int32),
    }

    @tf.function
    def train_step(features):
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator + optimizers.weight_decay_loss(variables, hp)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step() -> tuple[float, float]:
        float(train_step(features))
        return float(batch), float(batch)

    return step


def torch_step(hp: HParams, batch: int, image_size: int, precision: str = "float32",
               threads: int | None = None, channels_last: bool = True) -> training.Step:
    """A step of the same ResNet written in PyTorch (see the module doc and
    benchmarks/torch_resnet.py)."""
    return torch_resnet.train_step(hp, batch, image_size, NUM_CLASSES, BARE_LEARNING_RATE,
                                   precision, threads, channels_last)


# ------------------------------------------------------------------------ workers
def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """One precision: every model's paths, interleaved; matmul peaks before and after."""
    threads = training.tf_threads()
    out: dict[str, Any] = {"rows": [], "threads": threads, "torch": None,
                           "matmul_flops": harness.matmul_peaks(2048)}
    with_torch = args.torch and training.torch_available()
    if with_torch:
        import torch

        out["torch"] = torch.__version__
    for name in args.models.split(","):
        size, batch = MODELS[name][0], args.batch or MODELS[name][1]
        data_dir = os.path.join(args.tmp, f"data-{size}")
        problem = make_problem(size, data_dir, train_size=max(4 * batch, 64))
        output_dir = tempfile.mkdtemp(prefix=f"{name}-{args.precision}-", dir=args.tmp)
        paths = {
            TRAINER: trainer_step(problem, data_dir, output_dir, name, batch, args.precision),
            BARE: bare_step(problem.problem_hparams(data_dir), name, batch, size, args.precision),
        }
        if with_torch:
            paths[TORCH] = torch_step(model_hparams(name, batch), batch, size, args.precision,
                                      threads)
        steps = args.steps_for[name]
        for path, r in training.time_interleaved(paths, steps).items():
            r.update(model=name, path=path, precision=args.precision, batch=batch,
                     image_size=size)
            out["rows"].append(r)
            print(f"[{args.precision}] {name:<16} {path:<17} {r['step_ms']:9.1f} ms/step "
                  f"{r['examples_per_s']:8.1f} images/s, {r['cores']:.2f} cores ({steps} "
                  f"steps; warm-up {r['warmup_s']:.1f}s)", flush=True)
        del paths
        gc.collect()
    later = harness.matmul_peaks(2048)
    out["matmul_flops"] = {k: max(v, later[k]) for k, v in out["matmul_flops"].items()}
    return out


def _run_worker(precision: str, args: argparse.Namespace, models: list[str],
                steps_for: dict[str, int]) -> dict[str, Any]:
    return training.spawn_worker("benchmarks.resnet", precision, args.tmp, [
        "--models", ",".join(models), "--steps-json", json.dumps(steps_for),
        "--batch", str(args.batch or 0),
    ] + ([] if args.torch else ["--no-torch"]))


# --------------------------------------------------------------------------- main
def _table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'model':<16}  {'path':<17}  {'precision':<9}  {'images/s':>9}  "
              f"{'step ms':>8}  {'ratio':>5}  {'MFU':>6}  {'cores':>5}  {'cpu ms':>8}")
    lines = [header, "-" * len(header)]
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") else "-"
        lines.append(
            f"{r['model']:<16}  {r['path']:<17}  {r['precision']:<9}  "
            f"{r['examples_per_s']:>9,.1f}  {r['step_ms']:>8.1f}  {ratio:>5}  "
            f"{100 * r['mfu']:>5.1f}%  {r['cores']:>5.2f}  {r['cpu_ms']:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_MODELS)}")
    parser.add_argument("--models", default=None,
                        help=f"comma-separated hparams sets among {', '.join(MODELS)}")
    parser.add_argument("--steps", type=int, default=None, help="timed steps for every model")
    parser.add_argument("--batch", type=int, default=None, help="images a step (default: "
                        "the model's, see the module doc)")
    training.add_race_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        args.batch = args.batch or None  # the parent passes 0 for "the model's"
        return training.run_worker_process(args, _worker)

    models = args.models.split(",") if args.models else list(
        QUICK_MODELS if args.quick else MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown --models {', '.join(unknown)}: use some of {', '.join(MODELS)}")
    for flag, value in (("--batch", args.batch), ("--steps", args.steps)):
        if value is not None and value < 1:
            parser.error(f"{flag}={value}: give 1 or more (or leave it out for the default)")
    start = time.perf_counter()
    steps_for = {m: args.steps or MODELS[m][2][1 if args.quick else 0] for m in models}
    precisions = ["float32"] if args.no_bf16 else list(PRECISIONS)
    with_torch = args.torch and training.torch_available()
    print(f"ResNet training throughput on random images, {os.cpu_count()} CPUs; load "
          f"average {harness.load_average()} at the start.", flush=True)
    if args.torch and not with_torch:
        print("torch is not installed: the torch rows are skipped "
              "(pip install torch==2.13.0 into the venv to get them).", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        results = [_run_worker(p, args, models, steps_for) for p in precisions]
    peak = {k: max(r["matmul_flops"][k] for r in results) for k in PRECISIONS}
    rows = [row for r in results for row in r["rows"]]
    for r in rows:
        flops = model_flops_per_image(model_hparams(r["model"], r["batch"]), r["image_size"])
        r["mfu"] = flops * r["examples_per_s"] / peak[r["precision"]]
    training.compare_rows(rows, "examples_per_s", models, precisions, PATHS)
    elapsed = time.perf_counter() - start
    print()
    print(_table(rows))
    print()
    print("ratio: t2t Trainer images/s / this row's (same model and precision); < 1: t2t is "
          "slower. MFU: 6 x conv and dense multiply-adds per image x images/s / TensorFlow's "
          "dense matmul, best measured: " + ", ".join(
              f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in peak.items()) + ".")
    batches = ", ".join(f"{m} {MODELS[m][0]}x{MODELS[m][0]}x3 x {args.batch or MODELS[m][1]}"
                        for m in models)
    print(f"Batches: {batches}; timed steps {steps_for}. TensorFlow with {results[0]['threads']} intra-op threads"
          + (f"; torch {results[0]['torch']}, channels-last." if with_torch else
             "; no torch rows."))
    print(f"Took {elapsed:.0f}s; load average {harness.load_average()} at the end.")
    return {"rows": rows, "matmul_flops": peak, "steps": steps_for, "seconds": elapsed,
            "threads": results[0]["threads"], "torch": results[0]["torch"]}


if __name__ == "__main__":
    main()
