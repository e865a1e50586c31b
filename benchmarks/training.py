"""Training throughput: t2t's Trainer vs a bare TF loop vs PyTorch, with MFU.

    python -m benchmarks.training [--quick] [--models A,B] [--vocabs 8192,32768,12]
                                  [--steps N] [--torch-compile] [--no-torch] [--no-bf16]
                                  [--fixed-lengths] [--xla] [--peak-flops bfloat16=F]

Models: transformer_tiny, transformer_small and transformer_base (tiny and small with
--quick), float32 and mixed bfloat16, the embedding tied to the softmax as the sets
have it. Rows per model, vocabulary and precision:

- Vocabularies of 1,000 and more (default 8192 and 32768): real text at real lengths
  (benchmarks.real_text: consecutive docstring sentences of the stdlib and the installed
  packages, SentencePiece of exactly V pieces), batches of --tokens (4096) tokens per
  feature by t2t's length bucketing, sequences cut at --max-length (256), as in a
  translation run.
- Vocabulary 12 (the extra row): algorithmic reversal, every example exactly --length
  (64) tokens, batch --batch (32), static shapes: no padding.

Paths:
- t2t Trainer: `t2t.trainer.trainer.Trainer` (default strategy) on the problem's
  TFRecords and its own input pipeline; a step is `TrainingLoop._run_steps` plus the
  per-step host work of `Trainer.train` (no logging or checkpoints).
- bare tf.function: the same t2t Transformer layer and hparams, one `tf.function`
  (shapes [None, None]) with GradientTape and `keras.optimizers.Adam` on batches drawn
  from the same pipeline beforehand (cycled): no strategy, no input pipeline, no
  gradient norm. Shows the framework's overhead.
- torch nn.Transformer (benchmarks.torch_transformer): the same sizes and batches,
  eager; with --torch-compile also `torch.compile(dynamic=True)` ("torch compiled").
  `torch.set_num_threads` = TensorFlow's intra-op threads. Skipped, with a message,
  when torch is not installed (`pip install torch==2.13.0`: for benchmarking only).

Columns. tokens = non-padding input + target tokens. ratio = tokens/s of the t2t
Trainer row / this row's (same model, vocabulary, precision): < 1 means t2t is slower.
MFU = model FLOP/s / dense matmul FLOP/s measured here with TensorFlow (2048 x 2048,
float32 or bfloat16 as the row; the best of several measurements). Model FLOPs count
the real tokens only (padding is waste, not work): 6 * (encoder matmul weights * source
tokens + decoder matmul weights incl. the softmax * target tokens) + attention (QK^T
and AV: 12 * len_q * len_k * hidden per layer and example, with each example's real
lengths, the causal mask not discounted); per token averaged over the sampled batches.
Embedding look-ups, norms, biases and the optimizer are not counted. cores = process
CPU time / wall time in the timed steps (2.0 on an idle 2-core machine; much lower:
other processes took the CPU and the wall-clock columns are unreliable); cpu ms =
process CPU time per step.

torch's OpenMP threads spin at every barrier by default; on a machine shared with other
busy processes that made each small op wait for a descheduled thread (transformer_tiny:
5.4 s a step with 2 threads, 1.2 s with 1, 1.4 s with OMP_WAIT_POLICY=PASSIVE, at load
average 7). The workers therefore run with OMP_WAIT_POLICY=PASSIVE unless it is set:
`OMP_WAIT_POLICY=ACTIVE python -m benchmarks.training` measures torch's default.

On a GPU (not measured yet: no GPU was lent to this work), the large-model bfloat16 rows
in one call of a few minutes, MFU against the card's published dense peak (H100/H200
SXM: 989 TFLOP/s bfloat16):

    python -m benchmarks.training --models transformer_base,transformer_big \
        --vocabs 32768 --fixed-lengths --batch 128 --length 128 --steps 10 --xla \
        --no-torch --peak-flops bfloat16=989e12

Method. The data is made once in the parent (SentencePiece training included: ~1.5 min
for both vocabularies); each precision runs in a fresh subprocess. In it, per model and
vocabulary, the paths are built, warmed up (WARMUP steps; the first traces or
compiles), then timed in interleaved rounds (a few steps of each path in turn, order
rotating) so that background load hits them alike; throughput = tokens / time summed
over the timed steps.
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

from benchmarks import real_text
from benchmarks.harness import (  # noqa: F401  (resnet.py reads these from here)
    BARE,
    PRECISIONS,
    ROUNDS,
    TRAINER,
    WARMUP,
    PrecisionPolicy,
    Step,
    add_race_arguments,
    compare_rows,
    load_average,
    matmul_peaks,
    measure_matmul,
    run_worker_process,
    spawn_worker,
    tf_threads,
    time_interleaved,
    time_steps,
    trainer_path,
)
from benchmarks.torch_transformer import torch_available, torch_step
from t2t.data.encoders import text_encoder
from t2t.hparams import transformer as _transformer_hparams  # noqa: F401  (registers the sets)
from t2t.hparams.basic import create_hparams
from t2t.hparams.hparams import HParams
from t2t.problems.algorithmic_tasks import algorithmic

MODELS = ("transformer_tiny", "transformer_small", "transformer_base")
TORCH, TORCH_COMPILED = "torch nn.Transformer", "torch compiled"
PATHS = (TRAINER, BARE, TORCH, TORCH_COMPILED)
VOCABS = (8192, 32768, 12)
TEXT_MIN_VOCAB = 1000  # vocabularies from here on are real text, below algorithmic
# Timed steps per path: (full run, --quick).
STEPS = {"transformer_tiny": (12, 6), "transformer_small": (6, 3), "transformer_base": (3, 2)}
# The Trainer and sample_batches read the same seeded, deterministic pipeline, so with
# warm-up + timed steps sampled every path trains on the same batches in the same order.
INPUT_SEED = 1


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

    def dataset_filename(self) -> str:
        return f"{self.registered_name}_{self.num_symbols}_{self.train_length}"

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for _ in range(nbr_cases):
            inputs = rng.integers(0, nbr_symbols, size=max_length).tolist()
            yield {"inputs": inputs, "targets": inputs[::-1]}


def make_problem(vocab_size: int, length: int, data_dir: str,
                 train_size: int = 4096) -> BenchReverse:
    """The fixed-length problem, its data written to `data_dir` unless already there."""
    problem = BenchReverse(vocab_size, length, train_size)
    problem.generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    return problem


def is_text(vocab: int) -> bool:
    return vocab >= TEXT_MIN_VOCAB


def workload(vocab: int, data_dir: str, args: argparse.Namespace) -> Any:
    """The problem of a row: real text for large vocabularies (unless --fixed-lengths),
    else fixed-length reversal."""
    if is_text(vocab) and not args.fixed_lengths:
        return real_text.make_text_problem(vocab, data_dir)
    return make_problem(vocab, args.length, data_dir)


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


def text_hparams(hparams_set: str, tokens: int, max_length: int, overrides: str = "") -> HParams:
    """The set with length-bucketed batches of `tokens` tokens, sequences <= max_length."""
    hp = create_hparams(hparams_set, overrides)
    hp.batch_size = tokens
    hp.max_length = max_length
    return hp


def row_hparams(hparams_set: str, vocab: int, args: argparse.Namespace) -> HParams:
    if is_text(vocab) and not args.fixed_lengths:
        return text_hparams(hparams_set, args.tokens, args.max_length)
    return model_hparams(hparams_set, args.batch, args.length)


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
    """Training FLOPs of one step of `batch` examples of exactly src_len / tgt_len tokens
    (forward + backward = 3 x forward, 2 per multiply-add): 6 * (encoder matmul weights *
    source tokens + decoder matmul weights with the softmax * target tokens), plus with
    `attention` the QK^T and AV products of every attention layer (full matrices)."""
    src = np.full([batch], src_len)
    return example_flops(hp, vocab_size, src, np.full([batch], tgt_len), attention)


def example_flops(hp: HParams, vocab_size: int, src_lengths: np.ndarray,
                  tgt_lengths: np.ndarray, attention: bool = True) -> float:
    """`model_flops` of examples of the given real lengths (ints [N] each)."""
    d = dims(hp)
    h, f = d["hidden"], d["filter"]
    encoder = d["encoder_layers"] * (4 * h * h + 2 * h * f)
    decoder = d["decoder_layers"] * (8 * h * h + 2 * h * f) + vocab_size * h
    src, tgt = np.asarray(src_lengths, np.float64), np.asarray(tgt_lengths, np.float64)
    flops = 6.0 * (encoder * src.sum() + decoder * tgt.sum())
    if attention:
        per_example = (d["encoder_layers"] * src * src
                       + d["decoder_layers"] * (tgt * tgt + tgt * src))
        flops += 12.0 * h * per_example.sum()
    return float(flops)


def flops_per_token(hp: HParams, vocab_size: int, batches: list[dict[str, np.ndarray]]) -> float:
    """Model FLOPs per real (input + target) token over `batches` (0-padded [B, L])."""
    src = np.concatenate([np.count_nonzero(b["inputs"], axis=1) for b in batches])
    tgt = np.concatenate([np.count_nonzero(b["targets"], axis=1) for b in batches])
    return example_flops(hp, vocab_size, src, tgt) / float(src.sum() + tgt.sum())


# -------------------------------------------------------------------------- paths
def input_config() -> Any:
    """The seeded, deterministic InputConfig of every path (see INPUT_SEED)."""
    from t2t.config import InputConfig

    return InputConfig(deterministic=True, seed=INPUT_SEED)


def sample_batches(problem: Any, data_dir: str, hparams: HParams,
                   count: int) -> list[dict[str, np.ndarray]]:
    """The first `count` training batches of the Trainer's input pipeline, as NumPy."""
    from t2t.data.pipeline import input_pipeline

    dataset = input_pipeline.input_dataset(problem, "train", data_dir, hparams,
                                           config=input_config())
    return [{k: v.numpy() for k, v in batch.items() if k in ("inputs", "targets")}
            for batch in dataset.take(count)]


def trainer_step(problem: Any, data_dir: str, output_dir: str, hparams: HParams,
                 precision: str = "float32", xla: bool = False) -> Step:
    """`trainer_path` of the transformer."""
    return trainer_path(problem, "transformer", hparams, data_dir, output_dir, precision,
                        input_config(), xla)


def bare_step(problem_hparams: Any, hparams: HParams, batches: list[dict[str, np.ndarray]],
              precision: str = "float32", xla: bool = False) -> Step:
    """A step of the same t2t Transformer in a plain tf.function + GradientTape + keras
    Adam loop on the next of `batches` (cycled; no strategy, no input pipeline); with
    `xla` the function is compiled by XLA (jit_compile)."""
    import keras
    import tensorflow as tf

    from t2t.models import t2t_model
    from t2t.models.t2t_model import example_features

    hp = hparams
    with PrecisionPolicy(precision):
        model = t2t_model.create_model("transformer", hp, t2t_model.TRAIN, problem_hparams)
        model.build_for(example_features(problem_hparams))
        optimizer = keras.optimizers.Adam(
            1e-4, beta_1=hp.optimizer_adam_beta1, beta_2=hp.optimizer_adam_beta2,
            epsilon=hp.optimizer_adam_epsilon,
        )
        optimizer.build(model.trainable_variables)
    variables = model.trainable_variables
    prepared = [({k: tf.constant(v, tf.int32) for k, v in b.items()}, float(len(b["targets"])),
                 float(np.count_nonzero(b["inputs"]) + np.count_nonzero(b["targets"])))
                for b in batches]
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"inputs": spec, "targets": spec}], jit_compile=xla or None)
    def train_step(features):
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    position = [0]

    def step() -> tuple[float, float]:
        features, examples, tokens = prepared[position[0] % len(prepared)]
        position[0] += 1
        float(train_step(features))
        return examples, tokens

    return step


# Single-path measurements (the smoke test uses them).
def measure_trainer(problem, data_dir, output_dir, hparams, steps, warmup=WARMUP,
                    precision="float32") -> dict[str, float]:
    return time_steps(trainer_step(problem, data_dir, output_dir, hparams, precision), steps,
                      warmup)


def measure_bare(problem_hparams, hparams, batches, steps, warmup=WARMUP,
                 precision="float32") -> dict[str, float]:
    return time_steps(bare_step(problem_hparams, hparams, batches, precision), steps, warmup)


def measure_torch(hp_dims, vocab_size, batches, steps, warmup=WARMUP, precision="float32",
                  threads=None, compile=False) -> dict[str, float]:
    step = torch_step(hp_dims, vocab_size, batches, precision, threads, compile)
    result = time_steps(step, steps, warmup)
    import torch

    result["threads"] = torch.get_num_threads()
    return result


# ------------------------------------------------------------------------ workers
def _row_paths(name: str, vocab: int, args: argparse.Namespace, threads: int,
               with_torch: bool) -> tuple[dict[str, Step], float]:
    """The paths of one (model, vocabulary) row and its model FLOPs per token."""
    data_dir = os.path.join(args.tmp, f"data-{vocab}")
    problem = workload(vocab, data_dir, args)
    hp = row_hparams(name, vocab, args)
    batches = sample_batches(problem, data_dir, hp, WARMUP + args.steps_for[name])
    output_dir = tempfile.mkdtemp(prefix=f"{name}-{vocab}-{args.precision}-", dir=args.tmp)
    paths = {
        TRAINER: trainer_step(problem, data_dir, output_dir, hp, args.precision, args.xla),
        BARE: bare_step(problem.hparams(data_dir), row_hparams(name, vocab, args), batches,
                        args.precision, args.xla),
    }
    if with_torch:
        paths[TORCH] = torch_step(dims(hp), vocab, batches, args.precision, threads)
        if args.torch_compile:
            paths[TORCH_COMPILED] = torch_step(dims(hp), vocab, batches, args.precision,
                                               threads, compile=True)
    return paths, flops_per_token(hp, vocab, batches)


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """One precision: every model's and vocabulary's paths, interleaved; matmul peaks
    before and after."""
    import tensorflow as tf

    threads = tf_threads()
    out: dict[str, Any] = {"rows": [], "threads": threads, "tf": tf.__version__,
                           "torch": None, "matmul_flops": matmul_peaks(args.matmul_size)}
    with_torch = args.torch and torch_available()
    if with_torch:
        import torch

        out["torch"] = torch.__version__
    for name in args.models.split(","):
        for vocab in args.vocab_list:
            paths, per_token = _row_paths(name, vocab, args, threads, with_torch)
            steps = args.steps_for[name]
            for path, r in time_interleaved(paths, steps).items():
                r.update(model=name, vocab=vocab, path=path, precision=args.precision,
                         data="text" if is_text(vocab) else "fixed",
                         flops_per_token=per_token)
                out["rows"].append(r)
                print(f"[{args.precision}] {name:<17} v{vocab:<6} {path:<20} "
                      f"{r['step_ms']:9.1f} ms/step {r['tokens_per_s']:10,.0f} tokens/s, "
                      f"{r['cores']:.2f} cores ({steps} steps; warm-up {r['warmup_s']:.1f}s)",
                      flush=True)
            del paths
            gc.collect()  # ends the Trainer's input pipeline before the next row
    later = matmul_peaks(args.matmul_size)
    out["matmul_flops"] = {k: max(v, later[k]) for k, v in out["matmul_flops"].items()}
    print(f"[{args.precision}] matmul {args.matmul_size}: " + ", ".join(
        f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in out["matmul_flops"].items()), flush=True)
    return out


def _worker_argv(args: argparse.Namespace, models: list[str], steps_for: dict[str, int],
                 with_torch: bool) -> list[str]:
    return [
        "--models", ",".join(models), "--steps-json", json.dumps(steps_for),
        "--vocabs", ",".join(map(str, args.vocab_list)), "--batch", str(args.batch),
        "--length", str(args.length), "--tokens", str(args.tokens),
        "--max-length", str(args.max_length), "--matmul-size", str(args.matmul_size),
    ] + (["--torch-compile"] if args.torch_compile else []) + (
        ["--xla"] if args.xla else []) + (["--fixed-lengths"] if args.fixed_lengths else []) + (
        [] if with_torch else ["--no-torch"])


def _describe_data(args: argparse.Namespace) -> list[str]:
    """Makes every vocabulary's data (in the parent, once) and describes it."""
    lines = []
    for vocab in args.vocab_list:
        data_dir = os.path.join(args.tmp, f"data-{vocab}")
        start = time.perf_counter()
        problem = workload(vocab, data_dir, args)
        if not is_text(vocab) or args.fixed_lengths:
            lines.append(f"vocab {vocab}: fixed reversal, batch {args.batch} x {args.length} "
                         f"source + {args.length} target tokens, no padding")
            continue
        batches = sample_batches(problem, data_dir, text_hparams(MODELS[0], args.tokens,
                                                                 args.max_length), 32)
        lengths = np.concatenate([np.count_nonzero(b["inputs"], axis=1) for b in batches])
        real = sum(np.count_nonzero(b[k]) for b in batches for k in ("inputs", "targets"))
        padded = sum(b[k].size for b in batches for k in ("inputs", "targets"))
        lines.append(
            f"vocab {vocab}: docstring sentences -> their words reversed, {problem.num_examples('train'):,} "
            f"training pairs, SentencePiece {vocab} pieces; source tokens per example "
            f"{real_text.length_summary(lengths)}; batches of {args.tokens} tokens, "
            f"max_length {args.max_length}, padding efficiency {real / padded:.2f} "
            f"({time.perf_counter() - start:.0f}s to make)")
    return lines


# --------------------------------------------------------------------------- main
def _table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'model':<17}  {'vocab':>6}  {'path':<20}  {'precision':<9}  {'tokens/s':>9}  "
              f"{'examples/s':>10}  {'step ms':>8}  {'ratio':>5}  {'MFU':>6}  {'cores':>5}  "
              f"{'cpu ms':>8}")
    lines = [header, "-" * len(header)]
    previous = None
    for r in rows:
        if previous is not None and (r["model"], r["vocab"]) != previous:
            lines.append("")
        previous = r["model"], r["vocab"]
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") else "-"
        lines.append(
            f"{r['model']:<17}  {r['vocab']:>6}  {r['path']:<20}  {r['precision']:<9}  "
            f"{r['tokens_per_s']:>9,.0f}  {r['examples_per_s']:>10,.1f}  {r['step_ms']:>8.1f}  "
            f"{ratio:>5}  {100 * r['mfu']:>5.1f}%  {r['cores']:>5.2f}  {r['cpu_ms']:>8.1f}"
        )
    return "\n".join(lines)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--vocabs={text!r}: give comma-separated sizes, e.g. 8192,32768,12") from None
    if not values or min(values) < 4:
        raise argparse.ArgumentTypeError(
            f"--vocabs={text!r}: every size must be >= 4 (3 ids are reserved), e.g. 8192,12")
    return values


def _peaks(text: str) -> dict[str, float]:
    peaks = {}
    for part in filter(None, text.split(",")):
        precision, _, value = part.partition("=")
        try:
            peaks[precision] = float(value)
        except ValueError:
            peaks[precision] = -1.0
        if precision not in PRECISIONS or peaks[precision] <= 0:
            raise argparse.ArgumentTypeError(
                f"--peak-flops={text!r}: give PRECISION=FLOP/s pairs, PRECISION in "
                f"{', '.join(PRECISIONS)}, e.g. bfloat16=989e12,float32=67e12")
    return peaks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny + small, fewer steps")
    parser.add_argument("--models", default=None, help="comma-separated hparams sets")
    parser.add_argument("--vocabs", dest="vocab_list", type=_int_list, default=list(VOCABS),
                        help=">= 1000: real text, smaller: fixed-length reversal")
    parser.add_argument("--steps", type=int, default=None, help="timed steps for every model")
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per text batch")
    parser.add_argument("--max-length", type=int, default=256, help="text sequences cut here")
    parser.add_argument("--batch", type=int, default=32, help="examples per fixed batch")
    parser.add_argument("--length", type=int, default=64, help="fixed source = target tokens")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--torch-compile", action="store_true",
                        help="add torch.compile(dynamic=True) rows (minutes of compiling)")
    parser.add_argument("--fixed-lengths", action="store_true",
                        help="every vocabulary on fixed-length reversal (--batch x --length)")
    parser.add_argument("--xla", action="store_true",
                        help="compile the t2t paths with XLA (t2t-trainer --xla_compile)")
    parser.add_argument("--peak-flops", type=_peaks, default={},
                        help="MFU against these FLOP/s, not the measured matmul, e.g. "
                             "'bfloat16=989e12' (a card's published dense peak)")
    add_race_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.worker:
        return run_worker_process(args, _worker)

    start = time.perf_counter()
    models = args.models.split(",") if args.models else list(MODELS[:2] if args.quick else MODELS)
    steps_for = {m: args.steps or STEPS.get(m, (10, 3))[1 if args.quick else 0] for m in models}
    precisions = ["float32"] if args.no_bf16 else list(PRECISIONS)
    with_torch = args.torch and torch_available()
    print(f"Training throughput, vocabularies {args.vocab_list}, {os.cpu_count()} CPUs; load "
          f"average {load_average()} at the start.", flush=True)
    if args.torch and not with_torch:
        print("torch is not installed: the torch rows are skipped "
              "(pip install torch==2.13.0 into the venv to get them).", flush=True)

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        data = _describe_data(args)
        for line in data:
            print(line, flush=True)
        results = [spawn_worker("benchmarks.training", p, tmp,
                                _worker_argv(args, models, steps_for, with_torch))
                   for p in precisions]
    measured = {k: max(r["matmul_flops"][k] for r in results) for k in PRECISIONS}
    peak = {**measured, **args.peak_flops}
    for result in results:
        rows += result["rows"]
    threads, tf_version = results[0]["threads"], results[0]["tf"]
    torch_version = results[0]["torch"]
    for r in rows:
        r["model_flops_per_s"] = r["tokens_per_s"] * r["flops_per_token"]
        r["mfu"] = r["model_flops_per_s"] / peak[r["precision"]]
    compare_rows(rows, "tokens_per_s", models, precisions, PATHS, args.vocab_list)

    elapsed = time.perf_counter() - start
    print()
    print(_table(rows))
    print()
    print("\n".join(data))
    print(f"Timed steps per path {steps_for}, after {WARMUP} warm-up steps, in {ROUNDS} "
          "interleaved rounds.")
    print("ratio: t2t Trainer tokens/s / this row's (same model, vocabulary and precision); "
          "< 1: t2t is slower.")
    print("MFU: model FLOP/s (6 x matmul weights x real tokens + attention QK^T/AV at real "
          "lengths) / " + ", ".join(
              f"{k} {v / 1e9:,.1f} GFLOP/s" + (" (--peak-flops)" if k in args.peak_flops else
                                                f" (TensorFlow's {args.matmul_size}^2 matmul "
                                                "here, best measured)")
              for k, v in peak.items()) + ".")
    if args.xla:
        print("The t2t paths ran compiled by XLA (--xla).")
    print("cores: CPU time / wall time of the process in the timed steps (about "
          f"{threads} when it had the machine to itself); cpu ms: CPU time a step.")
    print(f"TensorFlow {tf_version} with {threads} intra-op threads; " + (
        f"torch {torch_version} with set_num_threads({threads}), OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}." if with_torch else
        "torch rows skipped: " + ("--no-torch." if not args.torch else
                                  "torch is not installed (pip install torch==2.13.0).")))
    print(f"Took {elapsed:.0f}s; load average {load_average()} at the end.")
    return {"rows": rows, "matmul_flops": measured, "peak_flops": peak, "xla": args.xla,
            "steps": steps_for, "seconds": elapsed,
            "threads": threads, "tensorflow": tf_version, "torch": torch_version,
            "data": data, "vocabs": args.vocab_list}


if __name__ == "__main__":
    main()
