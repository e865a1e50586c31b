"""Image generation problems read from the files of the classification problems.

Three ways to generate an image, for MNIST, Fashion-MNIST and CIFAR-10:
  class -> image    the `_rev` of the classification problem (image_mnist_rev,
                    image_fashion_mnist_rev, image_cifar10_rev): no class of its own;
  unconditional     image_mnist_gen, image_fashion_mnist_gen, image_cifar10_gen: the
                    images alone as targets;
  super-resolution  img2img_mnist, img2img_fashion_mnist (7x7 -> 28x28) and
                    img2img_cifar10 (8x8 -> 32x32), as Tensor2Tensor's img2img_*: the
                    inputs are the targets shrunk by area averaging (each input pixel the
                    mean of the 4x4 block it covers, rounded).
All read (and t2t-datagen writes) the classification problem's files: preparing
image_fashion_mnist once serves every problem of Fashion-MNIST. Generated images are not
augmented. Metrics: bits per dimension (per sub-pixel) of the targets.
"""

from __future__ import annotations

from typing import Any

from t2t import registry
from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.problems.image import cifar, mnist
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

GENERATION_METRICS = ["bits_per_dim", "neg_log_perplexity"]


class _FromClassificationFiles:
    """Mixin (before an Image2ClassProblem): the data files are the classifier's."""

    def dataset_filename(self) -> str:
        source = next(c for c in type(self).__mro__[1:]
                      if issubclass(c, image_problems.Image2ClassProblem)
                      and not issubclass(c, _FromClassificationFiles))
        return source.__dict__.get("registered_name") or registry.default_name(source)

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        return {}  # images in, images out: no text to encode

    def eval_metrics(self) -> list[str]:
        return list(GENERATION_METRICS)


class UnconditionalImageProblem(_FromClassificationFiles):
    """The classifier's images as targets, with no inputs."""

    @property
    def image_key(self) -> str:
        return "targets"

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        return {"targets": parsed["image/encoded"]}

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        return problem.ProblemHParams(
            modality={"targets": problem.Modality.IMAGE}, vocab_size={"targets": 256},
            input_space_id=problem.SpaceID.IMAGE, target_space_id=problem.SpaceID.IMAGE,
            batch_size_means_tokens=False, image_shape=list(self.image_shape))


class SuperResolutionProblem(_FromClassificationFiles):
    """Targets: the classifier's images; inputs: the same shrunk `factor` times."""

    factor = 4

    @property
    def image_key(self) -> str:
        return "targets"

    @property
    def input_size(self) -> int:
        return self.image_size // self.factor

    def decode_examples(self, serialized: Any) -> dict[str, Any]:
        parsed = tf.io.parse_example(serialized, self.example_reading_spec())
        return {"targets": parsed["image/encoded"]}

    def preprocess_example(self, example: dict[str, Any], mode: str,
                           model_hparams: Any) -> dict[str, Any]:
        example = super().preprocess_example(example, mode, model_hparams)
        example["inputs"] = shrink(example["targets"], self.input_size)
        return example

    def problem_hparams(self, data_dir: str | None) -> problem.ProblemHParams:
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.IMAGE, "targets": problem.Modality.IMAGE},
            vocab_size={"inputs": 256, "targets": 256}, input_space_id=problem.SpaceID.IMAGE,
            target_space_id=problem.SpaceID.IMAGE, batch_size_means_tokens=False,
            image_shape=list(self.image_shape))


def shrink(image: Any, size: int) -> Any:
    """uint8 [H, W, C] -> uint8 [size, size, C] by area averaging, rounded."""
    small = tf.image.resize(tf.cast(image, tf.float32), [size, size], method="area")
    return tf.cast(tf.clip_by_value(tf.round(small), 0, 255), tf.uint8)


@registry.register_problem
class ImageMnistGen(UnconditionalImageProblem, mnist.ImageMnist):
    """MNIST digits, generated unconditionally (28x28x1)."""


@registry.register_problem
class ImageFashionMnistGen(UnconditionalImageProblem, mnist.ImageFashionMnist):
    """Fashion-MNIST, generated unconditionally (28x28x1)."""


@registry.register_problem
class ImageCifar10Gen(UnconditionalImageProblem, cifar.ImageCifar10):
    """CIFAR-10, generated unconditionally (32x32x3)."""


@registry.register_problem("img2img_mnist")
class Img2imgMnist(SuperResolutionProblem, mnist.ImageMnist):
    """MNIST super-resolution: 7x7 -> 28x28."""


@registry.register_problem("img2img_fashion_mnist")
class Img2imgFashionMnist(SuperResolutionProblem, mnist.ImageFashionMnist):
    """Fashion-MNIST super-resolution: 7x7 -> 28x28."""


@registry.register_problem("img2img_cifar10")
class Img2imgCifar10(SuperResolutionProblem, cifar.ImageCifar10):
    """CIFAR-10 super-resolution: 8x8 -> 32x32 (Tensor2Tensor's img2img_cifar10)."""
