"""Tests of t2t.layers.common: initializers, make_norm and PrePostProcess."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.hparams.hparams import HParams
from t2t.layers import common


def hparams(**values):
    defaults = {"norm_type": "layer", "norm_epsilon": 1e-6, "initializer": "uniform_unit_scaling",
                "initializer_gain": 1.0}
    defaults.update(values)
    return HParams(**defaults)


def inputs(shape=(2, 3, 8), seed=0):
    return tf.constant(np.random.default_rng(seed).normal(2.0, 3.0, size=shape).astype(np.float32))


def layer_norm(x, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


# ---------------------------------------------------------------- initializer
def test_uniform_unit_scaling_is_fan_avg_uniform_variance_scaling():
    init = common.initializer(hparams(initializer_gain=1.5))
    assert isinstance(init, keras.initializers.VarianceScaling)
    config = init.get_config()
    assert config["scale"] == 1.5
    assert config["mode"] == "fan_avg"
    assert config["distribution"] == "uniform"
    values = init([200, 300]).numpy()
    limit = np.sqrt(3 * 1.5 / 250)
    assert np.abs(values).max() <= limit
    assert np.abs(values).max() > 0.9 * limit


@pytest.mark.parametrize(
    "name, cls",
    [
        ("uniform_unit_scaling", keras.initializers.VarianceScaling),
        ("normal_unit_scaling", keras.initializers.VarianceScaling),
        ("orthogonal", keras.initializers.Orthogonal),
        ("uniform", keras.initializers.RandomUniform),
        ("xavier", keras.initializers.GlorotUniform),
    ],
)
def test_initializer_names(name, cls):
    init = common.initializer(hparams(initializer=name))
    assert isinstance(init, cls)
    assert init([4, 4]).shape == (4, 4)


def test_normal_unit_scaling_is_truncated_normal():
    assert common.initializer(hparams(initializer="normal_unit_scaling")).get_config()[
        "distribution"] == "truncated_normal"


def test_uniform_initializer_range_scales_with_gain():
    values = common.initializer(hparams(initializer="uniform", initializer_gain=2.0))([1000]).numpy()
    assert values.min() >= -0.2 and values.max() <= 0.2 and values.max() > 0.15


def test_unknown_initializer():
    with pytest.raises(ValueError, match="Unknown initializer 'nope'"):
        common.initializer(hparams(initializer="nope"))


def test_clone_initializer_gives_a_fresh_equal_config():
    init = keras.initializers.VarianceScaling(2.0, mode="fan_avg", distribution="uniform")
    clone = common.clone_initializer(init)
    assert clone is not init and clone.get_config() == init.get_config()
    assert common.clone_initializer("zeros") == "zeros"


# ----------------------------------------------------------------- make_norm
def test_make_norm_layer():
    norm = common.make_norm(hparams(norm_epsilon=1e-3), "n")
    assert isinstance(norm, keras.layers.LayerNormalization)
    assert norm.epsilon == 1e-3 and norm.name == "n"
    x = inputs()
    np.testing.assert_allclose(norm(x).numpy(), layer_norm(x.numpy(), 1e-3), atol=1e-4)


def test_make_norm_batch_and_none():
    assert isinstance(common.make_norm(hparams(norm_type="batch"), "b"), keras.layers.BatchNormalization)
    identity = common.make_norm(hparams(norm_type="none"), "i")
    x = inputs()
    np.testing.assert_array_equal(identity(x).numpy(), x.numpy())


def test_make_norm_unknown():
    with pytest.raises(ValueError, match="Unknown norm_type 'noam'"):
        common.make_norm(hparams(norm_type="noam"), "x")


# ------------------------------------------------------------ PrePostProcess
def test_n_normalizes_only():
    layer = common.PrePostProcess("n", hparams(), dropout=0.5)
    x, residual = inputs(), inputs(seed=1)
    out = layer(x, residual=residual, training=True).numpy()
    np.testing.assert_allclose(out, layer_norm(x.numpy()), atol=1e-4)
    assert layer.dropout is None


def test_da_adds_the_residual_without_dropout_when_not_training():
    layer = common.PrePostProcess("da", hparams(), dropout=0.5)
    x, residual = inputs(), inputs(seed=1)
    expected = x.numpy() + residual.numpy()
    np.testing.assert_allclose(layer(x, residual=residual, training=False).numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(layer(x, residual=residual).numpy(), expected, atol=1e-6)
    assert layer.norm is None


def test_da_drops_out_before_adding_when_training():
    layer = common.PrePostProcess("da", hparams(), dropout=0.5)
    x = inputs(shape=(4, 16, 32))
    residual = inputs(shape=(4, 16, 32), seed=1)
    dropped = layer(x, residual=residual, training=True).numpy() - residual.numpy()
    zeros = np.isclose(dropped, 0.0, atol=1e-5)
    assert 0.3 < zeros.mean() < 0.7
    # Kept units are scaled by 1 / (1 - rate).
    np.testing.assert_allclose(dropped[~zeros], 2.0 * x.numpy()[~zeros], rtol=1e-4, atol=1e-4)


def test_dan_normalizes_the_sum():
    layer = common.PrePostProcess("dan", hparams(), dropout=0.1)
    x, residual = inputs(), inputs(seed=1)
    out = layer(x, residual=residual, training=False).numpy()
    np.testing.assert_allclose(out, layer_norm(x.numpy() + residual.numpy()), atol=1e-4)


def test_a_without_residual_is_identity():
    x = inputs()
    np.testing.assert_array_equal(common.PrePostProcess("a", hparams(), 0.0)(x).numpy(), x.numpy())


@pytest.mark.parametrize("sequence", ["", "none"])
def test_empty_and_none_sequences_are_identity(sequence):
    # "none" is basic_params1's layer_preprocess_sequence (Tensor2Tensor's no-op spelling).
    layer = common.PrePostProcess(sequence, hparams(), 0.5)
    x, residual = inputs(), inputs(seed=1)
    out = layer(x, residual=residual, training=True)
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    assert layer.norm is None and layer.dropout is None


@pytest.mark.parametrize("sequence", ["nonE", "nx", "dz", "a n"])
def test_bad_sequence(sequence):
    with pytest.raises(ValueError, match="Bad pre/post-process sequence"):
        common.PrePostProcess(sequence, hparams(), 0.1)


def test_dropout_drops_at_its_rate_and_scales_the_rest():
    layer = common.Dropout(0.1, seed=3)
    x = tf.ones([1000, 1001])  # an odd last axis: the 16-bit halves are cut to it
    out = layer(x, training=True).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.9) < 0.002
    np.testing.assert_allclose(out[kept], 1 / 0.9, rtol=1e-6)
    # Rows and columns are not correlated by the pairing of 16-bit halves.
    assert abs(kept[:, 0::2].mean() - kept[:, 1::2].mean()) < 0.003
    second = layer(x, training=True).numpy()
    assert (second != 0).mean() != kept.mean() or not np.array_equal(second != 0, kept)
    np.testing.assert_array_equal(layer(x, training=False), x)


def test_dropout_is_seeded_and_its_gradient_is_the_mask():
    x = tf.random.stateless_normal([4, 6, 10], [1, 1])
    first, again = common.Dropout(0.3, seed=7), common.Dropout(0.3, seed=7)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = first(x, training=True)
        total = tf.reduce_sum(out)
    np.testing.assert_array_equal(out, again(x, training=True))
    mask = (out.numpy() != 0) / 0.7
    np.testing.assert_allclose(tape.gradient(total, x), mask, rtol=1e-6)


def test_dropout_keeps_keras_names_dtype_and_noise_shape():
    layer = common.Dropout(0.5, noise_shape=(2, 1), seed=1)
    out = layer(tf.ones([2, 8]), training=True).numpy()
    assert all(len(set(row)) == 1 for row in out)  # Keras' own path: one draw per row
    bf16 = common.Dropout(0.2, dtype="mixed_bfloat16")(tf.ones([64, 64]), training=True)
    assert bf16.dtype == tf.bfloat16
    ours, theirs = common.Dropout(0.1), keras.layers.Dropout(0.1)
    assert [v.path.split("/")[-1] for v in ours.variables] == [
        v.path.split("/")[-1] for v in theirs.variables]
    assert ours.name.startswith("dropout") and ours.get_config()["rate"] == 0.1


@pytest.mark.parametrize("shape", [[8, 5, 6, 3], [16, 3], [4, 7, 3]])
def test_fused_batch_norm_trains_as_keras_does(shape):
    x = tf.random.stateless_normal(shape, [2, 3]) * 3.0 + 1.0
    upstream = tf.random.stateless_normal(shape, [4, 5])
    outputs = []
    for cls in (common.BatchNormalization, keras.layers.BatchNormalization):
        layer = cls(momentum=0.9, epsilon=1e-3, gamma_initializer="random_normal",
                    beta_initializer="random_normal")
        layer.build(x.shape)
        layer.gamma.assign(tf.linspace(0.5, 1.5, shape[-1]))
        layer.beta.assign(tf.linspace(-1.0, 1.0, shape[-1]))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y * upstream)
        grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
        outputs.append([y, *grads, layer.moving_mean, layer.moving_variance,
                        layer(x, training=False)])
    for mine, keras_own in zip(*outputs, strict=True):
        np.testing.assert_allclose(mine, keras_own, rtol=2e-4, atol=2e-4)


def test_fused_batch_norm_in_bfloat16_and_frozen():
    layer = common.BatchNormalization(dtype="mixed_bfloat16")
    y = layer(tf.random.stateless_normal([4, 3, 3, 8], [1, 2]), training=True)
    assert y.dtype == tf.bfloat16 and layer.moving_mean.dtype == tf.float32
    assert float(tf.reduce_max(tf.abs(layer.moving_mean))) > 0  # updated
    layer.trainable = False  # frozen: the moving statistics, no update (Keras' rule)
    before = layer.moving_mean.numpy()
    layer(tf.ones([4, 3, 3, 8]), training=True)
    np.testing.assert_array_equal(layer.moving_mean, before)
