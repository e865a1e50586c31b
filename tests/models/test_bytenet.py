"""Tests of t2t.models.bytenet (the `bytenet` model) and its hparams sets."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import bytenet as bytenet_hparams
from t2t.hparams.hparams import HParams
from t2t.models import bytenet, variable_names
from tests.helpers.model_checks import (
    assert_beams_sorted_and_scored,
    assert_decoder_is_causal,
    assert_teacher_forced_argmax,
    assert_well_formed,
    assert_xla_forward_matches_eager,
    losses_on_a_fixed_batch,
    mirrored_step_result,
    mirrored_step_script,
    mixed_bfloat16,  # noqa: F401
)

VOCAB = 4
PROBLEM = ProblemHParams(
    modality={"inputs": "symbol", "targets": "symbol"},
    vocab_size={"inputs": VOCAB, "targets": VOCAB},
)
# Right-padded ids (2, 3 are symbols, 1 is EOS); row 1 is shorter.
INPUTS = tf.constant([[2, 3, 3, 2, 1], [3, 2, 1, 0, 0]], tf.int32)
TARGETS = tf.constant([[2, 3, 3, 2, 1, 0, 0], [2, 3, 2, 2, 3, 3, 1]], tf.int32)


def small_hparams(**overrides) -> HParams:
    """bytenet_tiny at 16 channels, 1 repeat of dilations 1 and 2, no dropout (fast tests)."""
    hp = bytenet_hparams.bytenet_tiny()
    hp.hidden_size, hp.num_hidden_layers, hp.num_block_repeat, hp.dropout = 16, 2, 1, 0.0
    for name, value in overrides.items():
        hp.set_hparam(name, value)
    return hp


def make(mode: str = "train", **overrides) -> bytenet.ByteNet:
    return bytenet.ByteNet(small_hparams(**overrides), mode, PROBLEM)


def logits_of(model, inputs, targets, training: bool = False) -> np.ndarray:
    return model({"inputs": inputs, "targets": targets}, training=training)[0].numpy()


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(5)


# --------------------------------------------------------------------- structure
def test_registered_with_tensor2tensor_values():
    assert registry.model("bytenet") is bytenet.ByteNet
    hp = registry.hparams("bytenet_base")()
    expected = dict(batch_size=2048, hidden_size=768, dropout=0.2, symbol_dropout=0.2,
                    label_smoothing=0.1, clip_grad_norm=2.0, num_hidden_layers=4,
                    kernel_height=3, kernel_width=1, learning_rate_decay_scheme="exp",
                    learning_rate=0.05, learning_rate_warmup_steps=3000, initializer_gain=1.0,
                    weight_decay=3.0, sampling_method="argmax", optimizer_adam_epsilon=1e-6,
                    optimizer_adam_beta1=0.85, optimizer_adam_beta2=0.997, num_block_repeat=4,
                    initializer="orthogonal", learning_rate_schedule="legacy")
    assert {name: hp.get(name) for name in expected} == expected
    assert "num_sampled_classes" not in hp  # left out: t2t has no sampled softmax
    tiny = registry.hparams("bytenet_tiny")
    assert tiny.__doc__.startswith("A t2t addition") and tiny().hidden_size < hp.hidden_size


def test_parameter_count_by_hand():
    model = make("eval")
    model.build_weights()
    h, k, v = 16, 3, VOCAB
    conv, norm = k * h * h, 2 * h  # bias-free 3x1 conv; layer norm scale and bias
    stack = 1 * (norm + 2 * (conv + norm))  # 1 repeat: pre-norm, then 2 dilated convs
    start = k * (2 * h) * h + norm  # conv over [encoder, shifted targets]
    embeddings = 3 * v * h  # inputs, targets, softmax (not shared in bytenet_base)
    count = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert (stack, start) == (1632, 1568)
    assert count == 2 * stack + start + embeddings == 5024
    names = variable_names.named_variables(model)  # stable checkpoint names for all
    assert len(names) == len(model.variables) and not [n for n in names if n.startswith("unnamed")]


def test_padded_length_follows_tensor2tensor():
    lengths = [(5, 3, 50), (5, 12, 50), (34, 10, 100), (10, 51, 100), (0, 1, 50)]
    for s, t, expected in lengths:
        assert int(bytenet.padded_length(tf.constant(s), tf.constant(t))) == expected


@pytest.mark.parametrize("target_length", [3, 7, 60])  # T < S, T > S, T past 50 positions
def test_one_output_per_target_position(target_length):
    model = make()
    targets = tf.ones([2, target_length], tf.int32)
    logits, losses = model({"inputs": INPUTS, "targets": targets}, training=True)
    assert logits.shape == (2, target_length, VOCAB) and logits.dtype == tf.float32
    numerator, denominator = losses["training"]
    assert float(denominator) == 2 * target_length and np.isfinite(float(numerator))


def test_rejects_what_it_cannot_run():
    with pytest.raises(ValueError, match="odd kernel_height"):
        make(kernel_height=2)
    with pytest.raises(ValueError, match="symbol inputs"):
        bytenet.ByteNet(small_hparams(), "train", ProblemHParams(
            modality={"targets": "symbol"}, vocab_size={"targets": VOCAB}))
    packed = {"inputs": INPUTS, "targets": TARGETS, "inputs_segmentation": tf.ones_like(INPUTS)}
    with pytest.raises(ValueError, match="packed"):
        make()(packed)


# --------------------------------------------------------------------- causality
def test_decoder_is_causal():
    """Changing target t changes no logit at positions <= t (they read targets < t)."""
    model = make("eval", num_block_repeat=2)
    assert_decoder_is_causal(model, INPUTS, TARGETS)


# ---------------------------------------------------------------------- training
def test_loss_falls_on_a_fixed_batch():
    model = make()
    features = {"inputs": INPUTS, "targets": TARGETS}
    losses = losses_on_a_fixed_batch(model, features, 25)
    assert losses[-1] < 0.2 * losses[0], losses


# ---------------------------------------------------------------------- decoding
def test_greedy_decode_is_the_teacher_forced_argmax():
    model = make("infer")
    out = infer_lib.infer(model, {"inputs": INPUTS}, decode_length=7)
    decoded = out["outputs"].numpy()
    assert decoded.shape == (2, 7) and out["scores"].shape == (2,)
    assert_well_formed(decoded, VOCAB)
    assert_teacher_forced_argmax(model, INPUTS, decoded)
    # The decode reruns the model on the prefix, so a longer buffer changes nothing
    # (on the whole buffer, 60 positions would pad to 100 instead of 50).
    longer = infer_lib.infer(model, {"inputs": INPUTS}, decode_length=60)["outputs"].numpy()
    np.testing.assert_array_equal(longer[:, :7], decoded)


def test_beam_decode_returns_sorted_well_formed_beams():
    model = make("infer")
    assert_beams_sorted_and_scored(model, INPUTS, VOCAB)


# -------------------------------------------------------------------- numerics
def test_xla_forward_matches_eager():
    model = make("eval")
    assert_xla_forward_matches_eager(model, {"inputs": INPUTS, "targets": TARGETS})


@pytest.mark.usefixtures("mixed_bfloat16")
def test_mixed_bfloat16_forward_gives_float32_logits():
    model = make()
    features = {"inputs": INPUTS, "targets": TARGETS}
    logits, losses = model(features, training=True)
    assert logits.shape == (2, 7, VOCAB) and logits.dtype == tf.float32
    body = model.body(model.bottom(features, False), False)
    assert body.dtype == tf.bfloat16
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    assert np.isfinite(float(losses["training"][0]))


_MIRRORED_STEP = mirrored_step_script(
    """
    from t2t.hparams import bytenet as bh
    from t2t.models import bytenet
    from t2t.data.problem import ProblemHParams
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 4, "targets": 4})
    hp = bh.bytenet_tiny()
    hp.hidden_size, hp.num_hidden_layers, hp.num_block_repeat = 8, 2, 1
    features = {"inputs": tf.constant([[2, 3, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]]),
                "targets": tf.constant([[3, 2, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]])}
    """,
    {"bytenet": 'bytenet.ByteNet(hp, "train", php)'},
    optimizer="keras.optimizers.SGD(0.1)",  # Adam's update graph costs CI seconds
    loss='losses["training"][0] / 11.0',  # the global token count
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_mirrored_strategy_on_two_cpus():
    result = mirrored_step_result(_MIRRORED_STEP)["bytenet"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    # Every weight moved: 3 embeddings; per stack 1 pre-norm (2) and 2 convs with their
    # norms (6), twice; the decoder start's conv and norm (3).
    assert result["changed"] == result["total"] == 3 + 2 * 8 + 3
