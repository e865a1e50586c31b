"""Training throughput: t2t's Trainer vs a bare TF loop vs PyTorch, with MFU.

    python -m benchmarks.training [--quick] [--models A,B] [--steps N] [--vocab V]
                                  [--no-torch] [--no-bf16] [--matmul-top]

Models: transformer_tiny and transformer_small (and transformer_base unless --quick),
each trained on one fixed batch shape, batch 32 x 64 source tokens x 64 target tokens
(--batch, --length), in float32 and mixed bfloat16. Rows per model and precision:

- t2t Trainer: `t2t.trainer.trainer.Trainer` (default strategy) on a reverse task
  written to TFRecords in a temporary directory; every example is exactly `length`
  tokens (EOS included), so with hparams batch_size = batch * length tokens,
  max_length = length and static_shapes the Trainer's batches are [batch, length] with
  no padding. A step is `Trainer._run_steps` (the train step) on real input-pipeline
  batches plus the per-step host work of `Trainer.train` (loss to float, the step,
  counts to numpy), without logging or checkpoints; tokens are the non-padding input +
  target tokens the Trainer counts.
- bare tf.function: the same t2t Transformer layer and hparams, constant tensors of the
  same shape, one `tf.function` with GradientTape and `keras.optimizers.Adam`: no
  strategy, no input pipeline, no gradient norm. Shows the framework's overhead.
- torch nn.Transformer: the same sizes (d_model, heads, encoder/decoder layers,
  dim_feedforward, dropout 0.1 everywhere as in the sets, pre-norm, embedding tied to
  the output projection, sinusoidal positions, label smoothing, Adam betas/epsilon),
  eager; bfloat16 under `torch.autocast("cpu", dtype=torch.bfloat16)`;
  `torch.set_num_threads` = TensorFlow's intra-op threads. Skipped, with a message,
  when torch is not installed (`pip install torch==2.13.0`: for benchmarking only,
  never a t2t dependency).

Columns. ratio = tokens/s of the t2t Trainer row / tokens/s of this row (same model
and precision): < 1 means t2t is slower. MFU = model FLOP/s / dense matmul FLOP/s
measured here with TensorFlow (2048 x 2048; float32 for float32 rows, bfloat16 for
bfloat16 rows; the best of several measurements, as the machine may be shared). Model
FLOPs per step = 6 * (encoder matmul weights * source tokens + decoder matmul weights
incl. the softmax * target tokens) + attention (QK^T and AV: 12 * len_q * len_k *
hidden per layer and example, full square matrices as computed, the causal mask not
discounted); embedding look-ups, norms, biases and the optimizer are not counted.
cores = process CPU time / wall time during the timed steps (2.0 on an idle 2-core
machine; much lower means other processes took the CPU and the wall-clock columns are
unreliable); cpu ms = process CPU time per step, steadier on a shared machine.

torch's OpenMP threads spin at every barrier by default; on a machine shared with other
busy processes that made each small op wait for a descheduled thread (transformer_tiny:
5.4 s a step with 2 threads, 1.2 s with 1, 1.4 s with OMP_WAIT_POLICY=PASSIVE, at load
average 7). The workers therefore run with OMP_WAIT_POLICY=PASSIVE unless it is set:
`OMP_WAIT_POLICY=ACTIVE python -m benchmarks.training` measures torch's default.
TensorFlow's own thread pools are not affected by it.

Method. Each precision runs in a fresh subprocess of this module (the Keras dtype
policy is process-wide). In it, per model, the three paths are built, warmed up
(WARMUP steps; the first traces), then timed in interleaved rounds (a few steps of
each path in turn, order rotating) so that background load hits them alike;
throughput = tokens / time summed over the timed steps.

Run time on the 2-core development machine (shared with other jobs): --quick 3-4 min at
load average 2-5 (2.5 min of CPU), 7 min at load average 8; the full run 18.5 min at load
average 8 -> 5 (10.5 min of CPU), most of it transformer_base. The matmul reference
varies with the load too: 237 GFLOP/s float32 and 748 GFLOP/s bfloat16 when the
machine was nearly idle, about half that under load.

Vocabulary: 12 by default, algorithmic_reverse_decimal40's (10 digits, padding, EOS).
A larger one (--vocab 8192) currently hits a t2t performance bug:
`SymbolModality.top` computes the logits with `tf.einsum("...h,vh->...v")`, whose
gradient in TensorFlow 2.21 materializes a [vocab, hidden, batch, length] tensor
(vocab 8192, hidden 128, 32 x 64: 8.6 GB; ~30 s a step for transformer_tiny, out of
memory for transformer_small). `--matmul-top` replaces that method in the benchmark's
processes with the same product as `tf.tensordot` (a 2-D matmul), to show what a fix
gives; the default measures t2t as it is.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from t2t.hparams import transformer as _transformer_hparams  # noqa: F401  (registers the sets)
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams
from t2t.problems import algorithmic, text_encoder

MODELS = ("transformer_tiny", "transformer_small", "transformer_base")
PRECISIONS = ("float32", "bfloat16")
TRAINER, BARE, TORCH = "t2t Trainer", "bare tf.function", "torch nn.Transformer"
PATHS = (TRAINER, BARE, TORCH)
# Timed steps per path: (full run, --quick).
STEPS = {"transformer_tiny": (40, 10), "transformer_small": (20, 5), "transformer_base": (4, 2)}
WARMUP = 2  # steps before timing (the first one traces the tf.function)
ROUNDS = 4  # interleaved rounds the timed steps are split into

Step = Callable[[], tuple[float, float]]  # one training step -> (examples, tokens)


# --------------------------------------------------------------------------- data
class BenchReverse(algorithmic.AlgorithmicReverseDecimal40):
    """Reverse a random sequence of exactly `length - 1` symbols (+ EOS: `length` tokens)
    over a vocabulary of `vocab_size` ids."""

    registered_name = "bench_reverse_fixed"
    dev_size = 32
    train_shards = 1

    def __init__(self, vocab_size: int = 12, length: int = 64, train_size: int = 4096):
        super().__init__()
        self.num_symbols = vocab_size - text_encoder.NUM_RESERVED_TOKENS
        self.train_length = self.dev_length = length - 1
        self.train_size = train_size

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for _ in range(nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=max_length).tolist()
            yield {"inputs": inputs, "targets": inputs[::-1]}


def make_problem(vocab_size: int, length: int, data_dir: str,
                 train_size: int = 4096) -> BenchReverse:
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


def patch_matmul_top() -> None:
    """Makes `SymbolModality.top` a 2-D matmul (`tf.tensordot`) in this process: the
    same logits, without the [vocab, hidden, batch, length] tensor of the einsum's
    gradient (see the module doc). For `--matmul-top` only."""
    import tensorflow as tf

    from t2t.layers import modalities

    def top(self, body_output):
        weights = self.embedding if self.share_softmax else self.softmax_weights
        weights = tf.cast(weights, body_output.dtype)
        return tf.tensordot(body_output, weights, axes=[[body_output.shape.rank - 1], [1]])

    modalities.SymbolModality.top = top


# -------------------------------------------------------------------------- paths
def trainer_path(problem: Any, model: str, hparams: HParams, data_dir: str, output_dir: str,
                 precision: str = "float32") -> Step:
    """A step of t2t's Trainer for any problem and model: `_run_steps` on its own input
    pipeline's batches, with the per-step host work of `Trainer.train` (no logging, no
    checkpoints). Returns the Trainer's own (examples, tokens) counts of the step."""
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.trainer import runtime
    from t2t.trainer.trainer import Trainer

    config = TrainerConfig(
        train_steps=10**6, save_checkpoints_steps=10**9, log_every_steps=10**9,
        decode_summaries=0,
    )
    mixed = None if precision == "float32" else precision
    with _policy("float32"):  # runtime.start sets the mixed policy itself; restored after
        trainer = Trainer(problem, model, hparams, data_dir, output_dir, config,
                          runtime.start(RuntimeConfig(mixed_precision=mixed)))

    def step() -> tuple[float, float]:
        # TrainingLoop.train's per-step work: the step with the stop flag, then to host.
        _, _, counts = trainer.loop._run_steps(config.train_steps)
        examples, tokens = counts[0], counts[1]  # then positions, per-layer gradient norms
        _ = trainer.step
        return examples, tokens

    return step


def trainer_step(problem: BenchReverse, data_dir: str, output_dir: str, hparams_set: str,
                 batch: int, length: int, precision: str = "float32",
                 hparams_overrides: str = "") -> Step:
    """`trainer_path` of the transformer on the benchmark's fixed-length batches."""
    hp = model_hparams(hparams_set, batch, length, hparams_overrides)
    return trainer_path(problem, "transformer", hp, data_dir, output_dir, precision)


def bare_step(problem_hparams: Any, hparams_set: str, batch: int, length: int,
              precision: str = "float32", hparams_overrides: str = "") -> Step:
    """A step of the same t2t Transformer in a plain tf.function + GradientTape + keras
    Adam loop on constant [batch, length] tensors (no strategy, no input pipeline)."""
    import keras
    import tensorflow as tf

    from t2t.models import t2t_model
    from t2t.models.t2t_model import example_features

    hp = model_hparams(hparams_set, batch, length, hparams_overrides)
    with _policy(precision):
        model = t2t_model.create_model("transformer", hp, t2t_model.TRAIN, problem_hparams)
        model.build_for(example_features(problem_hparams))
        optimizer = keras.optimizers.Adam(
            1e-4, beta_1=hp.optimizer_adam_beta1, beta_2=hp.optimizer_adam_beta2,
            epsilon=hp.optimizer_adam_epsilon,
        )
        optimizer.build(model.trainable_variables)
    variables = model.trainable_variables
    vocab = problem_hparams.vocab_size["targets"]
    rng = np.random.default_rng(0)
    ids = rng.integers(text_encoder.NUM_RESERVED_TOKENS, vocab, [batch, length])
    features = {"inputs": tf.constant(ids, tf.int32),
                "targets": tf.constant(ids[:, ::-1], tf.int32)}

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

    return step


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def torch_step(hp_dims: dict[str, Any], vocab_size: int, batch: int, length: int,
               precision: str = "float32", threads: int | None = None) -> Step:
    """A step of torch.nn.Transformer with the same sizes (see the module doc)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    d, h = hp_dims, hp_dims["hidden"]

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, h)
            nn.init.normal_(self.embedding.weight, 0.0, h**-0.5)
            self.input_dropout = nn.Dropout(d["dropout"])
            with warnings.catch_warnings():  # "enable_nested_tensor is True, but ..."
                warnings.simplefilter("ignore", UserWarning)
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
    ids = np.random.default_rng(0).integers(text_encoder.NUM_RESERVED_TOKENS, vocab_size,
                                            [batch, length])
    inputs, targets = torch.from_numpy(ids), torch.from_numpy(ids[:, ::-1].copy())
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

    return step


# Single-path measurements (the smoke test uses them).
def measure_trainer(problem, data_dir, output_dir, hparams_set, batch, length, steps,
                    warmup=WARMUP, precision="float32", hparams_overrides="") -> dict[str, float]:
    step = trainer_step(problem, data_dir, output_dir, hparams_set, batch, length, precision,
                        hparams_overrides)
    return time_steps(step, steps, warmup)


def measure_bare(problem_hparams, hparams_set, batch, length, steps, warmup=WARMUP,
                 precision="float32", hparams_overrides="") -> dict[str, float]:
    step = bare_step(problem_hparams, hparams_set, batch, length, precision, hparams_overrides)
    return time_steps(step, steps, warmup)


def measure_torch(hp_dims, vocab_size, batch, length, steps, warmup=WARMUP,
                  precision="float32", threads=None) -> dict[str, float]:
    step = torch_step(hp_dims, vocab_size, batch, length, precision, threads)
    result = time_steps(step, steps, warmup)
    import torch

    result["threads"] = torch.get_num_threads()
    return result


# ------------------------------------------------------------------------ workers
def _matmul_peaks(size: int) -> dict[str, float]:
    return {dtype: measure_matmul(size, dtype) for dtype in PRECISIONS}


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """One precision: every model's paths, interleaved; matmul peaks before and after."""
    import tensorflow as tf

    if args.matmul_top:
        patch_matmul_top()
    threads = tf_threads()
    out: dict[str, Any] = {"rows": [], "threads": threads, "tf": tf.__version__,
                           "torch": None, "matmul_flops": _matmul_peaks(args.matmul_size)}
    with_torch = args.torch and torch_available()
    if with_torch:
        import torch

        out["torch"] = torch.__version__
    data_dir = os.path.join(args.tmp, "data")
    problem = make_problem(args.vocab, args.length, data_dir)
    for name in args.models.split(","):
        output_dir = tempfile.mkdtemp(prefix=f"{name}-{args.precision}-", dir=args.tmp)
        paths = {
            TRAINER: trainer_step(problem, data_dir, output_dir, name, args.batch, args.length,
                                  args.precision),
            BARE: bare_step(problem.hparams(data_dir), name, args.batch, args.length,
                            args.precision),
        }
        if with_torch:
            paths[TORCH] = torch_step(dims(model_hparams(name, args.batch, args.length)),
                                      args.vocab, args.batch, args.length, args.precision, threads)
        steps = args.steps_for[name]
        for path, r in time_interleaved(paths, steps).items():
            r.update(model=name, path=path, precision=args.precision)
            out["rows"].append(r)
            print(f"[{args.precision}] {name:<17} {path:<20} {r['step_ms']:9.1f} ms/step "
                  f"{r['tokens_per_s']:10,.0f} tokens/s, {r['cores']:.2f} cores ({steps} steps; "
                  f"warm-up {r['warmup_s']:.1f}s)", flush=True)
        del paths
        gc.collect()  # ends the Trainer's input pipeline before the next model
    later = _matmul_peaks(args.matmul_size)
    out["matmul_flops"] = {k: max(v, later[k]) for k, v in out["matmul_flops"].items()}
    print(f"[{args.precision}] matmul {args.matmul_size}: " + ", ".join(
        f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in out["matmul_flops"].items()), flush=True)
    return out


_NOISE = re.compile(
    r"^(WARNING: All log messages before absl|I0000 |E0000 .*cuInit|W0000 .*cuda)"
)


def _run_worker(precision: str, args: argparse.Namespace, models: list[str],
                steps_for: dict[str, int], with_torch: bool) -> dict[str, Any]:
    return spawn_worker("benchmarks.training", precision, args.tmp, [
        "--models", ",".join(models), "--steps-json", json.dumps(steps_for),
        "--vocab", str(args.vocab), "--batch", str(args.batch), "--length", str(args.length),
        "--matmul-size", str(args.matmul_size),
    ] + (["--matmul-top"] if args.matmul_top else []) + ([] if with_torch else ["--no-torch"]))


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
                 precisions: list[str], paths: tuple[str, ...]) -> None:
    """Sets each row's "ratio" (the t2t Trainer's `measure` over the row's, same model and
    precision; None without a Trainer row) and sorts `rows` by model, precision, path."""
    for r in rows:
        t2t = [x for x in rows if (x["model"], x["precision"], x["path"])
               == (r["model"], r["precision"], TRAINER)]
        r["ratio"] = t2t[0][measure] / r[measure] if t2t else None
    order = {key: i for i, key in enumerate(
        (m, p, q) for m in models for p in precisions for q in paths)}
    rows.sort(key=lambda r: order[(r["model"], r["precision"], r["path"])])


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


# --------------------------------------------------------------------------- main
def _table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'model':<17}  {'path':<20}  {'precision':<9}  {'tokens/s':>9}  "
              f"{'examples/s':>10}  {'step ms':>8}  {'ratio':>5}  {'MFU':>6}  {'cores':>5}  "
              f"{'cpu ms':>8}")
    lines = [header, "-" * len(header)]
    previous = None
    for r in rows:
        if previous is not None and r["model"] != previous:
            lines.append("")
        previous = r["model"]
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") else "-"
        lines.append(
            f"{r['model']:<17}  {r['path']:<20}  {r['precision']:<9}  {r['tokens_per_s']:>9,.0f}  "
            f"{r['examples_per_s']:>10,.1f}  {r['step_ms']:>8.1f}  {ratio:>5}  "
            f"{100 * r['mfu']:>5.1f}%  {r['cores']:>5.2f}  {r['cpu_ms']:>8.1f}"
        )
    return "\n".join(lines)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny + small, fewer steps")
    parser.add_argument("--models", default=None, help="comma-separated hparams sets")
    parser.add_argument("--steps", type=int, default=None, help="timed steps for every model")
    parser.add_argument("--batch", type=int, default=32, help="examples per batch")
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--vocab", type=int, default=12, help="vocabulary size")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--matmul-top", action="store_true",
                        help="patch SymbolModality.top to a 2-D matmul (see the module doc)")
    add_race_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker_process(args, _worker)

    start = time.perf_counter()
    models = args.models.split(",") if args.models else list(MODELS[:2] if args.quick else MODELS)
    steps_for = {m: args.steps or STEPS.get(m, (10, 3))[1 if args.quick else 0] for m in models}
    precisions = ["float32"] if args.no_bf16 else list(PRECISIONS)
    with_torch = args.torch and torch_available()
    print(f"Training throughput, batch {args.batch} x {args.length} source + {args.length} "
          f"target tokens, vocab {args.vocab}, {os.cpu_count()} CPUs; load average "
          f"{_load()} at the start.", flush=True)
    if args.torch and not with_torch:
        print("torch is not installed: the torch rows are skipped "
              "(pip install torch==2.13.0 into the venv to get them).", flush=True)

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        results = [_run_worker(p, args, models, steps_for, with_torch) for p in precisions]
    peak = {k: max(r["matmul_flops"][k] for r in results) for k in PRECISIONS}
    for result in results:
        rows += result["rows"]
    threads, tf_version = results[0]["threads"], results[0]["tf"]
    torch_version = results[0]["torch"]

    for r in rows:
        hp = create_hparams(r["model"])
        r["model_flops"] = model_flops(hp, args.vocab, args.batch, args.length, args.length)
        r["model_flops_per_s"] = r["model_flops"] / (r["step_ms"] / 1000)
        r["mfu"] = r["model_flops_per_s"] / peak[r["precision"]]
    compare_rows(rows, "tokens_per_s", models, precisions, PATHS)

    elapsed = time.perf_counter() - start
    print()
    print(_table(rows))
    print()
    print(f"Batch {args.batch} x {args.length} source + {args.length} target tokens (no "
          f"padding: {2 * args.batch * args.length} tokens a step), vocab {args.vocab}; timed "
          f"steps per path {steps_for}, after {WARMUP} warm-up steps, in {ROUNDS} interleaved "
          f"rounds.")
    print("ratio: t2t Trainer tokens/s / this row's (same model and precision); < 1: t2t is "
          "slower.")
    print("MFU: model FLOP/s (6 x matmul weights x tokens + attention QK^T/AV, full square) / "
          "TensorFlow's dense matmul here, best measured: " + ", ".join(
              f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in peak.items())
          + f" ({args.matmul_size}x{args.matmul_size}).")
    print("cores: CPU time / wall time of the process in the timed steps (about "
          f"{threads} when it had the machine to itself); cpu ms: CPU time a step. Where cores "
          "is well below that, other processes held the CPU: compare cpu ms rather than step "
          "ms.")
    print(f"TensorFlow {tf_version} with {threads} intra-op threads; " + (
        f"torch {torch_version} with set_num_threads({threads}), OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}." if with_torch else
        "torch rows skipped: " + ("--no-torch." if not args.torch else
                                  "torch is not installed (pip install torch==2.13.0).")))
    print("Softmax top: " + ("PATCHED to tf.tensordot (--matmul-top), not t2t as it is."
                             if args.matmul_top else "t2t's own (tf.einsum)."))
    print(f"Took {elapsed:.0f}s; load average {_load()} at the end.")
    return {"rows": rows, "matmul_flops": peak, "steps": steps_for, "seconds": elapsed,
            "threads": threads, "tensorflow": tf_version, "torch": torch_version}


if __name__ == "__main__":
    main()
