"""Tests for t2t.problems.image.mnist with tiny idx files from local mirrors (no internet)."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import os
import time
from collections.abc import Iterator

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.generation import download, generator_utils
from t2t.problems.image import mnist
from tests.helpers.local_http import serve_folder, write_pinned

NUM_TRAIN, NUM_TEST = 30, 10
DEBIAN_FASHION = "/usr/share/datasets/fashion-mnist"
FILES = (mnist.TRAIN_IMAGES, mnist.TRAIN_LABELS, mnist.TEST_IMAGES, mnist.TEST_LABELS)


def _images(count: int, seed: int) -> np.ndarray:
    """uint8 [count, 28, 28]; pixel (0, 0) of image i is i, the rest a known pattern."""
    rows, cols = np.meshgrid(np.arange(28), np.arange(28), indexing="ij")
    images = np.stack([(seed * 11 + i * 31 + rows * 7 + cols * 3) % 256 for i in range(count)])
    images[:, 0, 0] = np.arange(count)
    return images.astype(np.uint8)


def _idx_bytes(array: np.ndarray) -> bytes:
    magic = mnist.IDX_IMAGES_MAGIC if array.ndim == 3 else mnist.IDX_LABELS_MAGIC
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


@dataclasses.dataclass
class Tiny:
    """Tiny MNIST-format files in `folder` and Resources pinning their hashes."""

    folder: str
    arrays: dict[str, np.ndarray]
    resources: dict[str, download.Resource]


def _dead_url(tmp: str, name: str) -> str:
    """A canonical URL that fails at once and never touches the network."""
    return "file://" + os.path.join(tmp, "no-network", name)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    folder = str(tmp_path_factory.mktemp("tiny_mirror"))
    arrays = {
        mnist.TRAIN_IMAGES: _images(NUM_TRAIN, 1),
        mnist.TRAIN_LABELS: (np.arange(NUM_TRAIN) * 3 % 10).astype(np.uint8),
        mnist.TEST_IMAGES: _images(NUM_TEST, 2),
        mnist.TEST_LABELS: (np.arange(NUM_TEST) * 7 % 10).astype(np.uint8),
    }
    resources = {}
    for name, array in arrays.items():
        data = gzip.compress(_idx_bytes(array), mtime=0)
        resources[name] = write_pinned(folder, name, data, _dead_url(folder, name))
    return Tiny(folder, arrays, resources)


@pytest.fixture
def http_mirror(tiny: Tiny) -> Iterator[tuple[str, list[str]]]:
    with serve_folder(os.path.dirname(tiny.folder)) as (url, requested):
        yield url + os.path.basename(tiny.folder), requested


@pytest.fixture
def tiny_problems(tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both problems read the tiny files (same file names, pinned tiny hashes)."""
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)
    for cls in (mnist.ImageMnist, mnist.ImageFashionMnist):
        monkeypatch.setattr(cls, "resources", tiny.resources)
        monkeypatch.setattr(cls, "train_size", NUM_TRAIN)
        monkeypatch.setattr(cls, "dev_size", NUM_TEST)


def _check_data(p: problem.Problem, data_dir: str, tiny: Tiny) -> None:
    """The dev set in order and the train set as a whole hold exactly the tiny data."""
    dev = list(p.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    assert len(dev) == NUM_TEST
    for i, example in enumerate(dev):
        assert example["inputs"].shape == (28, 28, 1) and example["inputs"].dtype == np.uint8
        np.testing.assert_array_equal(example["inputs"][:, :, 0], tiny.arrays[mnist.TEST_IMAGES][i])
        assert example["targets"].tolist() == [int(tiny.arrays[mnist.TEST_LABELS][i])]
    train = list(p.dataset("train", data_dir, seed=0).as_numpy_iterator())
    assert len(train) == NUM_TRAIN
    order = sorted(int(ex["inputs"][0, 0, 0]) for ex in train)
    assert order == list(range(NUM_TRAIN))
    for example in train:
        i = int(example["inputs"][0, 0, 0])
        np.testing.assert_array_equal(
            example["inputs"][:, :, 0], tiny.arrays[mnist.TRAIN_IMAGES][i]
        )
        assert example["targets"].tolist() == [int(tiny.arrays[mnist.TRAIN_LABELS][i])]


def _shards(data_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(data_dir) if generator_utils.is_shard_name(n))


# ------------------------------------------------------------------------- idx parsing
def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_read_idx_parses_and_memory_maps(tmp_path) -> None:
    images = _images(4, 0)
    path = _write(str(tmp_path / "images"), _idx_bytes(images))
    array = mnist.read_idx(path, mnist.IDX_IMAGES_MAGIC)
    assert isinstance(array, np.memmap) and array.shape == (4, 28, 28)
    np.testing.assert_array_equal(array, images)
    labels = _write(str(tmp_path / "labels"), _idx_bytes(np.array([3, 1], np.uint8)))
    assert mnist.read_idx(labels, mnist.IDX_LABELS_MAGIC).tolist() == [3, 1]
    empty = _write(str(tmp_path / "empty"), _idx_bytes(np.zeros((0,), np.uint8)))
    assert mnist.read_idx(empty, mnist.IDX_LABELS_MAGIC).shape == (0,)


def test_read_idx_rejects_bad_files_naming_them(tmp_path) -> None:
    good = _idx_bytes(_images(2, 0))
    cases = {
        "labels_as_images": (_idx_bytes(np.array([1, 2], np.uint8)), "bad idx magic number 2049"),
        "truncated": (good[:-5], "truncated or corrupt"),
        "too_long": (good + b"x", "truncated or corrupt"),
        "short_header": (good[:9], "too short for an idx header"),
        "compressed": (gzip.compress(good), "bad idx magic number"),
    }
    for name, (data, message) in cases.items():
        path = _write(str(tmp_path / name), data)
        with pytest.raises(mnist.IdxFormatError, match=message) as info:
            mnist.read_idx(path, mnist.IDX_IMAGES_MAGIC)
        assert path in str(info.value)


def test_read_images_and_labels_checks_counts_sizes_and_labels(tiny: Tiny) -> None:
    images = os.path.join(tiny.folder, mnist.TEST_IMAGES)
    labels = os.path.join(tiny.folder, mnist.TEST_LABELS)
    kwargs = dict(image_size=28, num_classes=10, count=NUM_TEST)
    got_images, got_labels = mnist.read_images_and_labels(images, labels, **kwargs)
    np.testing.assert_array_equal(got_images, tiny.arrays[mnist.TEST_IMAGES])
    with pytest.raises(mnist.IdxFormatError, match="holds 10 items, expected 11"):
        mnist.read_images_and_labels(images, labels, **{**kwargs, "count": 11})
    with pytest.raises(mnist.IdxFormatError, match=r"images are \[28, 28\], expected \[32"):
        mnist.read_images_and_labels(images, labels, **{**kwargs, "image_size": 32})
    with pytest.raises(mnist.IdxFormatError, match=r"label 9 is outside \[0, 5\)"):
        mnist.read_images_and_labels(images, labels, **{**kwargs, "num_classes": 5})


# ----------------------------------------------------------------------- generation
def test_generate_from_http_mirror(tiny: Tiny, tiny_problems: None, http_mirror, tmp_path):
    url, requested = http_mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = mnist.ImageMnist()
    summary = p.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert summary["train"].examples == NUM_TRAIN and summary["dev"].examples == NUM_TEST
    assert _shards(data_dir) == ["image_mnist-dev-00000-of-00001"] + [
        f"image_mnist-train-{i:05d}-of-00010" for i in range(10)
    ]
    folder = os.path.basename(tiny.folder)
    assert sorted(requested) == sorted(f"/{folder}/{name}" for name in FILES)
    assert sorted(os.listdir(os.path.join(tmp_dir, "mnist"))) == sorted(
        FILES + tuple(name[: -len(".gz")] for name in FILES)
    )
    _check_data(p, data_dir, tiny)
    again = p.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert again["train"].shards_skipped == 10 and again["train"].examples == 0


def test_generate_from_local_folder_mirror(tiny: Tiny, tiny_problems: None, tmp_path):
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = mnist.ImageFashionMnist()
    p.generate_data(data_dir, tmp_dir, mirror=tiny.folder, progress=False)
    assert _shards(data_dir)[0] == "image_fashion_mnist-dev-00000-of-00001"
    assert len(_shards(data_dir)) == 11
    assert sorted(os.listdir(os.path.join(tmp_dir, "fashion_mnist")))[0] == mnist.TEST_IMAGES[:-3]
    _check_data(p, data_dir, tiny)
    assert p.feature_encoders(data_dir)["targets"].decode([9]) == "Ankle boot"


def test_mirror_from_environment_variable(tiny: Tiny, tiny_problems: None, tmp_path, monkeypatch):
    monkeypatch.setenv(download.MIRROR_ENV_VAR, tiny.folder)
    summary = mnist.ImageMnist().generate_data(
        str(tmp_path / "data"), str(tmp_path / "tmp"), max_cases=5, progress=False
    )
    assert summary["dev"].examples == 5


def test_missing_files_error_says_where_to_put_them(tiny_problems: None, tmp_path) -> None:
    empty_mirror = tmp_path / "empty_mirror"
    empty_mirror.mkdir()
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    with pytest.raises(download.DownloadError) as info:
        mnist.ImageMnist().generate_data(
            data_dir, tmp_dir, mirror=str(empty_mirror), progress=False
        )
    message = str(info.value)
    assert os.path.join(tmp_dir, "mnist") in message
    assert all(name in message for name in FILES)
    assert "--data_mirror" in message
    assert not os.path.exists(data_dir) or not _shards(data_dir)


def test_wrong_file_is_rejected(tiny: Tiny, tiny_problems: None, tmp_path) -> None:
    bad_mirror = tmp_path / "bad_mirror"
    bad_mirror.mkdir()
    (bad_mirror / mnist.TEST_LABELS).write_bytes(gzip.compress(b"not the labels"))
    for name in FILES:
        if name != mnist.TEST_LABELS:
            (bad_mirror / name).write_bytes(open(os.path.join(tiny.folder, name), "rb").read())
    with pytest.raises(download.ChecksumError, match=mnist.TEST_LABELS):
        mnist.ImageMnist().generate_data(
            str(tmp_path / "data"), str(tmp_path / "tmp"), mirror=str(bad_mirror), progress=False
        )


# -------------------------------------------------------------- the real pinned files
def _offline(resource: download.Resource, tmp: str) -> download.Resource:
    """`resource` with its hashes, but a canonical URL that never reaches the network."""
    return dataclasses.replace(resource, url=_dead_url(tmp, resource.local_name))


@pytest.mark.parametrize("cls", [mnist.ImageMnist, mnist.ImageFashionMnist])
def test_real_pins_reject_a_wrong_file(cls, tiny: Tiny, tmp_path) -> None:
    for name, resource in cls.resources.items():
        with pytest.raises(download.ChecksumError, match="mismatch"):
            download.fetch(
                _offline(resource, str(tmp_path)),
                str(tmp_path / "downloads"),
                mirror=tiny.folder,  # tiny files under the real names
                progress=False,
            )
        assert not os.path.exists(tmp_path / "downloads" / name)


def test_real_pins_match_tensorflow_datasets() -> None:
    spec = importlib.util.find_spec("tensorflow_datasets")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tensorflow_datasets is not installed")
    root = os.path.join(spec.submodule_search_locations[0], "url_checksums")
    for cls, fname in (
        (mnist.ImageMnist, "mnist.txt"),
        (mnist.ImageFashionMnist, "fashion_mnist.txt"),
    ):
        with open(os.path.join(root, fname)) as f:
            rows = [line.split("\t") for line in f.read().splitlines() if line.strip()]
        pinned = {(r.url, r.size, r.sha256) for r in cls.resources.values()}
        assert pinned == {(url, int(size), sha) for url, size, sha, _ in rows}
    assert all(r.payload_sha256 is None for r in mnist.MNIST_RESOURCES.values())
    assert all(r.payload_sha256 for r in mnist.FASHION_MNIST_RESOURCES.values())


@pytest.mark.skipif(not os.path.isdir(DEBIAN_FASHION), reason="dataset-fashion-mnist absent")
def test_debian_fashion_copies_verify_by_payload(tmp_path) -> None:
    for name, resource in mnist.FASHION_MNIST_RESOURCES.items():
        path = download.fetch(
            _offline(resource, str(tmp_path)),
            str(tmp_path / "downloads"),
            mirror=DEBIAN_FASHION,
            progress=False,
        )
        assert os.path.basename(path) == name
        # Re-compressed: only the payload hash can match.
        assert download.sha256_of(path) != resource.sha256
        assert download.payload_sha256_of(path) == resource.payload_sha256


def test_registered_problems() -> None:
    for name, cls in (
        ("image_mnist", mnist.ImageMnist),
        ("image_fashion_mnist", mnist.ImageFashionMnist),
    ):
        p = registry.problem(name)
        assert type(p) is cls and p.name == name
        hp = p.hparams()
        assert hp.modality["inputs"] == problem.Modality.IMAGE
        assert hp.vocab_size == {"inputs": 256, "targets": 10}
        assert hp.image_shape == [28, 28, 1]
        assert p.num_examples("train") == 60_000 and p.num_examples("dev") == 10_000
        assert [(s.name, s.shards) for s in p.splits] == [("train", 10), ("dev", 1)]
    assert mnist.ImageMnist.class_labels == tuple("0123456789")
    assert mnist.ImageFashionMnist.class_labels[0] == "T-shirt/top"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(DEBIAN_FASHION), reason="dataset-fashion-mnist absent")
def test_full_fashion_mnist_from_debian_mirror(tmp_path) -> None:
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = mnist.ImageFashionMnist()
    start = time.monotonic()
    summary = p.generate_data(data_dir, tmp_dir, mirror=DEBIAN_FASHION, progress=False)
    seconds = time.monotonic() - start
    print(f"image_fashion_mnist: 70000 images in {seconds:.1f} s ({70000 / seconds:,.0f}/s)")
    assert summary["train"].examples == 60_000 and summary["dev"].examples == 10_000
    assert summary["train"].shards_written == 10
    dev = p.dataset("eval", data_dir, deterministic=True).batch(10_000)
    batch = next(iter(dev.as_numpy_iterator()))
    images, labels = mnist.read_images_and_labels(
        os.path.join(tmp_dir, "fashion_mnist", mnist.TEST_IMAGES),
        os.path.join(tmp_dir, "fashion_mnist", mnist.TEST_LABELS),
        image_size=28,
        num_classes=10,
        count=10_000,
    )
    np.testing.assert_array_equal(batch["inputs"][:, :, :, 0], images)
    np.testing.assert_array_equal(batch["targets"][:, 0], labels)
    train_count = p.dataset("train", data_dir).reduce(0, lambda n, _: n + 1)
    assert int(train_count) == 60_000
