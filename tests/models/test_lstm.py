"""Tests of t2t.models.lstm: LSTM seq2seq models with and without attention."""

from __future__ import annotations

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams.hparams import HParams
from t2t.models import lstm

VOCAB = 4
PROBLEM = ProblemHParams(
    modality={"inputs": "symbol", "targets": "symbol"},
    vocab_size={"inputs": VOCAB, "targets": VOCAB},
)
LM_PROBLEM = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})

# (registered model, hparams set, overrides)
CONFIGS = {
    "plain": ("lstm_seq2seq", "lstm_seq2seq", {}),
    "bahdanau": ("lstm_seq2seq_attention", "lstm_bahdanau_attention", {}),
    "luong": ("lstm_seq2seq_attention", "lstm_luong_attention", {"output_attention": False}),
    "multi_head": (
        "lstm_seq2seq_attention",
        "lstm_luong_attention_multi",
        {"attention_layer_size": 8},
    ),
    "bidirectional": ("lstm_seq2seq_bidirectional_encoder", "lstm_seq2seq", {}),
    "bidirectional_attention": (
        "lstm_seq2seq_attention_bidirectional_encoder",
        "lstm_attention",
        {},
    ),
}
ATTENTION_CONFIGS = ["bahdanau", "luong", "multi_head", "bidirectional_attention"]
# Causality lives in the decoder: the bidirectional encoder adds nothing there.
DECODER_CONFIGS = ["plain", "bahdanau", "luong", "bidirectional_attention"]
# Padding lives in the encoder; multi-head attention differs only in widths.
ENCODER_CONFIGS = ["plain", "bahdanau", "luong", "bidirectional", "bidirectional_attention"]

# Right-padded ids; row 1 has a shorter input and target, row 2 an empty-looking tail.
INPUTS = tf.constant([[2, 3, 3, 2, 1], [3, 2, 0, 0, 0], [2, 2, 2, 1, 0]], tf.int32)
TARGETS = tf.constant([[3, 2, 2, 3, 1, 0], [2, 1, 0, 0, 0, 0], [3, 3, 3, 2, 2, 1]], tf.int32)


def small_hparams(hparams_set: str, **overrides) -> HParams:
    hp = registry.hparams(hparams_set)()
    hp.hidden_size = 16
    hp.num_hidden_layers = 2
    if "attention_layer_size" in hp:
        hp.attention_layer_size = 16
    for name, value in overrides.items():
        hp.set_hparam(name, value)
    return hp


def make(config: str, problem: ProblemHParams = PROBLEM, **overrides) -> lstm._LSTMSeq2seqBase:
    model_name, hparams_set, config_overrides = CONFIGS[config]
    hp = small_hparams(hparams_set, **{**config_overrides, **overrides})
    return registry.model(model_name)(hp, "train", problem)


def logits_of(model, inputs, targets, training: bool = False) -> np.ndarray:
    features = {"targets": targets} if inputs is None else {"inputs": inputs, "targets": targets}
    return model(features, training=training)[0].numpy()


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(7)


# --------------------------------------------------------------------- structure
def test_models_are_registered():
    assert registry.model("lstm_seq2seq") is lstm.LSTMSeq2seq
    assert registry.model("lstm_seq2seq_attention") is lstm.LSTMSeq2seqAttention
    assert (
        registry.model("lstm_seq2seq_bidirectional_encoder") is lstm.LSTMSeq2seqBidirectionalEncoder
    )
    assert (
        registry.model("lstm_seq2seq_attention_bidirectional_encoder")
        is lstm.LSTMSeq2seqAttentionBidirectionalEncoder
    )


def test_shift_right_and_lengths():
    x = tf.reshape(tf.range(1, 13, dtype=tf.float32), [2, 3, 2])
    shifted = lstm.shift_right(x).numpy()
    np.testing.assert_array_equal(shifted[:, 0], 0)
    np.testing.assert_array_equal(shifted[:, 1:], x.numpy()[:, :2])
    emb = tf.constant([[[1.0, 0.0], [0.0, -2.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    assert lstm.lengths_from_embedding(emb).numpy().tolist() == [2, 0]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_shapes_and_loss_with_padding(config):
    model = make(config, label_smoothing=0.0)
    logits, losses = model({"inputs": INPUTS, "targets": TARGETS}, training=False)
    assert logits.shape == (3, 6, VOCAB)
    numerator, denominator = losses["training"]
    weights = (TARGETS.numpy() != 0).astype(np.float32)
    assert float(denominator) == weights.sum() == 13
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=TARGETS, logits=logits).numpy()
    np.testing.assert_allclose(float(numerator), (xent * weights).sum(), rtol=1e-5)


@pytest.mark.parametrize("config", DECODER_CONFIGS)
def test_causal_in_targets(config):
    model = make(config)
    base = logits_of(model, INPUTS, TARGETS)
    for t in (0, 3):
        changed = TARGETS.numpy().copy()
        changed[:, t:] = np.where(changed[:, t:] == 2, 3, 2)  # every token from t on differs
        other = logits_of(model, INPUTS, tf.constant(changed))
        np.testing.assert_allclose(other[:, : t + 1], base[:, : t + 1], atol=1e-5)
        assert not np.allclose(other[:, t + 1 :], base[:, t + 1 :], atol=1e-4)


@pytest.mark.parametrize("config", ENCODER_CONFIGS)
def test_extra_input_padding_changes_nothing(config):
    model = make(config)
    base = logits_of(model, INPUTS, TARGETS)
    padded = tf.pad(INPUTS, [[0, 0], [0, 4]])
    np.testing.assert_allclose(logits_of(model, padded, TARGETS), base, atol=1e-5)
    # ...while the inputs themselves do matter.
    changed = INPUTS.numpy().copy()
    changed[1, 0] = 2
    assert not np.allclose(logits_of(model, tf.constant(changed), TARGETS)[1], base[1], atol=1e-4)


def test_unidirectional_encoder_reads_inputs_reversed():
    keras.utils.set_random_seed(1)
    hp = small_hparams("lstm_seq2seq", dropout=0.0)
    encoder = lstm.LSTMEncoder(16, 2, 0.0, hp)
    x = tf.random.normal([2, 5, 8])
    x *= tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], tf.float32)[..., None]  # row 1: length 3
    outputs, states, mask = encoder(x)
    assert mask.numpy().tolist() == [[True] * 5, [True] * 3 + [False] * 2]
    np.testing.assert_array_equal(outputs.numpy()[1, 3:], 0)
    # The same LSTM layers run by hand over row 1's three steps, last step first.
    y = x[1:2, 2::-1]
    for lstm_layer in encoder.stack.lstms:
        y, h, c = lstm_layer(y)
    np.testing.assert_allclose(states[-1][0].numpy()[1], h.numpy()[0], atol=1e-5)
    np.testing.assert_allclose(states[-1][1].numpy()[1], c.numpy()[0], atol=1e-5)
    # Outputs come back in input order: position 0 is the encoder's last step.
    np.testing.assert_allclose(outputs.numpy()[1, 0], y.numpy()[0, -1], atol=1e-5)


def test_bidirectional_encoder_concatenates_directions():
    hp = small_hparams("lstm_seq2seq")
    encoder = lstm.LSTMEncoder(16, 2, 0.0, hp, bidirectional=True)
    outputs, states, _ = encoder(tf.random.normal([2, 4, 8]))
    assert outputs.shape == (2, 4, 32) and encoder.output_size == 32
    assert len(states) == 2 and all(h.shape == c.shape == (2, 32) for h, c in states)


# --------------------------------------------------------------------- attention
@pytest.mark.parametrize("config", ATTENTION_CONFIGS)
def test_attention_weights_sum_to_one_and_ignore_padding(config):
    model = make(config)
    features = {"inputs": INPUTS, "targets": TARGETS}
    weights = model.attention_weights(features).numpy()
    assert weights.shape == (3, 6, 5)
    input_mask = (INPUTS.numpy() != 0)[:, None, :]
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(np.where(input_mask, 0.0, weights), 0.0)
    assert (np.where(input_mask, weights, 1.0) > 0).all()
    padded = {"inputs": tf.pad(INPUTS, [[0, 0], [0, 3]]), "targets": TARGETS}
    np.testing.assert_allclose(model.attention_weights(padded).numpy()[..., :5], weights, atol=1e-6)


def test_attention_config_errors():
    with pytest.raises(ValueError, match="attention_mechanism"):
        make("bahdanau", attention_mechanism="dot")
    with pytest.raises(ValueError, match="must have inputs"):
        make("bahdanau", problem=LM_PROBLEM)


def test_attention_output_sizes():
    assert make("bahdanau").projection is None  # attention vector already hidden_size wide
    assert make("luong").decoder.output_size == 16  # output_attention=False: the LSTM output
    multi = make("multi_head")
    assert multi.decoder.output_size == 32 and multi.projection is not None  # 4 heads x 8
    wide = make("bidirectional_attention", attention_layer_size=24)
    assert (
        wide.decoder.units == 32 and wide.decoder.output_size == 24 and wide.projection is not None
    )


# ------------------------------------------------------------------- behaviour
def test_language_model_without_inputs_is_causal():
    model = make("plain", problem=LM_PROBLEM)
    assert model.encoder is None
    base = logits_of(model, None, TARGETS)
    changed = TARGETS.numpy().copy()
    changed[:, 3] = 1
    np.testing.assert_allclose(
        logits_of(model, None, tf.constant(changed))[:, :4], base[:, :4], atol=1e-5
    )


@pytest.mark.parametrize("config", ["plain", "bahdanau"])
def test_dropout_only_in_training(config):
    model = make(config, dropout=0.5)
    features = {"inputs": INPUTS, "targets": TARGETS}
    eval_a, eval_b = logits_of(model, INPUTS, TARGETS), logits_of(model, INPUTS, TARGETS)
    np.testing.assert_array_equal(eval_a, eval_b)
    train_a = model(features, training=True)[0].numpy()
    train_b = model(features, training=True)[0].numpy()
    assert not np.allclose(train_a, train_b) and not np.allclose(train_a, eval_a)


def test_traces_with_unknown_lengths():
    model = make("bahdanau")
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec])
    def run(inputs, targets):
        return model({"inputs": inputs, "targets": targets}, training=True)[0]

    assert run(INPUTS, TARGETS).shape == (3, 6, VOCAB)
    assert run(INPUTS[:2, :3], TARGETS[:2, :2]).shape == (2, 2, VOCAB)


def test_infer_matches_teacher_forced_argmax():
    """Greedy decoding re-feeding its own argmax equals argmax of logits on that output."""
    model = make("bahdanau")
    decoded = infer_lib.infer(model, {"inputs": INPUTS}, decode_length=6)["outputs"]
    assert decoded.shape == (3, 6)
    logits = logits_of(model, INPUTS, decoded)
    argmax = logits.argmax(-1)
    for row, ids in enumerate(decoded.numpy()):
        steps = len(ids) if 1 not in ids.tolist() else ids.tolist().index(1) + 1
        np.testing.assert_array_equal(ids[:steps], argmax[row, :steps])


# ---------------------------------------------------------------------- training
def copy_task(reverse: bool) -> tuple[tf.Tensor, tf.Tensor]:
    """Every binary sequence (tokens 2, 3) of length 1..6; targets copy or reverse it + EOS."""
    sequences = [list(s) for n in range(1, 7) for s in itertools.product([2, 3], repeat=n)]
    inputs = np.zeros([len(sequences), 6], np.int32)
    targets = np.zeros([len(sequences), 7], np.int32)
    for i, seq in enumerate(sequences):
        out = (seq[::-1] if reverse else seq) + [1]
        inputs[i, : len(seq)] = seq
        targets[i, : len(out)] = out
    return tf.constant(inputs), tf.constant(targets)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_name, hparams_set, reverse, steps",
    [
        ("lstm_seq2seq", "lstm_seq2seq", False, 200),
        ("lstm_seq2seq_attention", "lstm_luong_attention", True, 150),
    ],
)
def test_learns_copy_and_reverse_then_decodes(model_name, hparams_set, reverse, steps):
    keras.utils.set_random_seed(1)
    hp = registry.hparams(hparams_set)()
    hp.hidden_size, hp.num_hidden_layers, hp.dropout, hp.label_smoothing = 32, 1, 0.0, 0.0
    if "attention_layer_size" in hp:
        hp.attention_layer_size = 32
    model = registry.model(model_name)(hp, "train", PROBLEM)
    inputs, targets = copy_task(reverse)
    features = {"inputs": inputs, "targets": targets}
    model.build_for(features)
    variables = model.trainable_variables
    optimizer = keras.optimizers.Adam(0.02, global_clipnorm=hp.clip_grad_norm)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            numerator, denominator = model(features, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, variables)
        # The inputs modality's softmax is never used: it gets no gradient.
        optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, variables, strict=True) if g is not None]
        )
        return loss

    for _ in range(steps):
        train_step()

    logits, _ = model(features, training=False)
    weights = targets.numpy() != 0
    correct = (logits.numpy().argmax(-1) == targets.numpy()) & weights
    assert correct.sum() / weights.sum() >= 0.95

    decoded = tf.function(lambda x: infer_lib.infer(model, {"inputs": x}, decode_length=7))(inputs)["outputs"]
    exact = np.all(decoded.numpy() == targets.numpy(), axis=-1)
    assert exact.mean() >= 0.8
