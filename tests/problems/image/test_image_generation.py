"""Tests of t2t.problems.image.image_generation: the class -> image `_rev`, unconditional and
super-resolution problems read the classifier's files, with bits/dim as their metric."""

from __future__ import annotations

import numpy as np
import pytest

from t2t import registry
from t2t.problems.image import image_generation, mnist
from tests.helpers.image_data import (
    COUNT,
    tiny_fashion_mnist,  # noqa: F401 (a fixture)
)


@pytest.fixture(scope="module")
def data_dir(tiny_fashion_mnist):  # noqa: F811
    return tiny_fashion_mnist


def _dev(name: str, data_dir: str) -> list[dict]:
    problem = registry.problem(name)
    return list(problem.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())


def test_class_to_image_through_rev(data_dir):
    path, arrays = data_dir
    problem = registry.problem("image_fashion_mnist_rev")
    dev = _dev("image_fashion_mnist_rev", path)
    assert dev[0]["inputs"].tolist() == [3] and dev[0]["targets"].shape == (28, 28, 1)
    np.testing.assert_array_equal(dev[0]["targets"][:, :, 0], arrays[mnist.TEST_IMAGES][0])
    php = problem.hparams(path)
    assert php.modality == {"inputs": "class_label", "targets": "image"}
    assert problem.eval_metrics() == ["bits_per_dim", "neg_log_perplexity"]


def test_unconditional_generation_has_targets_only(data_dir):
    path, arrays = data_dir
    dev = _dev("image_fashion_mnist_gen", path)
    assert len(dev) == COUNT and set(dev[0]) == {"targets"}
    np.testing.assert_array_equal(dev[1]["targets"][:, :, 0], arrays[mnist.TEST_IMAGES][1])
    php = registry.problem("image_fashion_mnist_gen").problem_hparams(path)
    assert php.modality == {"targets": "image"} and php.image_shape == [28, 28, 1]


def test_super_resolution_inputs_are_4x4_means_of_the_targets(data_dir):
    path, _ = data_dir
    example = _dev("img2img_fashion_mnist", path)[0]
    assert example["inputs"].shape == (7, 7, 1) and example["targets"].shape == (28, 28, 1)
    means = example["targets"][:, :, 0].reshape(7, 4, 7, 4).mean(axis=(1, 3))
    assert np.abs(example["inputs"][:, :, 0] - np.round(means)).max() <= 1
    assert registry.problem("img2img_cifar10").input_size == 8


def test_generation_problems_name_the_classifier_files():
    for name, files in (("image_mnist_gen", "image_mnist"), ("img2img_cifar10", "image_cifar10"),
                        ("image_cifar10_gen", "image_cifar10")):
        assert registry.problem(name).dataset_filename() == files
    assert image_generation.GENERATION_METRICS[0] == "bits_per_dim"
