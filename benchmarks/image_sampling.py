"""Image Transformer sampling speed: the cost of one sub-pixel at the first rows vs the
last rows of an image, cached vs uncached, and whole images per second.

    python -m benchmarks.image_sampling [--quick] [--configs mnist,cifar10]
        [--batch_size 8] [--repeats 3]

Builds an `imagetransformer` (random weights: sampling cost does not depend on training)
for unconditional generation of each configuration's image shape:
  mnist     imagetransformer_tiny_cpu on 28x28x1 (784 sub-pixels, 1-D local blocks of
            112 reading the 112 before);
  cifar10   imagetransformer_cifar10_base's layers (12 of 512, 1-D local blocks of 256)
            on 32x32x3 (3,072 sub-pixels), batch_size 1 unless --batch_size is given.
For each, a traced tf.function runs the decoder's step function over one image row (W*C
consecutive sub-pixels, the state threaded through a tf.while_loop, as in sampling)
starting at the first row and at the last row; ms/sub-pixel is the median time over
--repeats runs divided by the row's sub-pixels. The cached step (decode_step_cached:
every layer on one position, attending to its local block's cached keys and values)
should cost the same at both ends ("last/first" near 1); the uncached step
(decode_step: the whole model re-run on the [B, L] buffer) costs the whole image at
every position, so its ratio is ~1 too but its level is ~L/block times higher; it is
timed over 8 positions, not a row. "images/s" times whole images drawn as
`t2t.decoding.image_samples.sample_images` draws them (one traced `infer`, cached,
temperature 1), tracing and a warm-up draw excluded.
`--quick`: the mnist configuration only, 1 repeat, no whole-image timing of cifar10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

CONFIGS = {
    "mnist": ("imagetransformer_tiny_cpu", [28, 28, 1], 8),
    "cifar10": ("imagetransformer_cifar10_base", [32, 32, 3], 1),
}
UNCACHED_POSITIONS = 8


def build_model(hparams_set: str, image_shape: list[int], seed: int = 0) -> Any:
    """An unconditional imagetransformer in PREDICT mode with random weights."""
    import tensorflow as tf

    from t2t.data.problem import ProblemHParams
    from t2t.hparams import basic
    from t2t.models import image_transformer, t2t_model

    php = ProblemHParams(modality={"targets": "image"}, vocab_size={"targets": 256},
                         image_shape=list(image_shape))
    hp = basic.create_hparams(hparams_set, "unconditional=True")
    tf.random.set_seed(seed)
    model = image_transformer.Imagetransformer(hp, t2t_model.PREDICT, php)
    model.build_for({"targets": tf.zeros([1, *image_shape], tf.uint8)})
    return model


def make_runner(model: Any, batch_size: int, cached: bool) -> Any:
    """A traced (start, count) -> logits checksum running `count` steps from `start`."""
    import tensorflow as tf

    length = model.length
    features = {"targets": tf.zeros([batch_size, 0], tf.int32)}
    init = model.decode_init_cached if cached else model.decode_init
    step = model.decode_step_cached if cached else model.decode_step

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)])
    def run(start, count):
        state = init(features, length)

        def body(i, ids, total, state):
            logits, state = step(ids, i, state)
            ids = tf.cast(tf.argmax(logits, -1), tf.int32)
            return i + 1, ids, total + tf.reduce_sum(logits), state

        _, _, total, _ = tf.while_loop(
            lambda i, *_: i < start + count, body,
            (start, tf.zeros([batch_size], tf.int32), tf.constant(0.0), state))
        return total

    return run


def time_steps(run: Any, start: int, count: int, repeats: int) -> float:
    """Median milliseconds per step of `count` steps from `start`."""
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        run(start, count).numpy()
        times.append(time.perf_counter() - begin)
    return statistics.median(times) / count * 1000.0


def time_images(model: Any, batch_size: int, repeats: int) -> float:
    """Whole images per second: `batch_size` unconditional samples per call of one traced
    infer (as t2t.decoding.image_samples.sample_images draws them), tracing and a
    warm-up draw excluded."""
    import tensorflow as tf

    from t2t.decoding import infer as infer_lib

    @tf.function
    def draw():
        return infer_lib.infer(model, {}, model.length, temperature=1.0, seed=1,
                               num_samples=batch_size)["outputs"]

    draw().numpy()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        draw().numpy()
        times.append(time.perf_counter() - begin)
    return batch_size / statistics.median(times)


def benchmark(name: str, batch_size: int | None, repeats: int, whole_images: bool) -> dict:
    hparams_set, shape, default_batch = CONFIGS[name]
    batch = batch_size or default_batch
    model = build_model(hparams_set, shape)
    row = shape[1] * shape[2]
    length = model.length
    figures: dict[str, Any] = {"config": name, "hparams_set": hparams_set, "image_shape": shape,
                               "batch_size": batch, "sub_pixels": length}
    cached = make_runner(model, batch, cached=True)
    cached(0, 2).numpy()  # trace and warm up
    figures["cached_first_ms"] = time_steps(cached, 0, row, repeats)
    figures["cached_last_ms"] = time_steps(cached, length - row, row, repeats)
    uncached = make_runner(model, batch, cached=False)
    uncached(0, 1).numpy()
    figures["uncached_first_ms"] = time_steps(uncached, 0, UNCACHED_POSITIONS, repeats)
    figures["uncached_last_ms"] = time_steps(
        uncached, length - UNCACHED_POSITIONS, UNCACHED_POSITIONS, repeats)
    if whole_images:
        figures["images_per_s"] = time_images(model, batch, repeats)
    return figures


def format_table(rows: list[dict]) -> str:
    lines = ["| config | batch | sub-pixels | cached ms/sub-pixel first row | last row | "
             "last/first | uncached ms first | last | uncached/cached | images/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        images = f"{r['images_per_s']:.3f}" if "images_per_s" in r else "-"
        lines.append(
            f"| {r['config']} ({r['hparams_set']}, {'x'.join(map(str, r['image_shape']))}) | "
            f"{r['batch_size']} | {r['sub_pixels']} | {r['cached_first_ms']:.2f} | "
            f"{r['cached_last_ms']:.2f} | {r['cached_last_ms'] / r['cached_first_ms']:.2f} | "
            f"{r['uncached_first_ms']:.1f} | {r['uncached_last_ms']:.1f} | "
            f"{r['uncached_last_ms'] / r['cached_last_ms']:.1f} | {images} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="mnist only, 1 repeat")
    parser.add_argument("--configs", default="mnist,cifar10", help=f"of {sorted(CONFIGS)}")
    parser.add_argument("--batch_size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    names = ["mnist"] if args.quick else [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; use some of {sorted(CONFIGS)}")
    repeats = 1 if args.quick else args.repeats
    rows = [benchmark(n, args.batch_size, repeats, whole_images=not (args.quick and n != "mnist"))
            for n in names]
    print(format_table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
