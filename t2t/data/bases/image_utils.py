"""Tensor2Tensor's `image_utils`, for image problems written against Tensor2Tensor.

A module written for T2T keeps its imports (`from tensor2tensor.data_generators import
image_utils`, answered by this module through t2t.compat) and its classes:

    @registry.register_problem
    class MyDigits(image_utils.Image2ClassProblem):
      is_small = True            # T2T's properties, as properties or class attributes
      num_classes = 10
      train_shards = 2
      def generator(self, data_dir, tmp_dir, is_training):
        return image_utils.image_generator(images, labels)

`t2t-datagen` writes it (T2T's `generate_data`: `generator(..., True)` to the train
shards, `generator(..., False)` to the dev shards) and `t2t-trainer` / `t2t-decoder` read
it with T2T's reading spec (`image/encoded`, `image/format`, `image/class/label`).

What differs from Tensor2Tensor, and why:

* Image shape. t2t's models are built before they see data, from
  `ProblemHParams.image_shape` ([H, W, C]); T2T problems did not declare it. It is, in
  this order: the problem's own `image_shape` ([H, W, C], attribute or property), or
  `image_size` (one side of square images; C = `num_channels`); else read from the first
  dev (else train) example in `data_dir` as `dataset()` gives it, i.e. after
  `preprocess_example` (so a problem that resizes there gets the resized shape). Every
  image read is then checked against it: a problem whose images vary in size declares
  `image_shape` and resizes in `preprocess_example` (e.g. with `resize_by_area`).
* Normalization. T2T's `ImageProblem.preprocess_example` applied
  `tf.image.per_image_standardization` for its image modality, which took the floats as
  they came. t2t's image modality takes uint8 [0, 255] and scales it itself, and
  t2t-decoder (`--decode_from_file` image paths) and exported models feed it uint8
  images without `preprocess_example`; standardizing here would give the model other
  inputs in serving than in training. So the base `preprocess_example` keeps the decoded
  uint8 image, and `dataset()` warns when a subclass's `preprocess_example` returns float
  images (as T2T's MNIST did).
* `encode_images_as_png` works in any TensorFlow mode (it needs no session): the PNG
  writer of t2t.data.bases.image_problems (NumPy + zlib).
* `convert_predictions_to_image_summaries` returns (tag, uint8 image) pairs and, when a
  `tf.summary` writer is the default, writes them with `tf.summary.image` (T2T returned
  TF1 `Summary.Value` protos for its Estimator hooks; `image_to_tf_summary_value` still
  makes one).
* `make_multiscale` resizes with TF2's `tf.image.resize` and clips to [0, 255] (TF1's
  bicubic could leave values just outside, which no 256-way modality can read).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from absl import logging

from t2t.data import problem, t2t_style
from t2t.data.bases import image_problems
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils
from t2t.features import ModalityType
from t2t.utils import metrics
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

LABEL_KEY = "image/class/label"
MAX_SUMMARY_IMAGES = 10  # T2T's: ten random predictions, so TensorBoard does not hang


# ------------------------------------------------------------------------- helpers
def resize_by_area(img: Any, size: int) -> Any:
    """Resizes an image [H, W, C] (or a batch [B, H, W, C]) to size x size by area
    averaging; int64, as in Tensor2Tensor (values truncated toward zero)."""
    return tf.cast(tf.image.resize(img, [size, size], method="area"), tf.int64)


def make_multiscale(image: Any, resolutions: Sequence[int], resize_method: Any = "bicubic",
                    num_channels: int = 3) -> list[Any]:
    """One int64 copy of a square image [H, H, C] per height in `resolutions`, each
    [h, h, num_channels], resized with `resize_method` (a tf.image.ResizeMethod or its
    string) and clipped to [0, 255]."""
    scaled_images = []
    for height in resolutions:
        scaled = tf.image.resize(image, [height, height], method=resize_method)
        scaled = tf.cast(tf.clip_by_value(scaled, 0.0, 255.0), tf.int64)  # truncates, as T2T
        scaled.set_shape([height, height, num_channels])
        scaled_images.append(scaled)
    return scaled_images


def make_multiscale_dilated(image: Any, resolutions: Sequence[int],
                            num_channels: int = 3) -> list[Any]:
    """One int64 copy of a square image [H, H, C] per height in `resolutions`, made by
    keeping every (H // h)-th pixel (exactly h x h where h divides H)."""
    image_height = tf.shape(image)[0]
    scaled_images = []
    for height in resolutions:
        step = tf.maximum(image_height // height, 1)
        scaled = tf.cast(image[::step, ::step], tf.int64)
        scaled.set_shape([None, None, num_channels])
        scaled_images.append(scaled)
    return scaled_images


def _as_uint8_image(image: Any, index: int) -> np.ndarray:
    """`image` as a uint8 NumPy array [H, W, C] (C in 1..4; [H, W] reads as C = 1)."""
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.dtype != np.uint8:
        if array.dtype.kind not in "iu" or (array.size and (array.min() < 0 or array.max() > 255)):
            raise ValueError(f"image {index}: expected uint8 pixels (or integers in [0, 255]), "
                             f"got {array.dtype} values.")
        array = array.astype(np.uint8)
    if array.ndim != 3 or array.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"image {index}: expected [height, width, channels] with 1 to 4 "
                         f"channels, got shape {list(array.shape)}.")
    return array


def encode_images_as_png(images: Iterable[Any]) -> Iterator[bytes]:
    """Yields the PNG bytes of each uint8 image [H, W, C] (NumPy arrays or eager
    tensors), in order; decoding one gives exactly its pixels."""
    for index, image in enumerate(images):
        yield image_problems.encode_png(_as_uint8_image(image, index))


def image_generator(images: Sequence[Any], labels: Sequence[int]) -> Iterator[dict[str, Any]]:
    """Tensor2Tensor's example dicts of images and their labels, as PNG.

    Args:
      images: uint8 images [height, width, channels] (a list, or an array [N, H, W, C]).
      labels: one int per image.

    Yields:
      {"image/encoded": [PNG bytes], "image/format": ["png"],
       "image/class/label": [label], "image/height": [H], "image/width": [W]}
      (each value a one-element list, as generator_utils.to_example takes it).

    Raises:
      ValueError: no images, or not as many labels as images.
    """
    if not hasattr(images, "__len__"):
        images = list(images)
    if len(images) == 0:
        raise ValueError("Must provide some images for the generator.")
    if hasattr(labels, "__len__") and len(labels) != len(images):
        raise ValueError(f"image_generator: {len(images)} images but {len(labels)} labels.")
    for index, (image, label) in enumerate(zip(images, labels, strict=False)):
        array = _as_uint8_image(image, index)
        yield {
            "image/encoded": [image_problems.encode_png(array)],
            "image/format": ["png"],
            LABEL_KEY: [int(label)],
            "image/height": [int(array.shape[0])],
            "image/width": [int(array.shape[1])],
        }


def image_augmentation(images: Any, do_colors: bool = False,
                       crop_size: Sequence[int] | None = None) -> Any:
    """Random crop to `crop_size` (default 299 x 299), random left-right flip and, with
    `do_colors`, random brightness, saturation, hue and contrast (floats expected)."""
    crop = list(crop_size) if crop_size is not None else [299, 299]
    images = tf.image.random_crop(images, crop + [3])
    images = tf.image.random_flip_left_right(images)
    if do_colors:
        images = tf.image.random_brightness(images, max_delta=32.0 / 255.0)
        images = tf.image.random_saturation(images, lower=0.5, upper=1.5)
        images = tf.image.random_hue(images, max_delta=0.2)
        images = tf.image.random_contrast(images, lower=0.5, upper=1.5)
    return images


def cifar_image_augmentation(images: Any) -> Any:
    """CIFAR augmentation (arXiv:1608.06993, p. 5): pad to 40 x 40, random 32 x 32 x 3
    crop, random left-right flip."""
    images = tf.image.resize_with_crop_or_pad(images, 40, 40)
    images = tf.image.random_crop(images, [32, 32, 3])
    return tf.image.random_flip_left_right(images)


def random_shift(image: Any, wsr: float = 0.1, hsr: float = 0.1) -> Any:
    """Shifts an image [H, W, C] by a random offset of up to wsr * W horizontally and
    hsr * H vertically (Glow's CIFAR augmentation); uncovered pixels are 0."""
    shape = tf.shape(image)
    height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    dx = tf.random.uniform([], -wsr * width, wsr * width)
    dy = tf.random.uniform([], -hsr * height, hsr * height)
    # Output pixel (x, y) reads input pixel (x - dx, y - dy).
    transform = tf.stack([1.0, 0.0, -dx, 0.0, 1.0, -dy, 0.0, 0.0])[None]
    shifted = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[None], transforms=transform, output_shape=shape[:2],
        fill_value=0.0, interpolation="NEAREST", fill_mode="CONSTANT")[0]
    shifted.set_shape(image.shape)
    return shifted


# ----------------------------------------------------------------- image summaries
def _field(args: Any, name: str, default: Any = None) -> Any:
    if isinstance(args, dict):
        return args.get(name, default)
    return getattr(args, name, default)


def image_to_tf_summary_value(image: Any, tag: str) -> Any:
    """A TF1 `Summary.Value` holding `image` (uint8 [H, W, C]) as PNG, as Tensor2Tensor
    made them (t2t writes summaries with tf.summary.image instead)."""
    array = _as_uint8_image(image, 0)
    height, width, channels = array.shape
    encoded = image_problems.encode_png(array)
    summary_image = tf.compat.v1.Summary.Image(
        encoded_image_string=encoded, height=height, width=width, colorspace=channels)
    return tf.compat.v1.Summary.Value(tag=tag, image=summary_image)


def _summary_image(value: Any) -> np.ndarray | None:
    """`value` as a uint8 image [H, W, C] if it is one (C in 1, 3, 4), else None."""
    array = np.asarray(value)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or array.dtype.kind not in "iuf":
        return None
    if array.dtype != np.uint8:
        array = np.clip(np.rint(array), 0, 255).astype(np.uint8)
    return array


def convert_predictions_to_image_summaries(hook_args: Any) -> list[tuple[str, np.ndarray]]:
    """Tensor2Tensor's decode hook: images of (up to) ten random predictions.

    `hook_args` has (as T2T's DecodeHookArgs, or a dict) `predictions` (a list whose
    first element is the list of prediction dicts with "inputs" and "outputs"),
    `decode_hparams` (nothing is done when it has `display_decoded_images` false) and
    optionally `step`. Returns [("0_input", uint8 [H, W, C]), ("0_output", ...), ...]
    (predictions that are not images are skipped), and writes each with
    `tf.summary.image` when a summary writer is the default (at `step`, else the
    writer's current step, else 0).
    """
    decode_hparams = _field(hook_args, "decode_hparams")
    if decode_hparams is not None and not _field(decode_hparams, "display_decoded_images", True):
        return []
    all_predictions = _field(hook_args, "predictions") or [[]]
    predictions = list(all_predictions[0])
    chosen = random.sample(predictions, min(MAX_SUMMARY_IMAGES, len(predictions)))
    summaries: list[tuple[str, np.ndarray]] = []
    for index, prediction in enumerate(chosen):
        for key, suffix in (("inputs", "input"), ("outputs", "output")):
            image = _summary_image(prediction[key]) if key in prediction else None
            if image is not None:
                summaries.append((f"{index}_{suffix}", image))
    if summaries:
        step = _field(hook_args, "step")
        if step is None:
            step = tf.summary.experimental.get_step()
        step = 0 if step is None else step
        for tag, image in summaries:
            tf.summary.image(tag, image[None], step=step)  # no-op without a default writer
    return summaries


# ------------------------------------------------------------------------- encoder
class ImageEncoder:
    """Tensor2Tensor's `text_encoder.ImageEncoder`: an image file <-> its pixel ids
    (0..255, no reserved ids)."""

    type_name = "image"

    def __init__(self, num_reserved_ids: int = 0, height: int | None = None,
                 width: int | None = None, channels: int = 3):
        if num_reserved_ids != 0:
            raise ValueError("ImageEncoder has no reserved ids (num_reserved_ids=0).")
        self._height, self._width, self._channels = height, width, channels

    @property
    def num_reserved_ids(self) -> int:
        return 0

    @property
    def vocab_size(self) -> int:
        return 256

    def encode(self, s: str) -> np.ndarray:
        """The pixels of the image file at path `s` (PNG, JPEG, GIF or BMP) as uint8
        [H, W, channels]."""
        data = tf.io.read_file(s)
        return tf.io.decode_image(data, channels=self._channels, expand_animations=False).numpy()

    def decode(self, ids: Any, strip_extraneous: bool = False) -> str:
        """Writes the pixel ids (H * W * channels of them; a square image when height
        and width were not given) as a PNG file in the temporary folder; returns its
        path (the caller deletes it)."""
        del strip_extraneous
        flat = np.asarray(ids).reshape(-1)
        if self._height is None or self._width is None:
            side = int(math.sqrt(len(flat) / self._channels))
            shape = [side, side, self._channels]
        else:
            shape = [self._height, self._width, self._channels]
        if len(flat) != int(np.prod(shape)):
            raise ValueError(f"ImageEncoder.decode: {len(flat)} ids are not height x width x "
                             f"channels = {' x '.join(map(str, shape))}.")
        png = image_problems.encode_png(_as_uint8_image(flat.reshape(shape), 0))
        fd, path = tempfile.mkstemp("_decode.png")
        with os.fdopen(fd, "wb") as f:
            f.write(png)
        return path

    def decode_list(self, ids: Any) -> list[str]:
        return [self.decode(ids)]

    def describe(self) -> dict[str, Any]:
        return {"type": self.type_name, "vocab_size": 256, "height": self._height,
                "width": self._width, "channels": self._channels}


# ------------------------------------------------------------------------ problems
class ImageProblem(problem.Problem):
    """Tensor2Tensor's base class of problems with images ("inputs" decoded from the
    "image/encoded" PNG/JPEG bytes). See the module doc for the image shape."""

    batch_size_means_tokens = False
    sequence_features: Sequence[str] = ()
    # One side of square images ([image_size, image_size, num_channels]); None: the
    # shape is `image_shape` where a subclass sets it, else read from the data.
    image_size: int | None = None

    @property
    def num_channels(self) -> int:
        """Number of color channels."""
        return 3

    @property
    def vocab_size(self) -> int:
        """Number of pixel values."""
        return 256

    @property
    def image_shape(self) -> list[int] | None:
        """The declared [H, W, C] of the images the model sees (None: not declared; it is
        then read from the data). Subclasses may set it, or `image_size`."""
        if self.image_size:
            return [int(self.image_size), int(self.image_size), int(self.num_channels)]
        return None

    @property
    def image_key(self) -> str:
        """The feature holding the image: "inputs", or "targets" in the `_rev` problem."""
        return "targets" if self._was_reversed else "inputs"

    def example_reading_spec(self) -> Any:
        data_fields = {
            "image/encoded": tf.io.FixedLenFeature((), tf.string),
            "image/format": tf.io.FixedLenFeature((), tf.string),
        }
        data_items_to_decoders = {
            "inputs": t2t_style.slim().tfexample_decoder.Image(
                image_key="image/encoded", format_key="image/format",
                channels=self.num_channels),
        }
        return data_fields, data_items_to_decoders

    def preprocess_example(self, example: dict[str, Any], mode: str, hparams: Any) -> dict[str, Any]:
        """Keeps the decoded uint8 image: t2t's image modality normalizes it (see the
        module doc for why T2T's per_image_standardization is not applied here)."""
        return example

    def eval_metrics(self) -> list[str]:
        names = [metrics.Metrics.ACC, metrics.Metrics.ACC_TOP5, metrics.Metrics.ACC_PER_SEQ,
                 metrics.Metrics.NEG_LOG_PERPLEXITY]
        if self._was_reversed:
            names.append(metrics.Metrics.IMAGE_SUMMARY)  # t2t writes image samples itself
        return names

    @property
    def decode_hooks(self) -> list[Any]:
        return [convert_predictions_to_image_summaries]

    # ----------------------------------------------------- shape, for t2t's models
    def t2t_problem_hparams(self, t2t_hparams: Any, data_dir: str | None) -> problem.ProblemHParams:
        """T2T's hparams, with `image_shape` filled from the data when not declared."""
        hp = super().t2t_problem_hparams(t2t_hparams, data_dir)
        shape = self.resolved_image_shape(data_dir)
        return dataclasses.replace(hp, image_shape=shape, batch_size_means_tokens=False)

    def resolved_image_shape(self, data_dir: str | None) -> list[int] | None:
        """The declared image shape, else the one read from `data_dir` (None if neither)."""
        declared = self.image_shape
        if declared is not None and all(declared):
            return [int(d) for d in declared]
        return self.image_shape_from_data(data_dir)

    def image_shape_from_data(self, data_dir: str | None) -> list[int] | None:
        """[H, W, C] of the first dev (else train) example's image as `dataset()` gives
        it (after `preprocess_example`); None without data. Cached per data_dir."""
        if not data_dir:
            return None
        cache = self.__dict__.setdefault("_image_shapes", {})
        if data_dir in cache:
            return cache[data_dir]
        for split in (problem.DEV_SPLIT, problem.TRAIN_SPLIT):
            try:
                dataset = problem.Problem.dataset(self, problem.EVAL, data_dir, split=split,
                                                  shuffle_files=False, deterministic=True)
            except problem.DataMissingError:
                continue
            for example in dataset.take(1):
                shape = [int(d) for d in example[self.image_key].shape]
                if len(shape) != 3:
                    raise ValueError(
                        f"{self.name}: the {split} images are {shape} after "
                        f"preprocess_example; expected [height, width, channels].")
                cache[data_dir] = shape
                logging.info("%s: image shape %s, read from the first %s example (declare "
                             "image_shape = [H, W, C] to skip the read).", self.name, shape, split)
                return shape
        return None

    def dataset(self, mode: str, data_dir: str, **kwargs: Any) -> Any:
        """Problem.dataset, with the image given its shape (checked: a different image
        fails naming the fix) and a warning for float images."""
        dataset = super().dataset(mode, data_dir, **kwargs)
        key = self.image_key
        spec = dataset.element_spec.get(key) if isinstance(dataset.element_spec, dict) else None
        if spec is None:
            return dataset
        if spec.dtype.is_floating and not self.__dict__.get("_warned_float"):
            self.__dict__["_warned_float"] = True
            logging.warning(
                "%s: preprocess_example returns %s images. t2t's image modality takes "
                "uint8 [0, 255] and scales it itself, and t2t-decoder --decode_from_file "
                "and exported models feed uint8 images without preprocess_example: drop "
                "per_image_standardization (Tensor2Tensor's) so the model sees the same "
                "inputs in serving as in training.", self.name, spec.dtype.name)
        if spec.shape.is_fully_defined():
            return dataset
        shape = self.resolved_image_shape(data_dir)
        if shape is None:
            return dataset
        message = (f"{self.name}: an image's shape differs from {shape}, that of the first "
                   f"example (or the declared image_shape). Images that vary in size need "
                   f"image_shape = [H, W, C] declared and a resize in preprocess_example "
                   f"(e.g. image_utils.resize_by_area).")

        def fix_shape(example):
            image = example[key]
            check = tf.debugging.assert_equal(tf.shape(image), tf.constant(shape, tf.int32),
                                              message=message)
            with tf.control_dependencies([check]):
                image = tf.identity(image)
            image.set_shape(shape)
            return {**example, key: image}

        return dataset.map(fix_shape, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=kwargs.get("deterministic", False))


class _GeneratedImageProblem(ImageProblem):
    """What Tensor2Tensor's Image2ClassProblem and Image2TextProblem share: examples
    from `generator(data_dir, tmp_dir, is_training)`, written to `train_shards` train
    and `dev_shards` dev shards."""

    @property
    def train_shards(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define train_shards.")

    @property
    def dev_shards(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define dev_shards.")

    @property
    def splits(self) -> Sequence[problem.SplitSpec]:  # type: ignore[override]
        """Train and dev with their shard counts (a subclass defining `dataset_splits`
        keeps those)."""
        if type(self).dataset_splits is not problem.Problem.dataset_splits:
            return super().splits
        return (problem.SplitSpec(problem.TRAIN_SPLIT, int(self.train_shards)),
                problem.SplitSpec(problem.DEV_SPLIT, int(self.dev_shards)))

    def generator(self, data_dir: str, tmp_dir: str, is_training: bool) -> Iterator[dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must define generator(data_dir, "
                                  f"tmp_dir, is_training).")

    def generate_data(self, data_dir: str, tmp_dir: str, task_id: int = -1) -> None:
        generator_utils.generate_dataset_and_shuffle(
            self.generator(data_dir, tmp_dir, True),
            self.training_filepaths(data_dir, self.train_shards, shuffled=False),
            self.generator(data_dir, tmp_dir, False),
            self.dev_filepaths(data_dir, self.dev_shards, shuffled=False))


class Image2ClassProblem(_GeneratedImageProblem):
    """Tensor2Tensor's base class for image classification: `generator(data_dir,
    tmp_dir, is_training)` yields `image_generator`-style dicts; labels are ints in
    [0, num_classes)."""

    @property
    def is_small(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define is_small (True for "
                                  f"small images: batch_size_multiplier 4, loss_multiplier 3).")

    @property
    def num_classes(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define num_classes.")

    @property
    def dev_shards(self) -> int:
        return 1

    @property
    def class_labels(self) -> list[str]:
        return [f"ID_{i}" for i in range(self.num_classes)]

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        del data_dir
        return {"inputs": ImageEncoder(channels=self.num_channels),
                "targets": text_encoder.ClassLabelEncoder(list(self.class_labels))}

    def example_reading_spec(self) -> Any:
        data_fields, data_items_to_decoders = super().example_reading_spec()
        data_fields[LABEL_KEY] = tf.io.FixedLenFeature((1,), tf.int64)
        data_items_to_decoders["targets"] = t2t_style.slim().tfexample_decoder.Tensor(LABEL_KEY)
        return data_fields, data_items_to_decoders

    def hparams(self, defaults: Any, unused_model_hparams: Any) -> None:
        p = defaults
        p.modality = {"inputs": ModalityType.IMAGE, "targets": ModalityType.CLASS_LABEL}
        p.vocab_size = {"inputs": 256, "targets": self.num_classes}
        p.batch_size_multiplier = 4 if self.is_small else 256
        p.loss_multiplier = 3.0 if self.is_small else 1.0
        if self._was_reversed:
            p.loss_multiplier = 1.0
        p.input_space_id = problem.SpaceID.IMAGE
        p.target_space_id = problem.SpaceID.IMAGE_LABEL


class Image2TextProblem(_GeneratedImageProblem):
    """Tensor2Tensor's base class for image -> text: the targets are the token ids
    stored in "image/class/label" (bytes of the text, or subwords of `vocab_problem`'s
    vocabulary)."""

    sequence_features: Sequence[str] = ("targets",)

    @property
    def is_character_level(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define is_character_level.")

    @property
    def vocab_problem(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define vocab_problem (a "
                                  f"problem whose vocab_filename names the subword "
                                  f"vocabulary) unless is_character_level.")

    @property
    def target_space_id(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define target_space_id.")

    def example_reading_spec(self) -> Any:
        data_fields, data_items_to_decoders = super().example_reading_spec()
        data_fields[LABEL_KEY] = tf.io.VarLenFeature(tf.int64)
        data_items_to_decoders["targets"] = t2t_style.slim().tfexample_decoder.Tensor(LABEL_KEY)
        return data_fields, data_items_to_decoders

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        if self.is_character_level:
            encoder = text_encoder.ByteTextEncoder()
        else:
            vocab_filename = os.path.join(data_dir or "", self.vocab_problem.vocab_filename)
            encoder = text_encoder.SubwordTextEncoder(vocab_filename)
        return {"inputs": ImageEncoder(channels=self.num_channels), "targets": encoder}

    def hparams(self, defaults: Any, unused_model_hparams: Any) -> None:
        p = defaults
        targets = self.build_encoders(getattr(p, "data_dir", None))["targets"]
        p.modality = {"inputs": ModalityType.IMAGE, "targets": ModalityType.SYMBOL}
        p.vocab_size = {"inputs": 256, "targets": targets.vocab_size}
        p.batch_size_multiplier = 256
        p.loss_multiplier = 1.0
        p.input_space_id = problem.SpaceID.IMAGE
        p.target_space_id = self.target_space_id
