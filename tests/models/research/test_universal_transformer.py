"""Tests of t2t.models.research.universal_transformer and its hparams sets (tiny sizes)."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import basic
from t2t.layers import attention, positional
from t2t.models import t2t_model, transformer
from t2t.models.research import universal_transformer as ut
from tests.helpers.model_checks import (
    assert_xla_forward_matches_eager,
    mirrored_step_result,
    mirrored_step_script,
    start_mirrored_step,
)

VOCAB = 7
H, FILTER = 8, 8
# ACT: p ~ sigmoid(act_halting_bias_init 1.0) = 0.73, so most positions halt at step 2.
TINY = (f"hidden_size={H},filter_size={FILTER},num_heads=2,layer_prepostprocess_dropout=0.0,"
        "attention_dropout=0.0,relu_dropout=0.0,label_smoothing=0.0,num_rec_steps=2,"
        "act_max_steps=3")
SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": VOCAB, "targets": VOCAB})
LM = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})


def hparams(recurrence="act", overrides=""):
    hp = basic.create_hparams("universal_transformer_tiny", TINY + "," + overrides
                              if overrides else TINY)
    hp.recurrence_type = recurrence
    return hp


def make(problem=SEQ2SEQ, recurrence="act", overrides="", name="universal_transformer", seed=0):
    keras.utils.set_random_seed(seed)  # Keras initializers ignore tf.random.set_seed
    return t2t_model.create_model(name, hparams(recurrence, overrides), "train", problem)


def ids(shape, seed=0):
    return tf.constant(np.random.default_rng(seed).integers(2, VOCAB, shape).astype(np.int32))


def param_count(layer) -> int:
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


# ------------------------------------------------------------ registry, hparams
T2T_VALUES = {  # from T2T's universal_transformer.py on T2T's transformer sets
    "universal_transformer_base": dict(hidden_size=1024, filter_size=4096, num_heads=16,
                                       layer_prepostprocess_dropout=0.3, num_rec_steps=6,
                                       act_max_steps=12, recurrence_type="basic"),
    "universal_transformer_big": dict(hidden_size=2048, filter_size=8192, num_heads=16,
                                      num_rec_steps=6, recurrence_type="basic"),
    "universal_transformer_small": dict(hidden_size=512, filter_size=2048, num_heads=8,
                                        layer_prepostprocess_dropout=0.1, num_rec_steps=6,
                                        act_max_steps=12, recurrence_type="basic"),
    "universal_transformer_tiny": dict(hidden_size=128, filter_size=512, num_heads=4,
                                       num_hidden_layers=2, num_rec_steps=8, act_max_steps=4),
    "transformer_teeny": dict(hidden_size=128, filter_size=128, num_heads=2, pos="timing"),
    "universal_transformer_teeny": dict(hidden_size=128, filter_size=128, num_heads=2,
                                        num_rec_steps=10, act_max_steps=12),
    "universal_transformer_tall": dict(hidden_size=512, num_rec_steps=16),
    "universal_transformer_step_sinusoid_timing_tiny": dict(
        hidden_size=128, num_rec_steps=8, step_timing_signal_type="sinusoid"),
    "adaptive_universal_transformer_base": dict(hidden_size=1024, recurrence_type="act",
                                                act_max_steps=12),
    "adaptive_universal_transformer_small": dict(hidden_size=512, recurrence_type="act",
                                                 act_max_steps=12),
    "adaptive_universal_transformer_tiny": dict(hidden_size=128, recurrence_type="act",
                                                num_rec_steps=8, act_max_steps=4),
    "adaptive_universal_transformer_tall": dict(
        hidden_size=512, recurrence_type="act", num_hidden_layers=16, batch_size=1024,
        act_max_steps=24, act_loss_weight=0.01, num_rec_steps=6),
    "adaptive_universal_transformer_tall_actlossw0": dict(act_max_steps=24,
                                                          act_loss_weight=0.0),
    "adaptive_universal_transformer_tall_actlossw001": dict(act_max_steps=24,
                                                            act_loss_weight=0.001),
    "adaptive_universal_transformer_base_dropout03": dict(
        hidden_size=1024, recurrence_type="act", layer_prepostprocess_dropout=0.3,
        attention_dropout=0.3, relu_dropout=0.3),
    "adaptive_universal_transformer_base_dropout05": dict(
        hidden_size=1024, recurrence_type="act", layer_prepostprocess_dropout=0.5,
        attention_dropout=0.5, relu_dropout=0.5),
}
UT_DEFAULTS = dict(pos="none", add_position_timing_signal=True, add_step_timing_signal=True,
                   act_type="basic", act_halting_bias_init=1.0, act_epsilon=0.01)


def test_models_and_hparams_sets_are_registered_with_t2ts_values():
    assert registry.model("universal_transformer") is ut.UniversalTransformer
    assert registry.model("universal_transformer_encoder") is ut.UniversalTransformerEncoder
    for name, values in T2T_VALUES.items():
        hp = registry.hparams(name)()
        assert {k: hp.get(k, "MISSING") for k in values} == values, name
        if name != "transformer_teeny":
            assert {k: hp.get(k, "MISSING") for k in UT_DEFAULTS} == UT_DEFAULTS, name
            assert hp.layer_preprocess_sequence == "n" and hp.hidden_size % hp.num_heads == 0
            ut.check_hparams(hp)  # every set asks only for what t2t implements
    base = registry.hparams("universal_transformer_base")()
    assert base.act_loss_weight == 0.01 and base.step_timing_signal_type == "learned"


def test_unknown_recurrence_type_names_the_value_and_the_supported_ones():
    with pytest.raises(ValueError, match=r"'lstm'.*basic, act"):
        make(recurrence="lstm")
    with pytest.raises(ValueError, match=r"'global'.*basic, accumulated"):
        make(overrides="act_type=global")
    with pytest.raises(ValueError, match="needs a problem with inputs"):
        make(LM, name="universal_transformer_encoder")


# ------------------------------------------------------------------ shapes
def test_seq2seq_lm_and_encoder_only_shapes():
    model = make(SEQ2SEQ)
    logits, losses = model({"inputs": ids([3, 5]), "targets": ids([3, 4], 1)}, training=True)
    assert logits.shape == (3, 4, VOCAB) and float(losses["training"][1]) == 12.0
    assert set(losses) == {"training", "act_loss"}
    lm = make(LM, recurrence="basic")
    logits, losses = lm({"targets": ids([2, 6])}, training=True)
    assert logits.shape == (2, 6, VOCAB) and set(losses) == {"training"}
    assert not hasattr(lm, "encoder") and lm.decoder.stack_layers[0].unit.encdec_attention is None
    tagger = make(SEQ2SEQ, name="universal_transformer_encoder")
    assert tagger({"inputs": ids([2, 5]), "targets": ids([2, 5])})[0].shape == (2, 5, VOCAB)
    assert not hasattr(tagger, "decoder")
    classes = ProblemHParams(modality={"inputs": "symbol", "targets": "class_label"},
                             vocab_size={"inputs": VOCAB, "targets": 3})
    logits, _ = make(classes)({"inputs": ids([2, 5]), "targets": tf.constant([[0], [2]])})
    assert logits.shape == (2, 1, 3)


# ---------------------------------------------------------- shared weights
def test_one_layer_per_stack_whatever_the_number_of_steps():
    def counted(recurrence, steps, step_signal=True):
        model = make(recurrence=recurrence, overrides=f"num_rec_steps={steps},act_max_steps="
                     f"{steps},add_step_timing_signal={step_signal}")
        model.build_for({"inputs": ids([1, 1]), "targets": ids([1, 1])})
        return param_count(model)

    attention_params = 4 * H * H  # q, k, v, output; no biases
    ffn = H * FILTER + FILTER + FILTER * H + H
    norm = 2 * H
    encoder_layer = attention_params + ffn + 2 * norm
    decoder_layer = 2 * attention_params + ffn + 3 * norm
    fixed = VOCAB * H + 32 * H + encoder_layer + decoder_layer + 2 * norm  # + final norms
    halting = 2 * (H + 1)  # ACT: one sigmoid unit per stack
    assert (encoder_layer, decoder_layer, fixed) == (432, 704, 1480)
    # Steps add only the learned step signal: one [H] row per step and stack.
    assert counted("basic", 6) == fixed + 2 * 6 * H
    assert counted("act", 5) == fixed + halting + 2 * 5 * H
    assert counted("act", 3, step_signal=False) == fixed + halting


def recurrence_and_input(overrides, recurrence="act", seed=1):
    keras.utils.set_random_seed(seed)
    hp = hparams(recurrence, overrides)
    layer = ut.DepthRecurrence(hp, transformer.EncoderLayer(hp, "layer"), "recurrence")
    x = tf.constant(np.random.default_rng(seed).normal(size=[2, 5, H]).astype(np.float32))
    bias = attention.padding_bias(tf.constant([[1.0] * 5, [1, 1, 1, 0, 0]]))
    return layer, x, bias


def preprocess_by_hand(layer, state, step):
    """T2T's step_preprocess: position signal, then the step's learned or sinusoid row."""
    if layer.step_signal_type == "sinusoid":  # position `step` of a num_steps-long signal
        step_signal = positional.timing_signal(layer.num_steps, H)[0, step]
    else:
        step_signal = layer.step_embedding[step] * math.sqrt(H)
    return state + positional.timing_signal(5, H)[0] + step_signal


@pytest.mark.parametrize("step_signal", ["learned", "sinusoid"])
def test_basic_applies_the_same_layer_with_position_and_step_signals(step_signal):
    layer, x, bias = recurrence_and_input(
        f"num_rec_steps=3,step_timing_signal_type={step_signal}", recurrence="basic")
    output, stats = layer(x, bias)
    assert stats == {}
    state = x
    for step in range(3):
        state = layer.unit(preprocess_by_hand(layer, state, step), bias)
    np.testing.assert_allclose(output.numpy(), state.numpy(), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------- ACT
def test_act_with_one_step_halts_every_position_with_remainder_one():
    layer, x, bias = recurrence_and_input("act_max_steps=1")
    output, stats = layer(x, bias)
    for name in ("ponder_times", "remainders", "halting_probability"):
        np.testing.assert_array_equal(stats[name].numpy(), np.ones([2, 5]), err_msg=name)
    by_hand = layer.unit(preprocess_by_hand(layer, x, 0), bias)  # weight 1 on step 1
    np.testing.assert_allclose(output.numpy(), by_hand.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("act_type", ["basic", "accumulated"])
@pytest.mark.parametrize("max_steps, ponder, weights", [
    (5, 4, [0.3, 0.3, 0.3, 0.1]),  # 0.9 + 0.3 > 0.99: halts at step 4, remainder 0.1
    (3, 3, [0.3, 0.3, 0.4]),  # forced to halt at act_max_steps, remainder 0.4
])
def test_act_halting_weights_remainders_and_update(act_type, max_steps, ponder, weights):
    layer, x, bias = recurrence_and_input(f"act_max_steps={max_steps},act_type={act_type},"
                                          f"act_halting_bias_init={math.log(0.3 / 0.7)}")
    layer(x, bias)  # builds; a zero kernel then makes p = sigmoid(bias) = 0.3 everywhere
    layer.halting.kernel.assign(tf.zeros_like(layer.halting.kernel))
    output, stats = layer(x, bias)
    np.testing.assert_array_equal(stats["ponder_times"].numpy(), np.full([2, 5], ponder))
    np.testing.assert_allclose(stats["remainders"].numpy(), weights[-1], atol=1e-6)
    np.testing.assert_allclose(stats["halting_probability"].numpy(), 1.0, atol=1e-6)
    state, expected = x, tf.zeros_like(x)
    for step, w in enumerate(weights):
        state = layer.unit(preprocess_by_hand(layer, state, step), bias)
        expected = expected + w * state if act_type == "accumulated" else (
            w * state + (1 - w) * expected)
    np.testing.assert_allclose(output.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_act_bias_extremes_halt_at_once_or_run_to_the_limit():
    for bias_init, ponder in ((40.0, 1.0), (-40.0, 4.0)):
        layer, x, bias = recurrence_and_input(f"act_max_steps=4,act_halting_bias_init={bias_init}")
        stats = layer(x, bias)[1]
        np.testing.assert_array_equal(stats["ponder_times"].numpy(), ponder)
        np.testing.assert_allclose(stats["halting_probability"].numpy(), 1.0, atol=1e-6)


def test_ponder_loss_value_and_gradient():
    model = make(overrides="act_max_steps=1")  # ponder 1 + remainder 1, in both stacks
    batch = {"inputs": ids([2, 4]), "targets": ids([2, 3], 1)}
    act_loss, denominator = model(batch)[1]["act_loss"]
    assert float(act_loss) == pytest.approx(0.01 * (2 + 2)) and float(denominator) == 1.0
    model = make()  # p ~ sigmoid(1): two steps; the remainder 1 - p1 depends on p1
    with tf.GradientTape() as tape:
        act_loss = model(batch)[1]["act_loss"][0]
    halting = [v for v in model.trainable_variables if "pondering" in v.path]
    assert len(halting) == 4 and np.isfinite(float(act_loss)) and float(act_loss) > 0.02
    grads = tape.gradient(act_loss, halting)
    assert all(g is not None and np.all(np.isfinite(g.numpy())) for g in grads)
    assert all(float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


# --------------------------------------------------------------- causality
@pytest.mark.parametrize("problem, recurrence", [(SEQ2SEQ, "act"), (LM, "basic")],
                         ids=["encdec_act", "lm_basic"])
def test_decoder_is_causal(problem, recurrence):
    model = make(problem, recurrence)
    targets = ids([2, 4], seed=1)
    batch = {"targets": targets, **({"inputs": ids([2, 3], 2)} if problem.has_inputs else {})}
    logits = model(batch, training=False)[0].numpy()
    for t in range(3):
        changed = targets.numpy().copy()
        changed[:, t] = (changed[:, t] - 1) % (VOCAB - 2) + 2  # another real token
        new = model({**batch, "targets": tf.constant(changed)}, training=False)[0].numpy()
        np.testing.assert_allclose(new[:, : t + 1], logits[:, : t + 1], rtol=1e-5, atol=1e-5)
        assert np.abs(new[:, t + 1:] - logits[:, t + 1:]).max() > 1e-4


def test_act_input_padding_invariance():
    model = make()
    inputs = ids([2, 4], seed=3).numpy()
    inputs[1, 2:] = 0
    targets = ids([2, 3], seed=4)
    logits = model({"inputs": tf.constant(inputs), "targets": targets}, training=False)[0]
    padded = tf.constant(np.pad(inputs, [[0, 0], [0, 3]]))
    more = model({"inputs": padded, "targets": targets}, training=False)[0]
    np.testing.assert_allclose(more.numpy(), logits.numpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- training
def test_loss_falls_on_a_tiny_fixed_batch():
    model = make(seed=1)
    batch = {"inputs": ids([4, 4], 5), "targets": ids([4, 4], 6)}
    model.build_for(batch)
    optimizer = keras.optimizers.Adam(3e-2)
    optimizer.build(model.trainable_variables)
    losses = []
    for _ in range(6):  # eager: cheaper here than tracing the ACT loop's gradient
        with tf.GradientTape() as tape:
            out = model(batch, training=True)[1]
            loss = out["training"][0] / out["training"][1] + out["act_loss"][0]
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        losses.append(float(loss))
    assert losses[-1] < 0.75 * losses[0], losses


def test_greedy_infer_matches_teacher_forced_argmax():
    model = make()
    assert not model.has_decode_cache
    inputs = ids([3, 4], 7)
    decoded = infer_lib.infer(model, {"inputs": inputs}, decode_length=4)["outputs"].numpy()
    assert decoded.shape == (3, 4)
    logits = model({"inputs": inputs, "targets": tf.constant(decoded)}, training=False)[0]
    argmax = logits.numpy().argmax(-1)
    for row, out in enumerate(decoded.tolist()):
        steps = out.index(1) + 1 if 1 in out else len(out)
        np.testing.assert_array_equal(out[:steps], argmax[row, :steps])


def test_xla_forward_matches_eager():
    model = make(LM)
    assert_xla_forward_matches_eager(model, {"targets": ids([2, 5], 8)}, rtol=1e-4)


_MIRRORED_STEP = mirrored_step_script(
    f"""
    from t2t.hparams import basic
    from t2t.models import t2t_model
    from t2t.data.problem import ProblemHParams
    problem = ProblemHParams(modality={{"targets": "symbol"}}, vocab_size={{"targets": 7}})
    hp = basic.create_hparams("adaptive_universal_transformer_tiny", "{TINY}")
    features = {{"targets": tf.constant([[2, 3, 4, 1], [5, 6, 1, 0], [3, 3, 1, 0], [4, 1, 0, 0]])}}
    """,
    {"universal_transformer":
     't2t_model.create_model("universal_transformer", hp, "train", problem)'},
    loss='losses["training"][0] / 8.0 + losses["act_loss"][0] / 2.0',
)


MIRRORED_TEST = "test_one_training_step_under_mirrored_strategy_on_two_cpus"


@pytest.fixture(scope="module", autouse=True)
def mirrored_step(request):
    """The mirrored step's process, started with this module when its test is selected,
    so that its ~9 s (a fresh TensorFlow, tracing the ACT loop's gradient) overlap the
    other tests. Yields the process or None."""
    if not any(item.name == MIRRORED_TEST for item in request.session.items):
        yield None
        return
    with start_mirrored_step(_MIRRORED_STEP) as process:
        yield process


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_mirrored_strategy_on_two_cpus(mirrored_step):
    result = mirrored_step_result(mirrored_step)["universal_transformer"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    # Every weight moved: embedding, step signal, the one shared layer (12), the halting
    # unit (2), the final norm (2).
    assert result["changed"] == result["total"] == 18
