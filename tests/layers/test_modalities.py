"""Tests of t2t.layers.modalities: bottoms, tops and losses per feature kind."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.hparams.hparams import HParams
from t2t.layers import modalities

VOCAB, HIDDEN = 11, 8


def hparams(**values):
    defaults = {"hidden_size": HIDDEN, "shared_embedding_and_softmax_weights": False,
                "multiply_embedding_mode": "sqrt_depth", "symbol_dropout": 0.0,
                "initializer": "uniform_unit_scaling", "initializer_gain": 1.0}
    defaults.update(values)
    return HParams(**defaults)


def random(shape, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


# -------------------------------------------------------------------- symbol
def test_symbol_bottom_scales_by_sqrt_hidden_and_zeroes_padding():
    modality = modalities.create_modality("symbol", VOCAB, hparams(), "targets")
    ids = tf.constant([[3, 5, 0], [0, 10, 1]])
    out = modality.bottom(ids).numpy()
    assert out.shape == (2, 3, HIDDEN)
    table = modality.embedding.numpy()
    np.testing.assert_allclose(out[0, 0], table[3] * math.sqrt(HIDDEN), rtol=1e-6)
    np.testing.assert_allclose(out[1, 1], table[10] * math.sqrt(HIDDEN), rtol=1e-6)
    np.testing.assert_allclose(out[1, 2], table[1] * math.sqrt(HIDDEN), rtol=1e-6)
    np.testing.assert_array_equal(out[0, 2], 0.0)
    np.testing.assert_array_equal(out[1, 0], 0.0)
    assert np.abs(table[0]).max() > 0  # zero because it is padding, not because the row is


def test_symbol_bottom_without_sqrt_depth():
    modality = modalities.create_modality("symbol", VOCAB, hparams(multiply_embedding_mode="none"),
                                          "targets")
    np.testing.assert_allclose(modality.bottom(tf.constant([[4]])).numpy()[0, 0],
                               modality.embedding.numpy()[4], rtol=1e-6)


def test_symbol_embedding_initializer_scale():
    modality = modalities.SymbolModality(2000, hparams(hidden_size=64))
    assert modality.embedding.shape == (2000, 64)
    assert abs(modality.embedding.numpy().std() - 64**-0.5) < 0.01


def test_symbol_top_shares_the_embedding():
    modality = modalities.create_modality(
        "symbol", VOCAB, hparams(shared_embedding_and_softmax_weights=True), "targets")
    assert len(modality.weights) == 1
    assert not hasattr(modality, "softmax_weights")
    body = random([2, 3, HIDDEN])
    logits = modality.top(body).numpy()
    assert logits.shape == (2, 3, VOCAB)
    np.testing.assert_allclose(logits, body.numpy() @ modality.embedding.numpy().T, rtol=1e-5, atol=1e-5)


def test_symbol_top_has_its_own_softmax_when_not_shared():
    modality = modalities.create_modality("symbol", VOCAB, hparams(), "targets")
    assert len(modality.weights) == 2
    body = random([2, 3, HIDDEN])
    expected = body.numpy() @ modality.softmax_weights.numpy().T
    np.testing.assert_allclose(modality.top(body).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(expected, body.numpy() @ modality.embedding.numpy().T)


@pytest.mark.parametrize("shared", [False, True])
def test_inputs_symbol_modality_has_no_softmax(shared):
    modality = modalities.create_modality(
        "symbol", VOCAB, hparams(shared_embedding_and_softmax_weights=shared), "inputs")
    assert len(modality.weights) == 1
    assert not hasattr(modality, "softmax_weights")


def test_symbol_dropout_only_in_training():
    modality = modalities.create_modality("symbol", VOCAB, hparams(symbol_dropout=0.5), "targets")
    ids = tf.constant(np.random.default_rng(0).integers(1, VOCAB, [4, 50]))
    np.testing.assert_array_equal(modality.bottom(ids, training=False).numpy(), modality.bottom(ids).numpy())
    dropped = np.all(modality.bottom(ids, training=True).numpy() == 0, axis=-1)
    assert 0.3 < dropped.mean() < 0.7


def test_symbol_loss_masks_padding():
    modality = modalities.create_modality("symbol", VOCAB, hparams(), "targets")
    targets = tf.constant([[4, 2, 1, 0, 0], [7, 1, 0, 0, 0]])
    logits = random([2, 5, VOCAB])
    num, den = modality.loss(logits, targets, 0.0)
    assert float(den) == 5.0
    perturbed = logits.numpy()
    perturbed[0, 3:] = 1e3 * np.random.default_rng(1).normal(size=[2, VOCAB])
    perturbed[1, 2:] = -50.0
    num2, den2 = modality.loss(tf.constant(perturbed), targets, 0.0)
    assert float(num2) == pytest.approx(float(num), rel=1e-6) and float(den2) == float(den)
    # ... and the numerator is the sum of the cross entropies of the real tokens.
    log_probs = tf.nn.log_softmax(logits).numpy()
    expected = -sum(log_probs[b, t, targets.numpy()[b, t]] for b, t in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)])
    assert float(num) == pytest.approx(expected, rel=1e-5)
    # A change at a real position does change it (the check can fail).
    perturbed[0, 1] += 5.0 * np.eye(VOCAB)[3]
    assert abs(float(modality.loss(tf.constant(perturbed), targets, 0.0)[0]) - float(num)) > 1e-3


def test_smoothed_cross_entropy_of_a_perfect_prediction_is_zero():
    vocab, eps = 7, 0.1
    labels = tf.constant([0, 3, 6])
    soft = np.full([3, vocab], eps / (vocab - 1))
    soft[np.arange(3), labels.numpy()] = 1 - eps
    logits = tf.constant(np.log(soft).astype(np.float32))
    np.testing.assert_allclose(
        modalities.smoothed_cross_entropy(logits, labels, vocab, eps).numpy(), 0.0, atol=1e-5)
    # Any other prediction scores more.
    worse = modalities.smoothed_cross_entropy(logits + random([3, vocab]), labels, vocab, eps)
    assert np.all(worse.numpy() > 1e-4)


def test_smoothed_cross_entropy_matches_a_hand_computation():
    logits = [1.0, 2.0, 3.0]
    eps = 0.1
    log_z = math.log(sum(math.exp(v) for v in logits))
    log_probs = [v - log_z for v in logits]
    soft = [0.9, 0.05, 0.05]
    xent = -sum(p * lp for p, lp in zip(soft, log_probs, strict=True))
    normalizing = -(0.9 * math.log(0.9) + 2 * 0.05 * math.log(0.05))
    value = modalities.smoothed_cross_entropy(tf.constant([logits]), tf.constant([0]), 3, eps)
    assert float(value[0]) == pytest.approx(xent - normalizing, rel=1e-5)
    # Without smoothing: the plain cross entropy.
    plain = modalities.smoothed_cross_entropy(tf.constant([logits]), tf.constant([0]), 3, 0.0)
    assert float(plain[0]) == pytest.approx(-log_probs[0], rel=1e-6)


def test_symbol_loss_with_label_smoothing():
    modality = modalities.create_modality("symbol", 3, hparams(), "targets")
    logits = tf.constant([[[1.0, 2.0, 3.0], [0.0, 0.0, 9.0]]])
    num, den = modality.loss(logits, tf.constant([[1, 0]]), 0.1)
    expected = modalities.smoothed_cross_entropy(logits[:, :1], tf.constant([[1]]), 3, 0.1)
    assert float(den) == 1.0
    assert float(num) == pytest.approx(float(expected[0, 0]), rel=1e-6)


# --------------------------------------------------------------- class label
def test_class_label_top_mean_pools_and_loss_denominator_is_batch():
    modality = modalities.create_modality("class_label", 5, hparams(), "targets")
    body = random([3, 4, HIDDEN])
    logits = modality.top(body)
    assert logits.shape == (3, 1, 5)
    pooled = modality.top(tf.reduce_mean(body, axis=1, keepdims=True))
    np.testing.assert_allclose(logits.numpy(), pooled.numpy(), rtol=1e-5, atol=1e-6)
    kernel, bias = modality.dense.kernel.numpy(), modality.dense.bias.numpy()
    np.testing.assert_allclose(logits.numpy()[:, 0], body.numpy().mean(1) @ kernel + bias,
                               rtol=1e-5, atol=1e-5)
    num, den = modality.loss(logits, tf.constant([[0], [4], [2]]), 0.0)
    assert float(den) == 3.0
    log_probs = tf.nn.log_softmax(logits[:, 0]).numpy()
    assert float(num) == pytest.approx(-(log_probs[0, 0] + log_probs[1, 4] + log_probs[2, 2]), rel=1e-5)
    # Label 0 is a class here, not padding.
    np.testing.assert_array_equal(modality.targets_weights(tf.constant([[0], [3]])).numpy(), [[1], [1]])


def test_class_label_top_pools_images():
    modality = modalities.create_modality("class_label", 4, hparams(), "targets")
    body = random([2, 3, 5, HIDDEN])
    expected = modality.top(tf.reduce_mean(body, axis=[1, 2])[:, None, :])
    np.testing.assert_allclose(modality.top(body).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_class_label_bottom():
    modality = modalities.create_modality("class_label", 4, hparams(), "targets")
    assert modality.bottom(tf.constant([[1], [3]])).shape == (2, 1, HIDDEN)


# ------------------------------------------------------------- image, real
def test_image_bottom_scales_to_unit_interval():
    modality = modalities.create_modality("image", 256, hparams(), "inputs")
    images = tf.constant(np.array([[[[0], [255]], [[51], [102]]]], np.uint8))
    out = modality.bottom(images)
    assert out.dtype == tf.float32 and out.shape == (1, 2, 2, 1)
    np.testing.assert_allclose(out.numpy().reshape(-1), [0.0, 1.0, 0.2, 0.4], atol=1e-6)


def test_real_modality_l2_loss():
    modality = modalities.create_modality("real", 3, hparams(), "targets")
    assert modality.bottom(random([2, 4, 3])).shape == (2, 4, HIDDEN)
    predictions = modality.top(random([2, 4, HIDDEN]))
    assert predictions.shape == (2, 4, 3)
    targets = random([2, 4, 3], seed=1)
    num, den = modality.loss(predictions, targets, 0.1)
    assert float(den) == 8.0
    expected = np.square(predictions.numpy() - targets.numpy()).sum()
    assert float(num) == pytest.approx(expected, rel=1e-5)


def test_real_modality_loss_reads_a_4d_output_against_3d_targets():
    # A T2T-style basic_fc body gives [B, 1, 1, D] for one real-valued target of D
    # numbers stored as [B, 1, D] (tests/fixtures/t2t_usr/sine_series.py): the loss
    # compares them element by element, not broadcast [B, 1, 1, D] x [B, 1, D].
    modality = modalities.create_modality("real", 3, hparams(), "targets")
    predictions = random([2, 1, 1, 3])
    targets = random([2, 1, 3], seed=1) + 0.5  # non-zero rows: every one is weighted
    num, den = modality.loss(predictions, targets, 0.0)
    assert float(den) == 2.0
    expected = np.square(predictions.numpy().reshape(2, 1, 3) - targets.numpy()).sum()
    assert float(num) == pytest.approx(expected, rel=1e-5)


def test_identity_modality_passes_through():
    modality = modalities.create_modality("identity", None, hparams(), "inputs")
    x = random([2, 3])
    assert modality.bottom(x) is x and modality.top(x) is x


# -------------------------------------------------------------------- errors
def test_unknown_modality():
    with pytest.raises(ValueError, match="Unknown modality 'video' for feature 'inputs'"):
        modalities.create_modality("video", 10, hparams(), "inputs")


@pytest.mark.parametrize("kind", ["symbol", "class_label"])
def test_vocab_size_required(kind):
    with pytest.raises(ValueError, match="needs a vocab_size"):
        modalities.create_modality(kind, None, hparams(), "targets")


def test_modality_without_a_loss():
    modality = modalities.create_modality("image", 256, hparams(), "inputs")
    with pytest.raises(NotImplementedError):
        modality.loss(tf.zeros([1]), tf.zeros([1]), 0.0)
