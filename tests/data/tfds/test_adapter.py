"""Tests for t2t.data.tfds.adapter, offline: TFDS is mocked (tfds.testing.mock_data)
or only its code-defined metadata (features, supervised_keys) is read."""

from __future__ import annotations

import json
import os
import types

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils
from t2t.data.tfds import adapter as tfds_adapter

tfds = pytest.importorskip("tensorflow_datasets")

NUM_EXAMPLES = 12


@pytest.fixture(autouse=True)
def _no_tfds_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFDS_DATA_DIR", raising=False)
    monkeypatch.delenv("T2T_DATA_MIRROR", raising=False)


def _mocked_examples(name: str) -> list[dict]:
    """What the mocked TFDS yields for `name` (identical for every split)."""
    builder = tfds.builder(name)
    return list(tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False)))


def _shards(data_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(data_dir) if generator_utils.is_shard_name(n))


# ------------------------------------------------------------------------- names
def test_problem_and_tfds_names() -> None:
    assert tfds_adapter.problem_name_for("imdb_reviews") == "tfds_imdb_reviews"
    assert tfds_adapter.problem_name_for("glue/sst2") == "tfds_glue__sst2"
    assert tfds_adapter.problem_name_for("wmt14_translate/de-en:1.0.0") == "tfds_wmt14_translate__de_en"
    assert tfds_adapter.tfds_name_for("tfds_glue__sst2") == "glue/sst2"
    assert tfds_adapter.tfds_name_for("tfds_wmt14_translate__de_en") == "wmt14_translate/de-en"
    with pytest.raises(registry.UnknownNameError, match="Did you mean: tfds_imdb_reviews"):
        tfds_adapter.tfds_problem("tfds_imdb_reviewz")
    with pytest.raises(registry.UnknownNameError, match="tfds_glue__sst2"):
        tfds_adapter.tfds_problem("tfds_glue__nope")


def test_any_tfds_name_becomes_a_registered_problem() -> None:
    p = tfds_adapter.tfds_problem("tfds_glue__sst2")
    assert isinstance(p, tfds_adapter.TfdsProblem) and p.tfds_name == "glue/sst2"
    assert p.name == "tfds_glue__sst2"
    # Created once, then found by the registry too.
    assert type(registry.problem("tfds_glue__sst2")) is type(p)
    assert tfds_adapter.tfds_problem_class("tfds_glue__sst2") is type(p)
    rev = tfds_adapter.tfds_problem("tfds_glue__sst2_rev")
    assert type(rev) is type(p) and rev.was_reversed and rev.name == "tfds_glue__sst2_rev"
    # The known data sets are registered at import.
    imdb = registry.problem("tfds_imdb_reviews")
    assert isinstance(imdb, tfds_adapter.TfdsProblem) and imdb.tfds_name == "imdb_reviews"


def test_registry_builds_tfds_names_through_the_family_hook() -> None:
    family = registry._problem_families[tfds_adapter.PREFIX]
    assert family.make_problem is tfds_adapter.tfds_problem
    assert family.make_class is tfds_adapter.tfds_problem_class
    rev = registry.problem("tfds_glue__cola_rev")
    assert rev.was_reversed and rev.name == "tfds_glue__cola_rev"
    assert registry.problem_class("tfds_glue__cola") is type(rev)
    with pytest.raises(registry.UnknownNameError, match="Did you mean: tfds_imdb_reviews"):
        registry.problem("tfds_imdb_reviewz")


def test_public_names_stay_importable_from_tfds_adapter() -> None:
    from t2t.data.tfds import features as tfds_features
    from t2t.data.tfds import names as tfds_names
    from t2t.data.tfds import problem_base as tfds_problem_base

    assert tfds_adapter.TfdsProblem is tfds_problem_base.TfdsProblem
    assert tfds_adapter.KNOWN_FEATURE_MAPS is tfds_features.KNOWN_FEATURE_MAPS
    for name in ("FeatureSpec", "TfdsMappingError", "resolve_feature_map", "feature_kind",
                 "describe_features", "TEXT", "CLASS_LABEL", "IMAGE", "KINDS"):
        assert getattr(tfds_adapter, name) is getattr(tfds_features, name), name
    for name in ("PREFIX", "CONFIG_SEPARATOR", "problem_name_for", "tfds_name_for"):
        assert getattr(tfds_adapter, name) is getattr(tfds_names, name), name


# ------------------------------------------------------------------- mapping rules
def _keys(specs: list[tfds_adapter.FeatureSpec]) -> dict[str, tuple[str, str]]:
    return {s.key: (s.feature, s.kind) for s in specs}


def test_mapping_from_metadata() -> None:
    def specs(name: str, **kwargs) -> dict:
        info = tfds.builder(name).info
        return _keys(tfds_adapter.resolve_feature_map(name, info.features, info.supervised_keys, **kwargs))

    # Known map, supervised_keys, and the one-label + one-text rule.
    assert specs("imdb_reviews") == {"inputs": ("text", "text"), "targets": ("label", "class_label")}
    assert specs("wmt14_translate/de-en") == {"inputs": ("de", "text"), "targets": ("en", "text")}
    assert specs("glue/sst2") == {"inputs": ("sentence", "text"), "targets": ("label", "class_label")}
    cifar100 = tfds.builder("cifar100").info.features
    spec = tfds_adapter.resolve_feature_map("cifar100", cifar100)
    assert _keys(spec)["targets"] == ("label", "class_label") and len(spec[1].class_names) == 100
    assert spec[0].image_shape == (32, 32, 3)
    # Explicit maps win, may name only targets, and are checked.
    assert specs("glue/sst2", feature_map={"targets": "sentence"}) == {"targets": ("sentence", "text")}
    with pytest.raises(tfds_adapter.TfdsMappingError, match=r"no feature 'txt'.*sentence \(Text\)"):
        specs("glue/sst2", feature_map={"inputs": "txt", "targets": "label"})
    with pytest.raises(tfds_adapter.TfdsMappingError, match="only Text, ClassLabel and Image"):
        specs("glue/sst2", feature_map={"inputs": "idx", "targets": "label"})


def test_ambiguous_mapping_explains_how_to_choose() -> None:
    info = tfds.builder("squad").info
    with pytest.raises(tfds_adapter.TfdsMappingError) as e:
        tfds_adapter.resolve_feature_map("squad", info.features, info.supervised_keys)
    message = str(e.value)
    for expected in ("context (Text)", "question (Text)", "answers", "no supervised_keys",
                     "feature_map", "TfdsProblem", "tfds_name = 'squad'"):
        assert expected in message
    features = tfds.features.FeaturesDict(
        {"a": tfds.features.Text(), "b": tfds.features.Text(), "y": tfds.features.ClassLabel(num_classes=3)}
    )
    with pytest.raises(tfds_adapter.TfdsMappingError, match=r"a \(Text\), b \(Text\), y \(ClassLabel, 3 classes\)"):
        tfds_adapter.resolve_feature_map("two_texts", features)


def test_split_choice() -> None:
    p = tfds_adapter.tfds_problem("tfds_imdb_reviews")

    def splits(*names: str) -> dict[str, str]:
        return p.resolve_splits(types.SimpleNamespace(splits={n: None for n in names}))

    assert splits("train", "test", "unsupervised") == {"train": "train", "dev": "test"}
    assert splits("train", "validation", "test") == {"train": "train", "dev": "validation"}
    assert splits("train") == {"train": "train[:95%]", "dev": "train[95%:]"}
    with pytest.raises(tfds_adapter.TfdsMappingError, match="no 'train' split"):
        splits("test")


# ------------------------------------------------------------------ generation
def test_text_classification_imdb(tmp_path, monkeypatch) -> None:
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        p = tfds_adapter.tfds_problem("tfds_imdb_reviews")
        summary = p.generate_data(data_dir, tmp_dir, progress=False)
        expected = _mocked_examples("imdb_reviews")
    assert summary["train"].examples == NUM_EXAMPLES and summary["dev"].examples == NUM_EXAMPLES
    assert _shards(data_dir) == ["tfds_imdb_reviews-dev-00000-of-00001"] + [
        f"tfds_imdb_reviews-train-{i:05d}-of-00010" for i in range(10)
    ]
    saved = json.load(open(os.path.join(data_dir, "tfds_imdb_reviews.tfds.json")))
    assert saved["splits"] == {"train": "train", "dev": "test"}
    assert os.path.exists(os.path.join(data_dir, "vocab.tfds_imdb_reviews.8192.model"))

    # Reading needs no TFDS: everything comes from data_dir.
    fresh = tfds_adapter.tfds_problem("tfds_imdb_reviews")
    monkeypatch.setattr(tfds_adapter.TfdsProblem, "builder", lambda *a: pytest.fail("TFDS used"))
    hp = fresh.hparams(data_dir)
    encoders = fresh.feature_encoders(data_dir)
    assert hp.modality == {"inputs": "symbol", "targets": "class_label"}
    assert hp.vocab_size == {"inputs": encoders["inputs"].vocab_size, "targets": 2}
    assert isinstance(encoders["inputs"], text_encoder.SentencePieceEncoder)
    assert encoders["targets"].class_labels == ["neg", "pos"]
    assert hp.batch_size_means_tokens and fresh.sequence_features == ("inputs",)
    assert fresh.eval_metrics() == ["accuracy", "neg_log_perplexity"]
    dev = list(fresh.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    assert len(dev) == NUM_EXAMPLES
    for got, want in zip(dev, expected, strict=True):
        assert got["inputs"][-1] == text_encoder.EOS_ID
        text = encoders["inputs"].decode(got["inputs"][:-1])
        assert text == " ".join(want["text"].decode().split())  # SentencePiece normalizes spaces
        assert got["targets"].tolist() == [int(want["label"])]


def test_image_classification_mnist(tmp_path) -> None:
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        p = tfds_adapter.tfds_problem("tfds_mnist")
        p.train_shards = 2
        summary = p.generate_data(data_dir, tmp_dir, progress=False)
        expected = _mocked_examples("mnist")
    assert summary["dev"].examples == NUM_EXAMPLES
    assert len(_shards(data_dir)) == 3
    assert not any(n.startswith("vocab.") for n in os.listdir(data_dir))
    hp = p.hparams(data_dir)
    assert hp.modality == {"inputs": "image", "targets": "class_label"}
    assert hp.vocab_size == {"inputs": 256, "targets": 10}
    assert hp.image_shape == [28, 28, 1] and not hp.batch_size_means_tokens
    assert hp.input_space_id == problem.SpaceID.IMAGE
    assert p.sequence_features == () and "accuracy_top5" in p.eval_metrics()
    dev = list(p.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    for got, want in zip(dev, expected, strict=True):
        assert got["inputs"].dtype == np.uint8
        np.testing.assert_array_equal(got["inputs"], want["image"])
        assert got["targets"].tolist() == [int(want["label"])]
    assert p.feature_encoders(data_dir)["targets"].decode([7]) == "7"

    rev = tfds_adapter.tfds_problem("tfds_mnist_rev")
    assert rev.hparams(data_dir).modality == {"inputs": "class_label", "targets": "image"}
    first = next(iter(rev.dataset("eval", data_dir, deterministic=True).as_numpy_iterator()))
    np.testing.assert_array_equal(first["targets"], expected[0]["image"])
