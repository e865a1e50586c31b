"""Tests of t2t.models.research.transformer_moe and its hparams sets; the mirrored
training step here covers transformer_moe and the relative Transformer in one process."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.layers import mixture_of_experts
from t2t.models import t2t_model
from t2t.models.research import transformer_moe
from tests.helpers.model_checks import mirrored_step_result, mirrored_step_script

VOCAB = 7
SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": VOCAB, "targets": VOCAB})
LM = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})
TINY = ("hidden_size=16,filter_size=16,num_heads=2,moe_hidden_sizes=16,"
        "layer_prepostprocess_dropout=0.0")


def make_model(problem=SEQ2SEQ, overrides=TINY, hparams_set="transformer_moe_tiny", seed=0):
    tf.random.set_seed(seed)
    return t2t_model.create_model("transformer_moe", create_hparams(hparams_set, overrides),
                                  "train", problem)


def copy_batch():
    rng = np.random.default_rng(0)
    inputs = np.zeros([16, 5], np.int32)
    targets = np.zeros([16, 6], np.int32)
    for i in range(16):
        seq = list(rng.integers(2, VOCAB, rng.integers(1, 6)))
        inputs[i, :len(seq)] = seq
        targets[i, :len(seq) + 1] = seq + [1]
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


# ------------------------------------------------------------------ hparams
T2T_BASE = {
    "hidden_size": 512, "batch_size": 4096, "max_length": 2001, "max_input_seq_length": 2000,
    "max_target_seq_length": 2000, "dropout": 0.0, "clip_grad_norm": 0.0,
    "optimizer_adam_epsilon": 1e-9, "learning_rate_decay_scheme": "noam", "learning_rate": 0.1,
    "learning_rate_warmup_steps": 2000, "initializer_gain": 1.0, "num_hidden_layers": 5,
    "initializer": "uniform_unit_scaling", "weight_decay": 0.0, "optimizer_adam_beta1": 0.9,
    "optimizer_adam_beta2": 0.98, "label_smoothing": 0.0, "shared_embedding_and_softmax_weights": True,
    "layer_preprocess_sequence": "n", "layer_postprocess_sequence": "da", "pos": "timing",
    "proximity_bias": False, "num_heads": 8, "attention_key_channels": 0,
    "attention_value_channels": 0, "attention_dropout": 0.0, "filter_size": 2048, "relu_dropout": 0.0,
    "moe_hidden_sizes": "2048", "moe_num_experts": 64, "moe_k": 2, "moe_loss_coef": 1e-2,
    "layer_types": "", "default_att": "a", "default_ff": "fc", "norm_type": "layer",
}
T2T_8K = {"batch_size": 8192, "max_length": 0, "eval_drop_long_sequences": True,
          "min_length_bucket": 256, "default_ff": "sep", "hidden_size": 1024}
T2T_SETS = {
    "transformer_moe_base": T2T_BASE,
    "transformer_moe_8k": {**T2T_BASE, **T2T_8K},
    "transformer_moe_8k_lm": {**T2T_BASE, **T2T_8K, "default_ff": "sepm", "layer_types": "#a/a/a-moe/a/a"},
    "transformer_moe_2k": {**T2T_BASE, **T2T_8K, "batch_size": 2048,
                           "layer_types": "a/a/a/a/a#a-sepm/a-sepm/a-moe/a-sepm/a-sepm"},
    "transformer_moe_12k": {**T2T_BASE, **T2T_8K, "batch_size": 12000},
}


@pytest.mark.parametrize("name", sorted(T2T_SETS))
def test_sets_have_t2t_values(name):
    hp = registry.hparams(name)()
    assert {k: hp.get(k, "MISSING") for k in T2T_SETS[name]} == T2T_SETS[name]


def test_registered_with_a_tiny_set():
    assert registry.model("transformer_moe") is transformer_moe.TransformerMoe
    tiny = create_hparams("transformer_moe_tiny")
    assert (tiny.hidden_size, tiny.moe_num_experts, tiny.moe_k, tiny.layer_types) == (64, 4, 2, "a/a-moe#a/a-moe")


# -------------------------------------------------------------- layer_types
def parse(layer_types, default_ff="fc", layers=2):
    hp = create_hparams("transformer_moe_base", f"layer_types={layer_types},default_ff={default_ff},"
                                                f"num_hidden_layers={layers}")
    return transformer_moe.parse_layer_types(hp)


def test_layer_types_as_t2t_parses_them():
    assert parse("") == ([("a", "fc")] * 2, [("a", "a", "fc")] * 2)
    assert parse("a/a-moe") == ([("a", "fc"), ("a", "moe")], [("a", "a", "fc"), ("a", "a", "moe")])
    assert parse("a-moe#a/a-a-sepm") == ([("a", "moe")], [("a", "a", "fc"), ("a", "a", "sepm")])
    enc, dec = parse("a/a/a/a/a#a-sepm/a-sepm/a-moe/a-sepm/a-sepm", "sep")  # transformer_moe_2k
    assert enc == [("a", "sep")] * 5 and [ffn for _, _, ffn in dec] == ["sepm", "sepm", "moe", "sepm", "sepm"]
    enc, dec = parse("#a/a-moe")
    assert enc == [] and dec == [("a", "_", "fc"), ("a", "_", "moe")]


@pytest.mark.parametrize("layer_types, match", [
    ("a/loc", "'loc'.*T2T type t2t does not implement.*a"),
    ("a/a-conv", "feed-forward type 'conv'.*fc, moe, sep, sepm"),
    ("a#a-sep", "'sep' in the decoder"),
    ("a#a#a", "more than one"),
])
def test_unsupported_layer_types_are_refused(layer_types, match):
    with pytest.raises(ValueError, match=match):
        parse(layer_types)


def test_t2t_8k_set_is_refused_for_its_non_causal_decoder():
    with pytest.raises(ValueError, match="sepm"):
        make_model(hparams_set="transformer_moe_8k", overrides=TINY)


def test_an_empty_encoder_with_inputs_is_refused():
    with pytest.raises(ValueError, match="no encoder layers"):
        make_model(overrides=TINY + ",layer_types=#a/a-moe")


# ----------------------------------------------------------------- the model
def test_shapes_and_the_moe_loss():
    model = make_model()
    logits, losses = model(copy_batch(), training=True)
    assert logits.shape == (16, 6, VOCAB)
    assert set(losses) == {"training", "moe_loss"} and float(losses["moe_loss"][0]) > 0.0
    assert not model.has_decode_cache
    moe_layers = [layer.ffn.inner for layer in model.encoder_layers + model.decoder_layers
                  if isinstance(layer.ffn.inner, mixture_of_experts.MixtureOfExperts)]
    assert len(moe_layers) == 2 and moe_layers[0].expert_kernels[0].shape == (4, 16, 16)


def test_separable_convolution_blocks():
    model = make_model(overrides=TINY + ",layer_types=a-sep#a-sepm")
    logits, losses = model(copy_batch(), training=True)
    assert logits.shape == (16, 6, VOCAB) and float(losses["moe_loss"][0]) == 0.0
    conv = model.encoder_layers[0].ffn.inner
    assert isinstance(conv, transformer_moe.SeparableConvFFN) and not conv.masked
    assert conv.conv2.depthwise_kernel.shape == (31, 16, 1)  # T2T's widths 3 then 31
    assert model.decoder_layers[0].ffn.inner.masked


def test_language_model_with_masked_separable_convolutions_is_causal():
    model = make_model(LM, TINY + ",layer_types=#a-sepm/a-moe")
    targets = copy_batch()["targets"][:2].numpy()
    base = model({"targets": tf.constant(targets)}, training=False)[0].numpy()
    changed = targets.copy()
    changed[:, 2] = changed[:, 2] % (VOCAB - 2) + 2 if changed[0, 2] != VOCAB - 1 else 2
    new = model({"targets": tf.constant(changed)}, training=False)[0].numpy()
    np.testing.assert_allclose(new[:, :3], base[:, :3], rtol=1e-5, atol=1e-5)  # shifted right
    assert np.abs(new[:, 3:] - base[:, 3:]).max() > 1e-4


def test_loss_falls_then_greedy_decode_matches_teacher_forcing():
    model = make_model(overrides=TINY + ",layer_types=a-moe#a-moe")  # one layer a stack: quick
    batch = copy_batch()
    model.build_for(batch)
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            losses = model(batch, training=True)[1]
            numerator, denominator = losses["training"]
            loss = numerator / denominator + losses["moe_loss"][0]
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    losses = [float(step()) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0], losses[::6]
    decoded = infer_lib.infer(model, {"inputs": batch["inputs"][:4]}, decode_length=6)["outputs"].numpy()
    logits, _ = model({"inputs": batch["inputs"][:4], "targets": tf.constant(decoded)}, training=False)
    forced = tf.argmax(logits, -1, output_type=tf.int32).numpy()
    for row, forced_row in zip(decoded, forced, strict=True):
        end = list(row).index(1) + 1 if 1 in row else len(row)
        np.testing.assert_array_equal(row[:end], forced_row[:end])


# ----------------------------------------------------- distributed training
_MIRRORED_STEP = mirrored_step_script(
    """
    from t2t.features import ProblemHParams
    from t2t.hparams.basic import create_hparams
    from t2t.models import t2t_model
    # Decoder-only, one layer each: tracing a replica step costs seconds per layer.
    php = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": 7})
    features = {"targets": tf.constant([[2, 3, 4, 5, 6, 1]] * 4)}

    def make(name, hparams_set, extra):
        hp = create_hparams(hparams_set, "hidden_size=8,filter_size=8,num_heads=2," + extra)
        return t2t_model.create_model(name, hp, "train", php)

    def total_loss(losses):
        ctx = tf.distribute.get_replica_context()
        loss = losses["training"][0] / 24.0  # the global token count
        for key, (value, _) in losses.items():
            if key != "training":
                loss += value / ctx.num_replicas_in_sync
        return loss
    """,
    {"transformer_moe": 'make("transformer_moe", "transformer_moe_tiny", '
                        '"moe_hidden_sizes=8,layer_types=#a-moe")',
     "transformer": 'make("transformer", "transformer_relative_tiny", '
                    '"max_relative_position=3,num_hidden_layers=1")'},
    loss="total_loss(losses)",
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_of_each_model_under_mirrored_strategy_on_two_cpus():
    results = mirrored_step_result(_MIRRORED_STEP, timeout=300)
    assert set(results) == {"transformer_moe", "transformer"}, results
    for name, result in results.items():
        assert (result["replicas"], result["finite"], result["same"]) == (2, True, True), name
        assert result["changed"] == result["total"], (name, result)  # every weight moved
