"""Tiny Fashion-MNIST files for tests of image problems and models: `tiny_fashion_mnist`
prepares image_fashion_mnist (8 train + 8 dev random images, class i % 10 and
(i + 3) % 10) from a local mirror, for every problem that reads its files."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from t2t import registry
from t2t.problems.image import mnist
from tests.helpers.local_http import write_pinned

COUNT = 8


def _idx(array: np.ndarray) -> bytes:
    magic = mnist.IDX_IMAGES_MAGIC if array.ndim == 3 else mnist.IDX_LABELS_MAGIC
    return magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape) + \
        array.astype(np.uint8).tobytes()


@pytest.fixture(scope="module")
def tiny_fashion_mnist(tmp_path_factory):
    """(data_dir, {idx file name: array}) of image_fashion_mnist made from known images."""
    root = tmp_path_factory.mktemp("fashion")
    rng = np.random.default_rng(0)
    arrays = {mnist.TRAIN_IMAGES: rng.integers(0, 256, [COUNT, 28, 28]),
              mnist.TRAIN_LABELS: np.arange(COUNT) % 10,
              mnist.TEST_IMAGES: rng.integers(0, 256, [COUNT, 28, 28]),
              mnist.TEST_LABELS: (np.arange(COUNT) + 3) % 10}
    folder = str(root / "mirror")
    os.makedirs(folder)
    resources = {name: write_pinned(folder, name, gzip.compress(_idx(a), mtime=0),
                                    "file:///nonexistent/" + name)
                 for name, a in arrays.items()}
    patch = pytest.MonkeyPatch()
    patch.setattr(mnist.ImageFashionMnist, "resources", resources)
    patch.setattr(mnist.ImageFashionMnist, "train_size", COUNT)
    patch.setattr(mnist.ImageFashionMnist, "dev_size", COUNT)
    registry.problem("image_fashion_mnist").generate_data(
        str(root / "data"), str(root / "tmp"), mirror=folder, progress=False)
    yield str(root / "data"), arrays
    patch.undo()
