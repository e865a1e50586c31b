"""How many dev examples also occur in train: the check that catches dev figures
measured on training data (a corpus written whole to both splits, duplicated data).

Examples are compared exactly, by a 64-bit hash of all their stored features (the
encoded inputs and targets of a text problem). The dev keys are held in memory (8
bytes each) and the train split is streamed, so memory stays bounded; both reads stop
at a cap, and the report says when one did.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator

import numpy as np

from t2t.data import problem as problem_lib
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

DEFAULT_THRESHOLD = 0.01  # a dev split with more than 1% of train copies is reported loudly
MAX_RECORDS = 1_000_000  # dev examples hashed
MAX_REFERENCE_RECORDS = 10_000_000  # train examples streamed (~200k/s on one core)
_BATCH = 4096


@dataclasses.dataclass
class Overlap:
    """The examples of `split` that also occur in `reference`."""

    problem: str
    split: str
    reference: str
    examples: int  # examples of `split` read
    overlapping: int  # of those, the ones with an exact copy in `reference`
    reference_read: int  # examples of `reference` read
    split_truncated: bool  # `split` was read up to its cap only
    reference_truncated: bool  # `reference` was read up to its cap only (a lower bound)
    threshold: float = DEFAULT_THRESHOLD
    by_construction: str | None = None  # the problem's reason for an expected overlap

    @property
    def fraction(self) -> float:
        return self.overlapping / self.examples if self.examples else 0.0

    @property
    def above_threshold(self) -> bool:
        return self.fraction > self.threshold

    def format(self) -> str:
        """One line; a warning with the consequence and the fix above the threshold."""
        counts = (f"{self.overlapping:,} of {self.examples:,} {self.split} examples "
                  f"({self.fraction:.1%}) also occur in {self.reference}")
        read = []
        if self.split_truncated:
            read.append(f"the first {self.examples:,} {self.split} examples")
        if self.reference_truncated:
            read.append(f"the first {self.reference_read:,} {self.reference} examples")
        scope = f"; read {' and '.join(read)} only" if read else ""
        if not self.above_threshold:
            return (f"{self.split}/{self.reference} overlap: {counts} (exact match of the "
                    f"stored features{scope}).")
        if self.by_construction:
            return (f"{self.split}/{self.reference} overlap: {counts} (exact match of the "
                    f"stored features{scope}), expected for {self.problem}: "
                    f"{self.by_construction}.")
        return (
            f"WARNING: {counts}, above the {self.threshold * 100:g}% threshold (exact match of "
            f"the stored features{scope}): {self.split} figures (loss, accuracy, BLEU) "
            f"would be measured on training data. If {self.problem}'s generate_samples "
            f"yields one corpus for every split, set is_generate_per_split = False with "
            f"dataset_splits (e.g. train 9 shards : dev 1 deals every 10th example to dev), "
            f"delete its shards and re-run t2t-datagen; otherwise remove the duplicates "
            f"from the data."
        )


def example_key(record: bytes) -> int:
    """A 64-bit hash of a serialized tf.train.Example's features, independent of the
    order in which the features were serialized."""
    features = tf.train.Example.FromString(record).features.feature
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(features):
        value = features[name].SerializeToString()
        digest.update(name.encode())
        digest.update(len(value).to_bytes(8, "little"))
        digest.update(value)
    return int.from_bytes(digest.digest(), "little")


def _key_batches(files: list[str], limit: int) -> Iterator[np.ndarray]:
    """uint64 keys of the records of `files`, in batches, `limit` records at most."""
    dataset = tf.data.TFRecordDataset(files, buffer_size=1 << 20).take(limit).batch(_BATCH)
    for batch in dataset.as_numpy_iterator():
        yield np.fromiter((example_key(r) for r in batch), dtype=np.uint64, count=len(batch))


def check_overlap(
    problem: problem_lib.Problem,
    data_dir: str,
    split: str = problem_lib.DEV_SPLIT,
    reference: str = problem_lib.TRAIN_SPLIT,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    max_records: int = MAX_RECORDS,
    max_reference_records: int = MAX_REFERENCE_RECORDS,
) -> Overlap | None:
    """Counts the examples of `split` (with repeats) that occur exactly in `reference`.

    Returns None when the problem has no such splits or their data is not complete in
    `data_dir`. Reading `reference` stops early once every `split` example was found.
    """
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be a fraction in [0, 1), got {threshold!r}.")
    names = [spec.name for spec in problem.splits]
    if split not in names or reference not in names:
        return None
    try:
        split_files = problem.data_files(data_dir, split)
        reference_files = problem.data_files(data_dir, reference)
    except problem_lib.DataMissingError:
        return None
    keys = np.concatenate([np.zeros(0, np.uint64), *_key_batches(split_files, max_records + 1)])
    split_truncated = len(keys) > max_records
    keys = keys[:max_records]
    unique, counts = np.unique(keys, return_counts=True)
    found = np.zeros(len(unique), dtype=bool)
    reference_read, reference_truncated = 0, False
    batches = _key_batches(reference_files, max_reference_records + 1) if len(unique) else ()
    for batch in batches:
        if reference_read + len(batch) > max_reference_records:
            reference_truncated = True
            batch = batch[: max_reference_records - reference_read]
        reference_read += len(batch)
        where = np.minimum(np.searchsorted(unique, batch), len(unique) - 1)
        found[where[unique[where] == batch]] = True
        if found.all() or reference_truncated:  # all found: no need to read on
            break
    return Overlap(
        problem=problem.name, split=split, reference=reference, examples=len(keys),
        overlapping=int(counts[found].sum()), reference_read=reference_read,
        split_truncated=split_truncated, reference_truncated=reference_truncated,
        threshold=threshold, by_construction=getattr(problem, "dev_overlap_by_construction",
                                                     None),
    )
