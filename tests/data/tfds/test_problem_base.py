"""Tests for t2t.data.tfds.problem_base.TfdsProblem with a stand-in TFDS builder
(offline, no TensorFlow): builder data_dir choice and caching, split overrides and
errors, `prepare` (mirror handling, the saved mapping, a bounded vocabulary sample),
reading the saved mapping without TFDS, example encoding and problem hparams.
Generation and reading through mocked TFDS data are in test_tfds_adapter.py."""

from __future__ import annotations

import io
import json
import logging
import os
import types

import numpy as np
import pytest

from t2t.data import problem
from t2t.data.encoders import sentencepiece_encoder
from t2t.data.tfds import problem_base as tfds_problem_base
from t2t.data.tfds.problem_base import TfdsProblem

tfds = pytest.importorskip("tensorflow_datasets")
F = tfds.features


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFDS_DATA_DIR", raising=False)
    monkeypatch.delenv("T2T_DATA_MIRROR", raising=False)


class ReviewProblem(TfdsProblem):
    tfds_name = "fake_reviews"
    vocab_type = "byte"


class SplitProblem(TfdsProblem):
    tfds_name = "fake_splits"


def _info(features: dict, splits: tuple[str, ...] = ("train", "test")) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        features=F.FeaturesDict(features), supervised_keys=None, splits={s: None for s in splits}
    )


class FakeBuilder:
    """Stands in for a TFDS builder; records download_and_prepare's arguments."""

    def __init__(self, info: types.SimpleNamespace):
        self.info = info
        self.prepare_kwargs: list[dict] = []

    def download_and_prepare(self, **kwargs) -> None:
        self.prepare_kwargs.append(kwargs)


def _no_tfds(*args, **kwargs):
    pytest.fail("TFDS was used")


def _write_spec(data_dir, name: str, features: list[dict], splits: dict) -> None:
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, f"{name}.tfds.json"), "w") as f:
        json.dump({"tfds_name": "fake", "features": features, "splits": splits}, f)


def test_subclass_must_set_tfds_name() -> None:
    class Nameless(TfdsProblem):
        pass

    with pytest.raises(ValueError, match="Nameless must set tfds_name"):
        Nameless()


def test_builder_data_dir_and_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    fake_tfds = types.SimpleNamespace(
        builder=lambda name, data_dir: made.append((name, data_dir)) or object()
    )
    monkeypatch.setattr(tfds_problem_base, "tfds", fake_tfds)
    p = ReviewProblem()
    first = p.builder(str(tmp_path / "tmp"))
    assert made == [("fake_reviews", str(tmp_path / "tmp" / "tfds"))]
    assert p.builder() is first and p.builder(str(tmp_path / "tmp")) is first  # Cached.
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "shared"))
    assert p.builder(str(tmp_path / "tmp")) is not first  # $TFDS_DATA_DIR wins.
    assert made[-1] == ("fake_reviews", str(tmp_path / "shared"))


def test_split_overrides_and_errors() -> None:
    p = SplitProblem()

    def splits(*names: str) -> dict[str, str]:
        return p.resolve_splits(types.SimpleNamespace(splits={n: None for n in names}))

    assert splits("train", "dev", "test") == {"train": "train", "dev": "dev"}
    assert splits() == {"train": "train", "dev": "test"}  # Split sizes unknown.
    p.train_split, p.dev_split = "train[:10]", "train[10:20]"
    assert splits("train") == {"train": "train[:10]", "dev": "train[10:20]"}
    assert splits() == {"train": "train[:10]", "dev": "train[10:20]"}
    p.dev_split = None
    with pytest.raises(
        tfds_problem_base.TfdsMappingError, match=r"'fake_splits' has no validation.*set dev_split"
    ):
        splits("train", "extra")


def test_prepare_saves_mapping_and_passes_local_mirror(tmp_path, monkeypatch, caplog) -> None:
    builder = FakeBuilder(
        _info(
            {"review": F.Text(), "stars": F.ClassLabel(names=["1", "2", "3"])},
            ("train", "validation"),
        )
    )
    p = ReviewProblem()
    monkeypatch.setattr(p, "builder", lambda tmp_dir=None: builder)
    data_dir, mirror = str(tmp_path / "data"), str(tmp_path / "mirror")
    p.prepare(data_dir, str(tmp_path / "tmp"), mirror=mirror)
    assert builder.prepare_kwargs[0]["download_config"].manual_dir == mirror
    assert os.listdir(data_dir) == ["review_problem.tfds.json"]  # Byte vocab: no file.
    with open(p.spec_path(data_dir)) as f:
        saved = json.load(f)
    assert saved["splits"] == {"train": "train", "dev": "validation"}
    assert [(s["key"], s["feature"], s["class_names"]) for s in saved["features"]] == [
        ("inputs", "review", []),
        ("targets", "stars", ["1", "2", "3"]),
    ]
    # A URL mirror does not reach TFDS (it downloads from its own URLs).
    monkeypatch.setenv("T2T_DATA_MIRROR", "https://mirror.example/t2t")
    with caplog.at_level(logging.WARNING):
        p.prepare(data_dir, str(tmp_path / "tmp"))
    assert builder.prepare_kwargs[1] == {}
    assert "ignore the URL mirror https://mirror.example/t2t" in caplog.text


def test_prepare_trains_vocab_on_a_bounded_sample(tmp_path, monkeypatch) -> None:
    class Summaries(TfdsProblem):
        tfds_name = "fake_summaries"
        approx_vocab_size = 64
        max_samples_for_vocab = 30

    builder = FakeBuilder(_info({"article": F.Text(), "summary": F.Text()}))
    words = "the quick brown fox jumps over a lazy dog".split()
    pulled = []

    def examples(split: str, tmp_dir=None):
        assert split == problem.TRAIN_SPLIT
        for i in range(1000):
            pulled.append(i)
            yield {
                "article": " ".join(words[i % 9 :] + words[: i % 9]).encode(),
                "summary": words[i % 9],
            }

    p = Summaries()
    monkeypatch.setattr(p, "builder", lambda tmp_dir=None: builder)
    monkeypatch.setattr(p, "tfds_examples", examples)
    with pytest.raises(tfds_problem_base.TfdsMappingError, match="fake_summaries"):
        p.prepare(str(tmp_path / "data"), str(tmp_path / "tmp"))  # Two texts: ambiguous.
    p.feature_map = {"inputs": "article", "targets": "summary"}
    p.prepare(str(tmp_path / "data"), str(tmp_path / "tmp"))
    assert len(pulled) == 30
    vocab = os.path.join(tmp_path, "data", "vocab.summaries.64.model")
    assert p.vocab_filename == os.path.basename(vocab) and os.path.exists(vocab)
    enc = p.feature_encoders(str(tmp_path / "data"))["inputs"]
    assert isinstance(enc, sentencepiece_encoder.SentencePieceEncoder)
    assert p.feature_encoders(str(tmp_path / "data"))["targets"] is enc  # One shared vocabulary.
    assert enc.decode(enc.encode("the lazy fox")) == "the lazy fox"
    example = p.encode_example(
        {"article": b"a dog", "summary": "fox"}, {"inputs": enc, "targets": enc}
    )
    assert example == {"inputs": enc.encode("a dog") + [1], "targets": enc.encode("fox") + [1]}
    assert p.problem_hparams(str(tmp_path / "data")).stop_at_eos


def test_saved_mapping_is_read_without_tfds(tmp_path, monkeypatch) -> None:
    data_dir = str(tmp_path)
    _write_spec(
        data_dir,
        "review_problem",
        [
            {"key": "inputs", "feature": "review", "kind": "text"},
            {
                "key": "targets",
                "feature": "stars",
                "kind": "class_label",
                "class_names": ["1", "2", "3"],
            },
        ],
        {"train": "train[:90%]", "dev": "train[90%:]"},
    )
    monkeypatch.setattr(TfdsProblem, "builder", _no_tfds)
    p = ReviewProblem()
    assert [s.key for s in p.feature_specs(data_dir)] == ["inputs", "targets"]
    assert p.tfds_split("dev") == "train[90%:]"
    with pytest.raises(ValueError, match="has no split 'test'"):
        p.tfds_split("test")
    assert p.sequence_features == ("inputs",) and p.batch_size_means_tokens
    hp = p.hparams(data_dir)
    assert hp.modality == {"inputs": "symbol", "targets": "class_label"}
    assert hp.vocab_size == {"inputs": 258, "targets": 3}  # Byte vocabulary.
    assert (hp.input_space_id, hp.target_space_id) == (
        problem.SpaceID.GENERIC,
        problem.SpaceID.IMAGE_LABEL,
    )
    assert not hp.stop_at_eos and hp.image_shape is None
    assert p.eval_metrics() == ["accuracy", "neg_log_perplexity"]  # 3 classes: no top-5.
    encoders = p.feature_encoders(data_dir)
    assert p.encode_example({"review": b"ok!", "stars": np.int64(2)}, encoders) == {
        "inputs": [ord("o") + 2, ord("k") + 2, ord("!") + 2, 1],
        "targets": [2],
    }
    with pytest.raises(ValueError, match=r"stars label 3 is outside \[0, 3\)"):
        p.encode_example({"review": "x", "stars": 3}, encoders)


def test_subword_vocab_and_image_targets(tmp_path, monkeypatch) -> None:
    class Drawings(TfdsProblem):
        tfds_name = "fake_drawings"

    data_dir = str(tmp_path)
    _write_spec(
        data_dir,
        "drawings",
        [
            {"key": "inputs", "feature": "caption", "kind": "text"},
            {"key": "targets", "feature": "drawing", "kind": "image", "image_shape": [3, 2, 1]},
        ],
        {"train": "train", "dev": "test"},
    )
    monkeypatch.setattr(TfdsProblem, "builder", _no_tfds)
    p = Drawings()
    p.feature_specs(data_dir)
    with pytest.raises(problem.DataMissingError, match="pass data_dir"):
        p.build_encoders(None)
    with pytest.raises(
        FileNotFoundError, match=r"vocab\.drawings\.8192\.model.*--problem=drawings"
    ):
        p.build_encoders(data_dir)
    p.vocab_type = "wordpiece"
    with pytest.raises(ValueError, match="vocab_type must be 'subword' or 'byte'"):
        p.get_or_create_vocab(data_dir, data_dir)

    p.vocab_type = "byte"
    hp = p.hparams(data_dir)
    assert hp.modality == {"inputs": "symbol", "targets": "image"}
    assert hp.vocab_size == {"inputs": 258, "targets": 256} and hp.image_shape == [3, 2, 1]
    assert hp.target_space_id == problem.SpaceID.IMAGE and not hp.stop_at_eos
    assert p.eval_metrics() == ["accuracy", "neg_log_perplexity"]
    drawing = np.arange(6, dtype=np.uint8).reshape(3, 2) * 40  # 2-D: gets a channel axis.
    out = p.encode_example({"caption": "a", "drawing": drawing}, p.feature_encoders(data_dir))
    assert sorted(out) == [
        "inputs",
        "targets_image/encoded",
        "targets_image/format",
        "targets_image/height",
        "targets_image/width",
    ]
    assert (out["targets_image/height"], out["targets_image/width"]) == ([3], [2])
    Image = pytest.importorskip("PIL.Image")
    decoded = np.asarray(Image.open(io.BytesIO(out["targets_image/encoded"])))
    np.testing.assert_array_equal(decoded, drawing)
