"""Tests of t2t.models.resnet (the `resnet` model) on fake image problems."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.hparams import resnet as resnet_hparams
from t2t.hparams.hparams import HParams
from t2t.models import resnet
from tests.helpers.image_models import (
    NUM_CLASSES,
    image_problem,
    random_batch,
    stripes,
    train,
    with_overrides,
)


def body_param_count(model) -> int:
    """Trainable parameters outside the modalities (the network proper)."""
    modality_ids = {id(v) for m in model.feature_modalities.values() for v in m.trainable_weights}
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights if id(v) not in modality_ids)


def tiny_hparams(**overrides) -> HParams:
    return with_overrides(resnet_hparams.resnet_tiny_cpu(), **overrides)


def test_resnet_is_registered():
    assert registry.model("resnet") is resnet.Resnet
    assert resnet.Resnet.registered_name == "resnet"


@pytest.mark.parametrize("block_fn", ["residual", "bottleneck"])
def test_logits_and_losses_shapes(block_fn):
    model = resnet.Resnet(tiny_hparams(block_fn=block_fn), "train", image_problem([28, 28, 1]))
    features = random_batch(4, [28, 28, 1])
    logits, losses = model(features, training=True)
    assert logits.shape == (4, 1, NUM_CLASSES)
    numerator, denominator = losses["training"]
    assert float(denominator) == 4.0
    assert np.isfinite(float(numerator)) and float(numerator) > 0
    # CIFAR layout: no stem stride or pool; strides 1, 2, 2 -> 28 / 4 = 7.
    body = model.body(model.bottom(features, False), False)
    channels = 32 * (4 if block_fn == "bottleneck" else 1)
    assert body.shape == (4, 7, 7, channels)


@pytest.mark.parametrize("block_fn", ["residual", "bottleneck"])
def test_imagenet_layout_downsamples_by_32(block_fn):
    hp = tiny_hparams(
        block_fn=block_fn,
        is_cifar=False,
        layer_sizes=[1, 2, 1, 1],
        filter_sizes=[8, 8, 8, 16, 16],
        bottleneck_ratios=[2, 2, 2, 3],
    )
    model = resnet.Resnet(hp, "eval", image_problem([40, 40, 3]))
    features = random_batch(2, [40, 40, 3])
    logits, _ = model(features)
    assert logits.shape == (2, 1, NUM_CLASSES)
    body = model.body(model.bottom(features, False), False)
    # 40 -conv/2-> 20 -pool/2-> 10 -> 10 -> 5 -> 3 -> 2 (fixed padding rounds up).
    channels = 16 * (3 if block_fn == "bottleneck" else 1)
    assert body.shape == (2, 2, 2, channels)


def test_bottleneck_last_block_of_each_layer_starts_with_zero_scale():
    hp = tiny_hparams(block_fn="bottleneck", layer_sizes=[2, 1, 3])
    model = resnet.Resnet(hp, "train", image_problem([16, 16, 1]))
    model(random_batch(2, [16, 16, 1]), training=False)

    def gamma(layer, block):
        return model.block_layers[layer].blocks[block].bn3.bn.gamma.numpy()

    assert np.all(gamma(0, 1) == 0) and np.all(gamma(0, 0) == 1)
    assert np.all(gamma(1, 0) == 1)  # a single block is not a "final block" (T2T)
    assert np.all(gamma(2, 2) == 0) and np.all(gamma(2, 1) == 1)


def test_batch_norm_moving_stats_change_only_in_training():
    model = resnet.Resnet(tiny_hparams(), "train", image_problem([16, 16, 1]))
    features = random_batch(8, [16, 16, 1])
    model(features, training=False)
    moving = [v for v in model.non_trainable_weights if "moving" in v.path]
    assert moving, "no batch-norm moving statistics found"

    before = [v.numpy().copy() for v in moving]
    first, _ = model(features, training=False)
    second, _ = model(features, training=False)
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    for b, v in zip(before, moving, strict=True):
        np.testing.assert_array_equal(b, v.numpy())

    model(features, training=True)
    changed = [not np.allclose(b, v.numpy()) for b, v in zip(before, moving, strict=True)]
    assert all(changed)


def test_training_flag_defaults_to_the_mode():
    features = random_batch(4, [16, 16, 1])
    model = resnet.Resnet(tiny_hparams(), "eval", image_problem([16, 16, 1]))
    model(features)
    moving = [v.numpy().copy() for v in model.non_trainable_weights]
    model(features)
    for b, v in zip(moving, model.non_trainable_weights, strict=True):
        np.testing.assert_array_equal(b, v.numpy())


def test_kernels_use_the_hparams_initializer():
    # normal_unit_scaling, gain 2: variance 2 / fan_avg (He-like for square convs).
    hp = tiny_hparams(filter_sizes=[64, 64, 64, 64], layer_sizes=[1, 1, 1])
    model = resnet.Resnet(hp, "train", image_problem([8, 8, 1]))
    model(random_batch(1, [8, 8, 1]), training=False)
    kernel = model.block_layers[0].blocks[0].conv2.conv.kernel.numpy()
    fan_avg = 3 * 3 * 64
    assert kernel.std() == pytest.approx(np.sqrt(2.0 / fan_avg), rel=0.1)


def test_same_shaped_kernels_start_different():
    # A Keras 3 initializer object reused across layers repeats its values.
    hp = tiny_hparams(filter_sizes=[8, 8, 8, 8], layer_sizes=[2, 1, 1])
    model = resnet.Resnet(hp, "train", image_problem([8, 8, 1]))
    model(random_batch(1, [8, 8, 1]), training=False)
    kernels = [v.numpy() for v in model.trainable_weights if v.shape == (3, 3, 8, 8)]
    assert len(kernels) >= 4
    for i in range(len(kernels)):
        for j in range(i):
            assert not np.array_equal(kernels[i], kernels[j])


def test_parameter_counts_match_the_standard_resnets():
    # Parameters do not depend on the image size: build on small images, 1000 classes.
    problem = image_problem([32, 32, 3], num_classes=1000)
    features = random_batch(1, [32, 32, 3])
    r50 = resnet.Resnet(resnet_hparams.resnet_50(), "eval", problem)
    r50(features)
    # torchvision's resnet50 has 25,557,032 parameters, of which its fc 2,049,000.
    assert body_param_count(r50) == 25_557_032 - 2_049_000
    r18 = resnet.Resnet(resnet_hparams.resnet_18(), "eval", problem)
    r18(features)
    # torchvision's resnet18: 11,689,512 - 513,000 (fc); T2T's pre-activation blocks add
    # a projection to block layer 1 (64*64 + 128) and normalize the first block of later
    # layers over its input channels (-2 * (64 + 128 + 256)).
    assert body_param_count(r18) == 11_689_512 - 513_000 + 4_224 - 896


def test_bad_hparams_raise_clear_errors():
    problem = image_problem([16, 16, 1])
    with pytest.raises(ValueError, match="block_fn"):
        resnet.Resnet(tiny_hparams(block_fn="dense"), "train", problem)
    with pytest.raises(ValueError, match="layer_sizes"):
        resnet.Resnet(tiny_hparams(layer_sizes=[1, 1]), "train", problem)
    with pytest.raises(ValueError, match="filter_sizes"):
        resnet.Resnet(tiny_hparams(is_cifar=False), "train", problem)


def test_infer_returns_a_class():
    model = resnet.Resnet(tiny_hparams(), "infer", image_problem([16, 16, 1]))
    out = infer_lib.infer(model, {"inputs": random_batch(3, [16, 16, 1])["inputs"]})
    assert out["outputs"].shape == (3, 1)
    assert out["scores"].shape == (3,)


def test_tiny_resnet_fits_a_separable_image_task():
    tf.random.set_seed(1)
    hp = resnet_hparams.resnet_tiny_cpu()
    model = resnet.Resnet(hp, "train", image_problem([16, 16, 1]))
    accuracy = train(model, stripes(64, 16), steps=100, learning_rate=hp.learning_rate_constant)
    assert accuracy >= 0.95
