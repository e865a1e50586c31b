"""`tfds_*` problems: any TensorFlow Datasets data set as a t2t Problem.

`tfds_problem("tfds_imdb_reviews")` returns a Problem reading the TFDS data set
`imdb_reviews`; the registry calls it for any `tfds_` name that is not registered, so
no data set needs registering by hand. Names: `tfds_<dataset>` or
`tfds_<dataset>__<config>` (`tfds_glue__sst2` -> `glue/sst2`; `-` and `.` of config
names are written `_`: `tfds_wmt14_translate__de_en` -> `wmt14_translate/de-en`).

Features -> inputs/targets, chosen in this order:
  1. the problem's `feature_map` ({"inputs": "text", "targets": "label"}), else the
     entry of KNOWN_FEATURE_MAPS for the data set;
  2. the data set's `supervised_keys` (input, target) when both are usable features;
  3. exactly one ClassLabel feature as targets and exactly one Image (else exactly
     one Text) feature as inputs.
Anything else raises TfdsMappingError listing the features and how to map them. A
`feature_map` may name only "targets" (language modelling on one text feature).

Modalities by feature type: Text -> symbol, with one SentencePiece vocabulary
(`approx_vocab_size` pieces, an upper bound) trained on at most
`max_samples_for_vocab` training examples of all mapped text features and saved in
data_dir (`vocab.<problem>.<size>.model`); every sequence ends with EOS.
ClassLabel -> class_label (its names become the ClassLabelEncoder's labels).
Image (uint8) -> image, stored PNG-encoded (inputs under "image/encoded", as
ImageProblem stores them). The chosen mapping, class names and splits are written to
data_dir/<problem>.tfds.json, which reading uses (no TFDS import to train).

Data: `generate_data` runs `tfds.builder(name, data_dir=$TFDS_DATA_DIR or
tmp_dir/tfds).download_and_prepare()` (TFDS downloads from its own registered URLs and
verifies its own checksums; a local --data_mirror folder is passed as TFDS's
`manual_dir`, for data sets that need files placed by hand; URL mirrors do not apply),
then streams `as_dataset(split, shuffle_files=False)` into t2t's TFRecord shards.
Splits: train = TFDS "train"; dev = "validation", else "dev", else "test"; a data set
with only "train" gives train[:95%] / train[95%:]. Set `train_split` / `dev_split`
(any TFDS split expression) to choose others.

Overrides: subclass and register, e.g.

    @registry.register_problem
    class SquadQuestions(tfds_adapter.TfdsProblem):
        tfds_name = "squad"
        feature_map = {"inputs": "context", "targets": "question"}
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from absl import logging

from t2t import registry
from t2t.problems import download, image_problems, problem, text_encoder
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")
tfds = lazy_module("tensorflow_datasets")

PREFIX = "tfds_"
CONFIG_SEPARATOR = "__"

TEXT = "text"
CLASS_LABEL = "class_label"
IMAGE = "image"
KINDS = (TEXT, CLASS_LABEL, IMAGE)
_MODALITY = {
    TEXT: problem.Modality.SYMBOL,
    CLASS_LABEL: problem.Modality.CLASS_LABEL,
    IMAGE: problem.Modality.IMAGE,
}

# Data sets whose mapping is fixed here (and registered as tfds_<name> at import).
KNOWN_FEATURE_MAPS: dict[str, dict[str, str]] = {
    "imdb_reviews": {"inputs": "text", "targets": "label"},
    "mnist": {"inputs": "image", "targets": "label"},
    "fashion_mnist": {"inputs": "image", "targets": "label"},
    "kmnist": {"inputs": "image", "targets": "label"},
    "cifar10": {"inputs": "image", "targets": "label"},
    "cifar100": {"inputs": "image", "targets": "label"},  # fine labels, not coarse_label
    "ag_news_subset": {"inputs": "description", "targets": "label"},
    "yelp_polarity_reviews": {"inputs": "text", "targets": "label"},
}

_DEV_SPLITS = ("validation", "dev", "test")


class TfdsMappingError(ValueError):
    """The TFDS features cannot be (or were wrongly) mapped to inputs/targets."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """How one TFDS feature becomes the t2t feature `key` ("inputs" | "targets")."""

    key: str
    feature: str
    kind: str
    class_names: tuple[str, ...] = ()
    image_shape: tuple[int | None, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> FeatureSpec:
        return cls(
            key=values["key"],
            feature=values["feature"],
            kind=values["kind"],
            class_names=tuple(values.get("class_names", ())),
            image_shape=tuple(values.get("image_shape", ())),
        )

    @property
    def image_prefix(self) -> str:
        """Stored feature names of an image: "image/encoded" for inputs (ImageProblem's)."""
        return "image" if self.key == "inputs" else f"{self.key}_image"


# ---------------------------------------------------------------------- names
def _normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


def problem_name_for(tfds_name: str) -> str:
    """`glue/sst2` -> `tfds_glue__sst2` (versions are not part of problem names)."""
    base, _, config = tfds_name.split(":")[0].partition("/")
    return PREFIX + _normalize(base) + (CONFIG_SEPARATOR + _normalize(config) if config else "")


def tfds_name_for(problem_name: str) -> str:
    """`tfds_glue__sst2` -> `glue/sst2`; UnknownNameError if TFDS has no such data set."""
    if not problem_name.startswith(PREFIX) or len(problem_name) == len(PREFIX):
        raise ValueError(f"{problem_name!r} is not a tfds_ problem name (tfds_<dataset>).")
    rest = problem_name[len(PREFIX):]
    base, _, config = rest.partition(CONFIG_SEPARATOR)
    try:
        builder_cls = tfds.builder_cls(base)
    except Exception as e:  # DatasetNotFoundError (a ValueError); import errors too
        if type(e).__name__ != "DatasetNotFoundError":
            raise
        from tensorflow_datasets.core import registered

        known = [problem_name_for(n) for n in registered.list_imported_builders()]
        matches = registry.close_matches(problem_name, known)
        raise registry.UnknownNameError(
            f"Unknown problem {problem_name!r}: TensorFlow Datasets has no data set "
            f"{base!r}." + (f" Did you mean: {', '.join(matches)}?" if matches else "")
            + " tfds_ problems are named tfds_<dataset> or tfds_<dataset>__<config>."
        ) from None
    configs = [c.name for c in (getattr(builder_cls, "BUILDER_CONFIGS", None) or [])]
    if not config:
        return base
    by_normal = {_normalize(c): c for c in configs}
    if _normalize(config) not in by_normal:
        raise registry.UnknownNameError(
            f"Unknown problem {problem_name!r}: TFDS data set {base!r} has no config "
            f"{config!r}; its configs are: "
            f"{', '.join(problem_name_for(base + '/' + c) for c in configs) or 'none'}."
        )
    return f"{base}/{by_normal[_normalize(config)]}"


# ------------------------------------------------------------- feature mapping
def feature_kind(feature: Any) -> str | None:
    """TEXT, CLASS_LABEL, IMAGE for the TFDS feature types t2t stores; else None."""
    features = tfds.features
    if isinstance(feature, features.ClassLabel):
        return CLASS_LABEL
    if isinstance(feature, features.Text):
        return TEXT
    if isinstance(feature, features.Image):
        return IMAGE
    if isinstance(feature, features.Tensor) and not isinstance(feature, features.FeaturesDict):
        if tuple(feature.shape) == () and np.dtype(feature.np_dtype).kind in ("S", "U", "O"):
            return TEXT  # a scalar string, e.g. Translation's languages
    return None


def describe_features(features: Any) -> str:
    parts = []
    for name in features.keys():
        feature = features[name]
        kind = feature_kind(feature)
        extra = ""
        if kind == CLASS_LABEL:
            extra = f", {feature.num_classes} classes"
        elif kind == IMAGE:
            extra = f", {list(feature.shape)}"
        parts.append(f"{name} ({type(feature).__name__}{extra})")
    return ", ".join(parts)


def _spec(tfds_name: str, features: Any, key: str, name: str) -> FeatureSpec:
    names = list(features.keys())
    if name not in names:
        raise TfdsMappingError(
            f"TFDS data set {tfds_name!r} has no feature {name!r} (for {key}); its "
            f"features are: {describe_features(features)}."
        )
    feature = features[name]
    kind = feature_kind(feature)
    if kind is None:
        raise TfdsMappingError(
            f"Feature {name!r} of {tfds_name!r} is a {type(feature).__name__}; tfds_ "
            f"problems map only Text, ClassLabel and Image (uint8) features. Features: "
            f"{describe_features(features)}."
        )
    if kind == CLASS_LABEL:
        return FeatureSpec(key, name, kind, class_names=tuple(str(n) for n in feature.names))
    if kind == IMAGE:
        if np.dtype(feature.np_dtype) != np.uint8:
            raise TfdsMappingError(
                f"Image feature {name!r} of {tfds_name!r} is {np.dtype(feature.np_dtype)}; "
                "only uint8 images are supported."
            )
        return FeatureSpec(key, name, kind, image_shape=tuple(feature.shape))
    return FeatureSpec(key, name, kind)


def _how_to_map(tfds_name: str) -> str:
    return (
        "Say which features to use: subclass t2t.problems.tfds_adapter.TfdsProblem with "
        f"tfds_name = {tfds_name!r} and feature_map = {{'inputs': '<feature>', "
        "'targets': '<feature>'}, and register it with @registry.register_problem "
        "(or add the data set to tfds_adapter.KNOWN_FEATURE_MAPS)."
    )


def resolve_feature_map(
    tfds_name: str,
    features: Any,
    supervised_keys: Any = None,
    feature_map: Mapping[str, str] | None = None,
) -> list[FeatureSpec]:
    """The FeatureSpecs of inputs (if any) and targets, by the rules of the module doc."""
    explicit = feature_map or KNOWN_FEATURE_MAPS.get(tfds_name.split(":")[0])
    if explicit:
        unknown = sorted(set(explicit) - {"inputs", "targets"})
        if unknown or "targets" not in explicit:
            raise TfdsMappingError(
                f"feature_map {dict(explicit)} of {tfds_name!r} must map 'targets' (and "
                f"optionally 'inputs') to TFDS feature names; got keys {sorted(explicit)}."
            )
        return [_spec(tfds_name, features, key, explicit[key]) for key in ("inputs", "targets") if key in explicit]
    names = list(features.keys())
    if (
        isinstance(supervised_keys, (tuple, list))
        and len(supervised_keys) == 2
        and all(isinstance(k, str) and k in names for k in supervised_keys)
        and all(feature_kind(features[k]) for k in supervised_keys)
    ):
        return [
            _spec(tfds_name, features, "inputs", supervised_keys[0]),
            _spec(tfds_name, features, "targets", supervised_keys[1]),
        ]
    by_kind: dict[str | None, list[str]] = {}
    for name in names:
        by_kind.setdefault(feature_kind(features[name]), []).append(name)
    labels = by_kind.get(CLASS_LABEL, [])
    candidates = by_kind.get(IMAGE) or by_kind.get(TEXT) or []
    if len(labels) == 1 and len(candidates) == 1:
        return [
            _spec(tfds_name, features, "inputs", candidates[0]),
            _spec(tfds_name, features, "targets", labels[0]),
        ]
    raise TfdsMappingError(
        f"Cannot choose the inputs and targets of TFDS data set {tfds_name!r} "
        f"automatically: its features are {describe_features(features)}, and it "
        f"declares {'no' if not supervised_keys else 'unusable'} supervised_keys"
        f"{'' if not supervised_keys else ' ' + repr(supervised_keys)}. "
        + _how_to_map(tfds_name)
    )


def _is_url(mirror: str) -> bool:
    return urllib.parse.urlparse(mirror).scheme in ("http", "https", "ftp")


# --------------------------------------------------------------------- problem
class TfdsProblem(problem.Problem):
    """A TFDS data set as a Problem; see the module doc. Subclasses set `tfds_name`
    and may set `feature_map`, `train_split`, `dev_split` and the vocabulary options."""

    tfds_name: str = ""
    feature_map: Mapping[str, str] | None = None
    train_split: str | None = None
    dev_split: str | None = None
    train_shards: int = 10
    dev_shards: int = 1
    vocab_type: str = "subword"  # or "byte"
    approx_vocab_size: int = 2**13
    max_samples_for_vocab: int = 100_000
    sentencepiece_model_type: str = "unigram"

    def __init__(self, was_reversed: bool = False):
        super().__init__(was_reversed)
        if not self.tfds_name:
            raise ValueError(f"{type(self).__name__} must set tfds_name.")
        self._builder: Any = None
        self._builder_dir: str | None = None
        self._specs: list[FeatureSpec] | None = None
        self._split_names: dict[str, str] | None = None

    @property
    def splits(self) -> tuple[problem.SplitSpec, ...]:  # type: ignore[override]
        return (
            problem.SplitSpec(problem.TRAIN_SPLIT, self.train_shards),
            problem.SplitSpec(problem.DEV_SPLIT, self.dev_shards),
        )

    # ---------------------------------------------------------------- TFDS
    def builder(self, tmp_dir: str | None = None) -> Any:
        """The TFDS builder; its data_dir is $TFDS_DATA_DIR, else tmp_dir/tfds."""
        data_dir = os.environ.get("TFDS_DATA_DIR") or (
            os.path.join(os.path.abspath(tmp_dir), "tfds") if tmp_dir else None
        )
        if self._builder is None or (data_dir is not None and data_dir != self._builder_dir):
            self._builder = tfds.builder(self.tfds_name, data_dir=data_dir)
            self._builder_dir = data_dir
        return self._builder

    def spec_path(self, data_dir: str) -> str:
        return os.path.join(data_dir, f"{self.dataset_filename()}.tfds.json")

    def feature_specs(self, data_dir: str | None = None) -> list[FeatureSpec]:
        """The mapping: from data_dir's saved spec when present, else from TFDS."""
        if self._specs is None and data_dir and os.path.exists(self.spec_path(data_dir)):
            with open(self.spec_path(data_dir)) as f:
                saved = json.load(f)
            self._specs = [FeatureSpec.from_dict(s) for s in saved["features"]]
            self._split_names = saved.get("splits")
        if self._specs is None:
            info = self.builder().info
            self._specs = resolve_feature_map(
                self.tfds_name, info.features, info.supervised_keys, self.feature_map
            )
        return self._specs

    def _spec_by_key(self, data_dir: str | None = None) -> dict[str, FeatureSpec]:
        return {s.key: s for s in self.feature_specs(data_dir)}

    def _text_specs(self, data_dir: str | None = None) -> list[FeatureSpec]:
        return [s for s in self.feature_specs(data_dir) if s.kind == TEXT]

    @property
    def batch_size_means_tokens(self) -> bool:  # type: ignore[override]
        return bool(self._text_specs())

    @property
    def sequence_features(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(s.key for s in self._text_specs())

    def resolve_splits(self, info: Any) -> dict[str, str]:
        """{"train": TFDS split, "dev": TFDS split} (see the module doc)."""
        available = list(info.splits.keys()) if info.splits else []
        if not available:  # split sizes unknown (not prepared, or mocked)
            train = self.train_split or "train"
            dev = self.dev_split or "test"
            logging.warning(
                "%s: TFDS reports no splits for %s; using %s / %s.", self.name, self.tfds_name, train, dev
            )
            return {problem.TRAIN_SPLIT: train, problem.DEV_SPLIT: dev}
        train = self.train_split or ("train" if "train" in available else None)
        if train is None:
            raise TfdsMappingError(
                f"TFDS data set {self.tfds_name!r} has no 'train' split (it has "
                f"{available}); set train_split and dev_split in a TfdsProblem subclass."
            )
        dev = self.dev_split or next((s for s in _DEV_SPLITS if s in available), None)
        if dev is None:
            if self.train_split:
                raise TfdsMappingError(
                    f"TFDS data set {self.tfds_name!r} has no validation/dev/test split "
                    f"(it has {available}); set dev_split."
                )
            train, dev = "train[:95%]", "train[95%:]"
        return {problem.TRAIN_SPLIT: train, problem.DEV_SPLIT: dev}

    def tfds_split(self, split: str) -> str:
        if self._split_names is None:
            self._split_names = self.resolve_splits(self.builder().info)
        if split not in self._split_names:
            raise ValueError(f"{self.name} has no split {split!r}.")
        return self._split_names[split]

    def num_examples(self, split: str) -> int | None:
        try:
            return int(self.builder().info.splits[self.tfds_split(split)].num_examples) or None
        except Exception:  # unknown split sizes (not prepared, mocked, slicing quirks)
            return None

    # ----------------------------------------------------------- generation
    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """download_and_prepare, resolve and save the mapping, build the vocabulary."""
        builder = self.builder(tmp_dir)
        kwargs = {}
        if mirror is None:
            mirror = os.environ.get(download.MIRROR_ENV_VAR) or None
        if mirror and not _is_url(mirror):
            kwargs["download_config"] = tfds.download.DownloadConfig(manual_dir=mirror)
        elif mirror:
            logging.warning("%s: TFDS downloads ignore the URL mirror %s.", self.name, mirror)
        builder.download_and_prepare(**kwargs)
        info = builder.info
        self._specs = resolve_feature_map(
            self.tfds_name, info.features, info.supervised_keys, self.feature_map
        )
        self._split_names = self.resolve_splits(info)
        saved = {
            "tfds_name": self.tfds_name,
            "features": [s.to_dict() for s in self._specs],
            "splits": self._split_names,
        }
        os.makedirs(data_dir, exist_ok=True)
        tmp = self.spec_path(data_dir) + ".tmp"
        with open(tmp, "w") as f:
            json.dump(saved, f, indent=1)
        os.replace(tmp, self.spec_path(data_dir))
        if self._text_specs():
            self.get_or_create_vocab(data_dir, tmp_dir)

    def tfds_examples(self, split: str, tmp_dir: str | None = None) -> Iterator[dict[str, Any]]:
        """The TFDS examples of t2t split `split` as dicts of numpy values, in order."""
        dataset = self.builder(tmp_dir).as_dataset(split=self.tfds_split(split), shuffle_files=False)
        return iter(tfds.as_numpy(dataset))

    @staticmethod
    def _text(value: Any) -> str:
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    @property
    def vocab_filename(self) -> str:
        return f"vocab.{self.dataset_filename()}.{self.approx_vocab_size}.model"

    def get_or_create_vocab(self, data_dir: str, tmp_dir: str) -> text_encoder.TextEncoder:
        """The shared text vocabulary, trained on a bounded sample if not in data_dir."""
        if self.vocab_type == "byte":
            return text_encoder.ByteTextEncoder()
        if self.vocab_type != "subword":
            raise ValueError(f"{self.name}: vocab_type must be 'subword' or 'byte'.")
        path = os.path.join(data_dir, self.vocab_filename)
        if os.path.exists(path):
            return text_encoder.SentencePieceEncoder.load(path)
        fields = [s.feature for s in self._text_specs(data_dir)]
        examples = itertools.islice(self.tfds_examples(problem.TRAIN_SPLIT, tmp_dir), self.max_samples_for_vocab)
        texts = (self._text(ex[field]) for ex in examples for field in fields)
        logging.info("Training the SentencePiece vocabulary of %s at %s", self.name, path)
        return text_encoder.SentencePieceEncoder.train(
            texts,
            path[: -len(".model")],
            self.approx_vocab_size,
            model_type=self.sentencepiece_model_type,
            max_samples=self.max_samples_for_vocab * len(fields),
        )

    def encode_example(self, example: Mapping[str, Any], encoders: Mapping[str, Any]) -> dict[str, Any]:
        """A TFDS example (numpy values) -> the stored t2t features."""
        out: dict[str, Any] = {}
        for spec in self.feature_specs():
            value = example[spec.feature]
            if spec.kind == TEXT:
                out[spec.key] = encoders[spec.key].encode(self._text(value)) + [text_encoder.EOS_ID]
            elif spec.kind == CLASS_LABEL:
                label = int(value)
                if not 0 <= label < len(spec.class_names):
                    raise ValueError(
                        f"{self.name}: {spec.feature} label {label} is outside "
                        f"[0, {len(spec.class_names)})."
                    )
                out[spec.key] = [label]
            else:
                image = np.asarray(value)
                if image.ndim == 2:
                    image = image[:, :, None]
                prefix = spec.image_prefix
                out[f"{prefix}/encoded"] = image_problems.encode_png(image)
                out[f"{prefix}/format"] = "png"
                out[f"{prefix}/height"] = [int(image.shape[0])]
                out[f"{prefix}/width"] = [int(image.shape[1])]
        return out

    def generate_examples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, Any]]:
        self.feature_specs(data_dir)
        encoders = self.build_encoders(data_dir)
        for example in self.tfds_examples(split, tmp_dir):
            yield self.encode_example(example, encoders)

    # -------------------------------------------------------------- features
    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        encoders: dict[str, Any] = {}
        text = None
        for spec in self.feature_specs(data_dir):
            if spec.kind == TEXT:
                if text is None:
                    text = self._load_vocab(data_dir)
                encoders[spec.key] = text
            elif spec.kind == CLASS_LABEL:
                encoders[spec.key] = text_encoder.ClassLabelEncoder(list(spec.class_names))
        return encoders

    def _load_vocab(self, data_dir: str | None) -> text_encoder.TextEncoder:
        if self.vocab_type == "byte":
            return text_encoder.ByteTextEncoder()
        if data_dir is None:
            raise problem.DataMissingError(
                f"{self.name} needs its SentencePiece vocabulary from data_dir; pass data_dir."
            )
        return text_encoder.SentencePieceEncoder.load(
            os.path.join(data_dir, self.vocab_filename),
            hint=f"run `t2t-datagen --problem={self.name} --data_dir={data_dir}` first",
        )

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        specs = self._spec_by_key(data_dir)
        encoders = self.feature_encoders(data_dir)
        vocab_size: dict[str, int | None] = {}
        for key, spec in specs.items():
            if spec.kind == TEXT:
                vocab_size[key] = encoders[key].vocab_size
            elif spec.kind == CLASS_LABEL:
                vocab_size[key] = len(spec.class_names)
            else:
                vocab_size[key] = 256
        images = [s for s in specs.values() if s.kind == IMAGE]

        def space(spec: FeatureSpec | None) -> int:
            if spec is None or spec.kind == TEXT:
                return problem.SpaceID.GENERIC
            return problem.SpaceID.IMAGE if spec.kind == IMAGE else problem.SpaceID.IMAGE_LABEL

        targets = specs["targets"]
        return problem.ProblemHParams(
            modality={key: _MODALITY[spec.kind] for key, spec in specs.items()},
            vocab_size=vocab_size,
            input_space_id=space(specs.get("inputs")),
            target_space_id=space(targets),
            batch_size_means_tokens=self.batch_size_means_tokens,
            stop_at_eos=targets.kind == TEXT,
            image_shape=list(images[0].image_shape) if images else None,
        )

    def eval_metrics(self) -> list[str]:
        targets = self._spec_by_key()["targets"]
        if targets.kind == CLASS_LABEL:
            top5 = ["accuracy_top5"] if len(targets.class_names) > 5 else []
            return ["accuracy", "neg_log_perplexity"] + top5
        if targets.kind == TEXT:
            return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity"]
        return ["accuracy", "neg_log_perplexity"]

    # --------------------------------------------------------------- reading
    def example_reading_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        for s in self.feature_specs():
            if s.kind == TEXT:
                spec[s.key] = tf.io.RaggedFeature(tf.int64)
            elif s.kind == CLASS_LABEL:
                spec[s.key] = tf.io.FixedLenFeature([1], tf.int64)
            else:
                spec[f"{s.image_prefix}/encoded"] = tf.io.FixedLenFeature((), tf.string)
        return spec

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        out = {}
        for s in self.feature_specs():
            if s.kind == IMAGE:
                out[s.key] = parsed[f"{s.image_prefix}/encoded"]
            else:
                out[s.key] = tf.cast(parsed[s.key], tf.int32)
        return out

    def augment(self, key: str, image: Any) -> Any:
        """Training-time augmentation of image feature `key`; default: none."""
        return image

    def preprocess_example(self, example: dict[str, Any], mode: str, model_hparams: Any) -> dict[str, Any]:
        """Decodes the PNG images (and applies `augment` in TRAIN)."""
        example = dict(example)
        swap = {"inputs": "targets", "targets": "inputs"}
        for s in self.feature_specs():
            if s.kind != IMAGE:
                continue
            key = swap[s.key] if self.was_reversed else s.key
            channels = s.image_shape[-1] if s.image_shape else None
            image = tf.io.decode_png(example[key], channels=channels if channels in (1, 3, 4) else 0)
            if s.image_shape:
                image = tf.ensure_shape(image, list(s.image_shape))
            if mode == problem.TRAIN:
                image = self.augment(s.key, image)
            example[key] = image
        return example

    def dataset(self, mode: str, data_dir: str, **kwargs: Any) -> Any:
        self.feature_specs(data_dir)  # the saved mapping, before the records are parsed
        return super().dataset(mode, data_dir, **kwargs)


# -------------------------------------------------------- the tfds_ problem family
_CLASSES: dict[str, type[TfdsProblem]] = {}


def _make_class(problem_name: str, tfds_name: str) -> type[TfdsProblem]:
    cls = type(
        "Tfds_" + _normalize(tfds_name),
        (TfdsProblem,),
        {
            "tfds_name": tfds_name,
            "__module__": __name__,
            "__doc__": f"The TensorFlow Datasets data set {tfds_name!r} (see tfds_adapter).",
        },
    )
    registry.register_problem(cls, name=problem_name)
    _CLASSES[problem_name] = cls
    return cls


def tfds_problem_class(name: str) -> type[TfdsProblem]:
    """The Problem class of `tfds_<dataset>[__<config>]`, created (and registered) on
    first use; UnknownNameError when TFDS has no such data set."""
    if name not in _CLASSES:
        _make_class(name, tfds_name_for(name))
    return _CLASSES[name]


def tfds_problem(name: str, was_reversed: bool = False) -> TfdsProblem:
    """A Problem for any TFDS data set: `tfds_problem("tfds_imdb_reviews")`.

    A trailing `_rev` (when the name without it is a TFDS data set) swaps inputs and
    targets, as for registered problems.
    """
    if name.endswith(registry.REVERSE_SUFFIX) and name not in _CLASSES:
        try:
            return tfds_problem_class(name)(was_reversed=was_reversed)
        except registry.UnknownNameError:
            name, was_reversed = name[: -len(registry.REVERSE_SUFFIX)], True
    return tfds_problem_class(name)(was_reversed=was_reversed)


for _name in KNOWN_FEATURE_MAPS:
    _make_class(problem_name_for(_name), _name)
