"""CIFAR-10 and CIFAR-100: 32x32x3 uint8 images in 10 or 100 classes.

Tensor2Tensor's `image_cifar10` and `image_cifar100`: train = the official 50,000
training images (10 shards), dev = the official 10,000 test images (1 shard). Training
reads apply the standard augmentation (zero-pad 4, random 32x32 crop, random
horizontal flip: `image_problems.cifar_augment`); evaluation reads the images as stored.

The "python version" archives of https://www.cs.toronto.edu/~kriz/cifar.html are
fetched into tmp_dir/cifar10 or tmp_dir/cifar100 (or taken from a mirror: a URL prefix
or a local folder holding files of the same names) and verified against pinned sizes
and sha256, then read member by member straight from the verified archive (nothing is
extracted):

- cifar-10-python.tar.gz: cifar-10-batches-py/{data_batch_1..5, test_batch,
  batches.meta}; each batch a pickle of {b"data": uint8 [N, 3072], b"labels": [N]}.
- cifar-100-python.tar.gz: cifar-100-python/{train, test, meta}; {b"data": uint8
  [N, 3072], b"fine_labels": [N], b"coarse_labels": [N]}; the 100 fine labels are used.

A row of b"data" holds the 1024 red, then green, then blue values of one image in
row-major order, so [N, 3072] reshapes to [N, 3, 32, 32] and transposes to [N, 32, 32, 3].

Pins: the sha256 of both archives are the `file_hash` values Keras
(its datasets module, cifar10.py and cifar100.py) verifies the same files with; the sizes
are the Content-Length the server reports (170,498,071 and 169,001,437 bytes, as
recorded in many download logs). TFDS pins only the "binary version" archives.
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import tarfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.generation import download

CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR100_ARCHIVE = "cifar-100-python.tar.gz"
_BASE_URL = "https://www.cs.toronto.edu/~kriz/"

CIFAR10_RESOURCE = download.Resource(
    _BASE_URL + CIFAR10_ARCHIVE,
    sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
    size=170_498_071,
    filename=CIFAR10_ARCHIVE,
)
CIFAR100_RESOURCE = download.Resource(
    _BASE_URL + CIFAR100_ARCHIVE,
    sha256="85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
    size=169_001_437,
    filename=CIFAR100_ARCHIVE,
)

CIFAR10_LABELS = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)

# The fine label names of cifar-100-python/meta (b"fine_label_names"), in id order
# (alphabetical). prepare() checks them against the archive's own meta file.
CIFAR100_LABELS = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle",
    "bicycle", "bottle", "bowl", "boy", "bridge", "bus", "butterfly", "camel",
    "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock",
    "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur",
    "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster",
    "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
    "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse",
    "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear",
    "pickup_truck", "pine_tree", "plain", "plate", "poppy", "porcupine",
    "possum", "rabbit", "raccoon", "ray", "road", "rocket", "rose",
    "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake",
    "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table",
    "tank", "telephone", "television", "tiger", "tractor", "train", "trout",
    "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman",
    "worm",
)  # fmt: skip

_IMAGE_BYTES = 32 * 32 * 3


def _same_kind(e: download.DownloadError) -> type[download.DownloadError]:
    """ChecksumError or DownloadError, as `e` (whose own type may be gin's proxy)."""
    return download.ChecksumError if isinstance(e, download.ChecksumError) else download.DownloadError


class CifarFormatError(ValueError):
    """A CIFAR archive member is missing or not in the expected format."""


# The only globals a CIFAR pickle refers to: numpy's ndarray reconstruction. Python 2
# wrote the official files, naming numpy.core.multiarray; numpy 2 names numpy._core.
# A copy re-pickled by Python 3 with protocol 2 also names _codecs.encode (str -> bytes).
_RECONSTRUCT = np.zeros(0).__reduce__()[0]
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}


class _CifarUnpickler(pickle.Unpickler):
    """An Unpickler that can build numpy arrays and plain containers, nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"CIFAR pickle refers to {module}.{name}, which a CIFAR batch never "
                "contains; refusing to load it."
            ) from None


def load_pickle(data: bytes, what: str) -> dict[bytes, Any]:
    """The dict pickled in `data` (a CIFAR batch or meta file), keys as bytes.

    Only members of the pinned, sha256-verified archive are unpickled, and then with an
    Unpickler that resolves no global but numpy's array reconstruction, so neither a
    swapped archive nor a crafted pickle can run code. encoding="bytes" reads the
    Python 2 strings of the official files as bytes, as the CIFAR page prescribes.
    """
    try:
        value = _CifarUnpickler(io.BytesIO(data), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
        raise CifarFormatError(f"{what}: not a CIFAR pickle ({e}).") from e
    if not isinstance(value, dict):
        raise CifarFormatError(f"{what}: holds a {type(value).__name__}, not a dict.")
    return value


def read_member(archive: str, name: str) -> bytes:
    """The bytes of member `name` of the tar archive `archive`."""
    with tarfile.open(archive, "r:*") as tar:
        try:
            member = tar.getmember(name)
        except KeyError:
            raise CifarFormatError(
                f"{archive} has no member {name!r}; it is not the CIFAR python archive."
            ) from None
        f = tar.extractfile(member)
        if f is None:
            raise CifarFormatError(f"{archive}: {name!r} is not a regular file.")
        with f:
            return f.read()


def read_batch(
    archive: str, name: str, label_key: bytes, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images [N, 32, 32, 3], int64 labels [N]) of one batch pickle."""
    what = f"{archive}:{name}"
    batch = load_pickle(read_member(archive, name), what)
    if b"data" not in batch or label_key not in batch:
        raise CifarFormatError(
            f"{what}: expected keys b'data' and {label_key!r}, found {sorted(batch)}."
        )
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[label_key], dtype=np.int64).reshape(-1)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _IMAGE_BYTES:
        raise CifarFormatError(
            f"{what}: b'data' is {data.dtype} {list(data.shape)}, expected uint8 "
            f"[N, {_IMAGE_BYTES}]."
        )
    if labels.shape[0] != data.shape[0]:
        raise CifarFormatError(
            f"{what}: {data.shape[0]} images but {labels.shape[0]} labels."
        )
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise CifarFormatError(
            f"{what}: labels span [{labels.min()}, {labels.max()}], expected [0, "
            f"{num_classes})."
        )
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, labels


class CifarProblem(image_problems.Image2ClassProblem):
    """Base of the CIFAR data sets: one archive of python pickles, 32x32x3 images."""

    image_size = 32
    num_channels = 3
    train_shards = 10
    dev_shards = 1
    train_size = 50_000
    dev_size = 10_000
    homepage = "https://www.cs.toronto.edu/~kriz/cifar.html"
    resource: download.Resource = CIFAR10_RESOURCE
    download_subdir = "cifar10"
    archive_folder = "cifar-10-batches-py"
    train_members: Sequence[str] = ()
    dev_members: Sequence[str] = ()
    meta_member = ""
    meta_names_key = b""
    label_key = b""

    def augment(self, image: Any) -> Any:
        return image_problems.cifar_augment(image)

    def num_examples(self, split: str) -> int:
        return self.train_size if split == problem.TRAIN_SPLIT else self.dev_size

    def split_members(self, split: str) -> Sequence[str]:
        if split == problem.TRAIN_SPLIT:
            return self.train_members
        if split == problem.DEV_SPLIT:
            return self.dev_members
        raise ValueError(f"{self.name} has no split {split!r}.")

    def fetch(self, tmp_dir: str, mirror: str | None) -> str:
        """The verified local archive, fetched into tmp_dir/download_subdir if needed."""
        directory = os.path.abspath(os.path.join(tmp_dir, self.download_subdir))
        try:
            return download.fetch(self.resource, directory, mirror)
        except download.DownloadError as e:
            name = self.resource.local_name
            raise _same_kind(e)(
                f"{self.name}: could not get {name}.\n{e}\nTo provide the data by hand, "
                f"place {name} (the python version, from {self.homepage}) in {directory} "
                f"(under --tmp_dir), or pass --data_mirror (or set "
                f"{download.MIRROR_ENV_VAR}) to a folder or URL prefix holding it."
            ) from e

    def check_label_names(self, archive: str) -> None:
        """Raises CifarFormatError unless the archive's meta file names our classes."""
        member = f"{self.archive_folder}/{self.meta_member}"
        meta = load_pickle(read_member(archive, member), f"{archive}:{member}")
        names = meta.get(self.meta_names_key)
        if names is None:
            raise CifarFormatError(
                f"{archive}:{member} has no {self.meta_names_key!r} (keys: {sorted(meta)})."
            )
        found = tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names)
        if found != tuple(self.class_labels):
            raise CifarFormatError(
                f"{archive}:{member} names the classes {list(found)[:12]}..., expected "
                f"{list(self.class_labels)[:12]}...; the archive is not {self.name}'s."
            )

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Fetches and verifies the archive and its class names before any shard."""
        self.check_label_names(self.fetch(tmp_dir, mirror))

    def generate_images(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[tuple[np.ndarray, int]]:
        """Yields (uint8 [32, 32, 3], label) in the official order, one batch in memory."""
        archive = self.fetch(tmp_dir, mirror)
        count = 0
        for member in self.split_members(split):
            images, labels = read_batch(
                archive, f"{self.archive_folder}/{member}", self.label_key, self.num_classes
            )
            count += len(labels)
            for image, label in zip(images, labels, strict=True):
                yield image, int(label)
        expected = self.num_examples(split)
        if count != expected:
            raise CifarFormatError(
                f"{archive}: the {split} split holds {count} images, expected {expected}."
            )


@registry.register_problem
class ImageCifar10(CifarProblem):
    """CIFAR-10: 60,000 32x32 colour images in 10 classes (airplane ... truck)."""

    class_labels = CIFAR10_LABELS
    resource = CIFAR10_RESOURCE
    download_subdir = "cifar10"
    archive_folder = "cifar-10-batches-py"
    train_members = tuple(f"data_batch_{i}" for i in range(1, 6))
    dev_members = ("test_batch",)
    meta_member = "batches.meta"
    meta_names_key = b"label_names"
    label_key = b"labels"


@registry.register_problem
class ImageCifar100(CifarProblem):
    """CIFAR-100: 60,000 32x32 colour images in 100 fine classes (apple ... worm)."""

    class_labels = CIFAR100_LABELS
    resource = CIFAR100_RESOURCE
    download_subdir = "cifar100"
    archive_folder = "cifar-100-python"
    train_members = ("train",)
    dev_members = ("test",)
    meta_member = "meta"
    meta_names_key = b"fine_label_names"
    label_key = b"fine_labels"
