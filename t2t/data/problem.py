"""The Problem base class: one data set, from download to a `tf.data` pipeline.

A Problem writes sharded TFRecord files of `tf.train.Example`s into `data_dir`
(`generate_data`) and reads them back as a `tf.data.Dataset` of feature dicts
(`dataset`). Its `hparams()` tell a model what each feature is (modality, vocabulary
size) so that problems and models never import each other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging

from t2t import registry
from t2t.data import t2t_style
from t2t.data.generation import download, generator_utils
from t2t.data.t2t_style import preprocess_example_common  # noqa: F401  (T2T's name)
from t2t.features import (  # noqa: F401  (re-exported: problem.TRAIN, problem.Modality, ...)
    EVAL,
    MODES,
    PREDICT,
    TRAIN,
    Modality,
    ProblemHParams,
    SpaceID,
)
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

# Modes, modalities, space ids and ProblemHParams live in t2t.features (shared with the
# models, which never import problems); they are re-exported here under their usual names.
# Split names used in file names.
TRAIN_SPLIT = "train"
DEV_SPLIT = "dev"
TEST_SPLIT = "test"


class DatasetSplit:
    """Tensor2Tensor's split names, as t2t names the split files (T2T's EVAL, "eval",
    was written to the "dev" files too)."""

    TRAIN = TRAIN_SPLIT
    EVAL = DEV_SPLIT
    TEST = TEST_SPLIT


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


_DEFAULT_SPLITS = (SplitSpec(TRAIN_SPLIT, 10), SplitSpec(DEV_SPLIT, 1))
_SPLIT_ALIASES = {"eval": DEV_SPLIT}  # T2T's DatasetSplit.EVAL value


def split_specs(dataset_splits: Any, problem_name: str) -> tuple[SplitSpec, ...]:
    """SplitSpecs from Tensor2Tensor's `dataset_splits`: [{"split": "train", "shards": 9},
    {"split": "dev", "shards": 1}] ("eval" is read as "dev")."""
    fix = ('return e.g. [{"split": problem.DatasetSplit.TRAIN, "shards": 9}, '
           '{"split": problem.DatasetSplit.EVAL, "shards": 1}]')
    if isinstance(dataset_splits, (str, bytes, dict)) or not dataset_splits:
        raise ValueError(f"{problem_name}: dataset_splits {dataset_splits!r} is not a "
                         f"non-empty list of splits; {fix}.")
    specs: list[SplitSpec] = []
    for entry in dataset_splits:
        if isinstance(entry, SplitSpec):
            entry = {"split": entry.name, "shards": entry.shards}
        if not isinstance(entry, dict) or set(entry) != {"split", "shards"}:
            raise ValueError(f"{problem_name}: dataset_splits entry {entry!r} must be a dict "
                             f"with the keys 'split' and 'shards'; {fix}.")
        name, shards = entry["split"], entry["shards"]
        if not isinstance(name, str) or not name or "-" in name:
            raise ValueError(f"{problem_name}: split name {name!r} must be a non-empty "
                             f"string without '-' (it is part of the file names).")
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ValueError(f"{problem_name}: split {name!r} has shards={shards!r}; give "
                             f"an int >= 1.")
        name = _SPLIT_ALIASES.get(name, name)
        if name in [spec.name for spec in specs]:
            raise ValueError(f"{problem_name}: split {name!r} is listed twice in "
                             f"dataset_splits; list each split once.")
        specs.append(SplitSpec(name, shards))
    return tuple(specs)


def accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether `fn` takes the keyword argument `name` (declared, or through **kwargs)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def call_with_mirror(fn: Callable[..., Any], *args: Any, mirror: str | None) -> Any:
    """`fn(*args, mirror=mirror)` if `fn` declares `mirror`, else `fn(*args)`: the
    methods a user overrides keep Tensor2Tensor's signatures (`generate_samples(self,
    data_dir, tmp_dir, dataset_split)`) and read the mirror from `self.data_mirror`."""
    if accepts_keyword(fn, "mirror"):
        return fn(*args, mirror=mirror)
    return fn(*args)


def _overrides(cls: type, name: str) -> bool:
    return getattr(cls, name) is not Problem.__dict__[name]


def _adapt_t2t_generate_data(generate: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a subclass's `generate_data(self, data_dir, tmp_dir, task_id=-1)` (T2T's
    signature) so that t2t-datagen and t2t-trainer --generate_data can call it."""

    @functools.wraps(generate)
    def generate_data(self, data_dir, tmp_dir, *args, mirror=None, max_cases=None,
                      num_shards=None, progress=True, **kwargs):
        del progress  # the override writes as it pleases
        ignored = [f"{k}={v}" for k, v in (("max_cases", max_cases), ("num_shards", num_shards))
                   if v is not None]
        if ignored:
            logging.warning("%s defines generate_data(data_dir, tmp_dir, ...) itself "
                            "(Tensor2Tensor's signature): %s do not apply to it.",
                            self.name, ", ".join(ignored))
        os.makedirs(data_dir, exist_ok=True)
        os.makedirs(tmp_dir, exist_ok=True)
        with self.using_mirror(mirror):
            generate(self, data_dir, tmp_dir, *args, **kwargs)
        return self.written_summary(data_dir)

    return generate_data


def _swap_inputs_targets(example: dict[str, Any]) -> dict[str, Any]:
    example = dict(example)
    if "inputs" in example and "targets" in example:
        example["inputs"], example["targets"] = example["targets"], example["inputs"]
    return example


class Problem:
    """Base class of all problems. Subclasses implement `generate_examples` (or use a
    ready-made subclass such as Text2TextProblem) and describe their features."""

    # Subclasses may override these class attributes (or define them as properties).
    batch_size_means_tokens: bool = True
    # The features that carry sequences (used for length filtering and bucketing).
    sequence_features: Sequence[str] = ("inputs", "targets")
    # True: generate_examples is called once per split. False (Tensor2Tensor's way for a
    # corpus without its own splits): called once, with split "train", and its examples
    # are dealt to the splits in proportion to their shard counts.
    is_generate_per_split: bool = True
    # Why dev examples repeat train ones by construction (e.g. random short sequences
    # over a small alphabet), or None: t2t-datagen's overlap report then states the
    # count with this reason instead of warning of a leak.
    dev_overlap_by_construction: str | None = None
    # The --data_mirror of the generation under way (None: $T2T_DATA_MIRROR, then the
    # canonical URLs); methods with T2T's signatures pass it to download.fetch.
    data_mirror: str | None = None
    # Whether t2t-trainer saves the input position (the shuffle buffers' examples) with
    # each checkpoint for an exact resume. False where those buffers are too large to
    # save every time (audio: gigabytes); a resumed run then reads in a new order.
    checkpoint_input_position: bool = True

    def __init__(self, was_reversed: bool = False, was_copy: bool = False):
        """`was_reversed`: inputs and targets swapped (the `_rev` names). `was_copy`
        (Tensor2Tensor's): the targets are a copy of the inputs (applied after the
        swap, so both together give a targets -> targets task)."""
        self._was_reversed = was_reversed
        self._was_copy = was_copy
        self._encoders: dict[str, Any] | None = None
        self._encoders_dir: str | None = None

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("generate_data")
        if callable(own) and not accepts_keyword(own, "mirror"):
            cls.generate_data = _adapt_t2t_generate_data(own)
        own = cls.__dict__.get("hparams")
        if (callable(own) and not getattr(own, "t2t_signature", False)
                and t2t_style.is_t2t_hparams_signature(own)):
            cls.hparams = t2t_style.adapt_t2t_hparams(own)
        own = cls.__dict__.get("eval_metrics")
        if callable(own) and not getattr(own, "canonical", False):
            cls.eval_metrics = t2t_style.canonical_eval_metrics(own)

    # ---------------------------------------------------------------- splits
    @property
    def splits(self) -> Sequence[SplitSpec]:
        """The splits written, with their shard counts: from `dataset_splits` when a
        subclass defines it (Tensor2Tensor's way), else train 10 : dev 1."""
        if _overrides(type(self), "dataset_splits"):
            return split_specs(self.dataset_splits, self.name)
        return _DEFAULT_SPLITS

    @property
    def dataset_splits(self) -> list[dict[str, Any]]:
        """Tensor2Tensor's form of `splits`: [{"split": "train", "shards": 10}, ...]."""
        return [{"split": spec.name, "shards": spec.shards} for spec in self.splits]

    # ---------------------------------------------------------------- naming
    @property
    def name(self) -> str:
        """The registered name, with `_rev` when inputs and targets are swapped and
        `_copy` when the targets copy the inputs."""
        return (self.base_name + (registry.REVERSE_SUFFIX if self._was_reversed else "")
                + (registry.COPY_SUFFIX if self._was_copy else ""))

    @property
    def base_name(self) -> str:
        return type(self).__dict__.get("registered_name") or registry.default_name(type(self))

    @property
    def was_reversed(self) -> bool:
        return self._was_reversed

    @property
    def was_copy(self) -> bool:
        return self._was_copy

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

    @contextlib.contextmanager
    def using_mirror(self, mirror: str | None) -> Iterator[None]:
        """Sets `self.data_mirror` to `mirror` (when given) for the duration."""
        if mirror is None:
            yield
            return
        previous = self.__dict__.get("data_mirror")
        self.data_mirror = mirror
        try:
            with download.active_mirror(mirror):  # generator_utils.maybe_download's too
                yield
        finally:
            if previous is None:
                self.__dict__.pop("data_mirror", None)
            else:
                self.data_mirror = previous

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
        skips the shards (and splits) already written. `num_shards` replaces the train
        split's shard count (with is_generate_per_split False, the proportions dealt
        stay those of `splits`).
        """
        if self._was_reversed:
            logging.info("%s shares the data of %s.", self.name, self.base_name)
        os.makedirs(data_dir, exist_ok=True)
        os.makedirs(tmp_dir, exist_ok=True)
        with self.using_mirror(mirror):
            call_with_mirror(self.prepare, data_dir, tmp_dir, mirror=self.data_mirror)
            specs = list(self.splits)
            paths = {
                spec.name: generator_utils.shard_paths(
                    data_dir, self.dataset_filename(), spec.name,
                    num_shards if (num_shards and spec.name == TRAIN_SPLIT) else spec.shards)
                for spec in specs
            }
            if not self.is_generate_per_split:
                return self._generate_dealt(data_dir, tmp_dir, specs, paths, max_cases, progress)
            summaries = {}
            for spec in specs:
                total = self.num_examples(spec.name)
                if max_cases is not None:
                    total = min(total, max_cases) if total is not None else None
                summaries[spec.name] = generator_utils.write_shards(
                    lambda s=spec.name: self._examples(data_dir, tmp_dir, s),
                    paths[spec.name],
                    total=total,
                    max_cases=max_cases,
                    label=f"{self.dataset_filename()} {spec.name}",
                    progress=progress,
                )
        return summaries

    def _examples(self, data_dir: str, tmp_dir: str, split: str) -> Iterator[dict[str, Any]]:
        return call_with_mirror(self.generate_examples, data_dir, tmp_dir, split,
                                mirror=self.data_mirror)

    def _generate_dealt(self, data_dir, tmp_dir, specs, paths, max_cases, progress):
        """is_generate_per_split False: one pass (split "train") dealt to every split."""
        shares = " : ".join(f"{spec.name} {spec.shards}" for spec in specs)
        logging.info("%s: one pass over the examples (split %r), dealt %s "
                     "(is_generate_per_split = False).", self.name, TRAIN_SPLIT, shares)
        return generator_utils.deal_to_splits(
            lambda: self._examples(data_dir, tmp_dir, TRAIN_SPLIT),
            paths,
            {spec.name: spec.shards for spec in specs},
            max_cases=max_cases,
            label=f"{self.dataset_filename()} {'+'.join(paths)}",
            progress=progress,
        )

    def written_summary(self, data_dir: str) -> dict[str, generator_utils.SplitSummary]:
        """What the shards of each split in data_dir hold (counts every record)."""
        summaries = {}
        for spec in self.splits:
            pattern = os.path.join(data_dir, f"{self.dataset_filename()}-{spec.name}-*")
            files = sorted(f for f in glob.glob(pattern) if generator_utils.is_shard_name(f))
            summaries[spec.name] = generator_utils.SplitSummary(
                examples=generator_utils.count_records(files), shards_written=len(files),
                bytes=sum(os.path.getsize(f) for f in files))
        return summaries

    # Tensor2Tensor's file-name helpers, for a generate_data written against T2T. t2t
    # writes final names directly (`shuffled` is accepted and changes nothing).
    def training_filepaths(self, data_dir: str, num_shards: int, shuffled: bool = True) -> list[str]:
        return generator_utils.shard_paths(data_dir, self.dataset_filename(), TRAIN_SPLIT, num_shards)

    def dev_filepaths(self, data_dir: str, num_shards: int, shuffled: bool = True) -> list[str]:
        return generator_utils.shard_paths(data_dir, self.dataset_filename(), DEV_SPLIT, num_shards)

    def test_filepaths(self, data_dir: str, num_shards: int, shuffled: bool = True) -> list[str]:
        return generator_utils.shard_paths(data_dir, self.dataset_filename(), TEST_SPLIT, num_shards)

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

    def hparams(self, data_dir: Any = None, model_hparams: Any = None) -> ProblemHParams | None:
        """Modalities and vocabulary sizes of the features, swapped for `_rev`.

        Called Tensor2Tensor's way, `hparams(defaults, model_hparams)` (from an
        override's super() call), it fills `defaults` with the same description and
        returns None.
        """
        if isinstance(data_dir, t2t_style.ProblemHParamsBag) or model_hparams is not None:
            t2t_style.fill_bag(data_dir, self.problem_hparams(getattr(data_dir, "data_dir", None)))
            return None
        return self.adjusted_hparams(self.problem_hparams(data_dir))

    def get_hparams(self, model_hparams: Any = None) -> ProblemHParams:
        """Tensor2Tensor's name: `hparams(model_hparams.data_dir)`."""
        return self.hparams(getattr(model_hparams, "data_dir", None))

    def get_feature_encoders(self, data_dir: str | None = None) -> dict[str, Any]:
        """Tensor2Tensor's: `feature_encoders`, kept in `self._encoders` (which T2T
        problems read in their `hparams`)."""
        self._encoders, self._encoders_dir = self.feature_encoders(data_dir), data_dir
        return self._encoders

    @property
    def has_inputs(self) -> bool:
        """Whether the problem has an "inputs" feature (Tensor2Tensor's property)."""
        fields, decoders = t2t_style.split_reading_spec(self.example_reading_spec(), self.name)
        return "inputs" in (decoders if decoders is not None else fields)

    def adjusted_hparams(self, hp: ProblemHParams) -> ProblemHParams:
        """`hp` reversed for `_rev`, with the targets copied from the inputs for was_copy."""
        return t2t_style.reverse_and_copy(hp, self._was_reversed, self._was_copy, self.name)

    def t2t_problem_hparams(self, t2t_hparams: Callable[..., Any], data_dir: str | None) -> ProblemHParams:
        """ProblemHParams from a T2T-signature `hparams(defaults, model_hparams)`."""
        self.get_feature_encoders(data_dir)  # T2T built the encoders first (self._encoders)
        hp = t2t_style.hparams_from_t2t_override(
            self, t2t_hparams, data_dir, batch_size_means_tokens=self.batch_size_means_tokens,
            image_shape=getattr(self, "image_shape", None))
        return self.adjusted_hparams(hp)

    def problem_hparams(self, data_dir: str | None) -> ProblemHParams:
        """The problem's own (unreversed) hparams. Subclasses override."""
        raise NotImplementedError(f"Problem {self.name!r} must define problem_hparams().")

    def eval_metrics(self) -> list[str]:
        """Names of the metrics the trainer computes on the dev split."""
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity"]

    def example_reading_spec(self) -> Any:
        """How the stored Examples are parsed: Tensor2Tensor's `(data_fields,
        data_items_to_decoders)` (feature name -> tf.io spec, and None or item decoders),
        so that a subclass extends it T2T's way; a plain dict of specs works too."""
        return {
            "inputs": tf.io.RaggedFeature(tf.int64),
            "targets": tf.io.RaggedFeature(tf.int64),
        }, None

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
        """Parses a batch of serialized Examples into int32/float features (ragged).

        With Tensor2Tensor's `(data_fields, data_items_to_decoders)` reading spec this
        parses the data fields; `decode_example` then applies the item decoders.
        """
        fields, _ = t2t_style.split_reading_spec(self.example_reading_spec(), self.name)
        return t2t_style.cast_int64(tf.io.parse_example(serialized, fields))

    def decode_example(self, parsed: dict[str, Any]) -> dict[str, Any]:
        """One parsed example's features: Tensor2Tensor's item decoders applied (a
        decoded image, a reshaped tensor); unchanged for a dict reading spec."""
        _, decoders = t2t_style.split_reading_spec(self.example_reading_spec(), self.name)
        if decoders is None:  # parsed in batches, each feature is dense after unbatch
            return parsed
        return t2t_style.cast_int64(t2t_style.apply_item_decoders(parsed, decoders))

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
        **t2t_options: Any,
    ) -> tf.data.Dataset:
        """A dataset of feature dicts for `mode` ("train" | "eval" | "infer").

        Each element maps a feature name to an unbatched tensor: token ids int32 [length],
        class labels int32 [1], images uint8 [H, W, C] after preprocess_example.
        Files are split across `num_shards` readers (one per input pipeline) when there
        are enough files, else records are. `split` reads another split than the
        mode's own (e.g. the train split without training-time augmentation).
        Tensor2Tensor's keywords work too (`dataset_split`, `preprocess`, `max_records`,
        `partition_id` / `num_partitions`; its thread and buffer sizes are tf.data's).
        """
        options = t2t_style.dataset_options(t2t_options, self.name)  # T2T's keywords
        split = split or options.split or self.split_for_mode(mode)
        if options.num_partitions > 1:
            num_shards, shard_index = options.num_partitions, options.partition_id
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
        if t2t_style.split_reading_spec(self.example_reading_spec(), self.name)[1] is not None:
            examples = examples.map(self.decode_example, num_parallel_calls=autotune,
                                    deterministic=deterministic)  # T2T's item decoders
        if self._was_reversed:
            examples = examples.map(_swap_inputs_targets)
        if self._was_copy:
            examples = examples.map(lambda ex: {**ex, "targets": ex["inputs"]})
        if options.preprocess:
            examples = t2t_style.flat_preprocess(
                examples, lambda ex: self.preprocess_example(ex, mode, hparams),
                num_parallel_calls=autotune, deterministic=deterministic)
        return examples.take(options.max_records)
