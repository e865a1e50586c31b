"""Tests of t2t.models.basic (the `basic_fc_relu` model)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.hparams import basic_models
from t2t.hparams.hparams import HParams
from t2t.models import basic
from t2t.problems.problem import ProblemHParams

NUM_CLASSES = 10


def image_problem(shape: list[int]) -> ProblemHParams:
    return ProblemHParams(
        modality={"inputs": "image", "targets": "class_label"},
        vocab_size={"inputs": 256, "targets": NUM_CLASSES},
        batch_size_means_tokens=False,
        image_shape=shape,
    )


def random_batch(batch: int, shape: list[int], seed: int = 0) -> dict[str, tf.Tensor]:
    rng = np.random.default_rng(seed)
    return {
        "inputs": tf.constant(rng.integers(0, 256, [batch, *shape], dtype=np.uint8)),
        "targets": tf.constant(rng.integers(0, NUM_CLASSES, [batch, 1], dtype=np.int32)),
    }


def stripes(n: int, size: int, classes: int = 4, seed: int = 0) -> dict[str, tf.Tensor]:
    """n uint8 images [size, size, 1]: stripes whose orientation is the class, noisy."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:size, 0:size]
    directions = [rows, cols, rows + cols, rows - cols][:classes]
    labels = np.arange(n) % classes
    images = np.empty([n, size, size, 1], np.float32)
    for i, label in enumerate(labels):
        phase = rng.integers(0, 4)
        images[i, :, :, 0] = ((directions[label] + phase) % 4 < 2).astype(np.float32)
    images = 0.75 * images + 0.25 * rng.random(images.shape)
    return {
        "inputs": tf.constant((images * 255).astype(np.uint8)),
        "targets": tf.constant(labels[:, None].astype(np.int32)),
    }


def train(model, features: dict[str, tf.Tensor], steps: int, learning_rate: float) -> float:
    """Plain GradientTape + Adam on one fixed batch; returns eval-mode train accuracy."""
    model(features, training=False)
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        # The targets' class-label embedding gets no gradient (the body ignores targets).
        optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, model.trainable_variables, strict=True) if g is not None]
        )
        return loss

    for _ in range(steps):
        step(features)
    logits, _ = model(features, training=False)
    predictions = np.argmax(logits[:, 0, :].numpy(), axis=-1)
    return float(np.mean(predictions == features["targets"].numpy()[:, 0]))


def small_hparams(**overrides) -> HParams:
    hp = basic_models.basic_fc_small()
    for key, value in overrides.items():
        hp.set_hparam(key, value)
    return hp


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
