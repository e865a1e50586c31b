"""Tests of t2t.layers.feed_forward.DenseReluDense."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from t2t.layers import feed_forward


def inputs(shape=(2, 5, 8), seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def test_shape_and_weights():
    layer = feed_forward.DenseReluDense(32, 8, name="ffn")
    out = layer(inputs())
    assert out.shape == (2, 5, 8)
    assert tuple(layer.inner.kernel.shape) == (8, 32)
    assert tuple(layer.outer.kernel.shape) == (32, 8)
    assert layer.inner.name == "conv1" and layer.outer.name == "conv2"
    assert len(layer.trainable_weights) == 4  # two kernels, two biases


def test_computes_relu_dense_dense():
    layer = feed_forward.DenseReluDense(16, 8)
    x = inputs()
    out = layer(x).numpy()
    w1, b1 = layer.inner.kernel.numpy(), layer.inner.bias.numpy()
    w2, b2 = layer.outer.kernel.numpy(), layer.outer.bias.numpy()
    hidden = np.maximum(x.numpy() @ w1 + b1, 0.0)
    np.testing.assert_allclose(out, hidden @ w2 + b2, rtol=1e-5, atol=1e-5)


def test_relu_dropout_only_when_training():
    layer = feed_forward.DenseReluDense(64, 8, dropout=0.5)
    x = inputs()
    np.testing.assert_array_equal(layer(x, training=False).numpy(), layer(x).numpy())
    assert np.abs(layer(x, training=True).numpy() - layer(x).numpy()).max() > 1e-4


def test_shared_initializer_object_does_not_make_layers_identical():
    init = keras.initializers.VarianceScaling(1.0, mode="fan_avg", distribution="uniform")
    first = feed_forward.DenseReluDense(8, 8, kernel_initializer=init)
    second = feed_forward.DenseReluDense(8, 8, kernel_initializer=init)
    x = inputs()
    first(x), second(x)
    assert not np.allclose(first.inner.kernel.numpy(), second.inner.kernel.numpy())
    assert not np.allclose(first.inner.kernel.numpy(), first.outer.kernel.numpy())
