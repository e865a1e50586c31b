"""Tests for t2t.data.bases.image_problems: PNG encoding, datagen, decoding, augmentation."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from t2t.data import problem
from t2t.data.bases import image_problems
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils

SIZE = 6
CHANNELS = 3
LABELS = ("a", "b", "c", "d", "e", "f", "g")
NUM_TRAIN = 12
NUM_DEV = 5


def _image(index: int, size: int = SIZE, channels: int = CHANNELS) -> np.ndarray:
    """A distinct, known uint8 image [size, size, channels] for each index."""
    values = np.arange(size * size * channels, dtype=np.int64) * 5 + index * 17
    return (values % 256).astype(np.uint8).reshape(size, size, channels)


class ToyImages(image_problems.Image2ClassProblem):
    """Small RGB images whose pixels and labels are functions of their index."""

    registered_name = "toy_images"
    image_size = SIZE
    num_channels = CHANNELS
    class_labels = LABELS
    train_shards = 3
    dev_shards = 1

    def num_examples(self, split: str) -> int:
        return NUM_TRAIN if split == problem.TRAIN_SPLIT else NUM_DEV

    def generate_images(self, data_dir, tmp_dir, split, *, mirror=None):
        offset = 0 if split == problem.TRAIN_SPLIT else 1000
        for i in range(self.num_examples(split)):
            yield _image(offset + i), (offset + i) % len(LABELS)


class AugmentedToyImages(ToyImages):
    registered_name = "toy_images"  # reads ToyImages' files

    def augment(self, image):
        return image_problems.cifar_augment(image, pad=2)


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    data_dir = tmp_path_factory.mktemp("toy_data")
    ToyImages().generate_data(str(data_dir), str(data_dir / "tmp"), progress=False)
    return str(data_dir)


def _decode_pil(data: bytes) -> np.ndarray:
    array = np.asarray(Image.open(io.BytesIO(data)))
    return array[:, :, None] if array.ndim == 2 else array


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_encode_png_round_trips_through_tf_and_pil(channels: int) -> None:
    image = np.random.default_rng(channels).integers(0, 256, (5, 7, channels), dtype=np.uint8)
    data = image_problems.encode_png(image)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    np.testing.assert_array_equal(tf.io.decode_png(data).numpy(), image)
    np.testing.assert_array_equal(_decode_pil(data), image)


def test_encode_png_accepts_2d_and_rejects_bad_arrays() -> None:
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    decoded = tf.io.decode_png(image_problems.encode_png(gray), channels=1).numpy()
    np.testing.assert_array_equal(decoded[:, :, 0], gray)
    for bad in (
        np.zeros((3, 4, 1), np.float32),
        np.zeros((3, 4, 5), np.uint8),
        np.zeros((0, 4, 1), np.uint8),
        np.zeros((3,), np.uint8),
    ):
        with pytest.raises(ValueError, match="encode_png"):
            image_problems.encode_png(bad)


def test_image_example_features() -> None:
    example = image_problems.image_example(_image(3), 4)
    assert set(example) == {
        "image/encoded",
        "image/format",
        "image/class/label",
        "image/height",
        "image/width",
    }
    assert example["image/format"] == "png"
    assert example["image/class/label"] == [4]
    assert example["image/height"] == [SIZE] and example["image/width"] == [SIZE]
    proto = generator_utils.to_example(example)
    assert proto.features.feature["image/format"].bytes_list.value == [b"png"]
    assert "image/class/label" not in image_problems.image_example(_image(3))


def test_problem_description() -> None:
    p = ToyImages()
    hp = p.hparams()
    assert hp.modality == {
        "inputs": problem.Modality.IMAGE,
        "targets": problem.Modality.CLASS_LABEL,
    }
    assert hp.vocab_size == {"inputs": 256, "targets": len(LABELS)}
    assert hp.image_shape == [SIZE, SIZE, CHANNELS]
    assert hp.batch_size_means_tokens is False
    assert hp.target_space_id == problem.SpaceID.IMAGE_LABEL
    assert p.batch_size_means_tokens is False and tuple(p.sequence_features) == ()
    assert "accuracy" in p.eval_metrics() and "accuracy_top5" in p.eval_metrics()
    assert [(s.name, s.shards) for s in p.splits] == [("train", 3), ("dev", 1)]
    encoder = p.feature_encoders(None)["targets"]
    assert isinstance(encoder, text_encoder.ClassLabelEncoder)
    assert encoder.decode([2]) == "c" and "inputs" not in p.feature_encoders(None)

    class FewClasses(ToyImages):
        class_labels = ("yes", "no")

    assert "accuracy_top5" not in FewClasses().eval_metrics()


def test_generate_data_writes_shards(toy_data: str) -> None:
    names = sorted(n for n in os.listdir(toy_data) if generator_utils.is_shard_name(n))
    assert names == [
        "toy_images-dev-00000-of-00001",
        "toy_images-train-00000-of-00003",
        "toy_images-train-00001-of-00003",
        "toy_images-train-00002-of-00003",
    ]
    record = next(iter(tf.data.TFRecordDataset(f"{toy_data}/toy_images-dev-00000-of-00001")))
    features = tf.train.Example.FromString(record.numpy()).features.feature
    assert features["image/format"].bytes_list.value == [b"png"]
    assert features["image/class/label"].int64_list.value == [1000 % len(LABELS)]
    assert features["image/height"].int64_list.value == [SIZE]
    png = features["image/encoded"].bytes_list.value[0]
    np.testing.assert_array_equal(_decode_pil(png), _image(1000))


def test_eval_dataset_yields_the_exact_images(toy_data: str) -> None:
    ds = ToyImages().dataset("eval", toy_data, deterministic=True)
    assert ds.element_spec["inputs"].shape == (SIZE, SIZE, CHANNELS)
    assert ds.element_spec["inputs"].dtype == tf.uint8
    assert ds.element_spec["targets"].shape == (1,)
    assert ds.element_spec["targets"].dtype == tf.int32
    examples = list(ds.as_numpy_iterator())
    assert len(examples) == NUM_DEV
    for i, example in enumerate(examples):
        np.testing.assert_array_equal(example["inputs"], _image(1000 + i))
        assert example["targets"].tolist() == [(1000 + i) % len(LABELS)]


def test_train_dataset_yields_every_image_once(toy_data: str) -> None:
    examples = list(ToyImages().dataset("train", toy_data, seed=1).as_numpy_iterator())
    assert len(examples) == NUM_TRAIN
    seen = {}
    for example in examples:
        index = int(example["inputs"][0, 0, 0]) // 17  # pixel (0, 0, 0) is 17 * index
        np.testing.assert_array_equal(example["inputs"], _image(index))
        assert example["targets"].tolist() == [index % len(LABELS)]
        seen[index] = True
    assert sorted(seen) == list(range(NUM_TRAIN))


def test_augmentation_only_in_train(toy_data: str) -> None:
    p = AugmentedToyImages()
    train = list(p.dataset("train", toy_data, seed=3).take(8).as_numpy_iterator())
    for example in train:
        assert example["inputs"].shape == (SIZE, SIZE, CHANNELS)
        assert example["inputs"].dtype == np.uint8
    assert not all(
        any(np.array_equal(ex["inputs"], _image(i)) for i in range(NUM_TRAIN)) for ex in train
    )
    dev = list(p.dataset("eval", toy_data, deterministic=True).as_numpy_iterator())
    for i, example in enumerate(dev):
        np.testing.assert_array_equal(example["inputs"], _image(1000 + i))


def _windows(image: np.ndarray, pad: int) -> Iterator[np.ndarray]:
    height, width = image.shape[:2]
    padded = np.pad(image, ((pad, pad), (pad, pad), (0, 0)))
    for dy in range(2 * pad + 1):
        for dx in range(2 * pad + 1):
            window = padded[dy : dy + height, dx : dx + width]
            yield window
            yield window[:, ::-1]


def test_cifar_augment_is_a_padded_crop_or_its_mirror_image() -> None:
    image = (np.arange(64, dtype=np.uint8) + 1).reshape(8, 8, 1)
    candidates = list(_windows(image, 4))
    outputs = set()
    tf.random.set_seed(0)
    for _ in range(40):
        out = image_problems.cifar_augment(tf.constant(image)).numpy()
        assert out.shape == image.shape and out.dtype == np.uint8
        assert any(np.array_equal(out, c) for c in candidates)
        outputs.add(out.tobytes())
    assert len(outputs) > 5  # random: crops and flips differ between calls
    traced = tf.function(image_problems.cifar_augment).get_concrete_function(
        tf.TensorSpec([32, 32, 3], tf.uint8)
    )
    assert traced.structured_outputs.shape == (32, 32, 3)


def test_generate_examples_rejects_bad_images_and_labels(tmp_path) -> None:
    class BadShape(ToyImages):
        def generate_images(self, data_dir, tmp_dir, split, *, mirror=None):
            yield _image(0, size=SIZE + 1), 0

    class BadLabel(ToyImages):
        def generate_images(self, data_dir, tmp_dir, split, *, mirror=None):
            yield _image(0), len(LABELS)

    with pytest.raises(ValueError, match=r"expected uint8 \[6, 6, 3\]"):
        list(BadShape().generate_examples(str(tmp_path), str(tmp_path), "train"))
    with pytest.raises(ValueError, match="label 7 is outside"):
        list(BadLabel().generate_examples(str(tmp_path), str(tmp_path), "train"))


def test_decoding_an_image_of_the_wrong_size_fails(tmp_path) -> None:
    encoded = image_problems.encode_png(_image(0, size=SIZE + 2))
    with pytest.raises(tf.errors.InvalidArgumentError):
        ToyImages().decode_image(tf.constant(encoded))


def test_decode_examples_parses_a_batch() -> None:
    records = [
        generator_utils.to_example(image_problems.image_example(_image(i), i)).SerializeToString()
        for i in range(4)
    ]
    parsed = ToyImages().decode_examples(tf.constant(records))
    assert parsed["inputs"].dtype == tf.string and parsed["inputs"].shape == (4,)
    assert parsed["targets"].dtype == tf.int32
    assert parsed["targets"].numpy().tolist() == [[0], [1], [2], [3]]


def test_generate_images_without_a_mirror_parameter(tmp_path) -> None:
    """An override without `mirror` (T2T-style signature) reads self.data_mirror."""
    seen = []

    class NoMirror(ToyImages):
        def generate_images(self, data_dir, tmp_dir, split):
            seen.append(self.data_mirror)
            yield _image(0), 3

    prob = NoMirror()
    examples = list(prob.generate_examples(str(tmp_path), str(tmp_path), "train",
                                           mirror="/mirror"))
    assert len(examples) == 1 and examples[0]["image/class/label"] == [3]
    list(prob.generate_examples(str(tmp_path), str(tmp_path), "train"))
    assert seen == ["/mirror", None] and prob.data_mirror is None
