"""A training step with each fast kernel equals the step with the reference kernel.

The fast kernels (t2t.layers.common.Dropout's 16-bit masks, vocab_ops' cross entropy
with its hand-written gradient, common.BatchNormalization's fused op) replaced plain
TensorFlow/Keras code for speed. Here one whole step of a real model, dropout on at the
set's own rates, label smoothing on and padded targets, is taken twice from the same
weights: once as the models run, once with the reference kernel swapped in (the same
dropout mask applied by a multiply, TensorFlow's fused softmax cross entropy on smoothed
one-hot targets, Keras' own BatchNormalization); losses and every gradient agree to 1e-5.
Equal steps do not prove equal learning: regression/'s deterministic quick case guards
that (its recorded figure, tests/regression/test_cases_converge.py).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.data.problem import ProblemHParams
from t2t.hparams import basic
from t2t.hparams import resnet as resnet_hparams
from t2t.layers import common, modalities
from t2t.models import resnet, shake_shake, t2t_model
from tests.helpers.image_models import image_problem, random_batch

VOCAB = 37


def reference_dropout(x: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """The same mask as the 16-bit kernel, applied as Keras' dropout applies its own."""
    keep = common.keep_mask_16bit(tf.shape(x), rate, seed)
    return x * tf.cast(1.0 / (1.0 - rate), x.dtype) * tf.cast(keep, x.dtype)


def reference_cross_entropy(logits, labels, vocab_size, label_smoothing):
    """Tensor2Tensor's smoothed cross entropy with TensorFlow's fused op and gradient."""
    logits = tf.cast(logits, tf.float32)
    if not label_smoothing:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    confidence = 1.0 - label_smoothing
    low = label_smoothing / float(vocab_size - 1)
    soft = tf.one_hot(labels, vocab_size, on_value=confidence, off_value=low)
    normalizing = -(confidence * math.log(confidence) + (vocab_size - 1) * low * math.log(low))
    return tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=logits) - normalizing


def _gradients(model, features, variables):
    tf.random.set_seed(0)  # shake-shake's branch weights are stateful draws: the same in each trace

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        return loss, tape.gradient(loss, variables)

    loss, grads = step()
    return float(loss), [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]


def _seed_generators(model) -> list[keras.Variable]:
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _step_twice(model, features, patch, monkeypatch):
    """The step's loss and gradients as the model runs, then with `patch` applied, from
    the same weights and the same dropout seeds."""
    model(features, training=False)  # build
    variables = model.trainable_variables
    seeds = [v.numpy() for v in _seed_generators(model)]
    fast = _gradients(model, features, variables)
    for variable, value in zip(_seed_generators(model), seeds, strict=True):
        variable.assign(value)
    patch(monkeypatch)
    reference = _gradients(model, features, variables)
    return fast, reference


def _assert_equal_steps(fast, reference):
    (fast_loss, fast_grads), (ref_loss, ref_grads) = fast, reference
    assert abs(fast_loss - ref_loss) <= 1e-5 * abs(ref_loss), (fast_loss, ref_loss)
    compared = 0
    for a, b in zip(fast_grads, ref_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(b).max()))
            compared += 1
    return compared


def _transformer(overrides: str = ""):
    keras.utils.set_random_seed(3)
    hp = basic.create_hparams("transformer_tiny", "hidden_size=32,filter_size=64,num_heads=4,"
                              "label_smoothing=0.1" + overrides)
    assert hp.layer_prepostprocess_dropout > 0 and hp.attention_dropout > 0
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                             vocab_size={"inputs": VOCAB, "targets": VOCAB})
    return t2t_model.create_model("transformer", hp, "train", problem)


def _padded_batch():
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, VOCAB, [6, 11]).astype(np.int32)
    targets = rng.integers(2, VOCAB, [6, 9]).astype(np.int32)
    for row, (n_in, n_out) in enumerate([(11, 9), (4, 3), (7, 9), (1, 1), (9, 5), (6, 8)]):
        inputs[row, n_in:] = 0
        targets[row, n_out:] = 0  # padding: weight 0 in the loss
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


def test_transformer_step_with_16bit_dropout_equals_the_same_mask_applied_by_multiply(
        monkeypatch):
    model = _transformer()
    fast, reference = _step_twice(
        model, _padded_batch(),
        lambda mp: mp.setattr(common, "dropout_16bit", reference_dropout), monkeypatch)
    assert _assert_equal_steps(fast, reference) > 40


def test_transformer_step_with_the_fast_cross_entropy_equals_the_fused_op(monkeypatch):
    model = _transformer()
    fast, reference = _step_twice(
        model, _padded_batch(),
        lambda mp: mp.setattr(modalities, "smoothed_cross_entropy", reference_cross_entropy),
        monkeypatch)
    assert _assert_equal_steps(fast, reference) > 40


def test_the_reference_comparison_can_fail(monkeypatch):
    """Another mask (Keras' own float draw, same seed) gives another step: the
    comparisons above are not blind to the mask."""
    def keras_mask(x, rate, seed):
        return tf.nn.experimental.stateless_dropout(x, rate, common.int32_seed(seed))

    model = _transformer()
    fast, reference = _step_twice(
        model, _padded_batch(), lambda mp: mp.setattr(common, "dropout_16bit", keras_mask),
        monkeypatch)
    with pytest.raises(AssertionError):
        _assert_equal_steps(fast, reference)


@pytest.mark.parametrize("name", ["resnet", "shake_shake"])
def test_image_model_step_with_fused_batch_norm_equals_keras_batch_norm(name, monkeypatch):
    """The step's gradients and the moving statistics it leaves behind."""
    features = random_batch(8, [16, 16, 3])
    problem = image_problem([16, 16, 3])

    def build():
        if name == "resnet":
            model = resnet.Resnet(resnet_hparams.resnet_tiny_cpu(), "train", problem)
        else:
            hp = basic.create_hparams("shakeshake_small", "num_hidden_layers=8,hidden_size=16")
            model = shake_shake.ShakeShake(hp, "train", problem)
        model(features, training=False)
        return model

    fused = build()
    with monkeypatch.context() as mp:
        mp.setattr(common, "BatchNormalization", keras.layers.BatchNormalization)
        plain = build()
    assert any(isinstance(layer, common.BatchNormalization) for layer in fused._flatten_layers())
    assert not any(isinstance(layer, common.BatchNormalization)
                   for layer in plain._flatten_layers())
    for target, source in zip(plain.variables, fused.variables, strict=True):
        target.assign(source)  # the same start, seeds included
    fast = _gradients(fused, features, fused.trainable_variables)
    reference = _gradients(plain, features, plain.trainable_variables)
    assert _assert_equal_steps(fast, reference) > 10
    moving = [(a, b) for a, b in zip(fused.variables, plain.variables, strict=True)
              if "moving" in a.path]
    assert moving
    for a, b in moving:
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)
