"""MNIST and Fashion-MNIST: 28x28x1 uint8 images in 10 classes.

Tensor2Tensor's `image_mnist` and `image_fashion_mnist`: train = the official 60,000
training images (10 shards), dev = the official 10,000 test images (1 shard).

The four gzip files of each set are fetched into tmp_dir/{mnist,fashion_mnist} (or taken
from a mirror: a URL prefix or a local folder holding files of the same names), verified against the sizes
and sha256 that TensorFlow Datasets pins, decompressed next to them and read through
numpy memory maps, so generation holds neither all images nor all PNGs in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.generation import download, extract

TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"

IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions

_MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
_FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"


def _resources(base_url: str, pins: Mapping[str, tuple]) -> dict[str, download.Resource]:
    return {
        name: download.Resource(
            base_url + name, sha256=sha, size=size, filename=name, payload_sha256=payload
        )
        for name, (size, sha, payload) in pins.items()
    }


# (size in bytes, sha256, sha256 of the decompressed file) as in TensorFlow Datasets'
# url_checksums. The decompressed hashes of MNIST are not pinned (unknown here).
MNIST_RESOURCES = _resources(
    _MNIST_URL,
    {
        TRAIN_IMAGES: (
            9912422,
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            None,
        ),
        TRAIN_LABELS: (
            28881,
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            None,
        ),
        TEST_IMAGES: (
            1648877,
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            None,
        ),
        TEST_LABELS: (
            4542,
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            None,
        ),
    },
)

# The decompressed hashes let a re-compressed copy verify, e.g. Debian's package
# dataset-fashion-mnist (/usr/share/datasets/fashion-mnist/), whose .gz files differ.
FASHION_MNIST_RESOURCES = _resources(
    _FASHION_URL,
    {
        TRAIN_IMAGES: (
            26421880,
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        ),
        TRAIN_LABELS: (
            29515,
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        ),
        TEST_IMAGES: (
            4422102,
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        ),
        TEST_LABELS: (
            5148,
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        ),
    },
)


class IdxFormatError(ValueError):
    """A file is not a well-formed idx file of the expected kind."""


def read_idx(path: str, magic: int) -> np.ndarray:
    """A read-only uint8 array [d0, d1, ...] memory-mapped from a decompressed idx file.

    The idx header is a big-endian uint32 magic number (0x0000 0x08 <ndim>: unsigned
    bytes, `ndim` dimensions) followed by `ndim` big-endian uint32 sizes. The file must
    hold exactly the bytes those sizes announce. Raises IdxFormatError naming `path`.
    """
    ndim = magic & 0xFF
    header_size = 4 + 4 * ndim
    file_size = os.path.getsize(path)
    with open(path, "rb") as f:
        header = f.read(header_size)
    found = int.from_bytes(header[:4], "big") if len(header) >= 4 else None
    if found is not None and found != magic:
        raise IdxFormatError(
            f"{path}: bad idx magic number {found} (expected {magic}); the file is not "
            f"an idx {'label' if magic == IDX_LABELS_MAGIC else 'image'} file, or is "
            f"still compressed."
        )
    if len(header) < header_size:
        raise IdxFormatError(
            f"{path}: too short for an idx header ({file_size} bytes, need {header_size})."
        )
    shape = tuple(int(d) for d in np.frombuffer(header, ">u4", count=ndim, offset=4))
    expected = header_size + int(np.prod(shape, dtype=np.int64))
    if file_size != expected:
        raise IdxFormatError(
            f"{path}: holds {file_size} bytes but its header announces {list(shape)} "
            f"({expected} bytes); the file is truncated or corrupt."
        )
    if expected == header_size:
        return np.zeros(shape, np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=header_size, shape=shape)


def _decompressed(gz_path: str) -> str:
    """Path of the decompressed copy of `gz_path` (made next to it unless up to date)."""
    out = gz_path[: -len(".gz")] if gz_path.endswith(".gz") else gz_path + ".raw"
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(gz_path):
        extract.gunzip(gz_path, out)
    return out


def read_images_and_labels(
    images_gz: str, labels_gz: str, *, image_size: int, num_classes: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images [count, H, W] memory-mapped, uint8 labels [count]) of one split.

    Checks the formats, that both files hold `count` items, the image size and that
    every label is in [0, num_classes).
    """
    images = read_idx(_decompressed(images_gz), IDX_IMAGES_MAGIC)
    labels = np.array(read_idx(_decompressed(labels_gz), IDX_LABELS_MAGIC))
    if images.shape[1:] != (image_size, image_size):
        raise IdxFormatError(
            f"{images_gz}: images are {list(images.shape[1:])}, expected "
            f"[{image_size}, {image_size}]."
        )
    for path, n in ((images_gz, images.shape[0]), (labels_gz, labels.shape[0])):
        if n != count:
            raise IdxFormatError(f"{path}: holds {n} items, expected {count}.")
    if labels.size and int(labels.max()) >= num_classes:
        raise IdxFormatError(
            f"{labels_gz}: label {int(labels.max())} is outside [0, {num_classes})."
        )
    return images, labels


class MnistLikeProblem(image_problems.Image2ClassProblem):
    """Base of MNIST-format data sets: idx files named as MNIST's, 28x28x1, 10 classes."""

    image_size = 28
    num_channels = 1
    train_shards = 10
    dev_shards = 1
    train_size = 60_000
    dev_size = 10_000
    homepage = ""
    # File name -> Resource; the names are MNIST's (TRAIN_IMAGES, ...).
    resources: Mapping[str, download.Resource] = {}
    # Folder of tmp_dir the files are kept in: MNIST and Fashion-MNIST share file names.
    download_subdir = "mnist"

    def split_files(self, split: str) -> tuple[str, str]:
        """(images file, labels file) of `split`; dev is the official test set."""
        if split == problem.TRAIN_SPLIT:
            return TRAIN_IMAGES, TRAIN_LABELS
        if split == problem.DEV_SPLIT:
            return TEST_IMAGES, TEST_LABELS
        raise ValueError(f"{self.name} has no split {split!r}.")

    def num_examples(self, split: str) -> int:
        return self.train_size if split == problem.TRAIN_SPLIT else self.dev_size

    def fetch(self, names: Sequence[str], tmp_dir: str, mirror: str | None) -> list[str]:
        """Verified local paths of the files `names`, fetched into
        tmp_dir/download_subdir if not there yet; `mirror` is tried before the URLs."""
        directory = os.path.abspath(os.path.join(tmp_dir, self.download_subdir))
        paths = []
        for name in names:
            try:
                paths.append(download.fetch(self.resources[name], directory, mirror))
            except download.DownloadError as e:
                wanted = ", ".join(sorted(self.resources))
                raise type(e)(
                    f"{self.name}: could not get {name}.\n{e}\nTo provide the data by hand, "
                    f"place the files {wanted} (from {self.homepage or 'the data set page'})"
                    f" in {directory} (under --tmp_dir), or pass --data_mirror"
                    f" (or set {download.MIRROR_ENV_VAR}) to a folder or URL prefix holding"
                    " them."
                ) from e
        return paths

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        """Fetches all four files first, so a missing one fails before any shard."""
        self.fetch(sorted(self.resources), tmp_dir, mirror)

    def generate_images(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[tuple[np.ndarray, int]]:
        """Yields (uint8 [28, 28, 1], label) in file order, read from memory maps."""
        images_gz, labels_gz = self.fetch(self.split_files(split), tmp_dir, mirror)
        images, labels = read_images_and_labels(
            images_gz,
            labels_gz,
            image_size=self.image_size,
            num_classes=self.num_classes,
            count=self.num_examples(split),
        )
        for image, label in zip(images, labels, strict=True):
            yield image[:, :, None], int(label)


@registry.register_problem
class ImageMnist(MnistLikeProblem):
    """MNIST handwritten digits: 28x28 grayscale, labels "0".."9"."""

    class_labels = tuple(str(i) for i in range(10))
    homepage = "http://yann.lecun.com/exdb/mnist/"
    resources = MNIST_RESOURCES


@registry.register_problem
class ImageFashionMnist(MnistLikeProblem):
    """Fashion-MNIST (Zalando): 28x28 grayscale photos of clothing, 10 classes."""

    class_labels = (
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    )
    homepage = "https://github.com/zalandoresearch/fashion-mnist"
    download_subdir = "fashion_mnist"
    resources = FASHION_MNIST_RESOURCES
