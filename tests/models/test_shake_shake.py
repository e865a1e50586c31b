"""Tests of t2t.models.shake_shake (the `shake_shake` model) on fake image problems."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.hparams import shake_shake as shake_shake_hparams
from t2t.hparams.hparams import HParams
from t2t.models import shake_shake
from tests.helpers.image_models import (
    NUM_CLASSES,
    image_problem,
    random_batch,
    stripes,
    train,
    with_overrides,
)


def tiny_hparams(**overrides) -> HParams:
    """shake_shake_quick shrunk to one block per stage and k = 1."""
    hp = shake_shake_hparams.shake_shake_quick()
    hp.num_hidden_layers = 8
    hp.hidden_size = 16
    return with_overrides(hp, **overrides)


def test_shake_shake_is_registered():
    assert registry.model("shake_shake") is shake_shake.ShakeShake


@pytest.mark.parametrize(
    ("layers", "hidden", "blocks", "channels"), [(8, 16, 3, 64), (14, 32, 6, 128)]
)
def test_logits_losses_and_body_shapes(layers, hidden, blocks, channels):
    hp = tiny_hparams(num_hidden_layers=layers, hidden_size=hidden)
    model = shake_shake.ShakeShake(hp, "train", image_problem([28, 28, 1]))
    features = random_batch(3, [28, 28, 1])
    logits, losses = model(features, training=True)
    assert logits.shape == (3, 1, NUM_CLASSES)
    numerator, denominator = losses["training"]
    assert float(denominator) == 3.0 and np.isfinite(float(numerator))
    assert len(model.blocks) == blocks
    body = model.body(model.bottom(features, False), False)
    assert body.shape == (3, 7, 7, channels)  # 28 -> 28 -> 14 -> 7
    assert float(tf.reduce_min(body)) >= 0.0  # ends with a ReLU


def test_training_calls_are_random_eval_calls_are_not():
    model = shake_shake.ShakeShake(tiny_hparams(), "train", image_problem([12, 12, 1]))
    features = random_batch(4, [12, 12, 1])
    model(features, training=False)
    train_a, _ = model(features, training=True)
    train_b, _ = model(features, training=True)
    assert not np.allclose(train_a.numpy(), train_b.numpy())
    eval_a, _ = model(features, training=False)
    eval_b, _ = model(features, training=False)
    np.testing.assert_array_equal(eval_a.numpy(), eval_b.numpy())


def test_shake_forward_and_backward_weights_differ():
    x = tf.constant(np.arange(1.0, 9.0, dtype=np.float32).reshape(2, 2, 2, 1))
    forward = tf.constant([0.2, 0.9], shape=[2, 1, 1, 1])
    backward = tf.constant([0.7, 0.4], shape=[2, 1, 1, 1])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = shake_shake.shake(x, forward, backward)
        total = tf.reduce_sum(y)
    np.testing.assert_allclose(y.numpy(), (x * forward).numpy(), rtol=1e-6)
    grad = tape.gradient(total, x)
    np.testing.assert_allclose(grad.numpy(), np.broadcast_to(backward.numpy(), x.shape))


def test_branch_coefficients_are_per_example_and_sum_to_one():
    block = shake_shake.ShakeShakeBlock(16, 16, 1, tiny_hparams(shake_shake_num_branches=3))
    coefficients = block._coefficients(tf.zeros([5, 4, 4, 16]))
    assert len(coefficients) == 3 and coefficients[0].shape == (5, 1, 1, 1)
    np.testing.assert_allclose(tf.add_n(coefficients).numpy(), 1.0, rtol=1e-6)
    assert len(np.unique(coefficients[0].numpy())) == 5


def test_branches_start_with_different_weights():
    model = shake_shake.ShakeShake(tiny_hparams(), "train", image_problem([8, 8, 1]))
    model(random_batch(1, [8, 8, 1]), training=False)
    for block in model.blocks:
        first, second = (branch.conv1.kernel.numpy() for branch in block.branches)
        assert not np.array_equal(first, second)


def test_eval_averages_the_branches():
    hp = tiny_hparams(shake_shake_num_branches=2)
    block = shake_shake.ShakeShakeBlock(16, 16, 1, hp)
    x = tf.random.normal([2, 6, 6, 16])
    out = block(x, training=False)
    branches = [b(x, training=False) for b in block.branches]
    np.testing.assert_allclose(
        out.numpy(), (x + 0.5 * (branches[0] + branches[1])).numpy(), atol=1e-5
    )


def test_batch_norm_moving_stats_change_only_in_training():
    model = shake_shake.ShakeShake(tiny_hparams(), "train", image_problem([12, 12, 1]))
    features = random_batch(4, [12, 12, 1])
    model(features, training=False)
    moving = [v for v in model.non_trainable_weights if "moving" in v.path]
    assert moving
    before = [v.numpy().copy() for v in moving]
    model(features, training=False)
    for b, v in zip(before, moving, strict=True):
        np.testing.assert_array_equal(b, v.numpy())
    model(features, training=True)
    assert all(not np.allclose(b, v.numpy()) for b, v in zip(before, moving, strict=True))


def test_concat_variant_builds():
    hp = tiny_hparams(shake_shake_concat=1)
    model = shake_shake.ShakeShake(hp, "train", image_problem([12, 12, 1]))
    logits, _ = model(random_batch(2, [12, 12, 1]), training=True)
    assert logits.shape == (2, 1, NUM_CLASSES)
    assert any("concat_1x1" in v.path for v in model.trainable_weights)


def test_shake_shake_quick_runs_on_small_images():
    hp = shake_shake_hparams.shake_shake_quick()  # 26 layers, hidden_size 32
    model = shake_shake.ShakeShake(hp, "train", image_problem([8, 8, 3]))
    features = random_batch(2, [8, 8, 3])
    logits, losses = model(features, training=True)
    assert logits.shape == (2, 1, NUM_CLASSES)
    assert len(model.blocks) == 12
    assert np.isfinite(float(losses["training"][0]))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_hidden_layers": 10}, "num_hidden_layers"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"hidden_size": 24}, "hidden_size"),
        ({"hidden_size": 8}, "hidden_size"),
        ({"shake_shake_num_branches": 0}, "shake_shake_num_branches"),
    ],
)
def test_bad_config_raises_a_clear_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        shake_shake.ShakeShake(tiny_hparams(**overrides), "train", image_problem([12, 12, 1]))


def test_tiny_shake_shake_fits_a_separable_image_task():
    tf.random.set_seed(2)
    model = shake_shake.ShakeShake(tiny_hparams(), "train", image_problem([12, 12, 1]))
    features = stripes(32, 12)
    model(features, training=False)
    # T2T's batch-norm momentum (0.99) needs ~500 steps before the moving statistics that
    # evaluation uses forget their initial values; 0.9 lets a 100-step test check them.
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.9
    accuracy = train(model, features, steps=100, learning_rate=3e-3)
    assert accuracy >= 0.95
