"""Tests for t2t.problems.image.cifar with tiny archives in the real layout (no internet)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pickle
from collections.abc import Iterator

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.generation import download, generator_utils
from t2t.problems.image import cifar
from tests.helpers.local_http import serve_folder, tar_bytes, write_pinned

TRAIN_PER_BATCH, NUM_TEST = 3, 5  # CIFAR-10: 5 batches of 3; CIFAR-100: 15 in "train"
NUM_TRAIN = 5 * TRAIN_PER_BATCH


def _images(count: int, seed: int) -> np.ndarray:
    """uint8 [count, 32, 32, 3]; pixel (0, 0, 0) of image i is i."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, 32, 32, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(count)
    return images


def _rows(images: np.ndarray) -> np.ndarray:
    """The official row layout: 1024 red, 1024 green, 1024 blue values per image."""
    return images.transpose(0, 3, 1, 2).reshape(len(images), 3072)


def _pickle(value: object) -> bytes:
    return pickle.dumps(value, protocol=3)


@dataclasses.dataclass
class Tiny:
    folder: str
    train: np.ndarray
    train_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray
    resources: dict[str, download.Resource]  # archive name -> tiny pins


def _dead_url(tmp: str, name: str) -> str:
    return "file://" + os.path.join(tmp, "no-network", name)


def _cifar10_members(t: Tiny) -> dict[str, bytes]:
    folder = "cifar-10-batches-py"
    members = {
        f"{folder}/batches.meta": _pickle(
            {b"label_names": [n.encode() for n in cifar.CIFAR10_LABELS], b"num_vis": 3072}
        ),
        f"{folder}/readme.html": b"<html></html>",
    }
    for i in range(5):
        block = slice(i * TRAIN_PER_BATCH, (i + 1) * TRAIN_PER_BATCH)
        members[f"{folder}/data_batch_{i + 1}"] = _pickle(
            {
                b"batch_label": f"training batch {i + 1} of 5".encode(),
                b"labels": [int(x) for x in t.train_labels[block] % 10],
                b"data": _rows(t.train[block]),
                b"filenames": [b"x.png"] * TRAIN_PER_BATCH,
            }
        )
    members[f"{folder}/test_batch"] = _pickle(
        {b"labels": [int(x) for x in t.test_labels % 10], b"data": _rows(t.test)}
    )
    return members


def _cifar100_members(t: Tiny) -> dict[str, bytes]:
    folder = "cifar-100-python"
    return {
        f"{folder}/meta": _pickle(
            {
                b"fine_label_names": [n.encode() for n in cifar.CIFAR100_LABELS],
                b"coarse_label_names": [b"c%d" % i for i in range(20)],
            }
        ),
        f"{folder}/train": _pickle(
            {
                b"fine_labels": [int(x) for x in t.train_labels],
                b"coarse_labels": [int(x) % 20 for x in t.train_labels],
                b"data": _rows(t.train),
            }
        ),
        f"{folder}/test": _pickle(
            {
                b"fine_labels": [int(x) for x in t.test_labels],
                b"coarse_labels": [0] * NUM_TEST,
                b"data": _rows(t.test),
            }
        ),
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    folder = str(tmp_path_factory.mktemp("cifar_mirror"))
    t = Tiny(
        folder,
        _images(NUM_TRAIN, 1),
        (np.arange(NUM_TRAIN) * 37 % 100).astype(np.int64),
        _images(NUM_TEST, 2),
        (np.arange(NUM_TEST) * 53 % 100).astype(np.int64),
        {},
    )
    for name, members in (
        (cifar.CIFAR10_ARCHIVE, _cifar10_members(t)),
        (cifar.CIFAR100_ARCHIVE, _cifar100_members(t)),
    ):
        t.resources[name] = write_pinned(folder, name, tar_bytes(members), _dead_url(folder, name))
    return t


@pytest.fixture
def tiny_problems(tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)
    for cls, name in (
        (cifar.ImageCifar10, cifar.CIFAR10_ARCHIVE),
        (cifar.ImageCifar100, cifar.CIFAR100_ARCHIVE),
    ):
        monkeypatch.setattr(cls, "resource", tiny.resources[name])
        monkeypatch.setattr(cls, "train_size", NUM_TRAIN)
        monkeypatch.setattr(cls, "dev_size", NUM_TEST)
        monkeypatch.setattr(cls, "train_shards", 2)


@pytest.fixture
def http_mirror(tiny: Tiny) -> Iterator[tuple[str, list[str]]]:
    with serve_folder(tiny.folder) as (url, requested):
        yield url, requested


def _shards(data_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(data_dir) if generator_utils.is_shard_name(n))


def _check(p: problem.Problem, data_dir: str, tiny: Tiny, num_classes: int) -> None:
    dev = list(p.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    assert len(dev) == NUM_TEST
    for i, example in enumerate(dev):
        assert example["inputs"].shape == (32, 32, 3) and example["inputs"].dtype == np.uint8
        np.testing.assert_array_equal(example["inputs"], tiny.test[i])
        assert example["targets"].tolist() == [int(tiny.test_labels[i] % num_classes)]
    order = []
    for example in p.dataset("eval", data_dir, split="train").as_numpy_iterator():
        i = int(example["inputs"][0, 0, 0])
        order.append(i)
        np.testing.assert_array_equal(example["inputs"], tiny.train[i])
        assert example["targets"].tolist() == [int(tiny.train_labels[i] % num_classes)]
    assert sorted(order) == list(range(NUM_TRAIN))
    # TRAIN mode augments (pad 4, random crop, random flip): same shape, other pixels.
    augmented = list(p.dataset("train", data_dir, seed=1).as_numpy_iterator())
    assert len(augmented) == NUM_TRAIN
    assert all(a["inputs"].shape == (32, 32, 3) and a["inputs"].dtype == np.uint8 for a in augmented)
    assert any(
        not any(np.array_equal(a["inputs"], original) for original in tiny.train)
        for a in augmented
    )


def test_generate_cifar10_from_http_mirror(tiny: Tiny, tiny_problems: None, http_mirror, tmp_path):
    url, requested = http_mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = cifar.ImageCifar10()
    summary = p.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert summary["train"].examples == NUM_TRAIN and summary["dev"].examples == NUM_TEST
    assert _shards(data_dir) == [
        "image_cifar10-dev-00000-of-00001",
        "image_cifar10-train-00000-of-00002",
        "image_cifar10-train-00001-of-00002",
    ]
    assert requested == [f"/{cifar.CIFAR10_ARCHIVE}"]  # fetched once, then reused
    assert os.listdir(os.path.join(tmp_dir, "cifar10")) == [cifar.CIFAR10_ARCHIVE]
    _check(p, data_dir, tiny, 10)
    assert p.feature_encoders(data_dir)["targets"].decode([9]) == "truck"


def test_generate_cifar100_from_local_folder(tiny: Tiny, tiny_problems: None, tmp_path):
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = cifar.ImageCifar100()
    p.generate_data(data_dir, tmp_dir, mirror=tiny.folder, progress=False)
    assert len(_shards(data_dir)) == 3
    _check(p, data_dir, tiny, 100)
    assert p.feature_encoders(data_dir)["targets"].decode([99]) == "worm"


def test_label_names_must_match_the_meta_file(tiny: Tiny, tiny_problems: None, tmp_path, monkeypatch):
    monkeypatch.setattr(cifar.ImageCifar10, "class_labels", tuple(reversed(cifar.CIFAR10_LABELS)))
    with pytest.raises(cifar.CifarFormatError, match="names the classes"):
        cifar.ImageCifar10().generate_data(
            str(tmp_path / "data"), str(tmp_path / "tmp"), mirror=tiny.folder, progress=False
        )
    assert not os.path.exists(tmp_path / "data") or not _shards(str(tmp_path / "data"))


def test_count_mismatch_is_an_error(tiny: Tiny, tiny_problems: None, tmp_path, monkeypatch):
    monkeypatch.setattr(cifar.ImageCifar10, "dev_size", NUM_TEST + 1)
    with pytest.raises(cifar.CifarFormatError, match="holds 5 images, expected 6"):
        cifar.ImageCifar10().generate_data(
            str(tmp_path / "data"), str(tmp_path / "tmp"), mirror=tiny.folder, progress=False
        )


def test_unpickler_refuses_code(tmp_path) -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(cifar.CifarFormatError, match="refusing"):
        cifar.load_pickle(pickle.dumps({b"data": Evil()}), "evil")
    with pytest.raises(cifar.CifarFormatError, match="not a dict"):
        cifar.load_pickle(pickle.dumps([1, 2]), "list")
    # Protocol 2 as Python 2 wrote it, and numpy arrays, load.
    value = cifar.load_pickle(pickle.dumps({"data": np.arange(3, dtype=np.uint8)}, protocol=2), "p2")
    assert value["data"].tolist() == [0, 1, 2]


def test_read_batch_checks_the_format(tiny: Tiny, tmp_path) -> None:
    archive = str(tmp_path / "bad.tar.gz")
    with open(archive, "wb") as f:
        f.write(
            tar_bytes(
                {
                    "b/short": _pickle({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}),
                    "b/labels": _pickle({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}),
                    "b/range": _pickle({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}),
                }
            )
        )
    for member, message in (
        ("b/short", r"expected uint8 \[N, 3072\]"),
        ("b/labels", "2 images but 1 labels"),
        ("b/range", r"labels span \[10, 10\]"),
        ("b/absent", "has no member"),
    ):
        with pytest.raises(cifar.CifarFormatError, match=message):
            cifar.read_batch(archive, member, b"labels", 10)


def test_missing_archive_error_says_where_to_put_it(tiny_problems: None, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    tmp_dir = str(tmp_path / "tmp")
    with pytest.raises(download.DownloadError) as info:
        cifar.ImageCifar100().generate_data(
            str(tmp_path / "data"), tmp_dir, mirror=str(tmp_path / "empty"), progress=False
        )
    message = str(info.value)
    assert cifar.CIFAR100_ARCHIVE in message and os.path.join(tmp_dir, "cifar100") in message
    assert "--data_mirror" in message


@pytest.mark.parametrize("cls", [cifar.ImageCifar10, cifar.ImageCifar100])
def test_real_pins_reject_a_wrong_file(cls, tiny: Tiny, tmp_path) -> None:
    resource = dataclasses.replace(cls.resource, url=_dead_url(str(tmp_path), "x"))
    with pytest.raises(download.ChecksumError, match="mismatch"):
        download.fetch(resource, str(tmp_path / "dl"), mirror=tiny.folder, progress=False)
    assert not os.path.exists(tmp_path / "dl" / resource.local_name)


def test_real_pins_match_keras() -> None:
    """The sha256 pins are the file_hash values Keras checks the same archives with."""
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("keras is not installed")
    root = os.path.join(list(spec.submodule_search_locations)[0], "src", "datasets")
    for fname, resource in (
        ("cifar10.py", cifar.CIFAR10_RESOURCE),
        ("cifar100.py", cifar.CIFAR100_RESOURCE),
    ):
        path = os.path.join(root, fname)
        if not os.path.exists(path):
            pytest.skip(f"{path} not found")
        source = open(path).read()
        assert resource.url in source and resource.sha256 in source
    assert cifar.CIFAR10_RESOURCE.size == 170_498_071
    assert cifar.CIFAR100_RESOURCE.size == 169_001_437


def test_registered_problems() -> None:
    for name, cls, classes in (
        ("image_cifar10", cifar.ImageCifar10, 10),
        ("image_cifar100", cifar.ImageCifar100, 100),
    ):
        p = registry.problem(name)
        assert type(p) is cls and p.name == name
        hp = p.hparams()
        assert hp.modality == {"inputs": "image", "targets": "class_label"}
        assert hp.vocab_size == {"inputs": 256, "targets": classes}
        assert hp.image_shape == [32, 32, 3] and not hp.batch_size_means_tokens
        assert p.num_examples("train") == 50_000 and p.num_examples("dev") == 10_000
        assert "accuracy_top5" in p.eval_metrics()
    assert cifar.ImageCifar10.class_labels[0] == "airplane"
    labels = cifar.CIFAR100_LABELS
    assert len(set(labels)) == 100 and list(labels) == sorted(labels)
