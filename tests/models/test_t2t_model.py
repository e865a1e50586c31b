"""Tests of t2t.models.t2t_model.T2TModel, through the registered `transformer` model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import basic
from t2t.layers import modalities
from t2t.models import t2t_model, transformer

VOCAB = 12
NO_DROPOUT = "layer_prepostprocess_dropout=0.0,attention_dropout=0.0,relu_dropout=0.0"


def symbol_problem(inputs_vocab=VOCAB, targets_vocab=VOCAB, **kwargs) -> ProblemHParams:
    return ProblemHParams(
        modality={"inputs": "symbol", "targets": "symbol"},
        vocab_size={"inputs": inputs_vocab, "targets": targets_vocab},
        **kwargs,
    )


def make_model(overrides="", problem=None, mode="train", hparams_set="transformer_test", seed=0):
    tf.random.set_seed(seed)
    hp = basic.create_hparams(hparams_set, overrides)
    return t2t_model.create_model("transformer", hp, mode, problem or symbol_problem())


def features(batch=2, input_length=5, target_length=4, seed=0, vocab=VOCAB):
    rng = np.random.default_rng(seed)
    inputs = rng.integers(2, vocab, [batch, input_length]).astype(np.int32)
    targets = rng.integers(2, vocab, [batch, target_length]).astype(np.int32)
    inputs[-1, -2:] = 0
    targets[-1, -1:] = 0
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


# ----------------------------------------------------------- construction
def test_create_model_builds_the_registered_transformer():
    model = make_model()
    assert isinstance(model, transformer.Transformer)
    assert model.name == "transformer"
    assert model.mode == "train"


def test_model_copies_its_hparams():
    hp = basic.create_hparams("transformer_test")
    model = t2t_model.create_model("transformer", hp, "train", symbol_problem())
    hp.hidden_size = 99
    assert model.hparams.hidden_size == 16


def test_modalities_shared_when_vocab_sizes_match_and_weights_shared():
    model = make_model()
    assert model.hparams.shared_embedding_and_softmax_weights
    inputs_modality = model.feature_modalities["inputs"]
    assert inputs_modality is model.feature_modalities["targets"] is model.targets_modality
    assert isinstance(inputs_modality, modalities.SymbolModality)
    assert len(inputs_modality.weights) == 1  # one [V, H] matrix: embedding and softmax
    model(features(), training=False)
    embedding_like = [w for w in model.weights if tuple(w.shape) == (VOCAB, 16)]
    assert len(embedding_like) == 1


def test_modalities_separate_when_vocab_sizes_differ():
    model = make_model(problem=symbol_problem(inputs_vocab=20))
    inputs_modality, targets_modality = model.feature_modalities["inputs"], model.targets_modality
    assert inputs_modality is not targets_modality
    assert inputs_modality.vocab_size == 20 and targets_modality.vocab_size == VOCAB
    assert len(inputs_modality.weights) == 1  # no softmax on the inputs side
    assert len(targets_modality.weights) == 1  # targets embedding shared with its softmax
    logits, _ = model(features(), training=False)
    assert logits.shape == (2, 4, VOCAB)


def test_modalities_separate_when_weights_not_shared():
    model = make_model("shared_embedding_and_softmax_weights=false")
    inputs_modality, targets_modality = model.feature_modalities["inputs"], model.targets_modality
    assert inputs_modality is not targets_modality
    assert len(inputs_modality.weights) == 1
    assert len(targets_modality.weights) == 2  # embedding and softmax


def test_unknown_mode():
    with pytest.raises(ValueError, match="Unknown mode 'training'"):
        make_model(mode="training")


def test_missing_problem_hparams():
    hp = basic.create_hparams("transformer_test")
    with pytest.raises(ValueError, match="needs problem_hparams"):
        transformer.Transformer(hp, "train", None)


# ------------------------------------------------------------------- call
def test_call_returns_logits_and_training_loss():
    model = make_model()
    batch = features()
    logits, losses = model(batch, training=True)
    assert logits.shape == (2, 4, VOCAB)
    num, den = losses["training"]
    assert num.shape == () and den.shape == ()
    assert float(den) == 7.0  # 8 target positions, one of them padding
    assert np.isfinite(float(num)) and float(num) > 0


def test_call_without_targets_has_no_training_loss():
    batch = features()
    classifier = make_model(problem=ProblemHParams(
        modality={"inputs": "symbol", "targets": "class_label"}, vocab_size={"inputs": VOCAB, "targets": 3}))
    logits, losses = classifier({"inputs": batch["inputs"]}, training=False)
    assert logits.shape == (2, 1, 3) and "training" not in losses


def test_label_smoothing_only_when_training():
    model = make_model(NO_DROPOUT + ",label_smoothing=0.1")
    batch = features()
    train_logits, train_losses = model(batch, training=True)
    eval_logits, eval_losses = model(batch, training=False)
    # With all dropouts at 0 the logits agree, so only the smoothing differs.
    np.testing.assert_allclose(train_logits.numpy(), eval_logits.numpy(), rtol=1e-5, atol=1e-5)
    weights = tf.cast(tf.not_equal(batch["targets"], 0), tf.float32)
    smoothed = modalities.smoothed_cross_entropy(eval_logits, batch["targets"], VOCAB, 0.1)
    plain = modalities.smoothed_cross_entropy(eval_logits, batch["targets"], VOCAB, 0.0)
    assert float(train_losses["training"][0]) == pytest.approx(float(tf.reduce_sum(smoothed * weights)), rel=1e-5)
    assert float(eval_losses["training"][0]) == pytest.approx(float(tf.reduce_sum(plain * weights)), rel=1e-5)
    assert abs(float(train_losses["training"][0]) - float(eval_losses["training"][0])) > 1e-3
    # training=None follows the mode.
    assert float(model(batch)[1]["training"][0]) == pytest.approx(float(train_losses["training"][0]), rel=1e-5)
    model.mode = "eval"
    assert float(model(batch)[1]["training"][0]) == pytest.approx(float(eval_losses["training"][0]), rel=1e-5)


def test_no_label_smoothing_gives_equal_losses():
    model = make_model(NO_DROPOUT + ",label_smoothing=0.0")
    batch = features()
    train = model(batch, training=True)[1]["training"]
    evaluated = model(batch, training=False)[1]["training"]
    assert float(train[0]) == pytest.approx(float(evaluated[0]), rel=1e-5)


def test_dropout_changes_training_logits():
    model = make_model("layer_prepostprocess_dropout=0.5")
    batch = features()
    assert not np.allclose(model(batch, training=True)[0].numpy(), model(batch, training=False)[0].numpy())


def test_loss_multiplier_scales_the_numerator():
    model = make_model(NO_DROPOUT, problem=symbol_problem(loss_multiplier=2.5))
    batch = features()
    logits, losses = model(batch, training=False)
    num, den = model.targets_modality.loss(logits, batch["targets"], 0.0)
    assert float(losses["training"][0]) == pytest.approx(2.5 * float(num), rel=1e-6)
    assert float(losses["training"][1]) == float(den) == 7.0
    model.problem_hparams = dataclasses.replace(model.problem_hparams, loss_multiplier=1.0)
    assert float(model(batch, training=False)[1]["training"][0]) == pytest.approx(float(num), rel=1e-6)


# ------------------------------------------------------------------ infer
class _EosAtPosition(transformer.Transformer):
    """A transformer whose logits force EOS at a given position per row (and never pad)."""

    eos_positions = (2, 4)

    def top(self, body_output, features):
        logits = super().top(body_output, features)
        vocab = logits.shape[-1]
        steps = tf.range(tf.shape(logits)[1])[None, :]
        at_eos = tf.cast(tf.equal(steps, tf.constant(self.eos_positions)[:, None]), logits.dtype)
        eos = tf.one_hot(t2t_model.EOS_ID, vocab, dtype=logits.dtype)
        pad = tf.one_hot(0, vocab, dtype=logits.dtype)
        return logits + 30.0 * (2.0 * at_eos[..., None] - 1.0) * eos - 30.0 * pad


def test_greedy_infer_stops_at_eos_and_scores_the_output():
    tf.random.set_seed(1)
    model = _EosAtPosition(basic.create_hparams("transformer_test"), "infer", symbol_problem())
    inputs = features(seed=3)["inputs"]
    # The generic path (whole prefix re-run each step): the forced EOS depends on the
    # absolute position, which only the full-sequence top sees.
    result = infer_lib.infer(model, {"inputs": inputs, "targets": tf.zeros([2, 1], tf.int32)}, decode_length=7,
                         use_cache=False)
    outputs, scores = result["outputs"].numpy(), result["scores"].numpy()
    assert result["outputs"].dtype == tf.int32 and outputs.shape == (2, 7)
    assert result["scores"].dtype == tf.float32 and scores.shape == (2,)
    for row, eos in enumerate(_EosAtPosition.eos_positions):
        assert outputs[row, eos] == t2t_model.EOS_ID
        assert np.all(outputs[row, eos + 1:] == 0)
        assert np.all(outputs[row, :eos] > 1)
    # Each token is the argmax given the prefix, and the score sums their log-probabilities.
    logits, _ = model({"inputs": inputs, "targets": result["outputs"]}, training=False)
    log_probs = tf.nn.log_softmax(logits).numpy()
    for row, eos in enumerate(_EosAtPosition.eos_positions):
        np.testing.assert_array_equal(outputs[row, : eos + 1], log_probs[row, : eos + 1].argmax(-1))
        expected = sum(log_probs[row, t, outputs[row, t]] for t in range(eos + 1))
        assert scores[row] == pytest.approx(expected, abs=1e-4)


def test_greedy_infer_runs_to_decode_length_without_eos():
    model = make_model(mode="infer")
    result = infer_lib.infer(model, {"inputs": features()["inputs"]}, decode_length=5)
    assert result["outputs"].shape == (2, 5)
    assert np.all(result["scores"].numpy() <= 0)


def test_infer_decoder_only():
    problem = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})
    model = make_model(problem=problem, mode="infer")
    result = infer_lib.infer(model, {}, decode_length=4)
    assert result["outputs"].shape == (1, 4) and result["outputs"].dtype == tf.int32


def test_infer_class_label_problem():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "class_label"},
                             vocab_size={"inputs": VOCAB, "targets": 5})
    model = make_model(problem=problem, mode="infer")
    batch = features(batch=3)
    result = infer_lib.infer(model, {"inputs": batch["inputs"]})
    assert result["outputs"].shape == (3, 1) and result["outputs"].dtype == tf.int32
    logits, _ = model({"inputs": batch["inputs"]}, training=False)
    np.testing.assert_array_equal(result["outputs"].numpy()[:, 0], logits.numpy()[:, 0].argmax(-1))
    np.testing.assert_allclose(result["scores"].numpy(),
                               tf.nn.log_softmax(logits[:, 0]).numpy().max(-1), atol=1e-5)


def test_sampling_with_top_k_1_equals_greedy():
    model = make_model(mode="infer", seed=2)
    inputs = features(batch=3, seed=5)["inputs"]
    greedy = infer_lib.infer(model, {"inputs": inputs}, decode_length=6)
    sampled = infer_lib.infer(model, {"inputs": inputs}, decode_length=6, temperature=0.8, top_k=1, seed=7)
    np.testing.assert_array_equal(sampled["outputs"].numpy(), greedy["outputs"].numpy())
    np.testing.assert_allclose(sampled["scores"].numpy(), greedy["scores"].numpy(), atol=1e-5)


def test_beam_search_returns_ranked_beams():
    model = make_model(mode="infer")
    result = infer_lib.infer(model, {"inputs": features()["inputs"]}, decode_length=5, beam_size=4, top_beams=2)
    assert result["outputs"].shape == (2, 2, 5)
    scores = result["scores"].numpy()
    assert np.all(scores[:, 0] >= scores[:, 1])


def test_a_set_without_an_hparam_the_model_reads_is_named():
    from t2t.hparams.hparams import HParamsError, MissingHParamError

    seq2seq = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                             vocab_size={"inputs": VOCAB, "targets": VOCAB})
    # create_model checks the model's view first: the error names each missing key and
    # the sets that define it.
    with pytest.raises(HParamsError, match="missing 'num_heads' .*lstm_bahdanau_attention"):
        t2t_model.create_model("lstm_seq2seq_attention", basic.create_hparams("lstm_seq2seq"),
                               "train", seq2seq)
    hparams = basic.create_hparams("transformer_test")
    hparams.del_hparam("pos")
    with pytest.raises(HParamsError, match="missing 'pos'"):
        t2t_model.create_model("transformer", hparams, "train", seq2seq)
    # Built directly and read in call (through Keras' re-raise): a MissingHParamError.
    model = transformer.Transformer(hparams, "train", seq2seq)
    with pytest.raises(MissingHParamError, match="no hparam 'pos'"):
        model.build_weights()


def test_check_modalities_names_the_model_what_it_maps_and_what_the_problem_has():
    symbol, label = "symbol", "class_label"
    t2t_model.check_modalities("m", {"inputs": symbol, "targets": label}, inputs=(symbol,),
                               targets=(symbol, label))  # accepted: no error
    with pytest.raises(ValueError) as error:
        t2t_model.check_modalities("slicenet", {"targets": symbol}, inputs=(symbol,),
                                   targets=(symbol, label), detail=" (one per position)")
    assert str(error.value) == (
        "slicenet maps symbol inputs to symbol or class-label targets (one per position), but "
        "the problem's modalities are {'targets': 'symbol'}.")
    with pytest.raises(ValueError, match="bytenet maps symbol inputs to symbol targets, but"):
        t2t_model.check_modalities("bytenet", {"inputs": symbol, "targets": label},
                                   inputs=(symbol,), targets=(symbol,))
