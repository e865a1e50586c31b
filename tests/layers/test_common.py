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
    x = tf.ones([1000, 1001])  # an odd last axis: the last word's high half is cut off
    out = layer(x, training=True).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.9) < 0.002
    np.testing.assert_allclose(out[kept], 1 / 0.9, rtol=1e-6)
    second = layer(x, training=True).numpy()
    assert not np.array_equal(second != 0, kept)
    np.testing.assert_array_equal(layer(x, training=False), x)


# ----------------------------------------------- the statistics of the masks
RATE = 0.1


def _z(both: np.ndarray, first: np.ndarray, second: np.ndarray) -> float:
    """How many standard errors P(both dropped) lies from P(first) P(second): ~N(0, 1)
    for independent masks."""
    expected = first.mean() * second.mean()
    return float((both.mean() - expected) / np.sqrt(expected * (1 - expected) / both.size))


def _dropped(shape, seed, rate=RATE) -> np.ndarray:
    keep = common.keep_mask_16bit(tf.constant(shape), rate, tf.constant(seed, tf.int64))
    return ~keep.numpy()


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_mask_keep_rate_per_position(rate):
    """The keep rate overall and at every position of the last axis (each word's low
    half feeds the first half of a row, its high half the second)."""
    dropped = _dropped([4000, 64], [11, 0], rate)
    sigma = np.sqrt(rate * (1 - rate) / dropped.size)
    assert abs(dropped.mean() - round(rate * 65536) / 65536) < 5 * sigma
    per_position = dropped.mean(axis=0)
    assert np.all(np.abs(per_position - rate) < 5 * np.sqrt(rate * (1 - rate) / 4000))


def test_mask_neighbours_and_the_two_halves_of_a_word_are_independent():
    dropped = _dropped([2000, 2, 96], [5, 9])
    pairs = 48  # element j and element 48 + j come from one 32-bit word
    halves = _z(dropped[..., :pairs] & dropped[..., pairs:], dropped[..., :pairs],
                dropped[..., pairs:])
    neighbours = _z(dropped[..., :-1] & dropped[..., 1:], dropped[..., :-1], dropped[..., 1:])
    rows = _z(dropped[:, 0] & dropped[:, 1], dropped[:, 0], dropped[:, 1])
    examples = _z(dropped[:-1] & dropped[1:], dropped[:-1], dropped[1:])
    assert max(abs(halves), abs(neighbours), abs(rows), abs(examples)) < 5, (
        halves, neighbours, rows, examples)


def test_a_mask_whose_halves_repeat_fails_the_independence_check():
    """The check above can fail: a mask that uses one 16-bit half for two elements."""
    dropped = _dropped([2000, 2, 48], [5, 9])
    doubled = np.concatenate([dropped, dropped], axis=-1)
    assert _z(doubled[..., :48] & doubled[..., 48:], doubled[..., :48],
              doubled[..., 48:]) > 100


def test_masks_of_successive_calls_and_of_two_layers_are_independent():
    first, other = common.Dropout(RATE, seed=3), common.Dropout(RATE, seed=4)
    x = tf.ones([500, 2, 64])

    @tf.function  # as in a training step: the seed is read and advanced inside a graph
    def masks():
        return (tf.equal(first(x, training=True), 0), tf.equal(first(x, training=True), 0),
                tf.equal(other(x, training=True), 0))

    calls = [np.asarray(m) for m in masks()] + [np.asarray(m) for m in masks()]
    for a, b in [(0, 1), (1, 3), (0, 2), (0, 3), (2, 5)]:
        z = _z(calls[a] & calls[b], calls[a], calls[b])
        assert abs(z) < 5, (a, b, z)
        assert not np.array_equal(calls[a], calls[b])


_MIRRORED_MASKS = """
import json, numpy as np, tensorflow as tf
from t2t.trainer import strategy as s
strategy = s.create_strategy(s.StrategyConfig(cpu_devices=2))
from t2t.layers import common
import keras
with strategy.scope():
    layer, theirs = common.Dropout(0.1, seed=3), keras.layers.Dropout(0.1, seed=3)
x = tf.ones([500, 2, 64])
out = {}
for name, dropout in (("t2t", layer), ("keras", theirs)):
    masks = strategy.run(tf.function(lambda: tf.equal(dropout(x, training=True), 0)))
    out[name] = [np.asarray(m).ravel().tolist() for m in strategy.experimental_local_results(masks)]
print(json.dumps(out))
"""


def test_replicas_draw_independent_masks():
    """Two replicas of MirroredStrategy (2 logical CPUs, a fresh process) with one seed
    variable: each draws its own mask (Keras' Dropout gives both the same one)."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _MIRRORED_MASKS], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    first, second = (np.array(m) for m in out["t2t"])
    assert abs(first.mean() - RATE) < 0.01 and abs(second.mean() - RATE) < 0.01
    assert not np.array_equal(first, second)
    assert abs(_z(first & second, first, second)) < 5
    keras_first, keras_second = (np.array(m) for m in out["keras"])
    np.testing.assert_array_equal(keras_first, keras_second)  # what the seed fold-in fixes


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
