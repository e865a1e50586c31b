"""Tests of t2t.layers.ctc (the auxiliary CTC loss) and its use by the Transformer."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t.data.problem import ProblemHParams
from t2t.hparams import basic
from t2t.layers import ctc
from t2t.models import t2t_model

VOCAB = 6


def _identity_ctc(weight: float = 1.0) -> ctc.CTCLoss:
    """A CTC loss whose projection passes the encoder output through as logits."""
    layer = ctc.CTCLoss(VOCAB, weight, basic.create_hparams("transformer_test"))
    layer.project.build((None, None, VOCAB))
    layer.project.kernel.assign(np.eye(VOCAB, dtype=np.float32))
    layer.project.bias.assign(np.zeros(VOCAB, np.float32))
    return layer


def _one_hot_path(path: list[int], scale: float = 30.0) -> np.ndarray:
    return np.eye(VOCAB, dtype=np.float32)[path] * scale


def test_a_confident_correct_path_costs_nothing_and_a_wrong_one_costs_a_lot():
    layer = _identity_ctc()
    # Labels 3 3 1 (EOS) need a blank (id 0) between the repeated 3s; padding frames after.
    encoded = _one_hot_path([3, 0, 3, 1, 0, 0])[None]
    nonpadding = tf.constant([[1, 1, 1, 1, 1, 0]], tf.float32)
    targets = tf.constant([[3, 3, 1, 0]])
    assert float(layer(encoded, nonpadding, targets)) < 1e-3
    wrong = _one_hot_path([2, 0, 2, 1, 0, 0])[None]
    assert float(layer(wrong, nonpadding, targets)) > 10.0


def test_the_loss_is_the_weighted_ctc_sum_over_target_tokens():
    rng = np.random.default_rng(0)
    encoded = rng.normal(size=(2, 7, VOCAB)).astype(np.float32)
    nonpadding = tf.constant([[1] * 7, [1] * 5 + [0] * 2], tf.float32)
    targets = tf.constant([[2, 4, 5, 1], [3, 1, 0, 0]])
    expected = tf.nn.ctc_loss(labels=targets, logits=encoded, label_length=[4, 2],
                              logit_length=[7, 5], logits_time_major=False, blank_index=0)
    got = _identity_ctc(weight=0.3)(encoded, nonpadding, targets)
    np.testing.assert_allclose(float(got), 0.3 * float(tf.reduce_sum(expected)) / 6, rtol=1e-5)


def test_an_utterance_too_fast_for_its_frames_is_left_out_with_finite_gradients():
    layer = _identity_ctc()
    encoded = tf.Variable(np.random.default_rng(1).normal(size=(2, 4, VOCAB)).astype(np.float32))
    nonpadding = tf.ones([2, 4])
    # Row 0 fits (3 labels, 4 frames); row 1 needs 5 labels + 1 blank between the 2s.
    targets = tf.constant([[2, 3, 1, 0, 0, 0], [2, 2, 3, 4, 1, 0]])
    with tf.GradientTape() as tape:
        loss = layer(encoded, nonpadding, targets)
    gradient = tape.gradient(loss, encoded)
    alone = layer(encoded[:1], nonpadding[:1], targets[:1])
    np.testing.assert_allclose(float(loss), float(alone), rtol=1e-6)
    assert np.isfinite(gradient.numpy()).all()
    assert not np.any(gradient.numpy()[1])


@pytest.mark.parametrize("dense_labels", [False, True])
def test_sparse_and_dense_labels_give_the_same_loss_and_gradient(dense_labels):
    layer = _identity_ctc(weight=0.5)
    encoded = tf.Variable(np.random.default_rng(2).normal(size=(3, 9, VOCAB)).astype(np.float32))
    nonpadding = tf.constant([[1] * 9, [1] * 6 + [0] * 3, [1] * 2 + [0] * 7], tf.float32)
    targets = tf.constant([[2, 3, 3, 1], [4, 1, 0, 0], [2, 2, 5, 1]])  # row 2 too fast
    results = {}
    for dense in (False, True):
        with tf.GradientTape() as tape:
            loss = layer(encoded, nonpadding, targets, dense_labels=dense)
        results[dense] = (float(loss), tape.gradient(loss, encoded).numpy())
    np.testing.assert_allclose(results[dense_labels][0], results[not dense_labels][0], rtol=1e-4)
    np.testing.assert_allclose(results[dense_labels][1], results[not dense_labels][1], atol=1e-4)


def test_an_xla_compiled_step_uses_dense_labels():
    layer = _identity_ctc()
    encoded = tf.constant(np.random.default_rng(4).normal(size=(2, 6, VOCAB)).astype(np.float32))
    nonpadding, targets = tf.ones([2, 6]), tf.constant([[2, 3, 1], [4, 1, 0]])
    compiled = tf.function(lambda: layer(encoded, nonpadding, targets, dense_labels=True),
                           jit_compile=True)
    np.testing.assert_allclose(float(compiled()), float(layer(encoded, nonpadding, targets)),
                               rtol=1e-4)


def test_a_zero_weight_is_refused():
    with pytest.raises(ValueError, match="ctc_loss_weight must be > 0"):
        ctc.CTCLoss(VOCAB, 0.0, basic.create_hparams("transformer_test"))


# ------------------------------------------------------------ in the Transformer
def _transformer(problem: ProblemHParams, mode: str = "train", weight: float = 0.5):
    hp = basic.create_hparams("transformer_test")
    hp.add_hparam("ctc_loss_weight", weight)
    return t2t_model.create_model("transformer", hp, mode, problem)


SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 11, "targets": 11})


def test_the_transformer_adds_the_ctc_loss_in_training_and_eval_not_when_predicting():
    features = {"inputs": tf.constant([[2, 3, 4, 5, 6, 7, 1, 0]]),
                "targets": tf.constant([[4, 5, 1, 0]])}
    _, losses = _transformer(SEQ2SEQ)(features, training=True)
    assert set(losses) == {"training", "ctc"}
    assert np.isfinite(float(losses["ctc"][0])) and float(losses["ctc"][0]) > 0
    _, losses = _transformer(SEQ2SEQ, "eval")(features, training=False)
    assert "ctc" in losses
    _, losses = _transformer(SEQ2SEQ, "infer")(features, training=False)
    assert set(losses) == {"training"}


def test_ctc_needs_an_encoder_decoder_and_unpacked_examples():
    language_model = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": 11})
    with pytest.raises(ValueError, match="ctc_loss_weight=0.5 needs an encoder-decoder"):
        _transformer(language_model)
    packed = {"inputs": tf.constant([[2, 3, 1, 4, 1]]), "targets": tf.constant([[5, 1, 6, 1]]),
              "inputs_segmentation": tf.constant([[1, 1, 1, 2, 2]]),
              "targets_segmentation": tf.constant([[1, 1, 2, 2]])}
    with pytest.raises(ValueError, match="does not support packed examples"):
        _transformer(SEQ2SEQ)(packed, training=True)
