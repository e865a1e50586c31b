"""The input pipeline: a Problem's examples -> shuffled, length-bucketed, padded batches.

`input_dataset(problem, mode, data_dir, hparams)` is what the trainer iterates: per
replica batches, dicts of int32 token ids [batch, length] padded with 0 (images and
labels as the problem gives them). Tensor2Tensor's semantics are kept:

* `hparams.batch_size` counts tokens per replica when the problem's
  `batch_size_means_tokens` is true (text), else examples per replica; it is already a
  per-replica number, so `InputContext.get_per_replica_batch_size` is never applied.
* `max_length` is `hparams.max_length`, or `batch_size` when that is 0. In TRAIN an
  example longer than `max_length` (the longest of its sequence features) is dropped;
  in EVAL only when `hparams.eval_drop_long_sequences`. Before that, "inputs" and
  "targets" are cut to `max_input_seq_length` / `max_target_seq_length` ids (if > 0).
  `t2t.data.pipeline.length_report` counts what these filters drop.
* Token batches group examples of similar length (`batching_scheme`): a bucket of
  lengths [lo, hi) holds `batch_size // hi` examples padded to `hi - 1` tokens, so a
  batch holds at most `batch_size` tokens, padding included, and each bucket always
  yields the same shape (a bounded set of shapes: few retraces, XLA-friendly).

Speed. A per-example `tf.data` function call costs ~10-30 us on a 2-core machine, so
nothing here runs per example: examples are gathered into windows of a few thousand
(`padded_batch`, padded with -1 so the lengths survive), and filtering, bucketing
(a `scan` that carries the unfinished buckets from one window to the next) and packing
are vectorized over the window. Token ids must therefore be >= 0 (0 is padding).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from t2t.config import InputConfig
from t2t.data.pipeline import subword_sampling
from t2t.features import TRAIN
from t2t.utils.lazy_import import lazy_module

__all__ = ["Batching", "InputConfig", "batch_arguments", "batch_examples", "batching_scheme",
           "bucket_boundaries", "example_length", "input_dataset", "kept_lengths",
           "make_input_fn", "pack_examples"]

tf = lazy_module("tensorflow")

_HIGHLY_COMPOSITE_NUMBERS = [
    1, 2, 4, 6, 12, 24, 36, 48, 60, 120, 180, 240, 360, 720, 840, 1260, 1680, 2520, 5040,
    7560, 10080, 15120, 20160, 25200, 27720, 45360, 50400, 55440, 83160, 110880, 166320,
    221760, 277200, 332640, 498960, 554400, 665280, 720720, 1081080, 1441440, 2162160,
    2882880, 3603600, 4324320, 6486480, 7207200, 8648640, 10810800, 14414400, 17297280,
    21621600, 32432400, 36756720, 43243200, 61261200, 73513440, 110270160,
]  # fmt: skip
_NO_LIMIT = 10**9  # Tensor2Tensor's "no maximum length"
_SEQ_PAD = -1  # marks padding inside windows, so that lengths survive padded_batch


@dataclasses.dataclass(frozen=True)
class Batching:
    """What a batch is: Tensor2Tensor's batching hparams, read once from the model's
    hparams (`from_hparams`; their defaults live in basic_params1).

    batch_size: tokens per replica for text problems, examples for images and
      classification (or with use_fixed_batch_size); already per replica.
    max_length: longest example kept in TRAIN (0: batch_size in token mode).
    min_length_bucket, length_bucket_step: the length buckets (`batching_scheme`).
    min_length: shorter examples are dropped.
    eval_drop_long_sequences: drop examples over max_length in EVAL too.
    pack_dataset: pack examples into rows of max_length tokens.
    max_input_seq_length, max_target_seq_length: Tensor2Tensor's truncation: "inputs" /
      "targets" keep their first N ids, before the length filter (0: no truncation).
    batch_shuffle_size: batches in the TRAIN batch shuffle buffer.
    static_shapes: every batch [batch, max_length] (TPUs); set by the runtime's
      strategy hook, not an hparam.
    """

    batch_size: int = 4096
    max_length: int = 0
    min_length_bucket: int = 8
    length_bucket_step: float = 1.1
    min_length: int = 0
    eval_drop_long_sequences: bool = False
    pack_dataset: bool = False
    max_input_seq_length: int = 0
    max_target_seq_length: int = 0
    batch_shuffle_size: int = 512
    use_fixed_batch_size: bool = False
    static_shapes: bool = False

    @classmethod
    def from_hparams(cls, hparams: Any, **overrides: Any) -> Batching:
        """The batching hparams of `hparams` (a set derived from basic_params1)."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "static_shapes"]
        values = {name: getattr(hparams, name) for name in names}
        return cls(**{**values, **overrides})


# ------------------------------------------------------------------ batching scheme
def bucket_boundaries(
    max_length: int, min_length: int = 8, length_bucket_step: float = 1.1
) -> list[int]:
    """Tensor2Tensor's bucket boundaries (tokens): min_length, then x -> max(x + 1,
    int(x * step)), while < max_length."""
    if length_bucket_step <= 1.0:
        raise ValueError(f"length_bucket_step must be > 1.0, got {length_bucket_step}.")
    x, boundaries = min_length, []
    while x < max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * length_bucket_step))
    return boundaries


def batching_scheme(
    batch_size: int,
    max_length: int,
    min_length_bucket: int,
    length_bucket_step: float,
    *,
    drop_long_sequences: bool = False,
    shard_multiplier: int = 1,
    length_multiplier: int = 1,
    min_length: int = 0,
) -> dict[str, Any]:
    """Tensor2Tensor's `data_reader.batching_scheme`: examples per length bucket.

    Returns {"boundaries": bucket boundaries (tokens, times length_multiplier),
    "batch_sizes": examples per batch of each of the len(boundaries)+1 buckets, about
    batch_size / bucket length and rounded down to divisors of a highly composite
    window (times shard_multiplier), "min_length", "max_length" (10**9 unless
    drop_long_sequences), "shuffle_queue_size": batches}.
    """
    max_length = max_length or batch_size
    if max_length < min_length:
        raise ValueError(f"max_length ({max_length}) must be >= min_length ({min_length}).")
    boundaries = bucket_boundaries(max_length, min_length_bucket, length_bucket_step)
    boundaries = [b * length_multiplier for b in boundaries]
    max_length *= length_multiplier
    batch_sizes = [max(1, batch_size // length) for length in boundaries + [max_length]]
    window_size = max(n for n in _HIGHLY_COMPOSITE_NUMBERS if n <= 3 * max(batch_sizes))
    divisors = [d for d in range(1, window_size + 1) if window_size % d == 0]
    batch_sizes = [max(d for d in divisors if d <= bs) for bs in batch_sizes]
    window_size *= shard_multiplier
    batch_sizes = [bs * shard_multiplier for bs in batch_sizes]
    return {
        "boundaries": boundaries,
        "batch_sizes": batch_sizes,
        "min_length": min_length,
        "max_length": max_length if drop_long_sequences else _NO_LIMIT,
        "shuffle_queue_size": (window_size // min(batch_sizes)) * 3,
    }


def example_length(example: dict[str, Any], features: Sequence[str] = ("inputs", "targets")) -> Any:
    """Length (int32 scalar, tokens) of one example: the longest of its `features`."""
    length = tf.constant(0, tf.int32)
    for name in features:
        if name in example:
            length = tf.maximum(length, tf.shape(example[name], out_type=tf.int32)[0])
    return length


# ------------------------------------------------------------------------ windows
@dataclasses.dataclass(frozen=True)
class _Buckets:
    """Bucket i holds lengths in [bounds[i-1], bounds[i]) (the last: >= bounds[-1]).

    batch_sizes[i] examples per batch; pad_lengths[i] tokens (-1 = longest in batch).
    """

    bounds: list[int]
    batch_sizes: list[int]
    pad_lengths: list[int]


def _ragged_features(dataset: Any, sequence_features: Sequence[str]) -> list[str]:
    """The variable-length features (1-D integer ids) of the dataset's elements."""
    spec = dataset.element_spec
    if not isinstance(spec, dict):
        raise TypeError(f"Expected a dataset of feature dicts, got elements {spec}.")
    ragged = []
    for name, s in spec.items():
        sequence = s.dtype.is_integer and s.shape.rank == 1
        if s.shape.is_fully_defined() and not sequence:
            continue  # a fixed-shape feature (e.g. a real-valued window) batches as is
        if name in sequence_features or not s.shape.is_fully_defined():
            if not sequence:
                raise ValueError(
                    f"Feature {name!r} ({s}) varies in length but is not a 1-D integer "
                    f"sequence; give it a fixed shape in preprocess_example."
                )
            ragged.append(name)
    return ragged


def _windows(
    dataset: Any,
    ragged: list[str],
    window_size: int,
    min_length: int,
    max_length: int,
    sequence_features: Sequence[str],
    truncate: Mapping[str, int] | None = None,
) -> Any:
    """Windows of `window_size` examples (ragged features padded with -1), truncated
    and filtered by length: see `_prepare_window`."""
    padding = {
        name: tf.constant(_SEQ_PAD if name in ragged else 0, spec.dtype)
        for name, spec in dataset.element_spec.items()
    }
    seq = [name for name in ragged if name in sequence_features]
    cut = {name: n for name, n in (truncate or {}).items() if name in ragged and n > 0}
    return dataset.padded_batch(window_size, padding_values=padding).map(
        lambda window: _prepare_window(window, seq, min_length, max_length, cut),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _prepare_window(
    window: dict[str, Any], sequence_features: list[str], min_length: int, max_length: int,
    truncate: Mapping[str, int],
) -> dict[str, Any]:
    """Cuts each `truncate` feature to its first N ids, then keeps the examples of a
    window (dict of [n, ...], sequences -1 padded [n, width]) with min_length <= length
    <= max_length, and adds "_length" int32 [n'] (tokens of the longest sequence feature)."""
    window = {name: value[:, : truncate[name]] if name in truncate else value
              for name, value in window.items()}
    first = next(iter(window.values()))
    length = tf.zeros([tf.shape(first)[0]], tf.int32)
    for name in sequence_features:
        length = tf.maximum(length, _lengths(window[name]))
    keep = length >= min_length
    if max_length < _NO_LIMIT:
        keep = keep & (length <= max_length)
    out = {name: tf.boolean_mask(value, keep) for name, value in window.items()}
    out["_length"] = tf.boolean_mask(length, keep)
    return out


def _lengths(padded: Any) -> Any:
    """Lengths int32 [n] of the rows of a -1 padded [n, width] id matrix."""
    return tf.reduce_sum(tf.cast(padded >= 0, tf.int32), axis=1)


def _bucketize(
    windows: Any,
    buckets: _Buckets,
    ragged: list[str],
    sequence_features: list[str],
    drop_remainder: bool,
) -> Any:
    """Batches from windows. A `scan` carries the examples of unfilled buckets on to the
    next window and lets full batches out, in bucket order. At the end of a finite
    dataset the leftovers leave as smaller batches (or are dropped: drop_remainder).
    Sequence features are padded to the bucket's length, other ragged ones to their
    longest in the batch."""
    spec = windows.element_spec
    bounds = tf.constant(buckets.bounds, tf.int32)
    sizes = tf.constant(buckets.batch_sizes, tf.int32)
    pads = tf.constant(buckets.pad_lengths, tf.int32)
    num_buckets = len(buckets.batch_sizes)

    def empty(s: Any) -> Any:
        return tf.zeros([0] + [d or 0 for d in s.shape.as_list()[1:]], s.dtype)

    state0 = {name: empty(s) for name, s in spec.items()}
    ending = tf.data.Dataset.from_tensors((True, state0))
    windows = windows.map(lambda w: (False, w)).concatenate(ending)

    def step(state: dict[str, Any], item: Any) -> Any:
        last, window = item
        data = {}
        for name, old in state.items():
            new = window[name]
            if name in ragged:  # widen both to the same number of columns
                width = tf.maximum(tf.shape(old)[1], tf.shape(new)[1])
                old = tf.pad(old, [[0, 0], [0, width - tf.shape(old)[1]]], constant_values=_SEQ_PAD)
                new = tf.pad(new, [[0, 0], [0, width - tf.shape(new)[1]]], constant_values=_SEQ_PAD)
            data[name] = tf.concat([old, new], 0)
        bucket = tf.searchsorted(bounds, data["_length"], side="right", out_type=tf.int32)
        order = tf.argsort(bucket, stable=True)  # arrival order within a bucket
        bucket = tf.gather(bucket, order)
        counts = tf.math.bincount(bucket, minlength=num_buckets, maxlength=num_buckets)
        if drop_remainder:
            batches = counts // sizes
        else:
            batches = tf.where(last, (counts + sizes - 1) // sizes, counts // sizes)
        taken = tf.minimum(counts, batches * sizes)  # examples leaving, per bucket
        rank = tf.range(tf.size(bucket)) - tf.gather(tf.cumsum(counts, exclusive=True), bucket)
        leaving = rank < tf.gather(taken, bucket)
        batch_bucket = tf.repeat(tf.range(num_buckets), batches)
        index_in_bucket = tf.range(tf.size(batch_bucket)) - tf.gather(
            tf.cumsum(batches, exclusive=True), batch_bucket
        )
        bucket_size = tf.gather(sizes, batch_bucket)
        batch_size = tf.minimum(
            bucket_size, tf.gather(taken, batch_bucket) - index_in_bucket * bucket_size
        )
        out_rows, kept_rows = tf.boolean_mask(order, leaving), tf.boolean_mask(order, ~leaving)
        new_state = {name: tf.gather(value, kept_rows) for name, value in data.items()}
        for name in ragged:  # do not let one long example widen the state for good
            kept = new_state[name]
            new_state[name] = kept[:, : tf.reduce_max(tf.concat([_lengths(kept), [0]], 0))]
        out = {
            name: tf.RaggedTensor.from_row_lengths(tf.gather(value, out_rows), batch_size)
            for name, value in data.items()
            if name != "_length"
        }
        return new_state, (out, tf.gather(pads, batch_bucket))

    def finish(batch: dict[str, Any], pad_length: Any) -> dict[str, Any]:
        out = dict(batch)
        for name in ragged:
            value = batch[name]
            longest = tf.reduce_max(tf.concat([_lengths(value), [0]], 0))
            width = longest
            if name in sequence_features:
                width = tf.where(pad_length >= 0, pad_length, longest)
            value = value[:, :width]
            value = tf.pad(value, [[0, 0], [0, width - tf.shape(value)[1]]])
            out[name] = tf.maximum(value, 0)  # the -1 padding becomes 0
        return out

    return windows.scan(state0, step).unbatch().map(finish, num_parallel_calls=tf.data.AUTOTUNE)


# ------------------------------------------------------------------------ packing
def _pack_window(
    window: dict[str, Any], features: list[str], pack_length: int, window_size: int
) -> dict[str, Any]:
    """Packs a window (dict of -1 padded [n, width] ids) into rows of pack_length.

    Next-fit in arrival order: a row takes examples until the next one does not fit in
    every feature. Row starts are the orbit of example 0 under "next row start", found
    by pointer doubling (log2(n) vectorized steps, no per-example loop). Returns for each
    feature F: F, F_segmentation (1, 2, ... per example, 0 on padding) and F_position
    (0..len-1 within each example, 0 on padding), each int32 [rows, pack_length].
    """
    lengths = [_lengths(window[f]) for f in features]
    n = tf.size(lengths[0])
    cums = [tf.cumsum(length) for length in lengths]
    nxt = tf.fill([n], n)
    for length, cum in zip(lengths, cums, strict=True):  # first example not fitting after i
        nxt = tf.minimum(
            nxt, tf.searchsorted(cum, cum - length + pack_length, side="right", out_type=tf.int32)
        )
    jump = tf.concat([nxt, [n]], 0)  # [n + 1]; n is the end
    reach = tf.one_hot(0, n + 1, dtype=tf.int32)  # reachable from 0 in < 2^k steps
    for _ in range(window_size.bit_length()):  # paths have at most n <= window_size steps
        reach = tf.tensor_scatter_nd_max(reach, jump[:, None], reach)
        jump = tf.gather(jump, jump)
    starts = tf.cast(tf.where(reach[:n] > 0)[:, 0], tf.int32)
    is_start = reach[:n]
    row = tf.cumsum(is_start) - 1  # [n]
    segment = tf.range(n) - tf.gather(starts, row) + 1  # [n], 1-based within the row
    ends = tf.concat([starts[1:], [n]], 0)
    out = {}
    for name, length, cum in zip(features, lengths, cums, strict=True):
        ids = tf.RaggedTensor.from_tensor(window[name], lengths=length)
        cum0 = tf.concat([[0], cum], 0)
        row_tokens = tf.gather(cum0, ends) - tf.gather(cum0, starts)
        position = tf.ragged.range(length).flat_values
        seg = tf.repeat(segment, length)
        for key, flat in (
            (name, ids.flat_values),
            (f"{name}_segmentation", seg),
            (f"{name}_position", position),
        ):
            packed = tf.RaggedTensor.from_row_lengths(flat, row_tokens)
            out[key] = packed.to_tensor(0, shape=[None, pack_length])
    return out


def pack_examples(
    dataset: Any,
    pack_length: int,
    features: Sequence[str] = ("inputs", "targets"),
    *,
    min_length: int = 0,
    window_size: int = 4096,
    truncate: Mapping[str, int] | None = None,
) -> Any:
    """Packs examples into rows of `pack_length` tokens (a dataset of single rows).

    Examples with a feature longer than `pack_length` (or shorter than min_length) are
    dropped, not truncated. Inputs and targets of an example share a row and segment id.
    Other features than `features` are dropped. Each window of `window_size` examples
    is packed on its own (next-fit), so the last, partly filled row of each window and
    of a finite dataset is emitted too. Output per feature F: F, F_segmentation,
    F_position, int32 [pack_length], 0 on padding. `truncate`: as in batch_examples.
    """
    present = [f for f in features if f in dataset.element_spec]
    if not present:
        raise ValueError(f"Cannot pack: none of {list(features)} in {dataset.element_spec}.")
    ragged = _ragged_features(dataset, present)
    windows = _windows(dataset, ragged, window_size, min_length, pack_length, present, truncate)
    return windows.map(
        lambda w: _pack_window(w, present, pack_length, window_size),
        num_parallel_calls=tf.data.AUTOTUNE,
    ).unbatch()


# ----------------------------------------------------------------------- batching
def batch_examples(
    dataset: Any,
    *,
    batch_size: int,
    batch_size_means_tokens: bool,
    max_length: int,
    min_length_bucket: int = 8,
    length_bucket_step: float = 1.1,
    sequence_features: Sequence[str] = ("inputs", "targets"),
    drop_long_sequences: bool,
    pack_length: int = 0,
    static_shapes: bool = False,
    drop_remainder: bool = False,
    min_length: int = 0,
    length_multiplier: int = 1,
    window_size: int | None = None,
    truncate: Mapping[str, int] | None = None,
) -> Any:
    """Batches a dataset of per-example feature dicts; sequences are padded with 0.

    batch_size: tokens per batch (padding included) if batch_size_means_tokens, else
      examples per batch.
    max_length: longest example kept (tokens, longest sequence feature) when
      drop_long_sequences; 0 = batch_size in token mode, no limit in example mode.
    Token mode: length buckets from `batching_scheme`; bucket [lo, hi) gives batches of
      batch_sizes[i] examples x (hi - 1) tokens, the last T2T bucket max_length tokens;
      longer examples (kept when not drop_long_sequences) go to an extra bucket padded
      to its longest. Example mode: `batch_size` examples padded to the longest.
    pack_length > 0: packs examples into rows of pack_length tokens (`pack_examples`;
      longer examples are dropped) and batches batch_size // pack_length rows (token
      mode) or batch_size rows; features F, F_segmentation, F_position.
    static_shapes: every batch [batch_size // max_length (token mode) or batch_size,
      max_length]; longer examples dropped, last partial batch dropped.
    drop_remainder: drop the last, partial batches of a finite dataset.
    length_multiplier: Tensor2Tensor's batch_size_multiplier: batch sizes are computed
      for lengths times this factor (fewer examples per batch).
    window_size: examples gathered per vectorized step (None: from the batch sizes).
    truncate: feature -> N: a variable-length feature keeps its first N ids, before the
      length filter (Tensor2Tensor's max_input_seq_length / max_target_seq_length).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    limit = max_length or (batch_size if batch_size_means_tokens else 0)
    max_keep = kept_lengths(batch_size=batch_size, batch_size_means_tokens=batch_size_means_tokens,
                            max_length=max_length, drop_long_sequences=drop_long_sequences,
                            pack_length=pack_length, static_shapes=static_shapes)[1] or _NO_LIMIT
    spec = dataset.element_spec
    present = [f for f in sequence_features if f in spec]
    if pack_length:
        rows = max(1, batch_size // pack_length) if batch_size_means_tokens else batch_size
        packed = pack_examples(dataset, pack_length, present, min_length=min_length,
                               window_size=window_size or 4096, truncate=truncate)
        return packed.batch(rows, drop_remainder=drop_remainder or static_shapes)
    if not present:  # no sequences (images, labels): nothing to bucket
        return dataset.padded_batch(batch_size, drop_remainder=drop_remainder or static_shapes)
    ragged = _ragged_features(dataset, present)
    if static_shapes:
        if not limit:
            raise ValueError("static_shapes needs max_length > 0 (the padded length).")
        size = max(1, batch_size // limit) if batch_size_means_tokens else batch_size
        buckets = _Buckets([], [size], [limit])
        drop_remainder = True
    elif batch_size_means_tokens:
        scheme = batching_scheme(
            batch_size,
            limit,
            min_length_bucket,
            length_bucket_step,
            length_multiplier=length_multiplier,
        )
        bounds = [b // length_multiplier for b in scheme["boundaries"]] + [limit + 1]
        sizes = scheme["batch_sizes"] + scheme["batch_sizes"][-1:]
        buckets = _Buckets(bounds, sizes, [b - 1 for b in bounds] + [-1])
    else:
        buckets = _Buckets([], [batch_size], [-1])
    if window_size is None:
        window_size = min(max(1024, sum(buckets.batch_sizes)), 16384)
    windows = _windows(dataset, ragged, window_size, min_length, max_keep, present, truncate)
    return _bucketize(windows, buckets, ragged, present, drop_remainder)


def kept_lengths(*, batch_size: int, batch_size_means_tokens: bool, max_length: int,
                 drop_long_sequences: bool, pack_length: int = 0, static_shapes: bool = False,
                 min_length: int = 0) -> tuple[int, int]:
    """(shortest, longest) example that `batch_examples` keeps with these arguments:
    tokens of its longest sequence feature, after truncation; longest 0: no limit."""
    limit = pack_length or max_length or (batch_size if batch_size_means_tokens else 0)
    drop = drop_long_sequences or static_shapes or pack_length
    return min_length, (limit if drop else 0)


# ------------------------------------------------------------------- the pipeline
def _sequence_features(problem: Any) -> list[str]:
    names = list(getattr(problem, "sequence_features", ("inputs", "targets")))
    if getattr(problem, "was_reversed", False):
        swap = {"inputs": "targets", "targets": "inputs"}
        names = [swap.get(n, n) for n in names]
    return names


def input_dataset(
    problem: Any,
    mode: str,
    data_dir: str,
    hparams: Any,
    *,
    config: InputConfig | None = None,
    input_context: Any = None,
    repeat: bool | None = None,
    batching: Batching | None = None,
    split: str | None = None,
) -> Any:
    """Per-replica batches of `problem`'s `mode` split ("train" | "eval" | "infer").

    hparams: the model's (passed to the problem's preprocess_example; batching is read
    from them unless `batching` is given, see `Batching`).
    config: how to read and shuffle (`InputConfig`).
    input_context: shards the files (or records) across input pipelines
    (input_context.get_per_replica_batch_size is not applied: batch_size is per replica).
    repeat: loop forever (default: in TRAIN only).
    split: read this split instead of the mode's own (e.g. "test" in EVAL).
    Returns dicts of int32 [batch, length] sequences, 0-padded.
    """
    config = config or InputConfig()
    batching = batching or Batching.from_hparams(hparams)
    is_training = mode == TRAIN
    if repeat is None:
        repeat = is_training
    num_shards = input_context.num_input_pipelines if input_context else 1
    shard_index = input_context.input_pipeline_id if input_context else 0
    dataset = problem.dataset(
        mode, data_dir, shuffle_files=is_training, hparams=hparams, num_shards=num_shards,
        shard_index=shard_index, seed=config.seed, deterministic=config.deterministic,
        parse_batch_size=config.parse_batch_size, num_parallel_reads=config.num_parallel_reads,
        split=split)
    if is_training and config.shuffle_buffer_size > 1:
        dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed)
    if repeat:
        dataset = dataset.repeat()
    if is_training:  # subword regularization: each read of an example segmented anew
        dataset = subword_sampling.resample_dataset(dataset, problem, data_dir, hparams, config.seed)
    dataset = batch_examples(dataset, **batch_arguments(problem, data_dir, hparams, batching,
                                                        is_training))
    if is_training and batching.batch_shuffle_size > 1:
        seed = None if config.seed is None else config.seed + 1
        dataset = dataset.shuffle(batching.batch_shuffle_size, seed=seed)
    dataset = dataset.prefetch(config.prefetch_batches or tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = config.deterministic
    # Training-time augmentation (random crops and flips) uses stateful random ops, which
    # an iterator checkpoint cannot hold (TF fails the save): save the position without
    # their state; a resumed run draws fresh augmentations from the ops' seeds.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


def batch_arguments(problem: Any, data_dir: str, hparams: Any, batching: Batching,
                    is_training: bool) -> dict[str, Any]:
    """The keywords of `batch_examples` that input_dataset batches with: the problem's
    token/example mode, length multiplier and sequence features, and `batching`."""
    means_tokens = bool(getattr(problem, "batch_size_means_tokens", True))
    means_tokens = means_tokens and not batching.use_fixed_batch_size
    max_length = problem.max_length(hparams) if means_tokens else batching.max_length
    length_multiplier = 1
    if means_tokens:
        length_multiplier = int(getattr(problem.hparams(data_dir), "batch_size_multiplier", 1) or 1)
    pack = batching.pack_dataset and means_tokens
    truncate = {"inputs": batching.max_input_seq_length, "targets": batching.max_target_seq_length}
    return dict(
        batch_size=int(batching.batch_size), batch_size_means_tokens=means_tokens,
        max_length=max_length, min_length_bucket=int(batching.min_length_bucket),
        length_bucket_step=float(batching.length_bucket_step),
        sequence_features=_sequence_features(problem),
        drop_long_sequences=is_training or batching.eval_drop_long_sequences,
        pack_length=max_length if pack else 0, static_shapes=batching.static_shapes,
        min_length=int(batching.min_length), length_multiplier=length_multiplier,
        truncate={name: int(n) for name, n in truncate.items() if n})


def make_input_fn(
    problem: Any, mode: str, data_dir: str, hparams: Any, config: InputConfig | None = None,
    batching: Batching | None = None, split: str | None = None,
) -> Callable[[Any], Any]:
    """A `dataset_fn(input_context)` for `strategy.distribute_datasets_from_function`:
    each input pipeline reads its own shard; batches are per replica (see input_dataset).
    `split`: another split than the mode's own."""

    def dataset_fn(input_context: Any = None) -> Any:
        return input_dataset(
            problem, mode, data_dir, hparams, config=config, input_context=input_context,
            batching=batching, split=split,
        )

    return dataset_fn
