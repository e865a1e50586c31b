"""Tests for t2t.problems.image.imagenet with a tiny fake ILSVRC 2012 in the real nested-tar
layout: 2 classes x 3 images, 3 validation images (no internet, no real data)."""

from __future__ import annotations

import dataclasses
import io
import os
import time
from collections.abc import Iterator

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.generation import download, generator_utils
from t2t.problems.image import imagenet
from tests.helpers.local_http import serve_folder, tar_bytes, write_pinned

PIL = pytest.importorskip("PIL.Image")

CLASSES = ("n01440764", "n01443537")  # label ids 0 and 1
# (width, height) of each class's three images; the third of class 1 is CMYK, the second
# a PNG named .JPEG (as n02105855_2933.JPEG in the real set).
SIZES = ((64, 48), (40, 80), (50, 50))
VAL_SIZES = ((30, 60), (300, 280), (64, 64))


def _colour(index: int) -> tuple[int, int, int]:
    return ((40 * index + 20) % 256, (200 - 30 * index) % 256, (90 * index) % 256)


def _encode(colour: tuple[int, int, int], size: tuple[int, int], fmt: str = "JPEG", mode: str = "RGB") -> bytes:
    image = PIL.new("RGB", size, colour)
    if mode == "CMYK":
        image = image.convert("CMYK")
    out = io.BytesIO()
    image.save(out, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return out.getvalue()


def _tar(members: dict[str, bytes]) -> bytes:
    return tar_bytes(members, gz=False)  # ImageNet's archives are plain tars


@dataclasses.dataclass
class Tiny:
    folder: str
    train_colours: list[tuple[int, tuple[int, int, int]]]  # (label, colour) in written order
    val_colours: list[tuple[int, int, int]]
    resources: dict[str, download.Resource]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    folder = str(tmp_path_factory.mktemp("imagenet_mirror"))
    inner = {}
    colours: dict[int, list[tuple[int, int, int]]] = {}
    for label, wnid in enumerate(CLASSES):
        members = {}
        for k, size in enumerate(SIZES):
            colour = _colour(3 * label + k)
            colours.setdefault(label, []).append(colour)
            fmt = "PNG" if (label, k) == (1, 1) else "JPEG"
            mode = "CMYK" if (label, k) == (1, 2) else "RGB"
            members[f"{wnid}_{k + 1}.JPEG"] = _encode(colour, size, fmt, mode)
        inner[f"{wnid}.tar"] = _tar(members)
    # Written in reverse order: the reader sorts the classes.
    train = _tar(dict(reversed(list(inner.items()))))
    val_colours = [_colour(10 + i) for i in range(3)]
    val = _tar(
        {
            f"ILSVRC2012_val_{i + 1:08d}.JPEG": _encode(c, s)
            for i, (c, s) in enumerate(zip(val_colours, VAL_SIZES, strict=True))
        }
    )
    resources = {}
    for name, data in ((imagenet.TRAIN_ARCHIVE, train), (imagenet.VAL_ARCHIVE, val)):
        resources[name] = write_pinned(folder, name, data, "file:///nonexistent/" + name)
    # Round robin: image k of class 0, image k of class 1, ...
    order = [(label, colours[label][k]) for k in range(3) for label in (0, 1)]
    return Tiny(folder, order, val_colours, resources)


@pytest.fixture
def tiny_problem(tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)
    monkeypatch.setattr(imagenet.ImageImagenet, "resources", tiny.resources)
    monkeypatch.setattr(imagenet.ImageImagenet, "train_size", 6)
    monkeypatch.setattr(imagenet.ImageImagenet, "dev_size", 3)
    monkeypatch.setattr(imagenet.ImageImagenet, "train_shards", 1)
    monkeypatch.setattr(imagenet.ImageImagenet, "dev_shards", 2)


def _stored(path: str) -> list[dict]:
    import tensorflow as tf

    out = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        f = tf.train.Example.FromString(record).features.feature
        out.append(
            {
                "format": f["image/format"].bytes_list.value[0],
                "height": f["image/height"].int64_list.value[0],
                "width": f["image/width"].int64_list.value[0],
                "label": f["image/class/label"].int64_list.value[0],
                "encoded": f["image/encoded"].bytes_list.value[0],
            }
        )
    return out


def _close(image: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool(np.all(np.abs(image.reshape(-1, 3).mean(0) - np.array(colour)) < 6))


def _val_labels() -> list[int]:
    label_of = {w: i for i, w in enumerate(imagenet.synsets())}
    return [label_of[w] for w in imagenet.validation_synsets()[:3]]


def test_label_files_come_from_tfds() -> None:
    names = imagenet.synsets()
    assert len(names) == 1000 and names[:2] == CLASSES and list(names) == sorted(names)
    val = imagenet.validation_synsets()
    assert len(val) == 50_000 and set(val) <= set(names)
    assert val[:3] == ("n01751748", "n09193705", "n02105855")


def test_resize_image_keeps_the_aspect_ratio() -> None:
    data, height, width = imagenet.resize_image(_encode((10, 20, 30), (640, 480)), 256)
    assert (height, width) == (256, 341)
    with PIL.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG" and image.size == (341, 256) and image.mode == "RGB"
    _, height, width = imagenet.resize_image(_encode((1, 2, 3), (50, 100), "PNG"), 64, square=True)
    assert (height, width) == (64, 64)
    with pytest.raises(imagenet.ImagenetFormatError, match="cannot decode"):
        imagenet.ImageImagenet()._image(b"not an image", "x.JPEG")


def test_generate_from_local_folder(tiny: Tiny, tiny_problem: None, tmp_path) -> None:
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    p = imagenet.ImageImagenet()
    summary = p.generate_data(data_dir, tmp_dir, mirror=tiny.folder, progress=False)
    assert summary["train"].examples == 6 and summary["dev"].examples == 3
    shards = sorted(n for n in os.listdir(data_dir) if generator_utils.is_shard_name(n))
    assert shards == [
        "image_imagenet-dev-00000-of-00002",
        "image_imagenet-dev-00001-of-00002",
        "image_imagenet-train-00000-of-00001",
    ]
    # Read in place: nothing copied into tmp_dir, only the verification markers.
    assert sorted(os.listdir(os.path.join(tmp_dir, "imagenet"))) == [
        f".{imagenet.TRAIN_ARCHIVE}.verified",
        f".{imagenet.VAL_ARCHIVE}.verified",
    ]
    stored = _stored(os.path.join(data_dir, shards[-1]))
    assert [s["label"] for s in stored] == [label for label, _ in tiny.train_colours]
    # Shorter side 256, aspect kept: 64x48 -> 341x256, 40x80 -> 256x512, 50x50 -> 256.
    assert [(s["height"], s["width"]) for s in stored[::2]] == [(256, 341), (512, 256), (256, 256)]
    assert all(s["format"] == b"jpeg" for s in stored)
    for s, (_, colour) in zip(stored, tiny.train_colours, strict=True):
        with PIL.open(io.BytesIO(s["encoded"])) as image:
            assert image.format == "JPEG" and image.mode == "RGB"  # CMYK and PNG converted
            assert _close(np.asarray(image), colour)

    dev = list(p.dataset("eval", data_dir, deterministic=True, shuffle_files=False).as_numpy_iterator())
    assert len(dev) == 3
    assert sorted(int(ex["targets"][0]) for ex in dev) == sorted(_val_labels())
    for example in dev:
        assert example["inputs"].shape == (224, 224, 3) and example["inputs"].dtype == np.uint8
        index = _val_labels().index(int(example["targets"][0]))
        assert _close(example["inputs"], tiny.val_colours[index])
    train = list(p.dataset("train", data_dir, seed=3).as_numpy_iterator())
    assert [ex["inputs"].shape for ex in train] == [(224, 224, 3)] * 6
    assert sorted(int(ex["targets"][0]) for ex in train) == [0, 0, 0, 1, 1, 1]
    assert p.feature_encoders(data_dir)["targets"].decode([1]) == "n01443537"


def test_generate_from_http_mirror(tiny: Tiny, tiny_problem: None, tmp_path) -> None:
    with serve_folder(tiny.folder) as (url, requested):
        data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
        summary = imagenet.ImageImagenet().generate_data(
            data_dir, tmp_dir, mirror=url, max_cases=2, progress=False
        )
    assert summary["train"].examples == 2 and summary["dev"].examples == 2
    assert sorted(requested) == sorted(f"/{n}" for n in tiny.resources)  # once each
    assert os.path.isfile(os.path.join(tmp_dir, "imagenet", imagenet.TRAIN_ARCHIVE))


def test_missing_archives_error_says_exactly_what_to_do(tiny: Tiny, tiny_problem: None, tmp_path) -> None:
    tmp_dir = str(tmp_path / "tmp")
    with pytest.raises(problem.DataMissingError) as info:
        imagenet.ImageImagenet().generate_data(str(tmp_path / "data"), tmp_dir, progress=False)
    message = str(info.value)
    for expected in (
        imagenet.TRAIN_ARCHIVE,
        imagenet.VAL_ARCHIVE,
        os.path.join(tmp_dir, "imagenet"),
        "https://image-net.org/download-images",
        "log in",
        "--data_mirror",
    ):
        assert expected in message
    # With the validation archive in place, only the training archive is named.
    os.makedirs(os.path.join(tmp_dir, "imagenet"))
    os.link(
        os.path.join(tiny.folder, imagenet.VAL_ARCHIVE),
        os.path.join(tmp_dir, "imagenet", imagenet.VAL_ARCHIVE),
    )
    with pytest.raises(problem.DataMissingError) as info:
        imagenet.ImageImagenet().prepare(str(tmp_path / "data"), tmp_dir)
    assert f"Missing: {imagenet.TRAIN_ARCHIVE} " in str(info.value)
    assert f"{imagenet.VAL_ARCHIVE} (" not in str(info.value)


def test_verification_is_remembered_and_redone_when_the_file_changes(
    tiny: Tiny, tiny_problem: None, tmp_path, monkeypatch
) -> None:
    tmp_dir = str(tmp_path / "tmp")
    folder = tmp_path / "mirror"
    folder.mkdir()
    for name in tiny.resources:
        (folder / name).write_bytes(open(os.path.join(tiny.folder, name), "rb").read())
    p = imagenet.ImageImagenet()
    hashed: list[str] = []
    real_sha = download.sha256_of
    monkeypatch.setattr(download, "sha256_of", lambda path: hashed.append(path) or real_sha(path))
    p.prepare("unused", tmp_dir, mirror=str(folder))
    p.prepare("unused", tmp_dir, mirror=str(folder))
    assert len(hashed) == 2  # once per archive, not once per call
    val = folder / imagenet.VAL_ARCHIVE
    data = bytearray(val.read_bytes())
    data[-600] ^= 0xFF  # same size, other content
    val.write_bytes(bytes(data))
    os.utime(val, ns=(time.time_ns(), time.time_ns() + 10**9))
    with pytest.raises(download.ChecksumError, match="is not the official"):
        p.prepare("unused", tmp_dir, mirror=str(folder))


def test_real_pins_reject_a_wrong_file(tiny: Tiny, tmp_path) -> None:
    p = imagenet.ImageImagenet()  # the real pins
    for name in imagenet.RESOURCES:
        with pytest.raises(download.ChecksumError, match=f"{name}: it holds"):
            imagenet.verify_in_place(
                os.path.join(tiny.folder, name), imagenet.RESOURCES[name], str(tmp_path)
            )
    assert p.resources is imagenet.RESOURCES


def test_real_pins_match_tensorflow_datasets() -> None:
    path = imagenet.tfds_file("datasets/imagenet2012/checksums.tsv")
    rows = [line.split() for line in open(path).read().splitlines() if line.strip()]
    assert {(r.url, r.size, r.sha256) for r in imagenet.RESOURCES.values()} == {
        (url, int(size), sha) for url, size, sha in rows
    }


def test_bad_archive_layout_is_reported(tiny: Tiny, tmp_path) -> None:
    bad = str(tmp_path / "train.tar")
    with open(bad, "wb") as f:
        f.write(_tar({"nXXXX.tar": _tar({"a.JPEG": b"x"})}))
    with pytest.raises(imagenet.ImagenetFormatError, match="not a class archive"):
        list(imagenet.ImageImagenet().train_images(bad))
    with open(bad, "wb") as f:
        f.write(_tar({"photo.jpg": b"x"}))
    with pytest.raises(imagenet.ImagenetFormatError, match="unexpected member 'photo.jpg'"):
        list(imagenet.ImageImagenet().val_images(bad))


def test_registered_problem() -> None:
    p = registry.problem("image_imagenet")
    assert type(p) is imagenet.ImageImagenet
    hp = p.hparams()
    assert hp.modality == {"inputs": "image", "targets": "class_label"}
    assert hp.vocab_size == {"inputs": 256, "targets": 1000}
    assert hp.image_shape == [224, 224, 3]
    assert p.num_examples("train") == 1_281_167 and p.num_examples("dev") == 50_000
    assert [(s.name, s.shards) for s in p.splits] == [("train", 1024), ("dev", 10)]


def test_round_robin_interleaves_until_every_stream_ends() -> None:
    streams: list[tuple[int, Iterator[tuple[str, bytes]]]] = [
        (0, iter([("a", b""), ("b", b"")])),
        (1, iter([("c", b"")])),
        (2, iter([("d", b""), ("e", b""), ("f", b"")])),
    ]
    assert [name for _, name, _ in imagenet._round_robin(streams)] == list("acdbef")
