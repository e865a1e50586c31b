"""Tests of t2t.data.bases.image_utils: Tensor2Tensor's image_utils for problems written
against T2T. Helpers (PNG round trips, resizing, the encoder, image summaries), the base
classes in process (generate, read, hparams, the image shape), and end to end: a user
module in T2T's idiom through t2t-datagen, t2t-trainer and t2t-decoder."""

from __future__ import annotations

import glob
import io
import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from t2t.data import problem
from t2t.data.bases import image_utils
from t2t.data.t2t_style import ProblemHParamsBag

BIN = os.path.dirname(sys.executable)


def _decode_png(data: bytes) -> np.ndarray:
    return tf.io.decode_png(data, channels=0).numpy()


# ------------------------------------------------------------------- helpers
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_encode_images_as_png_round_trips_exactly(channels):
    rng = np.random.default_rng(channels)
    images = [rng.integers(0, 256, [5, 7, channels], dtype=np.uint8) for _ in range(3)]
    encoded = list(image_utils.encode_images_as_png(images))
    assert len(encoded) == 3 and all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in encoded)
    for image, png in zip(images, encoded, strict=True):
        np.testing.assert_array_equal(_decode_png(png), image)
    from PIL import Image  # a second, independent decoder

    decoded = np.asarray(Image.open(io.BytesIO(encoded[0])))
    np.testing.assert_array_equal(decoded.reshape(images[0].shape), images[0])


def test_encode_images_as_png_takes_tensors_and_int_pixels_and_refuses_others():
    image = np.arange(24, dtype=np.int64).reshape(2, 4, 3) * 10
    (png,) = image_utils.encode_images_as_png([tf.constant(image)])
    np.testing.assert_array_equal(_decode_png(png), image.astype(np.uint8))
    with pytest.raises(ValueError, match="integers in \\[0, 255\\]"):
        list(image_utils.encode_images_as_png([image * 100]))
    with pytest.raises(ValueError, match="1 to 4 channels"):
        list(image_utils.encode_images_as_png([np.zeros([2, 2, 5], np.uint8)]))


def test_image_generator_yields_t2t_example_dicts():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, [3, 6, 9, 3], dtype=np.uint8)  # height 6, width 9
    examples = list(image_utils.image_generator(images, np.array([2, 0, 7])))
    assert len(examples) == 3
    for image, label, example in zip(images, [2, 0, 7], examples, strict=True):
        assert set(example) == {"image/encoded", "image/format", "image/class/label",
                                "image/height", "image/width"}
        assert example["image/format"] == ["png"]
        assert example["image/class/label"] == [label]
        assert type(example["image/class/label"][0]) is int
        assert example["image/height"] == [6] and example["image/width"] == [9]
        np.testing.assert_array_equal(_decode_png(example["image/encoded"][0]), image)
    # What generator_utils.to_example stores, read back.
    from t2t.data.generation import generator_utils

    stored = generator_utils.to_example(examples[0]).features.feature
    assert stored["image/format"].bytes_list.value == [b"png"]
    assert stored["image/class/label"].int64_list.value == [2]

    with pytest.raises(ValueError, match="Must provide some images"):
        next(image_utils.image_generator([], []))
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        next(image_utils.image_generator(list(images), [1, 2]))


def test_resize_by_area_averages_blocks_and_truncates_to_int64():
    image = np.array([[1, 2, 10, 10], [3, 4, 10, 10], [0, 0, 255, 255], [0, 1, 255, 255]],
                     np.uint8)[:, :, None]
    resized = image_utils.resize_by_area(image, 2)
    assert resized.dtype == tf.int64 and resized.shape == (2, 2, 1)
    np.testing.assert_array_equal(resized.numpy()[:, :, 0], [[2, 10], [0, 255]])  # 2.5 -> 2
    batch = image_utils.resize_by_area(np.stack([image, image]), 1)
    np.testing.assert_array_equal(batch.numpy()[:, 0, 0, 0], [66, 66])  # 1071 / 16 = 66.9


def test_make_multiscale_and_dilated():
    image = np.tile(np.arange(8, dtype=np.uint8)[None, :, None] * 30, [8, 1, 3])
    scaled = image_utils.make_multiscale(image, [2, 4, 8], resize_method="area")
    assert [s.shape.as_list() for s in scaled] == [[2, 2, 3], [4, 4, 3], [8, 8, 3]]
    assert all(s.dtype == tf.int64 for s in scaled)
    np.testing.assert_array_equal(scaled[2].numpy(), image)
    np.testing.assert_array_equal(scaled[1].numpy()[0, :, 0], [15, 75, 135, 195])
    bicubic = image_utils.make_multiscale(image, [3])[0].numpy()  # default: bicubic
    assert bicubic.min() >= 0 and bicubic.max() <= 255
    dilated = image_utils.make_multiscale_dilated(image, [4, 2])
    np.testing.assert_array_equal(dilated[0].numpy(), image[::2, ::2])
    np.testing.assert_array_equal(dilated[1].numpy(), image[::4, ::4])


def test_image_encoder_writes_and_reads_png_files(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, [4, 4, 3], dtype=np.uint8)
    encoder = image_utils.ImageEncoder()
    assert encoder.vocab_size == 256 and encoder.num_reserved_ids == 0
    path = encoder.decode(image.reshape(-1).tolist())
    assert path.startswith(str(tmp_path)) and path.endswith("_decode.png")
    np.testing.assert_array_equal(encoder.encode(path), image)
    assert encoder.decode_list(image.reshape(-1)) != [path]  # a new file each time
    gray = image_utils.ImageEncoder(height=2, width=3, channels=1)
    gray_path = gray.decode(list(range(6)))
    np.testing.assert_array_equal(gray.encode(gray_path)[:, :, 0], [[0, 1, 2], [3, 4, 5]])
    with pytest.raises(ValueError, match="7 ids"):
        gray.decode(list(range(7)))
    with pytest.raises(ValueError, match="no reserved ids"):
        image_utils.ImageEncoder(num_reserved_ids=2)


def test_convert_predictions_to_image_summaries(tmp_path):
    rng = np.random.default_rng(2)
    predictions = [{"inputs": rng.integers(0, 256, [4, 4, 3], dtype=np.uint8),
                    "outputs": rng.integers(0, 256, [4, 4, 3]).astype(np.int64)}
                   for _ in range(12)]
    off = SimpleNamespace(predictions=[predictions],
                          decode_hparams=SimpleNamespace(display_decoded_images=False))
    assert image_utils.convert_predictions_to_image_summaries(off) == []

    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        summaries = image_utils.convert_predictions_to_image_summaries(
            {"predictions": [predictions], "decode_hparams": None, "step": 5})
    writer.close()
    assert len(summaries) == 20  # ten random predictions, input and output each
    assert [tag for tag, _ in summaries[:4]] == ["0_input", "0_output", "1_input", "1_output"]
    assert all(image.dtype == np.uint8 and image.shape == (4, 4, 3) for _, image in summaries)
    inputs = {image.tobytes() for tag, image in summaries if tag.endswith("_input")}
    assert inputs <= {p["inputs"].tobytes() for p in predictions}
    tags = set()
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value if event.step == 5)
    assert {"0_input", "9_output"} <= tags
    # Without a default writer: the pairs only. Class-label outputs are not images.
    labels = [{"inputs": np.zeros([2, 2, 1], np.uint8), "outputs": np.array([3])}]
    pairs = image_utils.convert_predictions_to_image_summaries({"predictions": [labels]})
    assert [tag for tag, _ in pairs] == ["0_input"]
    value = image_utils.image_to_tf_summary_value(pairs[0][1], "x")
    assert value.tag == "x" and value.image.height == 2 and value.image.colorspace == 1


# ------------------------------------------------------- the classes, in process
def _images(count: int, size: int = 8, channels: int = 3, seed: int = 0):
    """Distinct images: class c has a bright square at a class-dependent place."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for i in range(count):
        label = i % 4
        image = rng.integers(0, 40, [size, size, channels], dtype=np.uint8)
        image[label:label + 3, label:label + 3] = 250
        images.append(image)
        labels.append(label)
    return images, labels


class _Squares(image_utils.Image2ClassProblem):
    """Written as in Tensor2Tensor (properties), not registered."""

    def dataset_filename(self):  # shared by the subclasses below
        return "squares"

    @property
    def is_small(self):
        return True

    @property
    def num_classes(self):
        return 4

    @property
    def train_shards(self):
        return 2

    def generator(self, data_dir, tmp_dir, is_training):
        return image_utils.image_generator(*_images(12 if is_training else 4,
                                                    seed=int(is_training)))


@pytest.fixture(scope="module")
def squares(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("squares"))
    prob = _Squares()
    summary = prob.generate_data(data_dir, data_dir + "/tmp")
    return prob, data_dir, summary


def test_generate_data_writes_train_and_dev_shards(squares):
    prob, data_dir, summary = squares
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(data_dir, "squares-*")))
    assert names == ["squares-dev-00000-of-00001", "squares-train-00000-of-00002",
                     "squares-train-00001-of-00002"]
    assert summary["train"].examples == 12 and summary["dev"].examples == 4
    assert [(s.name, s.shards) for s in prob.splits] == [("train", 2), ("dev", 1)]


def test_dataset_decodes_t2t_reading_spec(squares):
    prob, data_dir, _ = squares
    dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True)
    assert dataset.element_spec["inputs"].shape.as_list() == [8, 8, 3]
    assert dataset.element_spec["inputs"].dtype == tf.uint8
    examples = list(dataset.as_numpy_iterator())
    images, labels = _images(4, seed=0)
    assert [int(e["targets"][0]) for e in examples] == labels
    for example, image in zip(examples, images, strict=True):
        np.testing.assert_array_equal(example["inputs"], image)  # uint8 kept, unstandardized
    fields, decoders = prob.example_reading_spec()
    assert set(fields) == {"image/encoded", "image/format", "image/class/label"}
    assert set(decoders) == {"inputs", "targets"}


def test_hparams_follow_t2t_and_give_t2t_the_image_shape(squares):
    prob, data_dir, _ = squares
    hp = prob.hparams(data_dir)
    assert hp.modality == {"inputs": "image", "targets": "class_label"}
    assert hp.vocab_size == {"inputs": 256, "targets": 4}
    assert (hp.input_space_id, hp.target_space_id) == (problem.SpaceID.IMAGE,
                                                       problem.SpaceID.IMAGE_LABEL)
    assert (hp.batch_size_multiplier, hp.loss_multiplier) == (4, 3.0)  # is_small
    assert hp.batch_size_means_tokens is False
    assert hp.image_shape == [8, 8, 3]  # read from the first dev example
    assert prob.hparams(None).image_shape is None  # no data, nothing declared
    # T2T's way (a subclass's super() call) fills the bag and returns None.
    bag = ProblemHParamsBag(modality={}, vocab_size={})
    assert prob.hparams(bag, None) is None and bag.vocab_size == {"inputs": 256, "targets": 4}
    rev = _Squares(was_reversed=True).hparams(data_dir)
    assert rev.modality == {"inputs": "class_label", "targets": "image"}
    assert rev.loss_multiplier == 1.0 and rev.image_shape == [8, 8, 3]


def test_declared_shape_encoders_and_metrics(squares):
    prob, data_dir, _ = squares

    class Declared(_Squares):
        image_size = 8

    assert Declared().hparams(None).image_shape == [8, 8, 3]
    encoders = prob.feature_encoders(data_dir)
    assert isinstance(encoders["inputs"], image_utils.ImageEncoder)
    assert encoders["targets"].decode([3]) == "ID_3"
    assert prob.eval_metrics() == ["accuracy", "accuracy_top5", "accuracy_per_sequence",
                                   "neg_log_perplexity"]
    assert _Squares(was_reversed=True).eval_metrics() == prob.eval_metrics()  # summary dropped


def test_images_of_another_size_fail_naming_the_fix(tmp_path):
    class Mixed(_Squares):
        @property
        def train_shards(self):
            return 1

        def generator(self, data_dir, tmp_dir, is_training):
            images = [np.zeros([8, 8, 3], np.uint8), np.zeros([6, 8, 3], np.uint8)]
            return image_utils.image_generator(images, [0, 1])

    prob = Mixed()
    prob.generate_data(str(tmp_path), str(tmp_path / "tmp"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="declared and a resize"):
        list(prob.dataset(problem.EVAL, str(tmp_path), deterministic=True))


def test_float_images_from_preprocess_example_are_warned_about(squares, caplog):
    _, data_dir, _ = squares

    class Standardized(_Squares):
        def preprocess_example(self, example, mode, hparams):
            example["inputs"] = tf.image.per_image_standardization(example["inputs"])
            return example

    with caplog.at_level("WARNING"):
        dataset = Standardized().dataset(problem.EVAL, data_dir)
    assert dataset.element_spec["inputs"].dtype == tf.float32
    assert "drop per_image_standardization" in caplog.text


def test_image2text_problem_reads_token_targets():
    class Captions(image_utils.Image2TextProblem):
        is_character_level = True
        target_space_id = problem.SpaceID.EN_CHR
        train_shards = 1
        dev_shards = 1

    prob = Captions()
    fields, decoders = prob.example_reading_spec()
    assert isinstance(fields["image/class/label"], tf.io.VarLenFeature)
    assert set(decoders) == {"inputs", "targets"}
    hp = prob.hparams(None)
    assert hp.modality == {"inputs": "image", "targets": "symbol"}
    assert hp.vocab_size["targets"] == prob.feature_encoders(None)["targets"].vocab_size
    assert hp.target_space_id == problem.SpaceID.EN_CHR and hp.batch_size_multiplier == 256
    assert prob.sequence_features == ("targets",)


# ------------------------------------------------------------------ end to end
USER_MODULE = '''\
"""Digits rendered from fonts: an image problem written against Tensor2Tensor."""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tensor2tensor.data_generators import image_utils
from tensor2tensor.data_generators import problem
from tensor2tensor.utils import registry

import tensorflow.compat.v1 as tf

TRAIN_FONTS = {train_fonts!r}
DEV_FONTS = {dev_fonts!r}
SIZE = 16


def render_digit(digit, font_path, dx, dy):
  """A white digit on black, SIZE x SIZE x 1, centred then shifted by (dx, dy)."""
  font = ImageFont.truetype(font_path, 14)
  canvas = Image.new("L", (SIZE, SIZE), 0)
  draw = ImageDraw.Draw(canvas)
  left, top, right, bottom = draw.textbbox((0, 0), str(digit), font=font)
  x = (SIZE - (right - left)) // 2 - left + dx
  y = (SIZE - (bottom - top)) // 2 - top + dy
  draw.text((x, y), str(digit), fill=255, font=font)
  return np.asarray(canvas, dtype=np.uint8)[:, :, None]


@registry.register_problem
class DigitGlyphsT2tStyle(image_utils.Image2ClassProblem):
  """Digits 0-9 in a few fonts and offsets; dev: other fonts."""

  @property
  def num_channels(self):
    return 1

  @property
  def is_small(self):
    return True

  @property
  def num_classes(self):
    return 10

  @property
  def class_labels(self):
    return ["digit_%d" % d for d in range(self.num_classes)]

  @property
  def train_shards(self):
    return 2

  def generator(self, data_dir, tmp_dir, is_training):
    fonts = TRAIN_FONTS if is_training else DEV_FONTS
    if is_training:
      offsets = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    else:
      offsets = [(0, 0), (1, 1)]
    images, labels = [], []
    for font_path in fonts:
      for dx, dy in offsets:
        for digit in range(self.num_classes):
          images.append(render_digit(digit, font_path, dx, dy))
          labels.append(digit)
    return image_utils.image_generator(images, labels)

  def preprocess_example(self, example, mode, unused_hparams):
    image = example["inputs"]
    image.set_shape([SIZE, SIZE, self.num_channels])
    if mode == tf.estimator.ModeKeys.TRAIN:
      image = tf.image.random_brightness(image, 0.0)  # T2T's augmentation idiom (no-op)
    example["inputs"] = image
    return example
'''
PROBLEM = "digit_glyphs_t2t_style"
FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu",
             "/usr/share/fonts/TTF", "/usr/share/fonts")
# fonts-dejavu-core's faces: four to train on, two others for dev.
TRAIN_FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSans-Bold.ttf",
               "DejaVuSansMono-Bold.ttf")
DEV_FONTS = ("DejaVuSansMono.ttf", "DejaVuSerif-Bold.ttf")


def _font(name: str) -> str:
    for folder in FONT_DIRS:
        found = sorted(glob.glob(os.path.join(folder, "**", name), recursive=True))
        if found:
            return found[0]
    pytest.skip(f"font {name} is not installed (apt-get install fonts-dejavu-core)")


def _run(*args, **kwargs):
    result = subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True,
                            text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stderr[-4000:]}"
    return result


def test_t2t_style_module_through_datagen_trainer_and_decoder(tmp_path):
    """A user's module in T2T's idiom (imports untouched) is generated by t2t-datagen,
    trained by t2t-trainer on basic_fc_relu and decoded by t2t-decoder, each in a fresh
    process; the decodes are the problem's class names."""
    pytest.importorskip("PIL")
    train_fonts = [_font(name) for name in TRAIN_FONTS]
    dev_fonts = [_font(name) for name in DEV_FONTS]
    usr_dir = tmp_path / "digit_glyphs_usr"
    usr_dir.mkdir()
    (usr_dir / "__init__.py").write_text("from . import digit_glyphs\n")
    (usr_dir / "digit_glyphs.py").write_text(
        USER_MODULE.format(train_fonts=train_fonts, dev_fonts=dev_fonts))
    data_dir, output_dir = tmp_path / "data", tmp_path / "run"
    # ImageEncoder.decode writes temporary PNGs (T2T's contract): keep them in tmp_path.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    common = [f"--t2t_usr_dir={usr_dir}", f"--data_dir={data_dir}"]

    datagen = _run("t2t-datagen", *common, f"--problem={PROBLEM}",
                   f"--tmp_dir={tmp_path / 'tmp'}", env=env)
    shards = sorted(os.path.basename(p) for p in glob.glob(str(data_dir / f"{PROBLEM}-*")))
    assert shards == [f"{PROBLEM}-dev-00000-of-00001", f"{PROBLEM}-train-00000-of-00002",
                      f"{PROBLEM}-train-00001-of-00002"]
    counts = {line.split()[0]: int(line.split()[1].replace(",", ""))
              for line in datagen.stdout.splitlines() if line.split()[:1] in (["train"], ["dev"])}
    assert counts == {"train": 200, "dev": 40}

    trained = _run("t2t-trainer", *common, f"--problem={PROBLEM}", "--model=basic_fc_relu",
                   "--hparams_set=basic_fc_small",
                   "--hparams=learning_rate=1.0,learning_rate_warmup_steps=5",
                   "--train_steps=20", f"--output_dir={output_dir}", "--random_seed=3", env=env)
    assert "image shape [16, 16, 1], read from the first dev example" in trained.stderr
    line = re.search(r"eval step 20: accuracy ([0-9.]+) .*", trained.stdout)
    assert line, trained.stdout[-3000:]
    with open(output_dir / "eval_results.jsonl", encoding="utf-8") as f:
        last = json.loads(f.read().splitlines()[-1])
    assert last["step"] == 20 and last["accuracy"] == pytest.approx(float(line[1]), abs=1e-4)
    assert {"accuracy_top5", "accuracy_per_sequence", "neg_log_perplexity"} <= set(last)
    assert last["accuracy"] >= 0.4, last  # ~0.7 after 20 steps on unseen fonts; chance 0.1
    assert os.path.exists(output_dir / "ckpt-20.index")

    decoded = _run("t2t-decoder", *common, f"--output_dir={output_dir}", "--eval_steps=0",
                   env=env)
    outputs = (output_dir / "decode_dev.outputs.txt").read_text().splitlines()
    targets = (output_dir / "decode_dev.targets.txt").read_text().splitlines()
    labels = {f"digit_{d}" for d in range(10)}
    assert len(outputs) == len(targets) == 40
    assert set(outputs) <= labels and targets == [f"digit_{i % 10}" for i in range(40)]
    exact = sum(o == t for o, t in zip(outputs, targets, strict=True)) / 40
    assert exact == pytest.approx(last["accuracy"], abs=1e-6)  # the trainer's dev accuracy
    assert f"exact match {exact:.4f}" in decoded.stdout
    assert "inputs:  <image 16x16x1>" in decoded.stdout

