"""Tests for t2t.data.tfds.features on hand-built TFDS feature dicts (offline):
feature-kind detection, FeatureSpec's saved form, the mapping rules' order and
fallbacks, and the mapping errors naming the bad feature, key or dtype. Mappings of
real data sets' metadata are in test_tfds_adapter.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from t2t.data.tfds import features as tf_feat

tfds = pytest.importorskip("tensorflow_datasets")
F = tfds.features


def _keys(specs: list[tf_feat.FeatureSpec]) -> dict[str, tuple[str, str]]:
    return {s.key: (s.feature, s.kind) for s in specs}


@pytest.mark.parametrize(
    ("feature", "kind"),
    [
        (F.Text(), tf_feat.TEXT),
        (F.ClassLabel(names=["a", "b"]), tf_feat.CLASS_LABEL),
        (F.Image(shape=(8, 8, 3)), tf_feat.IMAGE),
        (F.Tensor(shape=(), dtype=np.str_), tf_feat.TEXT),  # e.g. a Translation language
        (F.Tensor(shape=(2,), dtype=np.str_), None),
        (F.Tensor(shape=(), dtype=np.int32), None),
        (F.Sequence(F.Text()), None),
        (F.FeaturesDict({"a": F.Text()}), None),
        (F.Translation(languages=["de", "en"]), None),
    ],
)
def test_feature_kind(feature, kind) -> None:
    assert tf_feat.feature_kind(feature) == kind
    assert kind is None or kind in tf_feat.KINDS


def test_feature_spec_survives_json_and_names_image_keys() -> None:
    spec = tf_feat.FeatureSpec("inputs", "image", tf_feat.IMAGE, image_shape=(None, None, 3))
    again = tf_feat.FeatureSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.image_shape == (None, None, 3)
    label = tf_feat.FeatureSpec("targets", "label", tf_feat.CLASS_LABEL, class_names=("x", "y"))
    assert tf_feat.FeatureSpec.from_dict(json.loads(json.dumps(label.to_dict()))) == label
    assert spec.image_prefix == "image"
    assert tf_feat.FeatureSpec("targets", "im", tf_feat.IMAGE).image_prefix == "targets_image"


def test_known_maps_apply_to_versioned_names_and_are_checked() -> None:
    mnist = F.FeaturesDict(
        {"image": F.Image(shape=(28, 28, 1)), "label": F.ClassLabel(num_classes=10)}
    )
    specs = tf_feat.resolve_feature_map("mnist:3.0.1", mnist, supervised_keys=("label", "image"))
    assert _keys(specs) == {"inputs": ("image", "image"), "targets": ("label", "class_label")}
    assert specs[0].image_shape == (28, 28, 1)
    assert specs[1].class_names == tuple(str(i) for i in range(10))
    # imdb_reviews' fixed map names "text", which these features lack.
    with pytest.raises(
        tf_feat.TfdsMappingError, match=r"'imdb_reviews' has no feature 'text' \(for inputs\)"
    ):
        tf_feat.resolve_feature_map(
            "imdb_reviews",
            F.FeaturesDict({"review": F.Text(), "label": F.ClassLabel(num_classes=2)}),
        )


def test_explicit_map_errors_name_the_bad_value() -> None:
    features = F.FeaturesDict(
        {
            "text": F.Text(),
            "label": F.ClassLabel(names=["neg", "pos"]),
            "float_image": F.Image(shape=(4, 4, 1), dtype=np.float32),
        }
    )
    with pytest.raises(tf_feat.TfdsMappingError, match=r"got keys \['input', 'targets'\]"):
        tf_feat.resolve_feature_map(
            "x", features, feature_map={"input": "text", "targets": "label"}
        )
    with pytest.raises(
        tf_feat.TfdsMappingError, match=r"must map 'targets'.*got keys \['inputs'\]"
    ):
        tf_feat.resolve_feature_map("x", features, feature_map={"inputs": "text"})
    with pytest.raises(
        tf_feat.TfdsMappingError, match="'float_image' of 'x' is float32; only uint8"
    ):
        tf_feat.resolve_feature_map(
            "x", features, feature_map={"inputs": "float_image", "targets": "label"}
        )
    # An explicit map wins over usable supervised_keys.
    specs = tf_feat.resolve_feature_map(
        "x", features, ("text", "label"), feature_map={"inputs": "label", "targets": "text"}
    )
    assert _keys(specs) == {"inputs": ("label", "class_label"), "targets": ("text", "text")}
    assert specs[0].class_names == ("neg", "pos")


def test_automatic_rules_and_their_fallbacks() -> None:
    features = F.FeaturesDict(
        {
            "idx": F.Tensor(shape=(), dtype=np.int32),
            "caption": F.Text(),
            "photo": F.Image(shape=(None, None, 3)),
            "label": F.ClassLabel(num_classes=3),
        }
    )
    # Usable supervised_keys are taken as (inputs, targets), scalar strings as text.
    translation = F.FeaturesDict({"de": F.Tensor(shape=(), dtype=np.str_), "en": F.Text()})
    assert _keys(tf_feat.resolve_feature_map("t", translation, ("de", "en"))) == {
        "inputs": ("de", "text"),
        "targets": ("en", "text"),
    }
    # Unusable ones (an int feature, a missing one) fall back to one label + one image,
    # the image preferred over the text.
    for keys in (("idx", "label"), ("nope", "label"), ("caption",)):
        specs = tf_feat.resolve_feature_map("p", features, keys)
        assert _keys(specs) == {"inputs": ("photo", "image"), "targets": ("label", "class_label")}
        assert specs[0].image_shape == (None, None, 3)
    two_labels = F.FeaturesDict(
        {"text": F.Text(), "a": F.ClassLabel(num_classes=2), "b": F.ClassLabel(num_classes=2)}
    )
    with pytest.raises(tf_feat.TfdsMappingError) as e:
        tf_feat.resolve_feature_map("two", two_labels, ("text", "nope"))
    message = str(e.value)
    assert (
        "'two' automatically" in message and "unusable supervised_keys ('text', 'nope')" in message
    )
    assert "a (ClassLabel, 2 classes), b (ClassLabel, 2 classes)" in message
    assert "tfds_name = 'two'" in message
    assert tf_feat.describe_features(features) == (
        "idx (Tensor), caption (Text), photo (Image, [None, None, 3]), label (ClassLabel, 3 classes)"
    )
