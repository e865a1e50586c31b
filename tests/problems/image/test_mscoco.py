"""Tests for t2t.problems.image.mscoco with tiny zips in the real COCO 2014 layout."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import os
from collections.abc import Iterator

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.data.generation import download, generator_utils
from t2t.problems.image import mscoco
from tests.helpers.coco_data import NUM_DEV, NUM_TRAIN, TRAIN, VAL, Tiny, write_tiny_coco
from tests.helpers.local_http import serve_folder

PIL = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    return write_tiny_coco(str(tmp_path_factory.mktemp("coco_mirror")))


@pytest.fixture
def tiny_problem(tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)
    monkeypatch.setattr(mscoco.ImageMsCocoCharacters, "resources", tiny.resources)
    monkeypatch.setattr(mscoco.ImageMsCocoCharacters, "train_shards", 2)
    monkeypatch.setattr(mscoco.ImageMsCocoCharacters, "dev_shards", 1)


@pytest.fixture
def http_mirror(tiny: Tiny) -> Iterator[tuple[str, list[str]]]:
    with serve_folder(tiny.folder) as (url, requested):
        yield url.rstrip("/"), requested


def _mean_close(image: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool(np.all(np.abs(image.reshape(-1, 3).mean(0) - np.array(colour)) < 6))


def test_generate_from_http_mirror_and_read_back(tiny: Tiny, tiny_problem: None, http_mirror, tmp_path):
    url, requested = http_mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = mscoco.ImageMsCocoCharacters()
    summary = p.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert summary["train"].examples == NUM_TRAIN and summary["dev"].examples == NUM_DEV
    assert sorted(requested) == sorted(f"/{n}" for n in tiny.resources)  # each fetched once
    shards = sorted(n for n in os.listdir(data_dir) if generator_utils.is_shard_name(n))
    assert shards == [
        "image_ms_coco_characters-dev-00000-of-00001",
        "image_ms_coco_characters-train-00000-of-00002",
        "image_ms_coco_characters-train-00001-of-00002",
    ]
    encoder = p.feature_encoders(data_dir)["targets"]
    assert isinstance(encoder, text_encoder.ByteTextEncoder)

    dev = list(p.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    assert [encoder.decode(ex["targets"][:-1]) for ex in dev] == ["Yellow.", "So yellow", "x"]
    for example in dev:
        assert example["targets"][-1] == text_encoder.EOS_ID
        assert example["inputs"].shape == (224, 224, 3) and example["inputs"].dtype == np.uint8
        assert _mean_close(example["inputs"], VAL[42][2])
    stored = p.dataset("eval", data_dir, split="dev", deterministic=True)
    raw = next(iter(stored.take(1)))
    assert raw["inputs"].shape == (224, 224, 3)

    train = list(p.dataset("train", data_dir, seed=0).as_numpy_iterator())
    captions = sorted(encoder.decode(ex["targets"][:-1]) for ex in train)
    assert captions == sorted(["A red square.", "Red!", "A café sign ."])
    colour = {c: v[2] for v in TRAIN.values() for c in v[3]}
    for example in train:
        assert example["inputs"].shape == (224, 224, 3)
        assert _mean_close(example["inputs"], colour[encoder.decode(example["targets"][:-1])])


def test_stored_images_are_fixed_size_jpegs(tiny: Tiny, tiny_problem: None, tmp_path) -> None:
    import tensorflow as tf

    data_dir = str(tmp_path / "data")
    mscoco.ImageMsCocoCharacters().generate_data(
        data_dir, str(tmp_path / "tmp"), mirror=tiny.folder, progress=False
    )
    path = os.path.join(data_dir, "image_ms_coco_characters-dev-00000-of-00001")
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        feature = tf.train.Example.FromString(record).features.feature
        assert feature["image/format"].bytes_list.value == [b"jpeg"]
        assert feature["image/height"].int64_list.value == [256]
        assert feature["image/width"].int64_list.value == [256]
        with PIL.open(io.BytesIO(feature["image/encoded"].bytes_list.value[0])) as image:
            assert image.format == "JPEG" and image.size == (256, 256)


def test_read_captions_groups_by_image_in_file_order(tiny: Tiny) -> None:
    path = os.path.join(tiny.folder, mscoco.ANNOTATIONS)
    entries = mscoco.read_captions(path, "annotations/captions_train2014.json")
    assert entries == [
        ("COCO_train2014_000000000001.jpg", ["A red square.", "Red!"]),
        ("COCO_train2014_000000000007.jpg", ["A café sign ."]),
    ]
    with pytest.raises(mscoco.CocoFormatError, match="has no member"):
        mscoco.read_captions(path, "annotations/captions_test2014.json")
    with pytest.raises(mscoco.CocoFormatError, match="not a COCO captions file"):
        mscoco.read_captions(path, "annotations/instances_val2014.json")


def test_image_missing_from_the_zip_is_reported(tiny: Tiny, tiny_problem: None, tmp_path, monkeypatch):
    p = mscoco.ImageMsCocoCharacters()
    p.prepare(str(tmp_path / "data"), str(tmp_path / "tmp"), mirror=tiny.folder)
    p._captions["dev"] = [("COCO_val2014_000000000099.jpg", ["gone"])]
    with pytest.raises(mscoco.CocoFormatError, match="has no image 'val2014/COCO_val2014_000000000099.jpg'"):
        list(p.generate_examples(str(tmp_path / "data"), str(tmp_path / "tmp"), "dev"))


def test_missing_files_error_says_where_to_put_them(tiny_problem: None, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    tmp_dir = str(tmp_path / "tmp")
    with pytest.raises(download.DownloadError) as info:
        mscoco.ImageMsCocoCharacters().generate_data(
            str(tmp_path / "data"), tmp_dir, mirror=str(tmp_path / "empty"), progress=False
        )
    message = str(info.value)
    assert os.path.join(tmp_dir, "mscoco") in message and "--data_mirror" in message
    assert all(name in message for name in mscoco.MSCOCO_RESOURCES)


def test_real_pins_reject_a_wrong_file(tiny: Tiny, tmp_path) -> None:
    for name, resource in mscoco.MSCOCO_RESOURCES.items():
        offline = dataclasses.replace(resource, url="file:///nonexistent/" + name)
        with pytest.raises(download.ChecksumError, match="mismatch"):
            download.fetch(offline, str(tmp_path / "dl"), mirror=tiny.folder, progress=False)
        assert not os.path.exists(tmp_path / "dl" / name)


def test_real_pins_match_tensorflow_datasets() -> None:
    spec = importlib.util.find_spec("tensorflow_datasets")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tensorflow_datasets is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "url_checksums", "coco2014.txt")
    rows = {line.split("\t")[0]: line.split("\t") for line in open(path).read().splitlines() if line}
    for resource in mscoco.MSCOCO_RESOURCES.values():
        url, size, sha, _ = rows[resource.url]
        assert (resource.size, resource.sha256) == (int(size), sha)


def test_registered_problem() -> None:
    p = registry.problem("image_ms_coco_characters")
    assert type(p) is mscoco.ImageMsCocoCharacters and isinstance(p, mscoco.Image2TextProblem)
    hp = p.hparams()
    assert hp.modality == {"inputs": problem.Modality.IMAGE, "targets": problem.Modality.SYMBOL}
    assert hp.vocab_size == {"inputs": 256, "targets": 258}
    assert hp.image_shape == [224, 224, 3] and hp.stop_at_eos
    assert hp.target_space_id == problem.SpaceID.EN_CHR
    assert p.sequence_features == ("targets",) and not p.batch_size_means_tokens
    assert [(s.name, s.shards) for s in p.splits] == [("train", 100), ("dev", 10)]


def test_tokens32k_trains_its_vocabulary_on_the_train_captions(tiny: Tiny, tiny_problem: None,
                                                              tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    p = registry.problem("image_ms_coco_tokens32k")
    assert isinstance(p, mscoco.ImageMsCocoTokens32k)
    with pytest.raises(FileNotFoundError, match="t2t-datagen --problem=image_ms_coco_tokens32k"):
        p.feature_encoders(data_dir)
    p.generate_data(data_dir, str(tmp_path / "tmp"), mirror=tiny.folder, progress=False)
    vocab = os.path.join(data_dir, "vocab.image_ms_coco_tokens32k.32768.model")
    encoder = p.feature_encoders(data_dir)["targets"]
    assert isinstance(encoder, text_encoder.SentencePieceEncoder) and os.path.exists(vocab)
    assert p.hparams(data_dir).vocab_size["targets"] == encoder.vocab_size
    assert p.hparams(data_dir).target_space_id == problem.SpaceID.EN_TOK
    train = list(p.dataset("train", data_dir, seed=0).as_numpy_iterator())
    captions = sorted(encoder.decode(ex["targets"][:-1]) for ex in train)
    assert captions == sorted(["A red square.", "Red!", "A café sign ."])
    assert all(ex["targets"][-1] == text_encoder.EOS_ID for ex in train)
    # A second datagen keeps the vocabulary it finds (shards stay decodable).
    before = os.path.getmtime(vocab)
    mscoco.ImageMsCocoTokens32k().prepare(data_dir, str(tmp_path / "tmp"), mirror=tiny.folder)
    assert os.path.getmtime(vocab) == before
