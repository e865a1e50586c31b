"""Input pipeline throughput: parsing, length bucketing (the training path) and packing.

    python -m benchmarks.input_pipeline [--quick] [--seconds S] [--text-vocab 32768]

Generates algorithmic_reverse_decimal40-like data (lengths 1..40 plus EOS; 50k training
examples, 10k with --quick) into a temporary directory once, then measures each stage
for about S seconds after its first batch. The "real text" stage reads real sentences
at real lengths with a large vocabulary (benchmarks.real_text: docstring sentence pairs,
SentencePiece of --text-vocab pieces, made first: ~1.5 min) through the training path,
batches of 4096 tokens, max_length 256, as benchmarks.training's text rows; --text-vocab 0
leaves it out. Prints one table and returns the figures.
Tokens count inputs + targets; "real" tokens exclude padding, "padded" include it, so
real / padded is the padding (or packing) efficiency.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from benchmarks import real_text
from t2t.data.pipeline import input_pipeline as ip
from t2t.hparams import basic
from t2t.hparams.hparams import HParams
from t2t.problems.algorithmic_tasks import algorithmic


class _BenchReverseDecimal40(algorithmic.AlgorithmicReverseDecimal40):
    """algorithmic_reverse_decimal40 with a configurable number of training examples."""

    registered_name = "bench_reverse_decimal40"
    train_size = 50_000
    dev_size = 100
    dev_length = 40
    train_shards = 1


def _hparams(**overrides: Any) -> HParams:
    """basic_params1's batching fields (every key the pipeline reads, kept in step with
    the library) with a 4096-token batch and `overrides`."""
    hparams = basic.basic_params1()
    for name, value in {"batch_size": 4096, "batch_shuffle_size": 512, **overrides}.items():
        hparams.set_hparam(name, value)
    return hparams


def _count(batch: dict[str, np.ndarray]) -> tuple[int, int, int]:
    """(examples, real tokens, padded tokens) of one batch (padded or packed)."""
    names = [n for n in ("inputs", "targets") if n in batch]
    real = sum(int(np.count_nonzero(batch[n])) for n in names)
    padded = sum(int(batch[n].size) for n in names)
    if "targets_segmentation" in batch:
        examples = int(batch["targets_segmentation"].max(axis=1).sum())
    else:
        examples = len(batch["targets"])
    return examples, real, padded


def measure(
    make_batches: Callable[[], Iterable[dict[str, np.ndarray]]], seconds: float
) -> dict[str, float]:
    """Throughput of a batch iterator for ~`seconds` after its first batch."""
    start = time.perf_counter()
    batches = iter(make_batches())
    next(batches)
    first = time.perf_counter() - start
    examples = real = padded = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        e, r, p = _count(next(batches))
        examples, real, padded = examples + e, real + r, padded + p
    return {
        "examples_per_s": examples / elapsed,
        "tokens_per_s": real / elapsed,
        "padded_tokens_per_s": padded / elapsed,
        "efficiency": real / max(padded, 1),
        "first_batch_s": first,
    }


def _stages(problem: Any, data_dir: str, shuffle: int) -> dict[str, Callable[[], Any]]:
    """Stage name -> a function making that stage's fresh iterator over batches."""
    import tensorflow as tf

    def examples() -> Any:
        return problem.dataset("train", data_dir).repeat()

    cached = problem.dataset("train", data_dir).cache()
    for _ in cached:  # fill the cache: the "cached" rows measure batching alone
        pass

    def records_parsed() -> Any:  # batched parse, never one example at a time
        files = problem.data_files(data_dir, "train")
        records = tf.data.TFRecordDataset(files).repeat().batch(256)
        parsed = records.map(problem.decode_examples, num_parallel_calls=tf.data.AUTOTUNE)
        return parsed.map(lambda ex: {k: v.to_tensor() for k, v in ex.items()}).prefetch(2)

    def bucketed(source: Any) -> Any:
        return ip.batch_examples(
            source,
            batch_size=4096,
            batch_size_means_tokens=True,
            max_length=4096,
            drop_long_sequences=True,
        )

    def tf_bucketing(source: Any) -> Any:
        scheme = ip.batching_scheme(4096, 4096, 8, 1.1)
        return source.bucket_by_sequence_length(
            ip.example_length, scheme["boundaries"], scheme["batch_sizes"]
        )

    def training(**overrides: Any) -> Callable[[], Any]:
        hparams = _hparams(batch_shuffle_size=shuffle, **overrides)
        return lambda: ip.input_dataset(problem, "train", data_dir, hparams).as_numpy_iterator()

    return {
        "parse: records, batched parse_example": lambda: records_parsed().as_numpy_iterator(),
        "parse: Problem.dataset + padded_batch(256)":
            lambda: examples().padded_batch(256).as_numpy_iterator(),
        "bucketing: input_dataset (training path)": training(),
        "bucketing: batch_examples on cached examples":
            lambda: bucketed(cached.repeat()).as_numpy_iterator(),
        "bucketing: tf.data bucket_by_sequence_length, cached":
            lambda: tf_bucketing(cached.repeat()).as_numpy_iterator(),
        "packing: input_dataset, pack_dataset, max_length 256":
            training(pack_dataset=True, max_length=256),
        "packing: pack_examples(256) on cached examples": lambda: ip.pack_examples(
            cached.repeat(), 256).batch(16).as_numpy_iterator(),
    }  # fmt: skip


def _real_text_stage(text_vocab: int, text_dir: str, shuffle: int
                     ) -> tuple[str, Callable[[], Any]]:
    """The real-text stage: docstring sentence pairs with a SentencePiece vocabulary."""
    start = time.perf_counter()
    text = real_text.make_text_problem(text_vocab, text_dir)
    print(f"Made {text.num_examples('train'):,} docstring sentence pairs, SentencePiece "
          f"{text_vocab} pieces, in {time.perf_counter() - start:.0f}s.")
    hparams = _hparams(batch_shuffle_size=shuffle, max_length=256)
    name = f"real text {text_vocab // 1024}k: input_dataset, max_length 256"
    return name, lambda: ip.input_dataset(text, "train", text_dir, hparams).as_numpy_iterator()


def _print_results(results: dict[str, dict[str, float]], shuffle: int, seconds: float) -> None:
    width = max(len(name) for name in results)
    print(
        f"\n{'stage':<{width}}  {'examples/s':>10}  {'tokens/s':>10}  {'padded/s':>10}  "
        f"{'real/padded':>11}  {'1st batch':>9}"
    )
    for name, r in results.items():
        print(
            f"{name:<{width}}  {r['examples_per_s']:>10,.0f}  {r['tokens_per_s']:>10,.0f}  "
            f"{r['padded_tokens_per_s']:>10,.0f}  {r['efficiency']:>11.3f}  "
            f"{r['first_batch_s']:>8.2f}s"
        )
    print(
        f"\nbatch_size 4096 tokens; input_dataset uses batch_shuffle_size {shuffle}; "
        f"{seconds:g}s per stage."
    )


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k examples, shorter runs")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per stage")
    parser.add_argument("--text-vocab", type=int, default=32768,
                        help="SentencePiece pieces of the real-text stage (0: no such stage)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (1.5 if args.quick else 5.0)

    import tensorflow as tf

    problem = _BenchReverseDecimal40()
    problem.train_size = 10_000 if args.quick else 50_000
    shuffle = 32 if args.quick else 512
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = os.path.join(tmp, "data")
        start = time.perf_counter()
        problem.generate_data(data_dir, os.path.join(tmp, "tmp"), progress=False)
        print(
            f"Generated {problem.train_size:,} examples in {time.perf_counter() - start:.1f}s "
            f"({os.cpu_count()} CPUs, TensorFlow {tf.__version__})."
        )
        stages = _stages(problem, data_dir, shuffle)
        if args.text_vocab:
            name, make = _real_text_stage(args.text_vocab, os.path.join(tmp, "text"), shuffle)
            stages[name] = make
        results = {name: measure(make, seconds) for name, make in stages.items()}
    _print_results(results, shuffle, seconds)
    return results


if __name__ == "__main__":
    main()
