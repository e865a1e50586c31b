"""ImageNet (ILSVRC 2012 classification): 1,000 classes, manual download.

Tensor2Tensor's `image_imagenet`: train = the 1,281,167 training images (1024 shards),
dev = the 50,000 validation images (10 shards), labels 0..999 in the order of the
sorted WordNet ids (n01440764 = 0 ... n15075141 = 999), as TensorFlow Datasets'
imagenet2012 numbers them.

The archives cannot be downloaded automatically (image-net.org requires an account and
accepting its terms). Place the official files

  ILSVRC2012_img_train.tar  (147,897,477,120 bytes; a tar of 1000 per-class tars
                             n01440764.tar ... each holding that class's JPEGs)
  ILSVRC2012_img_val.tar    (6,744,924,160 bytes; ILSVRC2012_val_00000001.JPEG ...)

in tmp_dir/imagenet (or tmp_dir, or a folder passed as --data_mirror /
T2T_DATA_MIRROR; an http(s) mirror URL is downloaded into tmp_dir/imagenet). They are
read where they lie, never copied or extracted, and verified against the sizes and
sha256 TensorFlow Datasets pins (datasets/imagenet2012/checksums.tsv); the ~150 GB hash
is computed once and remembered in tmp_dir/imagenet/.<archive>.verified (keyed by path,
size and modification time).

Class ids and validation labels come from the label files the installed
tensorflow_datasets package ships (datasets/imagenet2012/labels.txt: the 1000 WordNet
ids; validation_labels.txt: the WordNet id of each validation image, in file-name
order), so no devkit is needed. Class names are the WordNet ids.

Stored images: every image is decoded (PIL; CMYK JPEGs and the one PNG in the training
set are converted to RGB), resized so that its shorter side is 256 pixels (bicubic,
aspect ratio kept; small images are enlarged) and re-encoded as JPEG (quality 90):
roughly 20 KB per image instead of 110 KB. T2T instead read the original JPEGs and
resized to 299 on every read. Reading: TRAIN takes a random 224x224 crop and flips it
left-right with probability 1/2; EVAL takes the central 224x224 crop (the standard
ResNet "resize 256, crop 224" evaluation).

Training images are written class-interleaved (round r holds the r-th image of every
class, classes in id order), reading the 1000 inner tars side by side from the
uncompressed outer tar, so that every shard holds all classes. This needs random reads
of the archive (fine on SSDs; slow on a spinning disk).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import re
import tarfile
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import IO, Any

from absl import logging

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.generation import download
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

TRAIN_ARCHIVE = "ILSVRC2012_img_train.tar"
VAL_ARCHIVE = "ILSVRC2012_img_val.tar"
DOWNLOAD_PAGE = "https://image-net.org/download-images"
_TFDS_URL = "http://www.image-net.org/challenges/LSVRC/2012/nnoupb/"

# Sizes and sha256 as in tensorflow_datasets/datasets/imagenet2012/checksums.tsv.
RESOURCES = {
    TRAIN_ARCHIVE: download.Resource(
        _TFDS_URL + TRAIN_ARCHIVE,
        sha256="b08200a27a8e34218a0e58fde36b0fe8f73bc377f4acea2d91602057c3ca45bb",
        size=147_897_477_120,
        filename=TRAIN_ARCHIVE,
    ),
    VAL_ARCHIVE: download.Resource(
        _TFDS_URL + VAL_ARCHIVE,
        sha256="c7e06a6c0baccf06d8dbeb6577d71efff84673a5dbdd50633ab44f8ea0456ae0",
        size=6_744_924_160,
        filename=VAL_ARCHIVE,
    ),
}

TFDS_LABELS_FILE = "datasets/imagenet2012/labels.txt"
TFDS_VALIDATION_LABELS_FILE = "datasets/imagenet2012/validation_labels.txt"
_VAL_NAME_RE = re.compile(r"^ILSVRC2012_val_(\d{8})\.JPEG$")

JPEG_QUALITY = 90


class ImagenetFormatError(ValueError):
    """An ImageNet archive does not have the layout of the official files."""


# ------------------------------------------------------------------ label files
def tfds_file(relative: str) -> str:
    """Path of a data file inside the installed tensorflow_datasets package."""
    spec = importlib.util.find_spec("tensorflow_datasets")
    if spec is None or not spec.submodule_search_locations:
        raise problem.DataMissingError(
            f"The ImageNet label files come from the tensorflow_datasets package "
            f"({relative}), which is not installed: pip install tensorflow-datasets."
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], relative)
    if not os.path.isfile(path):
        raise problem.DataMissingError(
            f"{path} is missing from the installed tensorflow_datasets package; "
            "reinstall it (pip install --force-reinstall tensorflow-datasets)."
        )
    return path


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f.read().strip().splitlines()]


@functools.cache
def synsets() -> tuple[str, ...]:
    """The 1000 WordNet ids in label-id order (TFDS's imagenet2012 labels.txt)."""
    names = tuple(_read_lines(tfds_file(TFDS_LABELS_FILE)))
    if len(names) != 1000 or len(set(names)) != 1000:
        raise ImagenetFormatError(f"{TFDS_LABELS_FILE}: expected 1000 distinct WordNet ids.")
    return names


@functools.cache
def validation_synsets() -> tuple[str, ...]:
    """WordNet id of validation image i + 1 (ILSVRC2012_val_%08d.JPEG) at index i."""
    return tuple(_read_lines(tfds_file(TFDS_VALIDATION_LABELS_FILE)))


# ----------------------------------------------------------------- image resizing
def _pil_image() -> Any:
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Preparing ImageNet / MS-COCO images needs Pillow: pip install pillow"
        ) from e
    return Image


def resize_image(
    data: bytes, shorter_side: int, *, square: bool = False, quality: int = JPEG_QUALITY
) -> tuple[bytes, int, int]:
    """(JPEG bytes, height, width) of an encoded image (any format PIL reads), in RGB,
    resized so that its shorter side is `shorter_side` (bicubic, aspect kept) and, with
    `square`, center-cropped to shorter_side x shorter_side."""
    Image = _pil_image()
    with Image.open(io.BytesIO(data)) as img:
        width, height = img.size
        scale = shorter_side / min(width, height)
        new_w = max(shorter_side, round(width * scale))
        new_h = max(shorter_side, round(height * scale))
        if img.format == "JPEG":
            img.draft("RGB", (new_w, new_h))  # decode at a reduced scale when shrinking
        rgb = img.convert("RGB")
    resized = rgb.resize((new_w, new_h), Image.Resampling.BICUBIC)
    if square:
        left = (new_w - shorter_side) // 2
        top = (new_h - shorter_side) // 2
        resized = resized.crop((left, top, left + shorter_side, top + shorter_side))
    out = io.BytesIO()
    resized.save(out, format="JPEG", quality=quality)
    return out.getvalue(), resized.size[1], resized.size[0]


def jpeg_example(encoded: bytes, height: int, width: int, label: int | None) -> dict[str, Any]:
    example: dict[str, Any] = {
        "image/encoded": encoded,
        "image/format": "jpeg",
        "image/height": [height],
        "image/width": [width],
    }
    if label is not None:
        example["image/class/label"] = [int(label)]
    return example


# ------------------------------------------------------------ locating the files
def _verified_marker(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.verified")


def _stamp(path: str) -> dict[str, Any]:
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def verify_in_place(path: str, resource: download.Resource, marker_dir: str, *, sha256: bool = True) -> None:
    """Checks a local file against its pinned size (always) and sha256 (once: the result
    is remembered in marker_dir, keyed by path, size and mtime). ChecksumError if wrong."""
    name = resource.local_name
    size = os.path.getsize(path)
    if resource.size is not None and size != resource.size:
        raise download.ChecksumError(
            f"{path} is not the official {name}: it holds {size:,} bytes, expected "
            f"{resource.size:,}. Replace it with the file from {DOWNLOAD_PAGE}."
        )
    if not sha256 or resource.sha256 is None:
        if resource.sha256 is None:
            logging.warning("%s is UNVERIFIED: no sha256 is pinned.", path)
        return
    marker = _verified_marker(marker_dir, name)
    stamp = {**_stamp(path), "sha256": resource.sha256.lower()}
    try:
        with open(marker) as f:
            if json.load(f) == stamp:
                return
    except (OSError, ValueError):
        pass
    logging.info(
        "Verifying the sha256 of %s (%.1f GB); this is done once and remembered in %s.",
        path, size / 1e9, marker,
    )
    actual = download.sha256_of(path)
    if actual != resource.sha256.lower():
        raise download.ChecksumError(
            f"{path} is not the official {name}: sha256 {actual}, expected "
            f"{resource.sha256.lower()}. Replace it with the file from {DOWNLOAD_PAGE}."
        )
    os.makedirs(marker_dir, exist_ok=True)
    with open(marker + ".tmp", "w") as f:
        json.dump(stamp, f)
    os.replace(marker + ".tmp", marker)


def _is_url(mirror: str) -> bool:
    return urllib.parse.urlparse(mirror).scheme in ("http", "https", "ftp")


def _local_mirror(mirror: str) -> str:
    parsed = urllib.parse.urlparse(mirror)
    if parsed.scheme == "file":
        return parsed.path
    return os.path.expanduser(mirror)


# ------------------------------------------------------------------ reading tars
def iter_tar_files(fileobj: IO[bytes] | None = None, path: str | None = None) -> Iterator[tuple[str, bytes]]:
    """(member base name, bytes) of the regular files of an uncompressed tar, in
    archive order, reading one member at a time (nothing is extracted to disk)."""
    with tarfile.open(name=path, fileobj=fileobj, mode="r:") as tar:
        while True:
            info = tar.next()
            if info is None:
                return
            # TarFile remembers every header it reads; 1.28M of them would add up.
            tar.members.clear()
            if not info.isfile():
                continue
            f = tar.extractfile(info)
            assert f is not None
            with f:
                yield os.path.basename(info.name), f.read()


def _round_robin(
    streams: Sequence[tuple[int, Iterator[tuple[str, bytes]]]],
) -> Iterator[tuple[int, str, bytes]]:
    """(label, name, bytes): the first item of every stream, then the second, ..."""
    active = list(streams)
    while active:
        still = []
        for label, stream in active:
            item = next(stream, None)
            if item is not None:
                yield label, item[0], item[1]
                still.append((label, stream))
        active = still


@registry.register_problem
class ImageImagenet(image_problems.Image2ClassProblem):
    """ILSVRC 2012: stored at shorter side 256 (JPEG); 224x224x3 crops; 1000 classes."""

    image_size = 224  # the crops the model sees
    stored_shorter_side = 256
    num_channels = 3
    train_shards = 1024
    dev_shards = 10
    train_size = 1_281_167
    dev_size = 50_000
    download_subdir = "imagenet"
    resources = RESOURCES
    verify_sha256 = True

    @property
    def class_labels(self) -> tuple[str, ...]:  # type: ignore[override]
        return synsets()

    def num_examples(self, split: str) -> int:
        return self.train_size if split == problem.TRAIN_SPLIT else self.dev_size

    # ------------------------------------------------------------------ files
    def archive_dir(self, tmp_dir: str) -> str:
        return os.path.abspath(os.path.join(tmp_dir, self.download_subdir))

    def _candidates(self, name: str, tmp_dir: str, mirror: str | None) -> list[str]:
        places = []
        if mirror and not _is_url(mirror):
            places.append(os.path.join(_local_mirror(mirror), name))
        places.append(os.path.join(self.archive_dir(tmp_dir), name))
        places.append(os.path.join(os.path.abspath(tmp_dir), name))
        return places

    def locate(self, names: Sequence[str], tmp_dir: str, mirror: str | None) -> list[str]:
        """Verified paths of the archives `names`; DataMissingError naming every
        missing one, where to put it and where to get it."""
        if mirror is None:
            mirror = os.environ.get(download.MIRROR_ENV_VAR) or None
        directory = self.archive_dir(tmp_dir)
        found: dict[str, str] = {}
        missing: list[str] = []
        for name in names:
            path = next((p for p in self._candidates(name, tmp_dir, mirror) if os.path.isfile(p)), None)
            if path is None and mirror and _is_url(mirror):
                url = mirror.rstrip("/") + "/" + urllib.parse.quote(name)
                resource = download.Resource(
                    url, sha256=self.resources[name].sha256, size=self.resources[name].size,
                    filename=name,
                )
                try:
                    # mirror="" so that only this URL is tried (no canonical, no env var).
                    path = download.fetch(resource, directory, mirror="")
                except download.ChecksumError:
                    raise
                except download.DownloadError as e:
                    logging.warning("Could not fetch %s from %s: %s", name, url, e)
            if path is None:
                missing.append(name)
            else:
                found[name] = path
        if missing:
            raise problem.DataMissingError(self._missing_message(missing, tmp_dir, mirror))
        for name, path in found.items():
            verify_in_place(path, self.resources[name], directory, sha256=self.verify_sha256)
        return [found[name] for name in names]

    def _missing_message(self, missing: Sequence[str], tmp_dir: str, mirror: str | None) -> str:
        looked = [p for name in missing for p in self._candidates(name, tmp_dir, mirror)]
        if mirror and _is_url(mirror):
            looked += [mirror.rstrip("/") + "/" + name for name in missing]
        sizes = ", ".join(f"{n} ({self.resources[n].size:,} bytes)" for n in missing)
        return (
            f"{self.name} needs the official ILSVRC 2012 archives, which must be "
            f"downloaded by hand. Missing: {sizes}.\n"
            f"Get them from {DOWNLOAD_PAGE} (log in with an image-net.org account and "
            f"accept the terms; ILSVRC2012: 'Training images (Task 1 & 2)' and "
            f"'Validation images (all tasks)'), then place them in "
            f"{self.archive_dir(tmp_dir)} (under --tmp_dir), or in a folder passed as "
            f"--data_mirror (or {download.MIRROR_ENV_VAR}). They are read in place, "
            f"never copied. Looked for: {', '.join(looked)}."
        )

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Finds and verifies both archives and the label files before any shard."""
        self.locate(sorted(self.resources), tmp_dir, mirror)
        synsets()
        validation_synsets()

    # ------------------------------------------------------------- examples
    def _image(self, data: bytes, where: str) -> tuple[bytes, int, int]:
        try:
            return resize_image(data, self.stored_shorter_side)
        except (OSError, ValueError, SyntaxError) as e:
            raise ImagenetFormatError(f"{where}: cannot decode the image ({e}).") from e

    def train_images(self, path: str) -> Iterator[tuple[int, str, bytes]]:
        """(label, file name, original bytes), class-interleaved (see module doc)."""
        label_of = {wnid: i for i, wnid in enumerate(synsets())}
        with tarfile.open(path, "r:") as outer:
            members = sorted((m for m in outer.getmembers() if m.isfile()), key=lambda m: m.name)
            streams = []
            for member in members:
                wnid = os.path.basename(member.name)
                if not wnid.endswith(".tar") or wnid[: -len(".tar")] not in label_of:
                    raise ImagenetFormatError(
                        f"{path}: member {member.name!r} is not a class archive "
                        "(<WordNet id>.tar); is this ILSVRC2012_img_train.tar?"
                    )
                inner = outer.extractfile(member)
                streams.append((label_of[wnid[: -len(".tar")]], iter_tar_files(fileobj=inner)))
            yield from _round_robin(streams)

    def val_images(self, path: str) -> Iterator[tuple[int, str, bytes]]:
        """(label, file name, original bytes) in archive order."""
        label_of = {wnid: i for i, wnid in enumerate(synsets())}
        labels = validation_synsets()
        for name, data in iter_tar_files(path=path):
            match = _VAL_NAME_RE.match(name)
            if not match or not 1 <= int(match[1]) <= len(labels):
                raise ImagenetFormatError(
                    f"{path}: unexpected member {name!r} (expected "
                    f"ILSVRC2012_val_00000001.JPEG ... ILSVRC2012_val_{len(labels):08d}.JPEG)."
                )
            yield label_of[labels[int(match[1]) - 1]], name, data

    def generate_examples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, Any]]:
        if split not in (problem.TRAIN_SPLIT, problem.DEV_SPLIT):
            raise ValueError(f"{self.name} has no split {split!r}.")
        archive = TRAIN_ARCHIVE if split == problem.TRAIN_SPLIT else VAL_ARCHIVE
        (path,) = self.locate([archive], tmp_dir, mirror)
        images = self.train_images(path) if split == problem.TRAIN_SPLIT else self.val_images(path)
        count = 0
        for label, name, data in images:
            encoded, height, width = self._image(data, f"{path}:{name}")
            count += 1
            yield jpeg_example(encoded, height, width, label)
        if count != self.num_examples(split):
            raise ImagenetFormatError(
                f"{path} holds {count:,} images, expected {self.num_examples(split):,}."
            )

    # -------------------------------------------------------------- reading
    def decode_image(self, encoded: Any) -> Any:
        image = tf.io.decode_jpeg(encoded, channels=self.num_channels)
        return tf.ensure_shape(image, [None, None, self.num_channels])

    def preprocess_example(
        self, example: dict[str, Any], mode: str, model_hparams: Any
    ) -> dict[str, Any]:
        """TRAIN: random 224x224 crop + random flip; else the central 224x224 crop."""
        example = dict(example)
        key, image = self.image_feature(example)
        size = self.image_size
        if mode == problem.TRAIN:
            image = tf.image.random_crop(image, [size, size, self.num_channels])
            image = tf.image.random_flip_left_right(image)
        else:
            image = tf.image.resize_with_crop_or_pad(image, size, size)
        example[key] = tf.ensure_shape(image, [size, size, self.num_channels])
        return example
