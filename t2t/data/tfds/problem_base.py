"""`TfdsProblem`: the Problem reading one TensorFlow Datasets data set.

Generation (download_and_prepare, the saved feature mapping, the SentencePiece
vocabulary, TFRecord shards), encoders, problem hparams and reading, as described in
t2t.data.tfds.adapter's module doc. Subclass it (setting `tfds_name`, optionally
`feature_map` and the splits) and register it for a data set that needs overrides.

Imports TensorFlow and TensorFlow Datasets only when they are used.
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from absl import logging

from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.encoders import text_encoder
from t2t.data.generation import download
from t2t.data.tfds.features import (
    CLASS_LABEL,
    IMAGE,
    TEXT,
    FeatureSpec,
    TfdsMappingError,
    resolve_feature_map,
)
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")
tfds = lazy_module("tensorflow_datasets")

_MODALITY = {
    TEXT: problem.Modality.SYMBOL,
    CLASS_LABEL: problem.Modality.CLASS_LABEL,
    IMAGE: problem.Modality.IMAGE,
}


_DEV_SPLITS = ("validation", "dev", "test")


def _is_url(mirror: str) -> bool:
    return urllib.parse.urlparse(mirror).scheme in ("http", "https", "ftp")


class TfdsProblem(problem.Problem):
    """A TFDS data set as a Problem (see t2t.data.tfds.adapter). Subclasses set
    `tfds_name` and may set `feature_map`, `train_split`, `dev_split` and the
    vocabulary options."""

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
        """{"train": TFDS split, "dev": TFDS split} (rules: t2t.data.tfds.adapter)."""
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
