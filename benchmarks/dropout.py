"""Dropout kernels: forward + backward time of one dropout on a large activation.

    python -m benchmarks.dropout [--quick] [--shape 4096,2048] [--repeats 20]

Times, in one traced tf.function each (the gradient of sum(dropout(x) * w) with respect
to x, as in a training step), at rate 0.1, float32 and bfloat16:
  keras      keras.layers.Dropout (TensorFlow's stateless_dropout: one float32 uniform
             per element);
  t2t 16-bit t2t.layers.common.Dropout (one 32-bit Philox word per two elements).
Prints the median milliseconds over --repeats calls after a warm-up call, and the
speed-up. `--quick`: a [512, 512] activation, 3 repeats (a smoke test, not a figure).
The 16-bit kernel must also learn as well as Keras' (the quick regression case's recorded
figure guards that; tests/models/test_fast_kernels.py checks a step's equality).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

RATE = 0.1


def time_kernel(layer: Any, shape: list[int], dtype: str, repeats: int) -> float:
    """Median ms of one forward + backward of `layer` on a [shape] tensor of `dtype`."""
    import tensorflow as tf

    x = tf.random.stateless_normal(shape, [1, 2], dtype=dtype)
    weights = tf.random.stateless_normal(shape, [3, 4], dtype=dtype)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            total = tf.reduce_sum(tf.cast(layer(x, training=True) * weights, tf.float32))
        return tape.gradient(total, x)

    step(x).numpy()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        step(x).numpy()
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1000.0


def run(shape: list[int], repeats: int) -> list[dict[str, Any]]:
    """One row per dtype: {"dtype", "keras_ms", "t2t_ms", "speedup"}."""
    import keras

    from t2t.layers import common

    rows = []
    for dtype in ("float32", "bfloat16"):
        keras_ms = time_kernel(keras.layers.Dropout(RATE, seed=1, dtype=dtype), shape, dtype,
                               repeats)
        t2t_ms = time_kernel(common.Dropout(RATE, seed=1, dtype=dtype), shape, dtype, repeats)
        rows.append({"dtype": dtype, "keras_ms": keras_ms, "t2t_ms": t2t_ms,
                     "speedup": keras_ms / t2t_ms})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shape", default="4096,2048")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    shape = [512, 512] if args.quick else [int(n) for n in args.shape.split(",")]
    repeats = 3 if args.quick else args.repeats
    rows = run(shape, repeats)
    print(f"dropout rate {RATE} on {shape}, forward + backward, median of {repeats}:")
    print(f"{'dtype':<10} {'keras ms':>9} {'t2t 16-bit ms':>14} {'speed-up':>9}")
    for row in rows:
        print(f"{row['dtype']:<10} {row['keras_ms']:>9.2f} {row['t2t_ms']:>14.2f} "
              f"{row['speedup']:>8.2f}x")
    print(json.dumps({"shape": shape, "rows": rows}))
    return rows


if __name__ == "__main__":
    main()
