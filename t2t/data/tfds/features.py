"""How the features of a TFDS data set become t2t's "inputs" and "targets".

`resolve_feature_map` applies the rules of t2t.data.tfds.adapter's module doc
(explicit feature_map / KNOWN_FEATURE_MAPS, then supervised_keys, then one ClassLabel
with one Image or Text feature) and returns one `FeatureSpec` per mapped feature;
anything else raises `TfdsMappingError` saying how to map the features by hand.

Imports TensorFlow Datasets only when a feature is inspected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from t2t.utils.lazy_import import lazy_module

tfds = lazy_module("tensorflow_datasets")

TEXT = "text"
CLASS_LABEL = "class_label"
IMAGE = "image"
KINDS = (TEXT, CLASS_LABEL, IMAGE)

# Data sets whose mapping is fixed here (tfds_adapter registers them as tfds_<name>).
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
    """"name (Type[, N classes | shape])" of every feature, comma-separated (for errors)."""
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
        "Say which features to use: subclass t2t.data.tfds.adapter.TfdsProblem with "
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
    """The FeatureSpecs of inputs (if any) and targets, by the rules of tfds_adapter."""
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
