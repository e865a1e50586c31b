"""Writing examples to sharded TFRecord files, safely and with flat memory.

Files are named `{base}-{split}-{index:05d}-of-{count:05d}`. Each shard is written to
a hidden temporary name (`.{name}.incomplete`) and renamed when it is complete, so a
crash or Ctrl-C never leaves a partial shard under a final name, and a re-run writes
only the shards that are still missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from absl import logging

from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

_SHARD_RE = re.compile(r"^(?P<base>.+)-(?P<split>[^-]+)-(?P<index>\d{5})-of-(?P<count>\d{5})$")
INCOMPLETE_SUFFIX = ".incomplete"


class MixedShardsError(ValueError):
    """Shards of one split written with different shard counts sit side by side."""


def shard_paths(data_dir: str, base: str, split: str, num_shards: int) -> list[str]:
    """The final paths of the `num_shards` shards of `split`."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}.")
    return [
        os.path.join(data_dir, f"{base}-{split}-{i:05d}-of-{num_shards:05d}")
        for i in range(num_shards)
    ]


def is_shard_name(path: str) -> bool:
    return bool(_SHARD_RE.match(os.path.basename(path)))


def missing_shards(files: Sequence[str]) -> list[str]:
    """Paths of the shards absent from a set that should be complete."""
    missing = []
    groups: dict[tuple[str, str, int], set[int]] = {}
    for path in files:
        match = _SHARD_RE.match(os.path.basename(path))
        if match:
            key = (os.path.dirname(path), f"{match['base']}-{match['split']}", int(match["count"]))
            groups.setdefault(key, set()).add(int(match["index"]))
    for (directory, prefix, count), present in groups.items():
        for index in range(count):
            if index not in present:
                missing.append(os.path.join(directory, f"{prefix}-{index:05d}-of-{count:05d}"))
    if len({count for _, _, count in groups}) > 1:
        counts = sorted({count for _, _, count in groups})
        raise MixedShardsError(
            f"Shards of different counts {counts} are mixed in {os.path.dirname(files[0])!r}; "
            f"delete the stale ones and re-run t2t-datagen."
        )
    return missing


def incomplete_path(path: str) -> str:
    return os.path.join(os.path.dirname(path), "." + os.path.basename(path) + INCOMPLETE_SUFFIX)


def to_example(features: dict[str, Any]) -> Any:
    """A tf.train.Example from a dict of int/float lists, bytes or str values."""
    feature = {}
    for name, value in features.items():
        if isinstance(value, (bytes, str)):
            value = [value]
        elif not isinstance(value, (list, tuple)):
            value = list(value) if hasattr(value, "__iter__") else [value]
        if not value:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[]))
            continue
        first = value[0]
        if isinstance(first, (bool, int)) or type(first).__name__.startswith(("int", "uint")):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in value]))
        elif isinstance(first, float) or type(first).__name__.startswith("float"):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in value]))
        elif isinstance(first, (bytes, str)):
            data = [v.encode("utf-8") if isinstance(v, str) else v for v in value]
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
        else:
            raise ValueError(
                f"Feature {name!r}: cannot store {type(first).__name__} values; use ints, "
                f"floats, bytes or str."
            )
    return tf.train.Example(features=tf.train.Features(feature=feature))


@dataclasses.dataclass
class SplitSummary:
    """What one split's generation wrote."""

    examples: int = 0  # written in this run
    shards_written: int = 0
    shards_skipped: int = 0  # already complete before this run
    bytes: int = 0
    seconds: float = 0.0


class _Progress:
    """One status line on stderr, refreshed at most every `interval` seconds."""

    def __init__(self, label: str, total: int | None, enabled: bool, interval: float = 1.0):
        self.label, self.total, self.enabled, self.interval = label, total, enabled, interval
        self.start = self.last = None
        self.tty = sys.stderr.isatty()

    def update(self, count: int, force: bool = False) -> None:
        now = time.monotonic()
        if self.start is None:  # the clock starts at the first example, not at set-up
            self.start = self.last = now
        if not self.enabled or (not force and now - self.last < self.interval):
            return
        self.last = now
        rate = count / max(now - self.start, 1e-9)
        if self.total:
            done = count / self.total
            bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
            eta = (self.total - count) / rate if rate else 0
            line = f"{self.label}: [{bar}] {count:,}/{self.total:,} ({rate:,.0f}/s, ETA {eta:,.0f}s)"
        else:
            line = f"{self.label}: {count:,} examples ({rate:,.0f}/s)"
        sys.stderr.write(("\r" + line) if self.tty else (line + "\n"))
        if force and self.tty:
            sys.stderr.write("\n")
        sys.stderr.flush()


def write_shards(
    make_examples: Callable[[], Iterable[dict[str, Any]]],
    paths: Sequence[str],
    *,
    total: int | None = None,
    max_cases: int | None = None,
    label: str = "",
    progress: bool = True,
) -> SplitSummary:
    """Streams examples into `paths`, one open shard at a time when `total` is known.

    With `total` (the exact count), shard i receives a contiguous block of examples, so
    shards finish one after another and a re-run skips the finished ones. Without it,
    examples are dealt round-robin. Either way the example sequence must be the same on
    a re-run (seeded generators) for the skipped shards to stay consistent.
    """
    summary = SplitSummary()
    start = time.monotonic()
    num_shards = len(paths)
    done = [os.path.exists(p) for p in paths]
    summary.shards_skipped = sum(done)
    for path in paths:  # a previous run's partial files are never reused
        if os.path.exists(incomplete_path(path)):
            os.remove(incomplete_path(path))
    if all(done):
        logging.info("%s: all %d shards exist, skipping.", label, num_shards)
        summary.seconds = time.monotonic() - start
        return summary
    if total is not None and max_cases is not None:
        total = min(total, max_cases)
    per_shard = -(-total // num_shards) if total else None

    def shard_of(index: int) -> int:
        return min(index // per_shard, num_shards - 1) if per_shard else index % num_shards

    writers: dict[int, Any] = {}
    progress_line = _Progress(label, total, progress)
    count = 0

    def finish(shard: int) -> None:
        writers.pop(shard).close()
        os.replace(incomplete_path(paths[shard]), paths[shard])
        done[shard] = True
        summary.shards_written += 1
        summary.bytes += os.path.getsize(paths[shard])

    try:
        examples: Iterator[dict[str, Any]] = iter(make_examples())
        for index, example in enumerate(examples):
            if max_cases is not None and index >= max_cases:
                break
            shard = shard_of(index)
            if per_shard and shard > 0 and (shard - 1) in writers:
                finish(shard - 1)
            if done[shard]:
                continue
            if shard not in writers:
                writers[shard] = tf.io.TFRecordWriter(incomplete_path(paths[shard]))
            writers[shard].write(to_example(example).SerializeToString())
            count += 1
            summary.examples = count
            progress_line.update(index + 1)
        # Shards that got no example (fewer examples than shards) are written empty so
        # the split is complete.
        for shard in range(num_shards):
            if not done[shard] and shard not in writers:
                writers[shard] = tf.io.TFRecordWriter(incomplete_path(paths[shard]))
        for shard in sorted(writers):
            finish(shard)
    finally:
        for shard, writer in writers.items():  # only on error: leave no partial shard
            writer.close()
            if os.path.exists(incomplete_path(paths[shard])):
                os.remove(incomplete_path(paths[shard]))
    progress_line.update(count, force=True)
    summary.seconds = time.monotonic() - start
    return summary
