"""Tests of t2t.models.transformer and the transformer hyperparameter sets."""

from __future__ import annotations

import itertools
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.hparams import basic
from t2t.layers import attention
from t2t.models import t2t_model, transformer

VOCAB = 13
NO_DROPOUT = "layer_prepostprocess_dropout=0.0,attention_dropout=0.0,relu_dropout=0.0"


def seq2seq(vocab=VOCAB) -> ProblemHParams:
    return ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                          vocab_size={"inputs": vocab, "targets": vocab})


def language_model() -> ProblemHParams:
    return ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": VOCAB})


def classifier(classes=4) -> ProblemHParams:
    return ProblemHParams(modality={"inputs": "symbol", "targets": "class_label"},
                          vocab_size={"inputs": VOCAB, "targets": classes})


def make_model(problem, overrides=NO_DROPOUT, hparams_set="transformer_test", seed=0):
    tf.random.set_seed(seed)
    hp = basic.create_hparams(hparams_set, overrides)
    return t2t_model.create_model("transformer", hp, "train", problem)


def ids(shape, seed=0, low=2):
    return tf.constant(np.random.default_rng(seed).integers(low, VOCAB, shape).astype(np.int32))


# ------------------------------------------------------------------ shapes
def test_registered():
    assert registry.model("transformer") is transformer.Transformer


def test_encoder_decoder_shapes():
    model = make_model(seq2seq())
    logits, losses = model({"inputs": ids([3, 7]), "targets": ids([3, 5], 1)}, training=True)
    assert logits.shape == (3, 5, VOCAB)
    assert float(losses["training"][1]) == 15.0
    assert model.has_encoder and not model.is_classifier
    assert len(model.encoder.stack_layers) == 2 and len(model.decoder.stack_layers) == 2
    assert model.decoder.stack_layers[0].encdec_attention is not None


def test_decoder_only_shapes():
    model = make_model(language_model())
    logits, losses = model({"targets": ids([2, 6])}, training=True)
    assert logits.shape == (2, 6, VOCAB)
    assert float(losses["training"][1]) == 12.0
    assert not model.has_encoder and not hasattr(model, "encoder")
    assert model.decoder.stack_layers[0].encdec_attention is None


def test_encoder_only_classifier_shapes():
    model = make_model(classifier(4))
    logits, losses = model({"inputs": ids([3, 6]), "targets": tf.constant([[0], [3], [1]])}, training=True)
    assert logits.shape == (3, 1, 4)
    assert float(losses["training"][1]) == 3.0
    assert model.is_classifier and not hasattr(model, "decoder")


def test_separate_encoder_and_decoder_layer_counts():
    model = make_model(seq2seq(), NO_DROPOUT + ",num_encoder_layers=3,num_decoder_layers=1")
    assert len(model.encoder.stack_layers) == 3 and len(model.decoder.stack_layers) == 1
    assert model({"inputs": ids([1, 4]), "targets": ids([1, 3])})[0].shape == (1, 3, VOCAB)


def test_unsupported_ffn_layer():
    with pytest.raises(ValueError, match="ffn_layer"):
        make_model(seq2seq(), "ffn_layer=conv_relu_conv")


def test_transformer_base_v1_postnorm_builds():
    # v1 keeps basic_params1's layer_preprocess_sequence "none" (post-norm "dan").
    model = make_model(seq2seq(), NO_DROPOUT + ",hidden_size=16,filter_size=8,num_heads=2",
                       hparams_set="transformer_base_v1")
    assert model.hparams.layer_preprocess_sequence == "none"
    assert model({"inputs": ids([1, 3]), "targets": ids([1, 2])})[0].shape == (1, 2, VOCAB)
    sublayer = model.encoder.stack_layers[0].self_attention
    assert sublayer.pre.norm is None and sublayer.post.norm is not None
    assert model.encoder.final.norm is None  # post-norm: no final norm


# ---------------------------------------------------------------- causality
@pytest.mark.parametrize("problem", [seq2seq(), language_model()], ids=["encdec", "decoder_only"])
def test_decoder_is_causal(problem):
    model = make_model(problem)
    length = 6
    targets = ids([2, length], seed=1)
    batch = {"targets": targets}
    if problem.has_inputs:
        batch["inputs"] = ids([2, 5], seed=2)
    logits = model(batch, training=False)[0].numpy()
    for t in range(length):
        changed = targets.numpy().copy()
        changed[:, t] = (changed[:, t] - 2 + 1) % (VOCAB - 2) + 2  # another real token
        new = model({**batch, "targets": tf.constant(changed)}, training=False)[0].numpy()
        # Targets are shifted right inside: logits at t depend on targets < t only.
        np.testing.assert_allclose(new[:, : t + 1], logits[:, : t + 1], rtol=1e-5, atol=1e-5)
        if t + 1 < length:
            assert np.abs(new[:, t + 1:] - logits[:, t + 1:]).max() > 1e-4


# ---------------------------------------------------------------- padding
def test_input_padding_invariance():
    model = make_model(seq2seq())
    inputs = ids([2, 5], seed=3).numpy()
    inputs[1, 3:] = 0
    targets = ids([2, 4], seed=4)
    logits = model({"inputs": tf.constant(inputs), "targets": targets}, training=False)[0].numpy()
    padded = np.pad(inputs, [[0, 0], [0, 4]])
    more = model({"inputs": tf.constant(padded), "targets": targets}, training=False)[0].numpy()
    np.testing.assert_allclose(more, logits, rtol=1e-5, atol=1e-5)
    # Row 1 alone, without its padding, gives the same logits too.
    alone = model({"inputs": tf.constant(inputs[1:, :3]), "targets": targets[1:]}, training=False)[0]
    np.testing.assert_allclose(alone.numpy(), logits[1:], rtol=1e-5, atol=1e-5)
    # Changing a real input does change the logits (the check can fail).
    inputs[1, 0] = inputs[1, 0] % (VOCAB - 2) + 2 if inputs[1, 0] != VOCAB - 1 else 2
    changed = model({"inputs": tf.constant(inputs), "targets": targets}, training=False)[0].numpy()
    assert np.abs(changed[1] - logits[1]).max() > 1e-4


def test_classifier_padding_invariance():
    model = make_model(classifier())
    inputs = ids([2, 4], seed=5).numpy()
    inputs[0, 2:] = 0
    logits = model({"inputs": tf.constant(inputs)}, training=False)[0].numpy()
    more = model({"inputs": tf.constant(np.pad(inputs, [[0, 0], [0, 3]]))}, training=False)[0].numpy()
    np.testing.assert_allclose(more, logits, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- packing
def test_packed_examples_equal_separate_examples():
    model = make_model(seq2seq(), NO_DROPOUT + ",use_target_space_embedding=true")
    a_inputs, a_targets = [3, 4, 5], [6, 7, 8, 1]
    b_inputs, b_targets = [9, 10], [11, 1]
    packed = {
        "inputs": tf.constant([a_inputs + b_inputs + [0]]),
        "inputs_segmentation": tf.constant([[1, 1, 1, 2, 2, 0]]),
        "inputs_position": tf.constant([[0, 1, 2, 0, 1, 0]]),
        "targets": tf.constant([a_targets + b_targets + [0]]),
        "targets_segmentation": tf.constant([[1, 1, 1, 1, 2, 2, 0]]),
        "targets_position": tf.constant([[0, 1, 2, 3, 0, 1, 0]]),
    }
    separate = {
        "inputs": tf.constant([a_inputs, b_inputs + [0]]),
        "targets": tf.constant([a_targets, b_targets + [0, 0]]),
    }
    packed_logits, packed_losses = model(packed, training=False)
    separate_logits, separate_losses = model(separate, training=False)
    packed_logits, separate_logits = packed_logits.numpy(), separate_logits.numpy()
    np.testing.assert_allclose(packed_logits[0, :4], separate_logits[0, :4], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(packed_logits[0, 4:6], separate_logits[1, :2], rtol=1e-5, atol=1e-5)
    assert float(packed_losses["training"][0]) == pytest.approx(float(separate_losses["training"][0]), rel=1e-5)
    assert float(packed_losses["training"][1]) == float(separate_losses["training"][1]) == 6.0
    # Without the segment features the two examples would see each other.
    unsegmented = {k: v for k, v in packed.items() if not k.endswith("_segmentation")}
    mixed = model(unsegmented, training=False)[0].numpy()
    assert np.abs(mixed[0, 4:6] - separate_logits[1, :2]).max() > 1e-4


def test_packed_decoder_only():
    model = make_model(language_model())
    a, b = [4, 5, 6], [7, 8]
    packed = {"targets": tf.constant([a + b]), "targets_segmentation": tf.constant([[1, 1, 1, 2, 2]]),
              "targets_position": tf.constant([[0, 1, 2, 0, 1]])}
    separate = model({"targets": tf.constant([a, b + [0]])}, training=False)[0].numpy()
    logits = model(packed, training=False)[0].numpy()
    np.testing.assert_allclose(logits[0, :3], separate[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logits[0, 3:], separate[1, :2], rtol=1e-5, atol=1e-5)


# ----------------------------------------------------- cached decoder layer
def test_decoder_layer_with_cache_equals_full_decoding():
    hp = basic.create_hparams("transformer_test", NO_DROPOUT)
    tf.random.set_seed(0)
    layer = transformer.DecoderLayer(hp, has_encoder=True, name="layer")
    batch, length, heads, hidden = 2, 5, hp.num_heads, hp.hidden_size
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=[batch, length, hidden]).astype(np.float32))
    memory = tf.constant(rng.normal(size=[batch, 4, hidden]).astype(np.float32))
    memory_bias = attention.padding_bias(tf.constant([[1, 1, 1, 1], [1, 1, 0, 0]]))
    bias = attention.causal_bias(length)
    full = layer(x, bias, memory=memory, memory_bias=memory_bias, training=False).numpy()
    depth = hidden // heads
    cache = {"k": tf.zeros([batch, heads, length, depth]), "v": tf.zeros([batch, heads, length, depth])}
    steps = []
    for t in range(length):
        out, cache = layer(x[:, t:t + 1], bias[:, :, t:t + 1], memory=memory,
                           memory_bias=memory_bias, training=False, cache=cache, decode_index=t)
        steps.append(out)
    np.testing.assert_allclose(tf.concat(steps, axis=1).numpy(), full, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ hparams
def test_transformer_base_values():
    hp = basic.create_hparams("transformer_base")
    expected = {
        "hidden_size": 512, "filter_size": 2048, "num_heads": 8, "num_hidden_layers": 6,
        "num_encoder_layers": 0, "num_decoder_layers": 0,
        "layer_preprocess_sequence": "n", "layer_postprocess_sequence": "da",
        "layer_prepostprocess_dropout": 0.1, "attention_dropout": 0.1, "relu_dropout": 0.1,
        "learning_rate_schedule": "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size",
        "learning_rate_constant": 2.0, "learning_rate_warmup_steps": 8000, "learning_rate": 0.2,
        "optimizer": "adam", "optimizer_adam_beta1": 0.9, "optimizer_adam_beta2": 0.997,
        "optimizer_adam_epsilon": 1e-9, "label_smoothing": 0.1, "batch_size": 4096,
        "max_length": 256, "clip_grad_norm": 0.0, "initializer": "uniform_unit_scaling",
        "initializer_gain": 1.0, "weight_decay": 0.0, "shared_embedding_and_softmax_weights": True,
        "norm_type": "layer", "pos": "timing", "ffn_layer": "dense_relu_dense",
        "attention_key_channels": 0, "attention_value_channels": 0,
        "use_target_space_embedding": True, "learning_rate_decay_scheme": "noam",
    }
    assert {k: hp.get(k, "MISSING") for k in expected} == expected


def test_transformer_base_v1_and_v2_values():
    v1 = basic.create_hparams("transformer_base_v1")
    assert (v1.layer_preprocess_sequence, v1.layer_postprocess_sequence) == ("none", "dan")
    assert (v1.learning_rate_schedule, v1.learning_rate_warmup_steps) == ("legacy", 4000)
    assert (v1.optimizer_adam_beta2, v1.attention_dropout, v1.relu_dropout) == (0.98, 0.0, 0.0)
    v2 = basic.create_hparams("transformer_base_v2")
    assert (v2.layer_preprocess_sequence, v2.layer_postprocess_sequence) == ("n", "da")
    assert (v2.learning_rate_warmup_steps, v2.learning_rate, v2.optimizer_adam_beta2) == (8000, 0.2, 0.98)


@pytest.mark.parametrize(
    "name, values",
    [
        ("transformer_tiny", {"num_hidden_layers": 2, "hidden_size": 128, "filter_size": 512, "num_heads": 4}),
        ("transformer_small", {"num_hidden_layers": 2, "hidden_size": 256, "filter_size": 1024, "num_heads": 4}),
        ("transformer_test", {"num_hidden_layers": 2, "hidden_size": 16, "filter_size": 8, "num_heads": 2}),
        ("transformer_big", {"hidden_size": 1024, "filter_size": 4096, "num_heads": 16, "batch_size": 2048,
                             "layer_prepostprocess_dropout": 0.3, "num_hidden_layers": 6,
                             "learning_rate_warmup_steps": 8000}),
        ("transformer_big_single_gpu", {"hidden_size": 1024, "filter_size": 4096, "num_heads": 16,
                                        "batch_size": 2048, "layer_prepostprocess_dropout": 0.1,
                                        "learning_rate_warmup_steps": 16000,
                                        "optimizer_adam_beta2": 0.997}),
        ("transformer_base_single_gpu", {"hidden_size": 512, "batch_size": 1024,
                                         "learning_rate_schedule": "constant*linear_warmup*rsqrt_decay",
                                         "learning_rate_constant": 0.1,
                                         "learning_rate_warmup_steps": 16000,
                                         "layer_prepostprocess_dropout": 0.1}),
    ],
)
def test_hparams_sets(name, values):
    hp = basic.create_hparams(name)
    assert {k: hp.get(k, "MISSING") for k in values} == values
    # Everything else about the base Transformer is kept.
    assert hp.layer_preprocess_sequence == "n" and hp.optimizer_adam_epsilon == 1e-9
    assert hp.label_smoothing == 0.1 and hp.shared_embedding_and_softmax_weights


def test_transformer_base_range_is_registered():
    assert "transformer_base_range" in registry.list_ranged_hparams()


def test_transformer_base_parameter_count():
    vocab, hidden, filter_size, layers = 32768, 512, 2048, 6
    model = make_model(seq2seq(vocab), "", hparams_set="transformer_base")
    model.build_for({"inputs": tf.constant([[5, 6]]), "targets": tf.constant([[7]])})
    count = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    attention_params = 4 * hidden * hidden  # q, k, v, output; no biases
    ffn = 2 * hidden * filter_size + filter_size + hidden
    norm = 2 * hidden
    expected = (
        vocab * hidden  # one shared embedding / softmax matrix
        + 32 * hidden  # target space embedding
        + layers * (attention_params + ffn + 2 * norm)  # encoder
        + layers * (2 * attention_params + ffn + 3 * norm)  # decoder
        + 2 * norm  # final encoder and decoder norms
    )
    assert count == expected
    assert 60_000_000 <= count <= 62_000_000  # Tensor2Tensor's base: ~61M with a 32k vocabulary


# ----------------------------------------------------------------- training
def copy_task():
    """Every binary sequence of length 1..5 over tokens {2, 3}; targets = inputs + EOS."""
    sequences = [list(s) for n in range(1, 6) for s in itertools.product([2, 3], repeat=n)]
    inputs = np.zeros([len(sequences), 5], np.int32)
    targets = np.zeros([len(sequences), 6], np.int32)
    for i, s in enumerate(sequences):
        inputs[i, : len(s)] = s
        targets[i, : len(s) + 1] = s + [1]
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


def teacher_forced_accuracy(model, batch):
    logits, _ = model(batch, training=False)
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32).numpy()
    targets = batch["targets"].numpy()
    mask = targets != 0
    return float((predictions == targets)[mask].mean())


def test_transformer_tiny_learns_to_copy():
    start = time.time()
    keras.utils.set_random_seed(5)  # unseeded, Adam at 1e-3 sometimes spiked at the end
    model = make_model(ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                                      vocab_size={"inputs": 4, "targets": 4}),
                       NO_DROPOUT + ",label_smoothing=0.0", hparams_set="transformer_tiny")
    batch = copy_task()
    assert batch["inputs"].shape == (62, 5)
    model.build_for(batch)
    before = teacher_forced_accuracy(model, batch)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            _, losses = model(batch, training=True)
            num, den = losses["training"]
            loss = num / den
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    losses = [float(step(batch)) for _ in range(150)]
    accuracy = teacher_forced_accuracy(model, batch)
    assert losses[-1] < 0.5 * losses[0]
    assert accuracy >= 0.95, (before, accuracy, losses[::25])
    print(f"copy task: accuracy {before:.2f} -> {accuracy:.3f} in {time.time() - start:.1f}s")


def test_sublayer_wraps_an_inner_layer_and_passes_its_extra_output_through():
    """transformer.Sublayer (also transformer_moe's blocks): pre-norm, inner, residual;
    an inner (output, extra) pair (a cache, attention weights, an experts' loss) comes
    back beside the output; its variables are named pre/inner/post."""
    from t2t.models import variable_names

    hp = basic.create_hparams("transformer_test", NO_DROPOUT)  # "n" then "da"

    class Doubling(keras.layers.Layer):
        def __init__(self, with_loss: bool):
            super().__init__()
            self.scale = keras.layers.Dense(hp.hidden_size, use_bias=False)
            self.with_loss = with_loss

        def call(self, x, training=None):
            y = self.scale(x)
            return (y, tf.constant(0.5)) if self.with_loss else y

    x = tf.random.stateless_normal([2, 3, hp.hidden_size], seed=[1, 2])
    plain = transformer.Sublayer(Doubling(False), hp, "ffn")
    out = plain(x)
    expected = x + plain.inner(plain.pre(x))  # post "da": dropout (0) then add the residual
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    paired = transformer.Sublayer(Doubling(True), hp, "ffn")
    out, loss = paired(x)
    assert out.shape == x.shape and float(loss) == 0.5
    assert sorted(variable_names.named_variables(plain)) == [
        "inner.scale.kernel", "pre.norm.beta", "pre.norm.gamma"]
