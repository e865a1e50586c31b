"""Writing examples to sharded TFRecord files, safely and with flat memory.

Files are named `{base}-{split}-{index:05d}-of-{count:05d}`. Each shard is written to
a hidden temporary name (`.{name}.incomplete`) and renamed when it is complete, so a
crash or Ctrl-C never leaves a partial shard under a final name, and a re-run writes
only the shards that are still missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from absl import logging

from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

_SHARD_RE = re.compile(r"^(?P<base>.+)-(?P<split>[^-]+)-(?P<index>\d{5})-of-(?P<count>\d{5})$")
INCOMPLETE_SUFFIX = ".incomplete"


class MixedShardsError(ValueError):
    """Shards of one split written with different shard counts sit side by side."""


class ShardWriteError(OSError):
    """A shard could not be written (disk full, file too large, I/O error)."""


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


class _ShardSet:
    """Writers over shard paths: each shard goes to its temporary name and is renamed
    when complete; shards complete before the run are never rewritten."""

    def __init__(self, paths: Sequence[str]):
        self.paths = list(paths)
        self.done = [os.path.exists(p) for p in self.paths]
        self.skipped = list(self.done)
        self.examples = [0] * len(self.paths)
        self.bytes = [0] * len(self.paths)
        self.writers: dict[int, Any] = {}
        for path in self.paths:  # a previous run's partial files are never reused
            if os.path.exists(incomplete_path(path)):
                os.remove(incomplete_path(path))

    def _open(self, shard: int) -> None:
        try:
            self.writers[shard] = tf.io.TFRecordWriter(incomplete_path(self.paths[shard]))
        except (OSError, tf.errors.OpError) as e:
            raise self._failed(shard, e) from e

    def write(self, shard: int, example: dict[str, Any]) -> bool:
        """Writes `example` to `shard` unless that shard was complete before; True if written."""
        if self.done[shard]:
            return False
        record = to_example(example).SerializeToString()
        if shard not in self.writers:
            self._open(shard)
        try:
            self.writers[shard].write(record)
        except (OSError, tf.errors.OpError) as e:  # e.g. the disk is full
            raise self._failed(shard, e) from e
        self.examples[shard] += 1
        return True

    def finish(self, shard: int) -> None:
        try:
            self.writers[shard].close()  # flushes: a full disk shows here
            del self.writers[shard]
            os.replace(incomplete_path(self.paths[shard]), self.paths[shard])
        except (OSError, tf.errors.OpError) as e:
            raise self._failed(shard, e) from e
        self.done[shard] = True
        self.bytes[shard] = os.path.getsize(self.paths[shard])

    def finish_all(self) -> None:
        """Completes every open shard; shards that got no example are written empty so
        the split is complete."""
        for shard in range(len(self.paths)):
            if not self.done[shard] and shard not in self.writers:
                self._open(shard)
        for shard in sorted(self.writers):
            self.finish(shard)

    def abort(self) -> None:
        """Closes open writers and deletes their partial files (on error)."""
        for shard, writer in self.writers.items():
            with contextlib.suppress(Exception):  # the error being raised says why
                writer.close()
            if os.path.exists(incomplete_path(self.paths[shard])):
                os.remove(incomplete_path(self.paths[shard]))
        self.writers.clear()

    def _failed(self, shard: int, error: Exception) -> ShardWriteError:
        """The error for a failed write of `shard`, after deleting its partial file (which
        would hold the space that a full disk lacks)."""
        writer = self.writers.pop(shard, None)
        with contextlib.suppress(Exception):
            if writer is not None:
                writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(incomplete_path(self.paths[shard]))
        reason = getattr(error, "message", None) or str(error)
        folder = os.path.dirname(os.path.abspath(self.paths[shard]))
        return ShardWriteError(
            f"Could not write the shard {self.paths[shard]} ({reason}); its partial file was "
            f"deleted and the {sum(self.done)} complete shard(s) of this set are kept. Free "
            f"space in {folder} (or choose another --data_dir) and run t2t-datagen again: it "
            f"writes only the missing shards.")

    def summary(self, shards: Iterable[int], seconds: float) -> SplitSummary:
        shards = list(shards)
        return SplitSummary(
            examples=sum(self.examples[s] for s in shards),
            shards_written=sum(1 for s in shards if self.done[s] and not self.skipped[s]),
            shards_skipped=sum(1 for s in shards if self.skipped[s]),
            bytes=sum(self.bytes[s] for s in shards),
            seconds=seconds,
        )


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
    start = time.monotonic()
    shards = _ShardSet(paths)
    num_shards = len(paths)
    if all(shards.done):
        logging.info("%s: all %d shards exist, skipping.", label, num_shards)
        return shards.summary(range(num_shards), time.monotonic() - start)
    if total is not None and max_cases is not None:
        total = min(total, max_cases)
    per_shard = -(-total // num_shards) if total else None
    progress_line = _Progress(label, total, progress)
    try:
        for index, example in enumerate(make_examples()):
            if max_cases is not None and index >= max_cases:
                break
            shard = min(index // per_shard, num_shards - 1) if per_shard else index % num_shards
            if per_shard and shard > 0 and (shard - 1) in shards.writers:
                shards.finish(shard - 1)
            shards.write(shard, example)
            progress_line.update(index + 1)
        shards.finish_all()
    finally:
        shards.abort()  # only on error: leave no partial shard
    progress_line.update(sum(shards.examples), force=True)
    return shards.summary(range(num_shards), time.monotonic() - start)


def deal_to_splits(
    make_examples: Callable[[], Iterable[dict[str, Any]]],
    split_paths: dict[str, Sequence[str]],
    weights: dict[str, int],
    *,
    max_cases: int | None = None,
    label: str = "",
    progress: bool = True,
) -> dict[str, SplitSummary]:
    """Deals ONE stream of examples to several splits: Tensor2Tensor's
    `is_generate_per_split = False`.

    Out of every `sum(weights)` consecutive examples, split s gets `weights[s]` (in the
    order of `split_paths`), and within a split examples go round-robin over its shards.
    When each split has `weights[s]` shards this is exactly T2T's `generate_files` over
    all shards of all splits (train 9 : dev 1 puts every 10th example in dev). No example
    goes to two splits; the same stream gives the same splits on every run, so a re-run
    skips finished shards consistently. `max_cases` caps each split; the stream stops
    when every split is full.
    """
    for name, weight in weights.items():
        if not isinstance(weight, int) or weight < 1:
            raise ValueError(f"Split {name!r}: weight (shard count) must be an int >= 1, "
                             f"got {weight!r}.")
    if set(weights) != set(split_paths):
        raise ValueError(f"weights name the splits {sorted(weights)}, the paths "
                         f"{sorted(split_paths)}: give both for the same splits.")
    start = time.monotonic()
    names = list(split_paths)
    offsets, paths = {}, []
    for name in names:
        offsets[name] = len(paths)
        paths.extend(split_paths[name])
    shards = _ShardSet(paths)
    ranges = {n: range(offsets[n], offsets[n] + len(split_paths[n])) for n in names}
    if all(shards.done):
        logging.info("%s: all %d shards exist, skipping.", label, len(paths))
        return {n: shards.summary(ranges[n], time.monotonic() - start) for n in names}
    slots = [name for name in names for _ in range(weights[name])]
    dealt = dict.fromkeys(names, 0)  # examples dealt to each split (written or not)
    progress_line = _Progress(label, None, progress)
    try:
        for index, example in enumerate(make_examples()):
            name = slots[index % len(slots)]
            if max_cases is None or dealt[name] < max_cases:
                shards.write(offsets[name] + dealt[name] % len(split_paths[name]), example)
                dealt[name] += 1
            elif all(count >= max_cases for count in dealt.values()):
                break
            progress_line.update(index + 1)
        shards.finish_all()
    finally:
        shards.abort()  # only on error: leave no partial shard
    progress_line.update(sum(shards.examples), force=True)
    return {n: shards.summary(ranges[n], time.monotonic() - start) for n in names}


# ------------------------------------------------ Tensor2Tensor's generator_utils API
def generate_files(
    generator: Iterable[dict[str, Any] | None],
    output_filenames: Sequence[str],
    max_cases: int | None = None,
    cycle_every_n: int = 1,
) -> None:
    """Tensor2Tensor's `generate_files`: writes the examples round-robin over
    `output_filenames` (switching file every `cycle_every_n` examples; None cases are
    skipped), at most `max_cases`. Skips when every file exists."""
    if cycle_every_n < 1:
        raise ValueError(f"cycle_every_n must be >= 1, got {cycle_every_n}.")
    cases = (case for case in generator if case is not None)
    if cycle_every_n == 1:
        write_shards(lambda: cases, output_filenames, max_cases=max_cases, progress=False)
        return
    shards = _ShardSet(output_filenames)
    if all(shards.done):
        return
    try:
        for index, case in enumerate(cases):
            if max_cases is not None and index >= max_cases:
                break
            shards.write((index // cycle_every_n) % len(output_filenames), case)
        shards.finish_all()
    finally:
        shards.abort()


def generate_dataset_and_shuffle(
    train_gen: Iterable[dict[str, Any]],
    train_paths: Sequence[str],
    dev_gen: Iterable[dict[str, Any]],
    dev_paths: Sequence[str],
    shuffle: bool = True,
) -> None:
    """Tensor2Tensor's `generate_dataset_and_shuffle`: writes both generators' examples.

    The shards are not rewritten in shuffled order (T2T read each whole shard into
    memory to do so): t2t shuffles training data as it reads it (file order and a
    shuffle buffer), so `shuffle` changes nothing.
    """
    del shuffle
    generate_files(train_gen, train_paths)
    generate_files(dev_gen, dev_paths)


def count_records(paths: Sequence[str]) -> int:
    """The number of records in TFRecord files (reads them all, in batches inside
    tf.data: ~0.3 s for 100,000 records, against ~20 s one by one in Python)."""
    if not paths:
        return 0

    @tf.autograph.experimental.do_not_convert
    def add(count: tf.Tensor, batch: tf.Tensor) -> tf.Tensor:
        return count + tf.size(batch, out_type=tf.int64)

    records = tf.data.TFRecordDataset(list(paths)).batch(8192)
    return int(records.reduce(tf.constant(0, tf.int64), add))


UNSHUFFLED_SUFFIX = "-unshuffled"  # T2T's; t2t never writes it (shards are final)


def train_data_filenames(problem: str, output_dir: str, num_shards: int) -> list[str]:
    """Tensor2Tensor's name: the train shard paths of `problem` in `output_dir`."""
    return shard_paths(output_dir, problem, "train", num_shards)


def dev_data_filenames(problem: str, output_dir: str, num_shards: int) -> list[str]:
    """Tensor2Tensor's name: the dev shard paths of `problem` in `output_dir`."""
    return shard_paths(output_dir, problem, "dev", num_shards)


def test_data_filenames(problem: str, output_dir: str, num_shards: int) -> list[str]:
    """Tensor2Tensor's name: the test shard paths of `problem` in `output_dir`."""
    return shard_paths(output_dir, problem, "test", num_shards)


def shuffle_dataset(filenames: Sequence[str], extra_fn: Any = None) -> None:
    """Tensor2Tensor's `shuffle_dataset`: a no-op in t2t, whose shards are written
    under their final names and shuffled when read (see generate_dataset_and_shuffle)."""
    del filenames, extra_fn


def maybe_download(directory: str, filename: str, uri: str, *, sha256: str | None = None,
                   mirror: str | None = None) -> str:
    """Tensor2Tensor's `maybe_download(directory, filename, uri)`: `directory/filename`,
    downloaded from `uri` unless already there. Goes through t2t.data.generation.download,
    so --data_mirror / $T2T_DATA_MIRROR (a URL prefix or a local folder holding
    `filename`) are tried first and an interrupted download is never left under the
    final name; `sha256` pins the content (T2T had no pin)."""
    from t2t.data.generation import download

    path = os.path.join(directory, filename)
    if os.path.exists(path) and sha256 is None:
        return path
    return download.fetch(download.Resource(uri, sha256=sha256, filename=filename),
                          directory, mirror)


def gunzip_file(gz_path: str, new_path: str) -> None:
    """Tensor2Tensor's `gunzip_file`: unzips `gz_path` to `new_path` unless it exists
    (written to a temporary name first, so a crash leaves no partial file)."""
    import gzip
    import shutil

    if os.path.exists(new_path):
        return
    partial = new_path + INCOMPLETE_SUFFIX
    with gzip.open(gz_path, "rb") as src, open(partial, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.replace(partial, new_path)


def get_or_generate_vocab_inner(data_dir: str, vocab_filename: str, vocab_size: int,
                                generator: Iterable[str], max_subtoken_length: int | None = None,
                                reserved_tokens: Sequence[str] | None = None) -> Any:
    """Tensor2Tensor's: the SubwordTextEncoder in `data_dir/vocab_filename`, built from
    the texts of `generator` to about `vocab_size` subtokens (and saved) if absent."""
    from t2t.data.encoders.subword_encoder import SubwordTextEncoder

    path = os.path.join(data_dir, vocab_filename) if data_dir else None
    if path and os.path.exists(path):
        return SubwordTextEncoder(path)
    encoder = SubwordTextEncoder.build_from_generator(
        generator, vocab_size, max_subtoken_length=max_subtoken_length,
        reserved_tokens=reserved_tokens)
    if path:
        os.makedirs(data_dir, exist_ok=True)
        encoder.store_to_file(path)
    return encoder


def get_or_generate_vocab(data_dir: str, tmp_dir: str, vocab_filename: str, vocab_size: int,
                          sources: Sequence[Any], file_byte_budget: float = 1e6,
                          max_subtoken_length: int | None = None) -> Any:
    """Tensor2Tensor's: a SubwordTextEncoder built from `sources` ([url, [file, ...]]
    pairs: an archive or plain/gzipped file downloaded to tmp_dir, the named files read
    up to `file_byte_budget` bytes each, lines taken evenly through each file)."""
    return get_or_generate_vocab_inner(
        data_dir, vocab_filename, vocab_size,
        _source_texts(tmp_dir, sources, file_byte_budget),
        max_subtoken_length=max_subtoken_length)


def _source_texts(tmp_dir: str, sources: Sequence[Any], file_byte_budget: float) -> Iterable[str]:
    import tarfile
    import zipfile

    for url, filenames in sources:
        archive = maybe_download(tmp_dir, os.path.basename(url), url)
        plain_gzip = False
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(tmp_dir, filter="data")
        elif zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                z.extractall(tmp_dir)
        else:
            plain_gzip = archive.endswith(".gz")
        for name in filenames:
            path = os.path.join(tmp_dir, name)
            if plain_gzip:  # one gzipped text file: unzip it under the name asked for
                gunzip_file(archive, path)
            yield from _budgeted_lines(path, file_byte_budget)


def _budgeted_lines(path: str, budget: float) -> Iterable[str]:
    """Lines spread through the file until `budget` bytes are taken (T2T's sampling:
    every k-th line, k = file size / budget)."""
    size = os.path.getsize(path)
    every = max(1, int(size / budget)) if budget else 1
    taken = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for index, line in enumerate(f):
            if index % every:
                continue
            line = line.strip()
            if line:
                taken += len(line)
                yield line
            if taken >= budget:
                return


def generate_lines_for_vocab(tmp_dir: str, sources: Sequence[Any],
                             file_byte_budget: float = 1e6) -> Iterable[str]:
    """Tensor2Tensor's: the lines `get_or_generate_vocab` builds from (see there)."""
    return _source_texts(tmp_dir, sources, file_byte_budget)


def get_or_generate_tabbed_vocab(data_dir: str, tmp_dir: str, source_filename: str,
                                 index: int, vocab_filename: str, vocab_size: int) -> Any:
    """Tensor2Tensor's: a SubwordTextEncoder from column `index` of the tab-separated
    file `tmp_dir/source_filename`."""
    def texts() -> Iterable[str]:
        with open(os.path.join(tmp_dir, source_filename), encoding="utf-8") as f:
            for line in f:
                columns = line.rstrip("\n").split("\t")
                if len(columns) > index and columns[index].strip():
                    yield columns[index].strip()

    return get_or_generate_vocab_inner(data_dir, vocab_filename, vocab_size, texts())


def get_or_generate_txt_vocab(data_dir: str, vocab_filename: str, vocab_size: int,
                              filepatterns: str | Sequence[str]) -> Any:
    """Tensor2Tensor's: a SubwordTextEncoder from the lines of the files matching
    `filepatterns` (tf.io.gfile globs)."""
    patterns = [filepatterns] if isinstance(filepatterns, str) else list(filepatterns)

    def texts() -> Iterable[str]:
        for pattern in patterns:
            for path in sorted(tf.io.gfile.glob(pattern)):
                with tf.io.gfile.GFile(path) as f:
                    for line in f:
                        if line.strip():
                            yield line.strip()

    return get_or_generate_vocab_inner(data_dir, vocab_filename, vocab_size, texts())


def pack_dataset(dataset: Any, length: int, keys: Sequence[str] | None = None,
                 use_custom_ops: bool = False) -> Any:
    """Tensor2Tensor's `pack_dataset`: examples packed into rows of `length` tokens, with
    `F_segmentation` and `F_position` per feature F (t2t.data.pipeline.input_pipeline.
    pack_examples; `use_custom_ops` is accepted and unneeded)."""
    del use_custom_ops
    from t2t.data.pipeline import input_pipeline

    return input_pipeline.pack_examples(dataset, length, tuple(keys or ("inputs", "targets")))
