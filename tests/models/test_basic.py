"""Tests of t2t.models.basic (the `basic_fc_relu` model)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.hparams import basic_models
from t2t.hparams.hparams import HParams
from t2t.models import basic
from tests.helpers.image_models import (
    NUM_CLASSES,
    image_problem,
    random_batch,
    stripes,
    train,
    with_overrides,
)


def small_hparams(**overrides) -> HParams:
    return with_overrides(basic_models.basic_fc_small(), **overrides)


def test_basic_fc_relu_is_registered():
    assert registry.model("basic_fc_relu") is basic.BasicFcRelu


def test_image_inputs_are_flattened():
    hp = small_hparams(hidden_size=32, num_hidden_layers=3)
    model = basic.BasicFcRelu(hp, "train", image_problem([28, 28, 1]))
    features = random_batch(5, [28, 28, 1])
    logits, losses = model(features, training=True)
    assert logits.shape == (5, 1, NUM_CLASSES)
    numerator, denominator = losses["training"]
    assert float(denominator) == 5.0 and np.isfinite(float(numerator))
    assert [layer.kernel.shape for layer in model.dense_layers] == [(784, 32), (32, 32), (32, 32)]
    # Each layer has its own initializer (a reused Keras 3 initializer repeats values).
    assert not np.array_equal(
        model.dense_layers[1].kernel.numpy(), model.dense_layers[2].kernel.numpy()
    )
    body = model.body(model.bottom(features, False), False)
    assert body.shape == (5, 1, 1, 32)
    assert float(tf.reduce_min(body)) >= 0.0  # ReLU last


def test_symbol_inputs_are_mean_pooled_over_non_padding():
    problem = ProblemHParams(
        modality={"inputs": "symbol", "targets": "class_label"},
        vocab_size={"inputs": 20, "targets": 3},
    )
    model = basic.BasicFcRelu(small_hparams(hidden_size=16), "eval", problem)
    ids = tf.constant([[3, 5, 7, 0], [2, 0, 0, 0]], tf.int32)
    logits, _ = model({"inputs": ids, "targets": tf.constant([[1], [2]])})
    assert logits.shape == (2, 1, 3)
    # Extra padding, or a longer batch, leaves each example's logits unchanged.
    padded = tf.pad(ids, [[0, 0], [0, 5]])
    logits_padded, _ = model({"inputs": padded})
    np.testing.assert_allclose(logits.numpy(), logits_padded.numpy(), rtol=1e-5, atol=1e-6)
    # The order of the tokens does not matter (a bag of embeddings).
    shuffled, _ = model({"inputs": tf.constant([[7, 3, 5, 0], [2, 0, 0, 0]])})
    np.testing.assert_allclose(logits.numpy(), shuffled.numpy(), rtol=1e-5, atol=1e-6)


def test_flatten_inputs_needs_a_known_image_size():
    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 1], tf.float32)])
    def flat(x):
        return basic.flatten_inputs(x)

    with pytest.raises(ValueError, match="size known"):
        flat.get_concrete_function()
    with pytest.raises(ValueError, match="rank"):
        basic.flatten_inputs(tf.zeros([1, 2, 2, 2, 2]))


def test_dropout_only_in_training():
    model = basic.BasicFcRelu(small_hparams(dropout=0.5), "train", image_problem([8, 8, 1]))
    features = random_batch(4, [8, 8, 1])
    train_a, _ = model(features, training=True)
    train_b, _ = model(features, training=True)
    assert not np.allclose(train_a.numpy(), train_b.numpy())
    eval_a, _ = model(features, training=False)
    eval_b, _ = model(features, training=False)
    np.testing.assert_array_equal(eval_a.numpy(), eval_b.numpy())


def test_basic_fc_relu_fits_a_separable_image_task():
    tf.random.set_seed(3)
    model = basic.BasicFcRelu(small_hparams(), "train", image_problem([16, 16, 1]))
    accuracy = train(model, stripes(64, 16), steps=100, learning_rate=1e-3)
    assert accuracy >= 0.95
