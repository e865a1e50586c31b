"""Training throughput: t2t's Trainer vs a bare TF loop vs PyTorch, with MFU.

    python -m benchmarks.training [--quick] [--steps N] [--vocab V] [--no-torch]

Models: transformer_tiny and transformer_small (and transformer_base unless --quick),
each trained on one fixed batch shape, batch 32 x 64 source tokens x 64 target tokens
(--batch, --length), in float32 and mixed bfloat16. Rows per model and precision:

- t2t Trainer: `t2t.trainer.trainer.Trainer` on a reverse task written to TFRecords in a
  temporary directory (every example exactly `length` tokens, EOS included, so the
  Trainer's batches are [batch, length] with no padding; hparams batch_size =
  batch * length tokens, max_length = length, static_shapes). Each step is
  `Trainer._train_step(train_iterator)` on real input-pipeline batches plus the host
  work of `Trainer.train`'s loop (loss to float, counts to numpy, the step); tokens are
  the non-padding input + target tokens the Trainer counts.
- bare tf.function: the same t2t Transformer layer, constant tensors of the same shape,
  one `tf.function` with GradientTape and `keras.optimizers.Adam`, no strategy, no
  input pipeline. ratio = t2t / bare shows the framework's overhead.
- torch nn.Transformer: the same sizes (d_model, heads, layers, dim_feedforward,
  dropout, pre-norm, tied embedding/softmax of the same vocabulary, sinusoidal
  positions, label smoothing), eager, torch.optim.Adam; bfloat16 under
  `torch.autocast("cpu", dtype=torch.bfloat16)`. Skipped if torch is not installed
  (`pip install torch==2.13.0`, for benchmarking only: not a t2t dependency).

ratio = tokens/s of the t2t Trainer row / tokens/s of the row (same model, precision).
MFU = model FLOP/s / dense matmul FLOP/s measured here with TensorFlow (2048 x 2048,
float32 for float32 rows, bfloat16 for bfloat16 rows). Model FLOPs per step =
6 * (encoder matmul weights * source tokens + decoder matmul weights incl. the softmax
* target tokens) + attention (QK^T and AV, 12 * len_q * len_k * hidden per layer and
example, full square matrices as computed, causal mask not discounted). Embedding
look-ups, norms, biases and the optimizer update are not counted.

Each precision runs in a fresh subprocess of this module (the Keras dtype policy is
process-wide), and torch in another one (it never imports TensorFlow). Steps are timed
one by one after `warmup` steps (the first one traces); throughput is total tokens /
total time of the timed steps. The vocabulary (default 8192) is that of the synthetic
problem and of the torch model.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from t2t.hparams import transformer as _transformer_hparams  # noqa: F401  (registers the sets)
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams
from t2t.problems import algorithmic, text_encoder

MODELS = ("transformer_tiny", "transformer_small", "transformer_base")
PRECISIONS = ("float32", "bfloat16")
PATHS = ("t2t Trainer", "bare tf.function", "torch nn.Transformer")
# Timed steps per model (after warmup): full run, --quick.
STEPS = {"transformer_tiny": (40, 15), "transformer_small": (20, 8), "transformer_base": (8, 3)}
WARMUP = 2  # steps before timing (the first one traces the tf.function)


# --------------------------------------------------------------------------- data
class BenchReverse(algorithmic.AlgorithmicReverseDecimal40):
    """Reverse a random sequence of exactly `length - 1` symbols (+ EOS: `length` tokens)
    over a vocabulary of `vocab_size` ids."""

    registered_name = "bench_reverse_fixed"
    train_size = 4096
    dev_size = 32
    train_shards = 1

    def __init__(self, vocab_size: int = 8192, length: int = 64, train_size: int = 4096):
        super().__init__()
        self.num_symbols = vocab_size - text_encoder.NUM_RESERVED_TOKENS
        self.train_length = self.dev_length = length - 1
        self.train_size = train_size

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for _ in range(nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=max_length).tolist()
            yield {"inputs": inputs, "targets": inputs[::-1]}


def make_problem(vocab_size: int, length: int, data_dir: str, train_size: int = 4096) -> BenchReverse:
    """The benchmark problem, its data written to `data_dir` unless already there."""
    problem = BenchReverse(vocab_size, length, train_size)
    problem.generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    return problem


# ------------------------------------------------------------------------ hparams
def model_hparams(hparams_set: str, batch: int, length: int, overrides: str = "") -> HParams:
    """The set with token batches of exactly [batch, length] (static shapes)."""
    hp = create_hparams(hparams_set, overrides)
    hp.batch_size = batch * length
    hp.max_length = length
    if "static_shapes" in hp:
        hp.static_shapes = True
    else:
        hp.add_hparam("static_shapes", True)
    return hp


def dims(hp: HParams) -> dict[str, Any]:
    """What the FLOP count and the torch model need from a transformer hparams set."""
    return {
        "hidden": hp.hidden_size,
        "filter": hp.filter_size,
        "heads": hp.num_heads,
        "encoder_layers": hp.get("num_encoder_layers", 0) or hp.num_hidden_layers,
        "decoder_layers": hp.get("num_decoder_layers", 0) or hp.num_hidden_layers,
        "dropout": hp.layer_prepostprocess_dropout,
        "attention_dropout": hp.attention_dropout,
        "relu_dropout": hp.relu_dropout,
        "label_smoothing": hp.label_smoothing,
        "beta1": hp.optimizer_adam_beta1,
        "beta2": hp.optimizer_adam_beta2,
        "epsilon": hp.optimizer_adam_epsilon,
    }


def model_flops(hp: HParams, vocab_size: int, batch: int, src_len: int, tgt_len: int,
                attention: bool = True) -> float:
    """Training FLOPs of one step (forward + backward = 3 x forward, 2 per multiply-add).

    6 * (encoder matmul weights * source tokens + decoder matmul weights with the
    softmax * target tokens), plus with `attention` the QK^T and AV products of every
    attention layer (full matrices, as computed)."""
    d = dims(hp)
    h, f = d["hidden"], d["filter"]
    encoder = d["encoder_layers"] * (4 * h * h + 2 * h * f)
    decoder = d["decoder_layers"] * (8 * h * h + 2 * h * f) + vocab_size * h
    flops = 6.0 * (encoder * batch * src_len + decoder * batch * tgt_len)
    if attention:
        per_example = (d["encoder_layers"] * src_len * src_len
                       + d["decoder_layers"] * (tgt_len * tgt_len + tgt_len * src_len))
        flops += 12.0 * h * per_example * batch
    return flops


# ------------------------------------------------------------------------- timing
def time_steps(step: Callable[[], tuple[float, float]], steps: int, warmup: int = WARMUP) -> dict[str, float]:
    """Runs `warmup` then `steps` calls of `step` (returning (examples, tokens) and
    finished when it returns); throughput over the timed calls."""
    start = time.perf_counter()
    for _ in range(max(warmup, 1)):
        step()
    warmup_s = time.perf_counter() - start
    times, examples, tokens = [], 0.0, 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        e, t = step()
        times.append(time.perf_counter() - t0)
        examples, tokens = examples + e, tokens + t
    total = sum(times)
    return {
        "steps": steps,
        "step_ms": 1000 * total / steps,
        "median_step_ms": 1000 * statistics.median(times),
        "tokens_per_s": tokens / total,
        "examples_per_s": examples / total,
        "tokens_per_step": tokens / steps,
        "warmup_s": warmup_s,
    }


def tf_threads() -> int:
    """Threads of TensorFlow's intra-op pool (0 in its config means one per usable core)."""
    import tensorflow as tf

    configured = tf.config.threading.get_intra_op_parallelism_threads()
    return configured or len(os.sched_getaffinity(0))


def measure_matmul(size: int = 2048, dtype: str = "float32", seconds: float = 2.0,
                   repeats: int = 3) -> float:
    """Dense matmul FLOP/s of TensorFlow here: best of `repeats` runs of ~seconds/repeats."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal([size, size]), dtype)
    b = tf.cast(tf.random.normal([size, size]), dtype)
    matmul = tf.function(lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y)[0, :1], tf.float32)))
    matmul(a, b).numpy()
    best = 0.0
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / repeats or count < 2:
            matmul(a, b).numpy()
            count += 1
        best = max(best, 2.0 * size**3 * count / elapsed)
    return best


class _policy:
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


def measure_trainer(problem: BenchReverse, data_dir: str, output_dir: str, hparams_set: str,
                    batch: int, length: int, steps: int, warmup: int = WARMUP,
                    precision: str = "float32", hparams_overrides: str = "") -> dict[str, float]:
    """Throughput of t2t's Trainer: `_train_step` on its own input pipeline's batches,
    with the per-step host work of `Trainer.train` (no logging, no checkpoints)."""
    from t2t.trainer.trainer import Trainer, TrainerConfig

    hp = model_hparams(hparams_set, batch, length, hparams_overrides)
    config = TrainerConfig(
        train_steps=10**6, save_checkpoints_steps=10**9, log_every_steps=10**9,
        decode_summaries=0, mixed_precision=None if precision == "float32" else precision,
    )
    with _policy("float32"):  # the Trainer sets the mixed policy itself; restored after
        trainer = Trainer(problem, "transformer", hp, data_dir, output_dir, config)
    shapes = set()

    def step() -> tuple[float, float]:
        loss, _, counts = trainer._train_step(trainer.train_iterator)
        float(loss)
        _ = trainer.step
        examples, tokens = counts.numpy().tolist()
        return examples, tokens

    shapes.add(tuple(trainer.train_iterator.element_spec["inputs"].shape))
    result = time_steps(step, steps, warmup)
    result["batch_shape"] = str(sorted(shapes))
    del trainer
    return result


def measure_bare(problem_hparams: Any, hparams_set: str, batch: int, length: int, steps: int,
                 warmup: int = WARMUP, precision: str = "float32",
                 hparams_overrides: str = "") -> dict[str, float]:
    """Throughput of the same t2t Transformer in a plain tf.function + GradientTape +
    keras Adam loop on constant [batch, length] tensors (no strategy, no pipeline)."""
    import keras
    import tensorflow as tf

    from t2t.models import t2t_model
    from t2t.trainer.trainer import dummy_features

    hp = model_hparams(hparams_set, batch, length, hparams_overrides)
    with _policy(precision):
        model = t2t_model.create_model("transformer", hp, t2t_model.TRAIN, problem_hparams)
        model.build_for(dummy_features(problem_hparams))
        optimizer = keras.optimizers.Adam(
            1e-4, beta_1=hp.optimizer_adam_beta1, beta_2=hp.optimizer_adam_beta2,
            epsilon=hp.optimizer_adam_epsilon,
        )
        optimizer.build(model.trainable_variables)
    variables = model.trainable_variables
    vocab = problem_hparams.vocab_size["targets"]
    rng = np.random.default_rng(0)
    features = {
        name: tf.constant(rng.integers(text_encoder.NUM_RESERVED_TOKENS, vocab, [batch, length]),
                          tf.int32)
        for name in ("inputs", "targets")
    }

    @tf.function
    def train_step(features):
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step() -> tuple[float, float]:
        float(train_step(features))
        return float(batch), float(2 * batch * length)

    return time_steps(step, steps, warmup)


# -------------------------------------------------------------------------- torch
def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def measure_torch(hp_dims: dict[str, Any], vocab_size: int, batch: int, length: int, steps: int,
                  warmup: int = WARMUP, precision: str = "float32",
                  threads: int | None = None) -> dict[str, float]:
    """Throughput of torch.nn.Transformer with the same sizes (see the module doc)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    d = hp_dims
    h = d["hidden"]

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, h)
            nn.init.normal_(self.embedding.weight, 0.0, h**-0.5)
            self.input_dropout = nn.Dropout(d["dropout"])
            self.transformer = nn.Transformer(
                d_model=h, nhead=d["heads"], num_encoder_layers=d["encoder_layers"],
                num_decoder_layers=d["decoder_layers"], dim_feedforward=d["filter"],
                dropout=d["dropout"], batch_first=True, norm_first=True,
            )
            position = torch.arange(length, dtype=torch.float32)[:, None]
            scale = torch.exp(-math.log(1.0e4) * torch.arange(h // 2) / max(h // 2 - 1, 1))
            timing = torch.cat([torch.sin(position * scale), torch.cos(position * scale)], 1)
            self.register_buffer("timing", timing)
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length))

        def embed(self, ids):
            return self.input_dropout(self.embedding(ids) * h**0.5 + self.timing[: ids.shape[1]])

        def forward(self, inputs, targets):
            shifted = F.pad(targets, (1, 0))[:, :-1]
            padding = inputs == 0
            out = self.transformer(
                self.embed(inputs), self.embed(shifted), tgt_mask=self.causal, tgt_is_causal=True,
                src_key_padding_mask=padding, memory_key_padding_mask=padding,
            )
            return out @ self.embedding.weight.t()

    model = Seq2Seq().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(d["beta1"], d["beta2"]),
                                 eps=d["epsilon"])
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randint(text_encoder.NUM_RESERVED_TOKENS, vocab_size, (batch, length),
                           generator=generator)
    targets = torch.flip(inputs, [1])
    autocast = precision == "bfloat16"

    def step() -> tuple[float, float]:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs, targets)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab_size), targets.reshape(-1),
                               label_smoothing=d["label_smoothing"])
        loss.backward()
        optimizer.step()
        loss.item()
        return float(batch), float(2 * batch * length)

    result = time_steps(step, steps, warmup)
    result["threads"] = torch.get_num_threads()
    return result


# ------------------------------------------------------------------------ workers
def _worker_tf(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    out: dict[str, Any] = {"rows": [], "threads": tf_threads(), "tf": tf.__version__}
    problem = make_problem(args.vocab, args.length, os.path.join(args.tmp, "data"))
    data_dir = os.path.join(args.tmp, "data")
    if args.precision == "float32":
        out["matmul_flops"] = {
            dtype: measure_matmul(args.matmul_size, dtype) for dtype in ("float32", "bfloat16")
        }
        print(f"[matmul {args.matmul_size}] " + ", ".join(
            f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in out["matmul_flops"].items()), flush=True)
    for name in args.models.split(","):
        steps = args.steps_for[name]
        output_dir = tempfile.mkdtemp(prefix=f"{name}-{args.precision}-", dir=args.tmp)
        for path in PATHS[:2]:
            if path == "t2t Trainer":
                r = measure_trainer(problem, data_dir, output_dir, name, args.batch, args.length,
                                    steps, precision=args.precision)
            else:
                r = measure_bare(problem.hparams(data_dir), name, args.batch, args.length, steps,
                                 precision=args.precision)
            r.update(model=name, path=path, precision=args.precision)
            out["rows"].append(r)
            print(f"[{args.precision}] {name:<17} {path:<20} {r['step_ms']:9.1f} ms/step "
                  f"{r['tokens_per_s']:10,.0f} tokens/s ({steps} steps, warmup "
                  f"{r['warmup_s']:.1f}s)", flush=True)
    return out


def _worker_torch(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"rows": [], "torch": torch.__version__}
    for name in args.models.split(","):
        steps = args.steps_for[name]
        hp_dims = dims(model_hparams(name, args.batch, args.length))
        for precision in PRECISIONS:
            r = measure_torch(hp_dims, args.vocab, args.batch, args.length, steps,
                              precision=precision, threads=args.threads)
            r.update(model=name, path=PATHS[2], precision=precision)
            out["rows"].append(r)
            print(f"[{precision}] {name:<17} {PATHS[2]:<20} {r['step_ms']:9.1f} ms/step "
                  f"{r['tokens_per_s']:10,.0f} tokens/s ({steps} steps, {r['threads']} threads)",
                  flush=True)
    return out


def _run_worker(kind: str, precision: str, args: argparse.Namespace, models: list[str],
                steps_for: dict[str, int], threads: int | None) -> dict[str, Any]:
    result = os.path.join(args.tmp, f"{kind}-{precision}.json")
    command = [
        sys.executable, "-m", "benchmarks.training", "--worker", kind, "--precision", precision,
        "--tmp", args.tmp, "--out", result, "--models", ",".join(models),
        "--steps-json", json.dumps(steps_for), "--vocab", str(args.vocab),
        "--batch", str(args.batch), "--length", str(args.length),
        "--matmul-size", str(args.matmul_size), "--threads", str(threads or 0),
    ]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    subprocess.run(command, check=True, env=env, cwd=root)
    with open(result) as f:
        return json.load(f)


# --------------------------------------------------------------------------- main
def _table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'model':<17}  {'path':<20}  {'precision':<9}  {'tokens/s':>10}  "
              f"{'examples/s':>10}  {'step ms':>9}  {'ratio':>6}  {'MFU':>6}")
    lines = [header, "-" * len(header)]
    previous = None
    for r in rows:
        if previous is not None and r["model"] != previous:
            lines.append("")
        previous = r["model"]
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") else "-"
        lines.append(
            f"{r['model']:<17}  {r['path']:<20}  {r['precision']:<9}  {r['tokens_per_s']:>10,.0f}  "
            f"{r['examples_per_s']:>10,.1f}  {r['step_ms']:>9.1f}  {ratio:>6}  "
            f"{100 * r['mfu']:>5.1f}%"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny + small, fewer steps")
    parser.add_argument("--models", default=None, help="comma-separated hparams sets")
    parser.add_argument("--steps", type=int, default=None, help="timed steps for every model")
    parser.add_argument("--batch", type=int, default=32, help="examples per batch")
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--vocab", type=int, default=8192, help="vocabulary size")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch rows")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 rows")
    parser.add_argument("--worker", choices=("tf", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--steps-json", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        args.steps_for = json.loads(args.steps_json)
        out = _worker_tf(args) if args.worker == "tf" else _worker_torch(args)
        with open(args.out, "w") as f:
            json.dump(out, f)
        return out

    start = time.perf_counter()
    models = args.models.split(",") if args.models else list(MODELS[:2] if args.quick else MODELS)
    steps_for = {m: args.steps or STEPS.get(m, (10, 4))[1 if args.quick else 0] for m in models}
    precisions = ["float32"] if args.no_bf16 else list(PRECISIONS)
    with_torch = not args.no_torch and torch_available()
    print(f"Training throughput, batch {args.batch} x {args.length} source + {args.length} "
          f"target tokens, vocab {args.vocab}, {os.cpu_count()} CPUs; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.", flush=True)

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        tf_results = {p: _run_worker("tf", p, args, models, steps_for, None) for p in precisions}
        first = tf_results["float32"] if "float32" in tf_results else next(iter(tf_results.values()))
        threads = first["threads"]
        for result in tf_results.values():
            rows += result["rows"]
        torch_version = None
        if with_torch:
            torch_result = _run_worker("torch", "all", args, models, steps_for, threads)
            torch_version = torch_result["torch"]
            rows += [r for r in torch_result["rows"] if r["precision"] in precisions]
    peak = first.get("matmul_flops", {})

    for r in rows:
        hp = create_hparams(r["model"])
        r["model_flops"] = model_flops(hp, args.vocab, args.batch, args.length, args.length)
        r["model_flops_per_s"] = r["model_flops"] / (r["step_ms"] / 1000)
        r["mfu"] = r["model_flops_per_s"] / peak.get(r["precision"], math.inf)
        t2t = [x for x in rows if x["model"] == r["model"] and x["precision"] == r["precision"]
               and x["path"] == PATHS[0]]
        r["ratio"] = t2t[0]["tokens_per_s"] / r["tokens_per_s"] if t2t else None
    order = {(m, p, q): i for i, (m, p, q) in enumerate(
        (m, p, q) for m in models for p in precisions for q in PATHS)}
    rows.sort(key=lambda r: order[(r["model"], r["precision"], r["path"])])

    elapsed = time.perf_counter() - start
    print()
    print(_table(rows))
    print()
    print(f"ratio: t2t Trainer tokens/s / this row's (same model and precision); > 1: t2t is "
          f"faster. Tokens: non-padding inputs + targets ({2 * args.batch * args.length} per step).")
    print("MFU: model FLOP/s (6 x matmul weights x tokens + attention QK^T/AV, full square) / "
          "TensorFlow's dense matmul FLOP/s here: " + ", ".join(
              f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in peak.items())
          + f" ({args.matmul_size}x{args.matmul_size}).")
    print(f"Steps timed per model: {steps_for} after {WARMUP} warm-up steps; TensorFlow "
          f"{first['tf']} with {threads} intra-op threads; "
          + (f"torch {torch_version} with set_num_threads({threads})." if with_torch else
             "torch rows skipped: " + ("--no-torch." if args.no_torch else
                                       "torch is not installed (pip install torch==2.13.0).")))
    print(f"Took {elapsed:.0f}s; load average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    return {"rows": rows, "matmul_flops": peak, "steps": steps_for, "seconds": elapsed,
            "threads": threads, "torch": torch_version}


if __name__ == "__main__":
    main()
