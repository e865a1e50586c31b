"""Tests of t2t.models.image_encoder and the image -> text hparams sets: positions per
flatten order, the ResNet encoder, a Transformer that reads images, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.hparams.image_text import add_image_encoder_hparams
from t2t.hparams.transformer import transformer_test
from t2t.models import image_encoder, t2t_model


def _hparams(**overrides):
    hp = add_image_encoder_hparams(transformer_test())
    for name, value in overrides.items():
        setattr(hp, name, value)
    return hp


def test_columns_give_one_position_per_column_and_raster_one_per_cell():
    images = tf.random.uniform([2, 32, 96, 1])
    columns = image_encoder.ImageEncoder(_hparams(image_encoder_flatten="columns"))(images)
    raster = image_encoder.ImageEncoder(_hparams())(images)
    assert columns.shape == (2, 12, 16) and raster.shape == (2, 4 * 12, 16)


def test_the_resnet_encoder_halves_the_size_per_stage_after_the_stem():
    hp = _hparams(image_encoder="resnet", image_encoder_channels=4,
                  image_encoder_resnet_blocks=[1, 1, 1])
    out = image_encoder.ImageEncoder(hp)(tf.random.uniform([2, 32, 32, 3]), training=True)
    assert out.shape == (2, 4 * 4, 16)  # 32 -> 16 (stem) -> 16 -> 8 -> 4


def test_the_xception_encoder_divides_the_size_by_32_at_its_own_width():
    hp = _hparams(image_encoder="xception", image_encoder_channels=8,
                  image_encoder_xception_blocks=1)
    encoder = image_encoder.ImageEncoder(hp)
    out = encoder(tf.random.uniform([2, 64, 96, 3]), training=True)
    assert out.shape == (2, 2 * 3, 16)  # 64 x 96 -> 2 x 3 cells of 2.5 * 8 = 20 -> 16
    assert encoder.feature_map(tf.zeros([1, 64, 96, 3])).shape[-1] == 20
    assert hp.hidden_size == 16 and hp.kernel_width == 1  # the model's hparams untouched


@pytest.mark.parametrize("name, value, match", [
    ("image_encoder", "vgg", "image_encoder='vgg'"),
    ("image_encoder_xception_blocks", -1, "image_encoder_xception_blocks=-1"),
    ("image_encoder_flatten", "spiral", "image_encoder_flatten='spiral'"),
    ("image_encoder_layers", 0, "image_encoder_layers=0"),
    ("image_encoder_convs", 0, "image_encoder_convs=0"),
])
def test_bad_hparams_are_named(name, value, match):
    with pytest.raises(ValueError, match=match):
        image_encoder.ImageEncoder(_hparams(**{name: value}))


def _image_text_problem() -> ProblemHParams:
    return ProblemHParams(modality={"inputs": Modality.IMAGE, "targets": Modality.SYMBOL},
                          vocab_size={"inputs": 256, "targets": 20}, image_shape=[16, 32, 1])


def test_a_transformer_reads_images_and_decodes_text():
    model = registry.model("transformer")(
        _hparams(image_encoder_flatten="columns"), t2t_model.TRAIN, _image_text_problem())
    images = np.random.default_rng(0).integers(0, 256, [2, 16, 32, 1]).astype(np.uint8)
    targets = np.array([[5, 6, 1], [7, 1, 0]], np.int32)
    logits, losses = model({"inputs": images, "targets": targets}, training=True)
    numerator, denominator = losses["training"]
    assert logits.shape[:2] == (2, 3) and np.isfinite(float(numerator / denominator))
    assert any("image_encoder" in v.path for v in model.trainable_variables)


def test_image_inputs_without_the_encoder_hparams_say_which_sets_have_them():
    with pytest.raises(ValueError, match="transformer_image_text_tiny"):
        registry.model("transformer")(transformer_test(), t2t_model.TRAIN, _image_text_problem())
