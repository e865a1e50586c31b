"""Tensor2Tensor's Problem conventions, turned into t2t's.

A problem written against Tensor2Tensor describes itself in T2T's shapes:
`hparams(self, defaults, model_hparams)` mutates a bag of defaults,
`example_reading_spec()` returns `(data_fields, data_items_to_decoders)` with
`tf.io.FixedLenFeature` / `VarLenFeature` and slim-style item decoders. This module
holds those shapes (`ProblemHParamsBag`, `Tensor`, `Image`, `preprocess_example_common`)
and their conversion to t2t's (`ProblemHParams`, dict reading specs), so
`t2t.data.problem` only dispatches.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from t2t import features
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


class ProblemHParamsBag:
    """Tensor2Tensor's problem hparams (`problem._default_hparams()`): a mutable bag
    with `add_hparam` / `set_hparam` / `get`; values may be dicts (modality, vocab_size)."""

    def __init__(self, **values: Any):
        self.__dict__.update(values)

    def add_hparam(self, name: str, value: Any) -> None:
        if name in self.__dict__:
            raise ValueError(f"Problem hparam {name!r} already exists (value "
                             f"{self.__dict__[name]!r}); use set_hparam to change it.")
        self.__dict__[name] = value

    def set_hparam(self, name: str, value: Any) -> None:
        if name not in self.__dict__:
            raise ValueError(f"No problem hparam {name!r}; add it with add_hparam first.")
        self.__dict__[name] = value

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__.get(name, default)

    def values(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __contains__(self, name: str) -> bool:
        return name in self.__dict__

    def __repr__(self) -> str:
        return f"ProblemHParamsBag({self.__dict__!r})"


def default_problem_hparams(data_dir: str | None = None) -> ProblemHParamsBag:
    """Tensor2Tensor's `_default_hparams()` (plus data_dir, which T2T read from the
    model hparams)."""
    return ProblemHParamsBag(
        loss_multiplier=1.0,
        batch_size_multiplier=1,
        stop_at_eos=False,
        modality={},
        vocab_size={},
        input_space_id=features.SpaceID.GENERIC,
        target_space_id=features.SpaceID.GENERIC,
        data_dir=data_dir,
    )


def default_model_hparams(data_dir: str | None = None) -> Any:
    """Tensor2Tensor's `problem.default_model_hparams()`: what a problem's `hparams`
    override gets as `model_hparams` when no model's are at hand (t2t describes a
    problem before and apart from the model)."""
    from t2t.hparams.hparams import HParams

    return HParams(max_input_seq_length=0, max_target_seq_length=0, prepend_mode="none",
                   split_to_length=0, data_dir=data_dir)


def fill_bag(bag: Any, hp: features.ProblemHParams) -> None:
    """Writes t2t's description of a problem into a T2T defaults bag (what T2T's base
    classes' `hparams(defaults, model_hparams)` did)."""
    bag.modality = dict(hp.modality)
    bag.vocab_size = dict(hp.vocab_size)
    bag.input_space_id = hp.input_space_id
    bag.target_space_id = hp.target_space_id
    bag.loss_multiplier = hp.loss_multiplier
    bag.batch_size_multiplier = hp.batch_size_multiplier
    bag.stop_at_eos = bool(hp.stop_at_eos)


def from_bag(bag: Any, problem_name: str, *, batch_size_means_tokens: bool,
             image_shape: list[int] | None = None) -> features.ProblemHParams:
    """t2t's ProblemHParams from a T2T bag filled by a problem's `hparams(defaults, _)`."""
    modality = dict(getattr(bag, "modality", {}) or {})
    if not modality:
        old_style = ("input_modality" in bag.__dict__ or "target_modality" in bag.__dict__)
        raise ValueError(
            f"{problem_name}: hparams(defaults, model_hparams) left defaults.modality "
            f"empty{' (input_modality / target_modality are Tensor2Tensor < 1.11)' if old_style else ''}; "
            f"set e.g. defaults.modality = {{'inputs': modalities.ModalityType.SYMBOL, "
            f"'targets': modalities.ModalityType.SYMBOL}} and defaults.vocab_size.")
    vocab_size = dict(getattr(bag, "vocab_size", {}) or {})
    missing = [name for name in modality if name not in vocab_size]
    if missing:
        raise ValueError(f"{problem_name}: defaults.vocab_size has no entry for "
                         f"{missing}; give one per feature in defaults.modality (None "
                         f"where it has no vocabulary).")
    return features.ProblemHParams(
        modality={name: features.t2t_modality(kind, name) for name, kind in modality.items()},
        vocab_size=vocab_size,
        input_space_id=int(getattr(bag, "input_space_id", 0)),
        target_space_id=int(getattr(bag, "target_space_id", 0)),
        loss_multiplier=float(getattr(bag, "loss_multiplier", 1.0)),
        batch_size_multiplier=int(getattr(bag, "batch_size_multiplier", 1)),
        stop_at_eos=bool(getattr(bag, "stop_at_eos", False)),
        batch_size_means_tokens=batch_size_means_tokens,
        image_shape=image_shape,
    )


def is_t2t_hparams_signature(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is T2T's `hparams(self, defaults, model_hparams)` (two positional
    parameters after self) rather than t2t's `hparams(self, data_dir=None)`."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 and positional[0].name != "data_dir"


def hparams_from_t2t_override(problem: Any, t2t_hparams: Callable[..., Any], data_dir: str | None,
                              *, batch_size_means_tokens: bool,
                              image_shape: list[int] | None) -> features.ProblemHParams:
    """T2T's defaults, filled by a problem's `hparams(defaults, model_hparams)`, as
    t2t's ProblemHParams (not yet reversed or copied)."""
    bag = default_problem_hparams(data_dir)
    if t2t_hparams(problem, bag, default_model_hparams(data_dir)) is not None:
        raise ValueError(f"{problem.name}: hparams(defaults, model_hparams) must fill "
                         f"`defaults` and return None (as in Tensor2Tensor).")
    return from_bag(bag, problem.name, batch_size_means_tokens=batch_size_means_tokens,
                    image_shape=image_shape)


def reverse_and_copy(hp: features.ProblemHParams, was_reversed: bool, was_copy: bool,
                     problem_name: str) -> features.ProblemHParams:
    """`hp` with inputs and targets swapped (`_rev`), then the targets made a copy of
    the inputs (T2T's was_copy), in T2T's order."""
    if was_reversed:
        hp = hp.reversed()
    if was_copy:
        if "inputs" not in hp.modality:
            raise ValueError(f"{problem_name}: was_copy copies the inputs to the targets, "
                             f"but the problem has no inputs.")
        hp = dataclasses.replace(
            hp, modality={**hp.modality, "targets": hp.modality["inputs"]},
            vocab_size={**hp.vocab_size, "targets": hp.vocab_size.get("inputs")},
            target_space_id=hp.input_space_id)
    return hp


def adapt_t2t_hparams(own: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a Problem subclass's `hparams(self, defaults, model_hparams)` (T2T's
    signature): t2t's callers pass `data_dir` (or nothing) and get a ProblemHParams
    built from the defaults the override fills (`Problem.t2t_problem_hparams`);
    T2T-style callers (a further subclass's super() call) pass (defaults,
    model_hparams) and get None, as in T2T."""

    @functools.wraps(own)
    def hparams(self, *args, **kwargs):
        if len(args) + len(kwargs) >= 2 or (args and isinstance(args[0], ProblemHParamsBag)):
            return own(self, *args, **kwargs)
        data_dir = args[0] if args else kwargs.get("data_dir")
        return self.t2t_problem_hparams(own, data_dir)

    hparams.t2t_signature = True
    return hparams


def canonical_eval_metrics(own: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a Problem subclass's `eval_metrics` so Tensor2Tensor's names
    (metrics.Metrics: approx_bleu_score, rouge_2_fscore, ...) come out as t2t's."""
    from t2t.utils import metrics as metric_names

    @functools.wraps(own)
    def eval_metrics(self):
        return metric_names.canonical_metric_names(own(self), self.name)

    eval_metrics.canonical = True
    return eval_metrics


@dataclasses.dataclass(frozen=True)
class DatasetOptions:
    """Tensor2Tensor's `Problem.dataset` keywords, as t2t reads them."""

    split: str | None = None
    preprocess: bool = True
    max_records: int = -1
    partition_id: int = 0
    num_partitions: int = 1


# T2T's dataset() keywords that tf.data sizes itself in t2t (AUTOTUNE), accepted and unused.
_TUNED_BY_TF_DATA = ("num_threads", "output_buffer_size", "shuffle_buffer_size")


def dataset_options(kwargs: dict[str, Any], problem_name: str) -> DatasetOptions:
    """DatasetOptions from T2T's keywords to `Problem.dataset`; TypeError naming any
    other keyword."""
    kwargs = dict(kwargs)
    for name in _TUNED_BY_TF_DATA:
        kwargs.pop(name, None)
    if kwargs.get("shard") is not None:
        raise TypeError(f"{problem_name}.dataset(shard=...): read one shard's file with "
                        f"tf.data.TFRecordDataset, or use num_shards / shard_index.")
    kwargs.pop("shard", None)
    split = kwargs.pop("dataset_split", None)
    known = {f.name for f in dataclasses.fields(DatasetOptions)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(f"{problem_name}.dataset() got unexpected keyword(s) {unknown}; "
                        f"t2t's: shuffle_files, hparams, num_shards, shard_index, seed, "
                        f"deterministic, split (T2T's: dataset_split, preprocess, "
                        f"max_records, partition_id, num_partitions).")
    if split == "eval":
        split = "dev"  # T2T's DatasetSplit.EVAL names the dev files
    return DatasetOptions(split=split, **kwargs)


# ------------------------------------------------------------ reading specs
class ItemHandler:
    """Tensor2Tensor's (slim's) item handler: turns parsed features (`keys`) into one
    decoded tensor. Subclass and implement `tensors_to_item(keys_to_tensors)`."""

    def __init__(self, keys: str | list[str]):
        self.keys = [keys] if isinstance(keys, str) else list(keys)

    def tensors_to_item(self, keys_to_tensors: dict[str, Any]) -> Any:
        raise NotImplementedError


def _dense(value: Any, default_value: Any = 0) -> Any:
    if isinstance(value, tf.SparseTensor):
        return tf.sparse.to_dense(value, default_value=default_value)
    if isinstance(value, tf.RaggedTensor):
        return value.to_tensor(default_value=default_value)
    return value


class Tensor(ItemHandler):
    """slim's `tfexample_decoder.Tensor(tensor_key, shape_keys=None, shape=None,
    default_value=0)`: the feature as a dense tensor (a VarLenFeature densified),
    reshaped to `shape` (or to the values of the `shape_keys` features)."""

    def __init__(self, tensor_key: str, shape_keys: str | list[str] | None = None,
                 shape: list[int] | None = None, default_value: Any = 0):
        if shape_keys and shape is not None:
            raise ValueError("give shape_keys or shape, not both.")
        self._tensor_key = tensor_key
        self._shape_keys = [shape_keys] if isinstance(shape_keys, str) else list(shape_keys or [])
        self._shape = shape
        self._default_value = default_value
        super().__init__([tensor_key, *self._shape_keys])

    def tensors_to_item(self, keys_to_tensors):
        tensor = _dense(keys_to_tensors[self._tensor_key], self._default_value)
        if self._shape_keys:
            dims = [tf.reshape(_dense(keys_to_tensors[k]), [-1]) for k in self._shape_keys]
            return tf.reshape(tensor, tf.cast(tf.concat(dims, 0), tf.int32))
        if self._shape is not None:
            return tf.reshape(tensor, self._shape)
        return tensor


class Image(ItemHandler):
    """slim's `tfexample_decoder.Image(image_key="image/encoded",
    format_key="image/format", shape=None, channels=3, dtype=tf.uint8)`: decodes a PNG,
    JPEG, GIF or BMP string into uint8 [H, W, channels]."""

    def __init__(self, image_key: str | None = None, format_key: str | None = None,
                 shape: list[int] | None = None, channels: int = 3, dtype: Any = None,
                 repeated: bool = False, dct_method: str = ""):
        if repeated:
            raise ValueError("Image(repeated=True) (several images per example) is not "
                             "supported in t2t; store one image per feature.")
        self._image_key = image_key or "image/encoded"
        self._format_key = format_key or "image/format"
        self._shape = shape
        self._channels = channels
        self._dtype = dtype
        super().__init__([self._image_key, self._format_key])

    def tensors_to_item(self, keys_to_tensors):
        encoded = tf.reshape(_dense(keys_to_tensors[self._image_key], b""), [])
        image = tf.io.decode_image(encoded, channels=self._channels, expand_animations=False)
        if self._dtype is not None and self._dtype != tf.uint8:
            image = tf.cast(image, self._dtype)
        if self._shape is not None:
            image = tf.reshape(image, self._shape)
        else:
            image.set_shape([None, None, self._channels])
        return image


class _SlimDecoders:
    """What `contrib.slim().tfexample_decoder` offered a T2T problem."""

    ItemHandler = ItemHandler
    Tensor = Tensor
    Image = Image


class _Slim:
    tfexample_decoder = _SlimDecoders


def slim() -> _Slim:
    """Tensor2Tensor's `contrib.slim()` (only `tfexample_decoder`'s item handlers)."""
    return _Slim()


def _to_batch_spec(spec: Any) -> Any:
    """A T2T data field spec as parse_example reads it in batches: VarLenFeature ->
    RaggedFeature (dense per example after unbatch)."""
    if isinstance(spec, tf.io.VarLenFeature):
        return tf.io.RaggedFeature(spec.dtype)
    return spec


def split_reading_spec(spec: Any, problem_name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(data_fields for parse_example, item decoders or None) from either reading spec:
    t2t's dict, or T2T's (data_fields, data_items_to_decoders) tuple."""
    if isinstance(spec, dict):
        return spec, None
    if not (isinstance(spec, tuple | list) and len(spec) == 2 and isinstance(spec[0], dict)):
        raise ValueError(
            f"{problem_name}: example_reading_spec() returned {type(spec).__name__}; return "
            f"a dict of feature specs, or Tensor2Tensor's (data_fields, "
            f"data_items_to_decoders) tuple.")
    data_fields, decoders = spec
    if decoders is not None:
        for name, handler in decoders.items():
            if not hasattr(handler, "tensors_to_item") or not hasattr(handler, "keys"):
                raise ValueError(
                    f"{problem_name}: data_items_to_decoders[{name!r}] is "
                    f"{type(handler).__name__}, not an item handler; use "
                    f"contrib.slim().tfexample_decoder.Tensor / Image (t2t.data.t2t_style).")
    return {name: _to_batch_spec(s) for name, s in data_fields.items()}, decoders


def apply_item_decoders(parsed: dict[str, Any], decoders: dict[str, Any] | None) -> dict[str, Any]:
    """One example's features: each decoder's item, or every field densified (T2T's
    default `Tensor(field)` per field)."""
    if decoders is None:
        return {name: _dense(value) for name, value in parsed.items()}
    return {name: handler.tensors_to_item({k: parsed[k] for k in handler.keys if k in parsed})
            for name, handler in decoders.items()}


def cast_int64(example: dict[str, Any]) -> dict[str, Any]:
    """int64 features as int32 (what t2t's models and pipeline take)."""
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}


def preprocess_example_common(example: dict[str, Any], mode: str, hparams: Any) -> dict[str, Any]:
    """Tensor2Tensor's `problem.preprocess_example_common`: truncates inputs/targets to
    hparams.max_input_seq_length / max_target_seq_length when those are > 0."""
    max_inputs = getattr(hparams, "max_input_seq_length", 0) or 0
    max_targets = getattr(hparams, "max_target_seq_length", 0) or 0
    if "inputs" in example and max_inputs > 0:
        example["inputs"] = example["inputs"][:max_inputs]
    if "targets" in example and max_targets > 0:
        example["targets"] = example["targets"][:max_targets]
    return example


def flat_preprocess(examples: Any, preprocess: Callable[[Any], Any], **map_kwargs: Any) -> Any:
    """`examples.map(preprocess)`, or a flat_map where `preprocess` returns a Dataset
    per example (Tensor2Tensor allowed one example to become several)."""

    class _ReturnsDataset(Exception):
        pass

    def per_example(example):
        out = preprocess(example)
        if isinstance(out, tf.data.Dataset):
            raise _ReturnsDataset
        return out

    try:
        return examples.map(per_example, **map_kwargs)
    except _ReturnsDataset:
        return examples.flat_map(preprocess)
