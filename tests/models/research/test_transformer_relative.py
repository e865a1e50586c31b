"""The Transformer with hparams.self_attention_type "dot_product_relative" (T2T's
transformer_relative sets); the mirrored step is in test_transformer_moe.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.layers import attention, relative_attention
from t2t.models import t2t_model

VOCAB = 7
SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": VOCAB, "targets": VOCAB})
TINY = ("hidden_size=16,filter_size=16,num_heads=2,max_relative_position=3,"
        "layer_prepostprocess_dropout=0.0,attention_dropout=0.0,relu_dropout=0.0,label_smoothing=0.0")


def make_model(overrides=TINY, mode="train", seed=0):
    tf.random.set_seed(seed)
    hp = create_hparams("transformer_relative_tiny", overrides)
    return t2t_model.create_model("transformer", hp, mode, SEQ2SEQ)


def reverse_batch():
    """Reverse 2..6 tokens of {2..6}: targets = reversed inputs + EOS (needs positions)."""
    rng = np.random.default_rng(0)
    inputs = np.zeros([16, 6], np.int32)
    targets = np.zeros([16, 7], np.int32)
    for i in range(16):
        seq = list(rng.integers(2, VOCAB, rng.integers(2, 7)))
        inputs[i, :len(seq)] = seq
        targets[i, :len(seq) + 1] = seq[::-1] + [1]
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


def test_sets_are_registered_with_t2t_values():
    base, big = create_hparams("transformer_base"), create_hparams("transformer_big")
    assert (base.self_attention_type, base.max_relative_position) == ("dot_product", 0)
    for name, reference in [("transformer_relative", base), ("transformer_relative_big", big)]:
        hp = registry.hparams(name)()
        assert (hp.pos, hp.self_attention_type, hp.max_relative_position) == (None, "dot_product_relative", 20)
        assert set(hp.diff(reference)) == {"pos", "self_attention_type", "max_relative_position"}
    tiny = create_hparams("transformer_relative_tiny")
    assert (tiny.num_hidden_layers, tiny.hidden_size, tiny.filter_size, tiny.num_heads) == (2, 128, 512, 4)
    assert (tiny.pos, tiny.max_relative_position) == (None, 20)


def test_self_attention_is_relative_encdec_attention_is_not():
    model = make_model()
    logits, losses = model(reverse_batch(), training=True)
    assert logits.shape == (16, 7, VOCAB) and np.isfinite(float(losses["training"][0]))
    for stack in (model.encoder, model.decoder):
        for layer in stack.stack_layers:
            inner = layer.self_attention.inner
            assert isinstance(inner, relative_attention.RelativeMultiHeadAttention)
            assert inner.relative_keys.shape == (7, 8)  # 2 * 3 + 1 distances, depth 16 / 2
    encdec = model.decoder.stack_layers[0].encdec_attention.inner
    assert type(encdec) is attention.MultiHeadAttention


def test_unknown_self_attention_type_lists_the_supported_ones():
    with pytest.raises(ValueError, match="dot_product_relative"):
        make_model(TINY + ",self_attention_type=dot_product_relative_v2")


def test_hparams_without_self_attention_type_build_plain_attention():
    hp = create_hparams("transformer_test")  # as an hparams.json written before the hook
    hp.del_hparam("self_attention_type")
    hp.del_hparam("max_relative_position")
    model = t2t_model.create_model("transformer", hp, "train", SEQ2SEQ)
    assert type(model.encoder.stack_layers[0].self_attention.inner) is attention.MultiHeadAttention


def test_loss_falls_then_greedy_decode_matches_teacher_forcing():
    model = make_model(TINY + ",num_hidden_layers=1")  # quick
    batch = reverse_batch()
    model.build_for(batch)
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            numerator, denominator = model(batch, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    losses = [float(step()) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0], losses[::6]
    inputs = batch["inputs"][:4]
    cached = infer_lib.infer(model, {"inputs": inputs}, decode_length=7)["outputs"].numpy()
    uncached = infer_lib.infer(model, {"inputs": inputs}, decode_length=7, use_cache=False)["outputs"]
    np.testing.assert_array_equal(cached, uncached.numpy())
    logits, _ = model({"inputs": inputs, "targets": tf.constant(cached)}, training=False)
    forced = tf.argmax(logits, -1, output_type=tf.int32).numpy()
    for row, forced_row in zip(cached, forced, strict=True):
        end = list(row).index(1) + 1 if 1 in row else len(row)  # up to and with EOS
        np.testing.assert_array_equal(row[:end], forced_row[:end])
    beams = [infer_lib.infer(model, {"inputs": inputs}, decode_length=7, beam_size=2,
                             use_cache=c)["outputs"].numpy() for c in (True, False)]
    np.testing.assert_array_equal(beams[0], beams[1])
