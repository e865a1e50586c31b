"""Tests of t2t.models.slicenet (the `slicenet` model) and its hparams sets."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import slicenet as slicenet_hparams
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import RangedHParams
from t2t.models import slicenet, variable_names
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
    """slicenet_tiny_cpu at 32 channels (the least the timing signal allows), 1 decoder
    and 1 encoder layer (fast tests)."""
    hp = slicenet_hparams.slicenet_tiny_cpu()
    hp.hidden_size, hp.num_hidden_layers = 32, 1
    for name, value in overrides.items():
        hp.set_hparam(name, value)
    return hp


def make(mode: str = "train", problem: ProblemHParams = PROBLEM, **overrides) -> slicenet.SliceNet:
    return slicenet.SliceNet(small_hparams(**overrides), mode, problem)


def logits_of(model, inputs, targets, training: bool = False) -> np.ndarray:
    return model({"inputs": inputs, "targets": targets}, training=training)[0].numpy()


def param_count(layer) -> int:
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(5)


# --------------------------------------------------------------------- structure
SLICENET_1 = dict(
    batch_size=1024, hidden_size=768, dropout=0.5, symbol_dropout=0.2, label_smoothing=0.1,
    clip_grad_norm=2.0, num_hidden_layers=4, kernel_height=3, kernel_width=1, norm_type="layer",
    learning_rate_decay_scheme="exp", learning_rate=0.05, learning_rate_warmup_steps=3000,
    initializer_gain=1.0, weight_decay=3.0, sampling_method="argmax",
    optimizer_adam_epsilon=1e-6, optimizer_adam_beta1=0.85, optimizer_adam_beta2=0.997,
    large_kernel_size=15, separability=-2, dilation_scheme="1.1.1.1", kernel_scheme="3.7.15.31",
    attention_type="simple", num_heads=8, attention_key_channels=0, attention_value_channels=0,
    attention_dropout=0.2, shared_embedding_and_softmax_weights=True, initializer="orthogonal",
)
NOAM = dict(learning_rate_decay_scheme="noam", learning_rate=1.0, learning_rate_warmup_steps=4000,
            initializer="uniform_unit_scaling", optimizer_adam_epsilon=1e-9,
            optimizer_adam_beta1=0.9, optimizer_adam_beta2=0.98)
TINY = dict(attention_type="simple", separability=0, hidden_size=128, num_hidden_layers=2,
            batch_size=512, learning_rate_warmup_steps=200)


@pytest.mark.parametrize(("name", "values"), [
    ("slicenet_params1", SLICENET_1), ("slicenet_1", SLICENET_1),
    ("slicenet_1noam", {**SLICENET_1, **NOAM}), ("slicenet_1tiny", {**SLICENET_1, **TINY}),
])
def test_hparams_sets_have_tensor2tensor_values(name, values):
    hp = registry.hparams(name)()
    assert {key: hp.get(key) for key in values} == values
    for left_out in ("num_sampled_classes", "audio_compression", "sim_loss_mult"):
        assert left_out not in hp


def test_registered_model_ranged_and_cpu_sets():
    assert registry.model("slicenet") is slicenet.SliceNet
    rhp = RangedHParams()
    registry.ranged_hparams("slicenet1")(rhp)
    ranges = {r.name: (r.low, r.high) for r in rhp.ranges()}
    assert ranges == {"clip_grad_norm": (1.0, 10.0), "learning_rate": (0.02, 1.0),
                      "optimizer_adam_beta2": (0.995, 0.998), "weight_decay": (1.0, 5.0)}
    assert rhp["learning_rate"].scale == rhp["clip_grad_norm"].scale == rhp.LOG_SCALE
    cpu = registry.hparams("slicenet_tiny_cpu")
    assert cpu.__doc__.startswith("A t2t addition") and cpu().hidden_size == 64


def test_parameter_count_by_hand():
    model = make("eval")
    model.build_weights()
    h, v = 32, VOCAB

    def sep(k):  # bias-free depthwise k x 1 + pointwise h -> h
        return k * h + h * h

    norm = 2 * h  # layer norm scale and bias
    conv_layer = sep(3) + sep(7) + sep(15) + sep(31) + 4 * norm  # kernel_scheme 3.7.15.31
    attention = sep(5) + sep(5) + 2 * norm + norm  # targets_time block, then attn_norm
    merge = 4 * (3 * (2 * h // 4) * (h // 4)) + (h * h + h) + norm  # 4 groups, 1x1 mix
    encoder, decoder = conv_layer, conv_layer + attention  # int(1.5 * 1) = 1 layer each
    space, embedding = 32 * h, v * h  # embedding shared by inputs, targets and softmax
    assert (conv_layer, attention, merge) == (6144, 2560, 2656)
    total = encoder + attention + merge + decoder + space + embedding
    assert param_count(model) == total == 21_216
    names = variable_names.named_variables(model)  # stable checkpoint names for all
    assert len(names) == len(model.variables) and not [n for n in names if n.startswith("unnamed")]


@pytest.mark.parametrize(("separability", "expected"), [
    (0, 5 * 12 + 12 * 6),  # depthwise-separable
    (1, 5 * 12 * 6),  # one plain conv
    (3, 3 * (5 * 4 * 2) + 6 * 6 + 6),  # 3 plain groups, then a 1x1 mix with bias
    (-3, 3 * (5 * 4 + 4 * 2)),  # 3 separable groups, concatenated
])
def test_subseparable_conv_groups(separability, expected):
    hp = small_hparams()
    conv = slicenet.SubseparableConv(6, (5, 1), (1, 1), separability, hp)
    out = conv(tf.zeros([2, 11, 1, 12]))
    assert out.shape == (2, 7, 1, 6) and param_count(conv) == expected
    with pytest.raises(ValueError, match="groups"):
        slicenet.SubseparableConv(6, (5, 1), (1, 1), 4, hp)


@pytest.mark.parametrize("attention_type", ["simple", "transformer", "none"])
def test_one_output_per_target_position(attention_type):
    model = make(attention_type=attention_type, num_heads=4)
    for target_length in (3, 9):  # T < S and T > S
        targets = tf.ones([2, target_length], tf.int32)
        logits, losses = model({"inputs": INPUTS, "targets": targets}, training=True)
        assert logits.shape == (2, target_length, VOCAB) and logits.dtype == tf.float32
        numerator, denominator = losses["training"]
        assert float(denominator) == 2 * target_length and np.isfinite(float(numerator))


def test_grouped_separability_of_slicenet_1():
    model = make(separability=-2, hidden_size=48)  # groups -3, -2: 48 splits both ways
    assert model(  # shared embedding: inputs, targets and softmax
        {"inputs": INPUTS, "targets": TARGETS})[0].shape == (2, 7, VOCAB)
    specs1, specs2 = slicenet.conv_specs(model.hparams)
    assert [s for _, _, s in specs1 + specs2] == [-3, -2, -3, -2]
    with pytest.raises(ValueError, match="groups"):
        make(separability=-2, hidden_size=64)


def test_classifier_runs_the_encoder_only():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "class_label"},
                             vocab_size={"inputs": VOCAB, "targets": 3})
    model = make(problem=problem)
    logits, _ = model({"inputs": INPUTS, "targets": tf.constant([[1], [2]])}, training=True)
    assert logits.shape == (2, 1, 3) and not hasattr(model, "decoder")


def test_rejects_what_it_cannot_run():
    with pytest.raises(ValueError, match="attention_type 'local'.*simple, transformer, none"):
        make(attention_type="local")
    with pytest.raises(ValueError, match="kernel_scheme '3.7.15.33'"):
        make(kernel_scheme="3.7.15.33")
    with pytest.raises(ValueError, match="hidden_size >= 32"):
        make(hidden_size=16)
    images = ProblemHParams(modality={"inputs": "image", "targets": "class_label"},
                            vocab_size={"inputs": 256, "targets": 3})
    with pytest.raises(ValueError, match="symbol inputs"):
        make(problem=images)
    packed = {"inputs": INPUTS, "targets": TARGETS, "inputs_segmentation": tf.ones_like(INPUTS)}
    with pytest.raises(ValueError, match="packed"):
        make()(packed)
    # "none" selects T2T's other kernel pattern: kernel_height twice, large_kernel_size.
    specs1, specs2 = slicenet.conv_specs(small_hparams(kernel_scheme="none"))
    assert [(d, k) for d, k, _ in specs1 + specs2] == [
        ((1, 1), (3, 1)), ((1, 1), (3, 1)), ((1, 1), (15, 1)), ((4, 4), (15, 1))]


# ------------------------------------------------------------ masking, causality
def test_input_padding_changes_nothing():
    """The encoder masks padding and the attention hides it: extra padding is invisible."""
    model = make("eval")
    padded = tf.pad(INPUTS, [[0, 0], [0, 3]])
    np.testing.assert_allclose(logits_of(model, padded, TARGETS), logits_of(model, INPUTS, TARGETS),
                               atol=1e-5)


@pytest.mark.parametrize("attention_type", ["simple", "transformer"])
def test_decoder_is_causal(attention_type):
    """Changing target t changes no logit at positions <= t (they read targets < t)."""
    model = make("eval", attention_type=attention_type, num_heads=4)
    assert_decoder_is_causal(model, INPUTS, TARGETS)


# ---------------------------------------------------------------------- training
def test_loss_falls_on_a_fixed_batch():
    model = make()
    features = {"inputs": INPUTS, "targets": TARGETS}
    losses = losses_on_a_fixed_batch(model, features, 15)
    assert losses[-1] < 0.2 * losses[0], losses


# ---------------------------------------------------------------------- decoding
def test_greedy_decode_is_the_teacher_forced_argmax():
    model = make("infer")
    out = infer_lib.infer(model, {"inputs": INPUTS}, decode_length=7)
    decoded = out["outputs"].numpy()
    assert decoded.shape == (2, 7) and out["scores"].shape == (2,)
    assert_well_formed(decoded, VOCAB)
    assert_teacher_forced_argmax(model, INPUTS, decoded)


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
    from t2t.hparams import slicenet as sh
    from t2t.models import slicenet
    from t2t.data.problem import ProblemHParams
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 4, "targets": 4})
    hp = sh.slicenet_tiny_cpu()
    hp.hidden_size, hp.num_hidden_layers = 32, 1
    features = {"inputs": tf.constant([[2, 3, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]]),
                "targets": tf.constant([[3, 2, 1], [3, 1, 0], [2, 2, 1], [3, 3, 1]])}
    """,
    {"slicenet": 'slicenet.SliceNet(hp, "train", php)'},
    optimizer="keras.optimizers.SGD(0.1)",  # Adam's update graph costs CI seconds
    loss='losses["training"][0] / 11.0',  # the global token count
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_mirrored_strategy_on_two_cpus():
    result = mirrored_step_result(_MIRRORED_STEP)["slicenet"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    # Every weight moved. Encoder layer: 4 separable convs (2 kernels each) + 4 norms (2
    # each) = 16; each attention: 2 convs + 2 norms + attn_norm = 10; merge: 4 groups + 1x1
    # mix (kernel, bias) + norm = 8; decoder layer 16 + 10; target space and shared embedding.
    assert result["changed"] == result["total"] == 16 + 10 + 8 + 16 + 10 + 2
