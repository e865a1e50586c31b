"""The Problem base class: one data set, from download to a `tf.data` pipeline.

A Problem writes sharded TFRecord files of `tf.train.Example`s into `data_dir`
(`generate_data`) and reads them back as a `tf.data.Dataset` of feature dicts
(`dataset`). Its `hparams()` tell a model what each feature is (modality, vocabulary
size) so that problems and models never import each other.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

from absl import logging

from t2t import registry
from t2t.features import (  # noqa: F401  (re-exported: problem.TRAIN, problem.Modality, ...)
    EVAL,
    MODES,
    PREDICT,
    TRAIN,
    Modality,
    ProblemHParams,
    SpaceID,
)
from t2t.problems import generator_utils
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

# Modes, modalities, space ids and ProblemHParams live in t2t.features (shared with the
# models, which never import problems); they are re-exported here under their usual names.
# Split names used in file names.
TRAIN_SPLIT = "train"
DEV_SPLIT = "dev"
TEST_SPLIT = "test"


class DataMissingError(FileNotFoundError):
    """The prepared data a problem needs is not in data_dir (or is incomplete)."""


class DamagedDataError(DataMissingError):
    """Shards that exist but cannot be read (truncated or corrupted records)."""


class UnknownSplitError(registry.UnknownNameError, ValueError):
    """A split name the problem does not have (not one of its `splits`)."""


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """A data split and how many TFRecord shards it is written to."""

    name: str
    shards: int


def _swap_inputs_targets(example: dict[str, Any]) -> dict[str, Any]:
    example = dict(example)
    if "inputs" in example and "targets" in example:
        example["inputs"], example["targets"] = example["targets"], example["inputs"]
    return example


class Problem:
    """Base class of all problems. Subclasses implement `generate_examples` (or use a
    ready-made subclass such as Text2TextProblem) and describe their features."""

    # Subclasses may override these class attributes.
    splits: Sequence[SplitSpec] = (SplitSpec(TRAIN_SPLIT, 10), SplitSpec(DEV_SPLIT, 1))
    batch_size_means_tokens: bool = True
    # The features that carry sequences (used for length filtering and bucketing).
    sequence_features: Sequence[str] = ("inputs", "targets")

    def __init__(self, was_reversed: bool = False):
        self._was_reversed = was_reversed
        self._encoders: dict[str, Any] | None = None
        self._encoders_dir: str | None = None

    # ---------------------------------------------------------------- naming
    @property
    def name(self) -> str:
        """The registered name, with `_rev` when inputs and targets are swapped."""
        return self.base_name + (registry.REVERSE_SUFFIX if self._was_reversed else "")

    @property
    def base_name(self) -> str:
        return type(self).__dict__.get("registered_name") or registry.default_name(type(self))

    @property
    def was_reversed(self) -> bool:
        return self._was_reversed

    def dataset_filename(self) -> str:
        """Base of the data file names; `_rev` problems share their base's files."""
        return self.base_name

    # ------------------------------------------------------------ generation
    def generate_examples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yields encoded examples (dicts of int/float lists or bytes) for `split`."""
        raise NotImplementedError(
            f"Problem {self.name!r} does not generate data: implement generate_examples "
            f"(or subclass Text2TextProblem, Image2ClassProblem, ...)."
        )

    def num_examples(self, split: str) -> int | None:
        """The exact number of examples of `split` if known before generating (else None).

        When known, shards are filled one after another, so a re-run after a crash skips
        the shards already finished; otherwise examples are dealt round-robin.
        """
        return None

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Downloads and builds what every split needs (vocabularies), before writing."""

    def generate_data(
        self,
        data_dir: str,
        tmp_dir: str,
        *,
        mirror: str | None = None,
        max_cases: int | None = None,
        num_shards: int | None = None,
        progress: bool = True,
    ) -> dict[str, generator_utils.SplitSummary]:
        """Writes every split as sharded TFRecord files in `data_dir`; returns a summary.

        Shards are written to temporary names and renamed when complete, so an
        interrupted run never leaves a partial shard that reads as complete; a re-run
        skips the shards (and splits) already written.
        """
        if self._was_reversed:
            logging.info("%s shares the data of %s.", self.name, self.base_name)
        os.makedirs(data_dir, exist_ok=True)
        os.makedirs(tmp_dir, exist_ok=True)
        self.prepare(data_dir, tmp_dir, mirror=mirror)
        summaries = {}
        for split in self.splits:
            shards = num_shards if (num_shards and split.name == TRAIN_SPLIT) else split.shards
            paths = generator_utils.shard_paths(data_dir, self.dataset_filename(), split.name, shards)
            total = self.num_examples(split.name)
            if max_cases is not None:
                total = min(total, max_cases) if total is not None else None
            summaries[split.name] = generator_utils.write_shards(
                lambda s=split.name: self.generate_examples(data_dir, tmp_dir, s, mirror=mirror),
                paths,
                total=total,
                max_cases=max_cases,
                label=f"{self.dataset_filename()} {split.name}",
                progress=progress,
            )
        return summaries

    # --------------------------------------------------------------- features
    def feature_encoders(self, data_dir: str | None) -> dict[str, Any]:
        """Feature name -> TextEncoder (or ClassLabelEncoder), swapped for `_rev`."""
        if self._encoders is None or self._encoders_dir != data_dir:
            encoders = self.build_encoders(data_dir)
            if self._was_reversed:
                encoders = _swap_inputs_targets(encoders)
            self._encoders, self._encoders_dir = encoders, data_dir
        return self._encoders

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        """Feature name -> encoder, in the problem's own (unreversed) direction."""
        return {}

    def hparams(self, data_dir: str | None = None) -> ProblemHParams:
        """Modalities and vocabulary sizes of the features, swapped for `_rev`."""
        hp = self.problem_hparams(data_dir)
        return hp.reversed() if self._was_reversed else hp

    def problem_hparams(self, data_dir: str | None) -> ProblemHParams:
        """The problem's own (unreversed) hparams. Subclasses override."""
        raise NotImplementedError(f"Problem {self.name!r} must define problem_hparams().")

    def eval_metrics(self) -> list[str]:
        """Names of the metrics the trainer computes on the dev split."""
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity"]

    def example_reading_spec(self) -> dict[str, Any]:
        """Feature name -> tf.io feature spec used to parse the stored Examples."""
        return {
            "inputs": tf.io.RaggedFeature(tf.int64),
            "targets": tf.io.RaggedFeature(tf.int64),
        }

    def preprocess_example(self, example: dict[str, Any], mode: str, model_hparams: Any) -> dict[str, Any]:
        """Per-example transformation (e.g. image decoding, augmentation in TRAIN)."""
        return example

    def max_length(self, model_hparams: Any) -> int:
        """Longest sequence kept (0 = no limit): hparams.max_length or batch_size."""
        if model_hparams is None:
            return 0
        return model_hparams.max_length or model_hparams.batch_size

    # -------------------------------------------------------------- reading
    def check_split(self, split: str) -> str:
        """`split` if it is one of the problem's `splits`, else UnknownSplitError."""
        names = [spec.name for spec in self.splits]
        if split not in names:
            raise UnknownSplitError(
                f"Problem {self.name!r} has no split {split!r}: its splits are "
                f"{', '.join(names)}."
            )
        return split

    def split_for_mode(self, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}: use one of {MODES}.")
        return TRAIN_SPLIT if mode == TRAIN else DEV_SPLIT

    def data_files(self, data_dir: str, split: str) -> list[str]:
        """The complete shard files of `split`; DataMissingError if absent or partial."""
        pattern = os.path.join(data_dir, f"{self.dataset_filename()}-{split}-*")
        files = sorted(f for f in glob.glob(pattern) if generator_utils.is_shard_name(f))
        hint = (
            f"Run: t2t-datagen --problem={self.name} --data_dir={data_dir} "
            f"(or t2t-trainer --generate_data ...)."
        )
        if not files:
            known = sorted({os.path.basename(f).split("-")[0] for f in glob.glob(os.path.join(data_dir, "*-*-*-of-*"))})
            have = f" It holds data of: {', '.join(known)}." if known else ""
            raise DataMissingError(
                f"No {split} data for problem {self.name!r} in {data_dir!r} "
                f"(looked for {os.path.basename(pattern)}).{have} {hint}"
            )
        missing = generator_utils.missing_shards(files)
        if missing:
            raise DataMissingError(
                f"The {split} data of {self.name!r} in {data_dir!r} is incomplete: missing "
                f"{', '.join(os.path.basename(m) for m in missing[:5])}"
                f"{' ...' if len(missing) > 5 else ''}. {hint}"
            )
        return files

    def damaged_data_message(self, data_dir: str, error: Exception) -> str:
        """Explains a TFRecord read error (DataLossError): which shards are damaged, the fix.

        Reads every record of each split's shards (a full scan: call it after a read
        failed, not on the normal path) to name the damaged files.
        """
        damaged = []
        for spec in self.splits:
            try:
                files = self.data_files(data_dir, spec.name)
            except DataMissingError:
                continue
            for path in files:
                try:
                    for _ in tf.data.TFRecordDataset(path):
                        pass
                except tf.errors.OpError as e:
                    damaged.append(f"{path} ({e.message.splitlines()[0][:120]})")
        if not damaged:
            return f"Reading the data of {self.name!r} in {data_dir!r} failed: {error}"
        return (
            f"Damaged data of {self.name!r}: {'; '.join(damaged)}. Delete the damaged "
            f"shard(s) and run t2t-datagen --problem={self.name} --data_dir={data_dir} "
            f"to rewrite them (complete shards are kept)."
        )

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        """Parses a batch of serialized Examples into int32/float features (ragged)."""
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}

    def dataset(
        self,
        mode: str,
        data_dir: str,
        *,
        shuffle_files: bool | None = None,
        hparams: Any = None,
        num_shards: int = 1,
        shard_index: int = 0,
        seed: int | None = None,
        deterministic: bool = False,
        parse_batch_size: int = 256,
        num_parallel_reads: int | None = None,
        split: str | None = None,
    ) -> tf.data.Dataset:
        """A dataset of feature dicts for `mode` ("train" | "eval" | "infer").

        Each element maps a feature name to an unbatched tensor: token ids int32 [length],
        class labels int32 [1], images uint8 [H, W, C] after preprocess_example.
        Files are split across `num_shards` readers (one per input pipeline) when there
        are enough files, else records are. `split` reads another split than the
        mode's own (e.g. the train split without training-time augmentation).
        """
        split = split or self.split_for_mode(mode)
        files = self.data_files(data_dir, split)
        if shuffle_files is None:
            shuffle_files = mode == TRAIN
        autotune = tf.data.AUTOTUNE
        files_ds = tf.data.Dataset.from_tensor_slices(files)
        shard_records = num_shards > 1 and len(files) < num_shards
        if num_shards > 1 and not shard_records:
            files_ds = files_ds.shard(num_shards, shard_index)
        if shuffle_files:
            files_ds = files_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        records = files_ds.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(files), 8),
            num_parallel_calls=num_parallel_reads or autotune,
            deterministic=deterministic,
        )
        if shard_records:
            records = records.shard(num_shards, shard_index)
        # Parsing a batch of records at once is several times faster than one by one.
        examples = records.batch(parse_batch_size).map(
            self.decode_examples, num_parallel_calls=autotune, deterministic=deterministic
        ).unbatch()
        if self._was_reversed:
            examples = examples.map(_swap_inputs_targets)
        return examples.map(
            lambda ex: self.preprocess_example(ex, mode, hparams),
            num_parallel_calls=autotune,
            deterministic=deterministic,
        )
