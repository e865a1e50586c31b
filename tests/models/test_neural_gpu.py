"""Tests of t2t.models.neural_gpu (the `neural_gpu` model) and its hparams sets."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import neural_gpu as neural_gpu_hparams
from t2t.hparams.hparams import HParams
from t2t.models import neural_gpu
from tests.helpers.model_checks import mirrored_step_result, mirrored_step_script

VOCAB = 4
PROBLEM = ProblemHParams(
    modality={"inputs": "symbol", "targets": "symbol"},
    vocab_size={"inputs": VOCAB, "targets": VOCAB},
)
# Right-padded ids (2, 3 are symbols, 1 is EOS); row 1 is shorter.
INPUTS = tf.constant([[2, 3, 3, 2, 1], [3, 2, 1, 0, 0]], tf.int32)


def small_hparams(**overrides) -> HParams:
    hp = neural_gpu_hparams.neural_gpu_tiny()
    hp.hidden_size = 16
    for name, value in overrides.items():
        hp.set_hparam(name, value)
    return hp


def make(mode: str = "train", **overrides) -> neural_gpu.NeuralGPU:
    return neural_gpu.NeuralGPU(small_hparams(**overrides), mode, PROBLEM)


def logits_of(model, inputs, targets, training: bool = False) -> np.ndarray:
    return model({"inputs": inputs, "targets": targets}, training=training)[0].numpy()


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(3)


# --------------------------------------------------------------------- structure
def test_registered_with_tensor2tensor_values():
    assert registry.model("neural_gpu") is neural_gpu.NeuralGPU
    hp = registry.hparams("neural_gpu")()
    expected = dict(batch_size=1024, num_hidden_layers=1, hidden_size=256, dropout=0.1,
                    label_smoothing=0.0, clip_grad_norm=10.0, kernel_height=3, kernel_width=1,
                    learning_rate=0.02, learning_rate_warmup_steps=3000,
                    learning_rate_decay_scheme="exp", initializer_gain=1.0, weight_decay=0.0,
                    optimizer_adam_epsilon=1e-6, optimizer_adam_beta1=0.85,
                    optimizer_adam_beta2=0.997)
    assert {name: hp.get(name) for name in expected} == expected
    assert registry.hparams("neural_gpu_tiny")().hidden_size < hp.hidden_size


def test_parameter_count_matches_tensor2tensor():
    # T2T's neural_gpu: per conv-GRU layer three 3x1 convs of 256 -> 256 channels with bias.
    model = neural_gpu.NeuralGPU(neural_gpu_hparams.neural_gpu(), "eval", PROBLEM)
    body = [w for layer in model.cgru_layers for w in layer.trainable_weights]
    assert sum(int(np.prod(w.shape)) for w in body) == 3 * (3 * 1 * 256 * 256 + 256) == 590_592


def test_conv_gru_biases_and_formula():
    layer = make().cgru_layers[0]
    assert np.all(layer.reset_conv.bias.numpy() == 1.0)
    assert np.all(layer.gate_conv.bias.numpy() == 1.0)
    assert np.all(layer.candidate_conv.bias.numpy() == 0.0)
    x = tf.random.normal([2, 5, 1, 16])

    def conv(c, v):
        return tf.nn.conv2d(v, c.kernel, 1, "SAME") + c.bias

    r = neural_gpu.saturating_sigmoid(conv(layer.reset_conv, x))
    u = neural_gpu.saturating_sigmoid(conv(layer.gate_conv, x))
    expected = u * x + (1 - u) * tf.tanh(conv(layer.candidate_conv, r * x))
    np.testing.assert_allclose(layer(x).numpy(), expected.numpy(), atol=1e-5)
    assert neural_gpu.saturating_sigmoid(tf.constant([-9.0, 9.0])).numpy().tolist() == [0.0, 1.0]


@pytest.mark.parametrize("target_length", [3, 8])  # S = 5 > T and S < T
def test_one_output_per_target_position(target_length):
    model = make()
    targets = tf.ones([2, target_length], tf.int32)
    logits, losses = model({"inputs": INPUTS, "targets": targets}, training=True)
    assert logits.shape == (2, target_length, VOCAB)
    numerator, denominator = losses["training"]
    assert float(denominator) == 2 * target_length and np.isfinite(float(numerator))
    embedded = model.bottom({"inputs": INPUTS}, False)["inputs"]
    assert model.neural_gpu_state(embedded, target_length, False).shape == (2, max(5, target_length), 16)
    assert model({"inputs": INPUTS}, training=False)[0].shape == (2, 5, VOCAB)


def test_traces_with_unknown_lengths_and_compiles_with_xla():
    model = make()
    targets = tf.constant([[3, 2, 1], [2, 1, 0]], tf.int32)
    model.build_for({"inputs": INPUTS, "targets": targets})
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec])
    def run(inputs, targets):
        return model({"inputs": inputs, "targets": targets}, training=True)[0]

    assert run(INPUTS, targets).shape == (2, 3, VOCAB)
    assert run(INPUTS[:, :2], targets).shape == (2, 3, VOCAB)
    variables = model.trainable_variables

    @tf.function(jit_compile=True)
    def forward_backward(inputs, targets):
        with tf.GradientTape() as tape:
            numerator, denominator = model({"inputs": inputs, "targets": targets}, training=True)[1]["training"]
            loss = numerator / denominator
        return tape.gradient(loss, variables)

    grads = forward_backward(INPUTS, targets)
    # Every trainable variable gets a gradient (the unread targets' embedding is not one).
    assert all(g is not None for g in grads)
    assert "targets_symbol_modality/weights" not in {v.path for v in variables}


def test_rejects_problems_without_symbol_inputs():
    lm = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})
    with pytest.raises(ValueError, match="symbol inputs"):
        neural_gpu.NeuralGPU(small_hparams(), "train", lm)


# ----------------------------------------------------------------------- padding
def test_padding_steps_leave_the_state_unchanged():
    """Trailing input padding changes nothing once the state has the same length: the
    padding steps are no-ops (the zero state positions are computed either way)."""
    model = make()
    targets = tf.ones([2, 7], tf.int32)
    padded = tf.pad(INPUTS, [[0, 0], [0, 2]])
    np.testing.assert_allclose(logits_of(model, padded, targets), logits_of(model, INPUTS, targets),
                               atol=1e-5)
    # Row 1 alone, unpadded (3 real steps), equals row 1 of the padded batch (5 steps).
    alone = logits_of(model, INPUTS[1:, :3], targets[1:])
    np.testing.assert_allclose(alone[0], logits_of(model, INPUTS, targets)[1], atol=1e-5)
    # An all-padding input keeps its initial (all-zero) state.
    embedded = model.bottom({"inputs": tf.zeros([1, 4], tf.int32)}, False)["inputs"]
    assert np.all(model.neural_gpu_state(embedded, 6, False).numpy() == 0)


def test_outputs_read_no_targets_and_dropout_only_in_training():
    model = make(dropout=0.5)
    zeros, other = tf.zeros([2, 6], tf.int32), tf.constant([[3, 2, 1, 2, 3, 1]] * 2)
    np.testing.assert_array_equal(logits_of(model, INPUTS, zeros), logits_of(model, INPUTS, other))
    assert not np.allclose(logits_of(model, INPUTS, zeros, training=True),
                           logits_of(model, INPUTS, zeros, training=True))


# ---------------------------------------------------------------------- training
def test_loss_falls_on_a_fixed_batch():
    model = make()
    targets = tf.constant([[1, 2, 3, 3, 2], [1, 2, 3, 0, 0]], tf.int32)  # EOS first: shorter
    features = {"inputs": INPUTS, "targets": targets[:, :4]}
    model.build_for(features)
    variables = model.trainable_variables
    optimizer = keras.optimizers.Adam(0.02)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            numerator, denominator = model(features, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, variables)
        # The targets' input embedding is never read: it gets no gradient.
        optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables, strict=True) if g is not None])
        return loss

    losses = [float(train_step()) for _ in range(30)]
    assert losses[-1] < 0.3 * losses[0]


def test_greedy_decode_is_the_argmax_of_the_logits():
    model = make("infer")
    decoded = infer_lib.infer(model, {"inputs": INPUTS}, decode_length=7)["outputs"].numpy()
    assert decoded.shape == (2, 7)
    argmax = logits_of(model, INPUTS, tf.zeros([2, 7], tf.int32)).argmax(-1)
    for row, ids in enumerate(argmax):
        ids = ids.tolist()
        stop = ids.index(1) + 1 if 1 in ids else len(ids)  # zeros after EOS
        np.testing.assert_array_equal(decoded[row], ids[:stop] + [0] * (len(ids) - stop))


_MIRRORED_STEP = mirrored_step_script(
    """
    from t2t import registry
    from t2t.trainer.task import Task
    hp = registry.hparams("neural_gpu_tiny")()
    hp.hidden_size = 8
    hp.learning_rate_schedule = "constant"  # linear warmup's first rate is 0
    task = Task(registry.problem("algorithmic_reverse_binary40_test"), "neural_gpu", hp,
                "/nonexistent")
    features = {"inputs": tf.constant([[2, 3, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]]),
                "targets": tf.constant([[3, 2, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]])}
    """,
    {"neural_gpu": "task.build_model()"},
    # The Task's own optimizer and replica step, as the trainer runs them.
    optimizer="task.build_optimizer(model, train_steps=10)[0]",
    step="task.train_step_fn(model, optimizer)",
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_two_mirrored_cpus():
    # mirrored_step_result also fails on the optimizer's "Gradients do not exist" warning.
    result = mirrored_step_result(_MIRRORED_STEP)["neural_gpu"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    # Every trainable weight: 2 layers of 3 convs (kernel, bias), the inputs' embedding
    # and the softmax. The targets' input embedding, which nothing reads, is not
    # trainable, so the optimizer has nothing to warn about.
    assert result["changed"] == result["total"] == 2 * 6 + 2
