"""The transformer hparams that published architectures need (t2t-import: Marian, T5),
each checked against its definition, with cached decoding, packing and padding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from t2t.data.problem import ProblemHParams
from t2t.decoding import infer as infer_lib
from t2t.hparams import basic
from t2t.layers import feed_forward, positional, relative_buckets
from t2t.models import t2t_model

VOCAB = 17
NO_DROPOUT = "layer_prepostprocess_dropout=0.0,attention_dropout=0.0,relu_dropout=0.0"
TINY = ("num_hidden_layers=2,hidden_size=16,filter_size=24,num_heads=2,"
        "attention_key_channels=8,attention_value_channels=8," + NO_DROPOUT)
OPTIONS = {  # one of each kind; t2t-import's equality tests cover T5 v1.0 against transformers
    "marian": ("transformer_opus_mt", TINY),
    "t5": ("transformer_t5", TINY),
    "t5_v1_1": ("transformer_t5_v1_1", TINY),
    "t5_packed_buckets": ("transformer_t5", TINY + ",relative_attention_num_buckets=8,"
                          "relative_attention_max_distance=12"),
}


def seq2seq() -> ProblemHParams:
    return ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                          vocab_size={"inputs": VOCAB, "targets": VOCAB})


def make(hparams_set: str, overrides: str, problem: ProblemHParams | None = None, seed: int = 0):
    tf.random.set_seed(seed)
    hp = basic.create_hparams(hparams_set, overrides)
    model = t2t_model.create_model("transformer", hp, "infer", problem or seq2seq())
    model.build_weights()
    # Non-zero values where the initializers give zeros, so each option shows.
    for weight in model.weights:
        if weight.path.endswith(("bias", "softmax_bias", "beta")):
            weight.assign(tf.random.normal(weight.shape, stddev=0.3, seed=seed))
    return model


# ------------------------------------------------------------------ layers
def test_sinusoid_is_vaswanis_formula_in_marians_layout():
    channels, positions = 8, np.arange(5)
    signal = positional.timing_signal(5, channels, kind="sinusoid")[0].numpy()
    # Marian: angle(pos, j) = pos / 10000^(2 (j // 2) / C); sines of even j first, then cosines
    angle = positions[:, None] / np.power(10000, 2 * (np.arange(channels) // 2) / channels)
    expected = np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)
    np.testing.assert_allclose(signal, expected, atol=1e-6)
    timing = positional.timing_signal(5, channels, kind="timing")[0].numpy()
    assert np.abs(timing - expected).max() > 1e-2  # T2T's timescales differ
    with pytest.raises(ValueError, match="Unknown position signal 'learned'"):
        positional.timing_signal(5, channels, kind="learned")


def t5_bucket(relative: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """Mesh TensorFlow's relative_position_bucket, written out for one integer."""
    bucket = 0
    n = -relative
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact)
                            * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_buckets_are_t5s(bidirectional):
    relative = np.arange(-300, 301)
    got = relative_buckets.relative_position_buckets(tf.constant(relative), bidirectional, 32, 128)
    expected = [t5_bucket(int(r), bidirectional, 32, 128) for r in relative]
    assert got.numpy().tolist() == expected
    assert max(expected) == 31 and min(expected) == 0  # the whole table is reachable


def test_relative_position_bias_reads_its_table_per_head():
    layer = relative_buckets.RelativePositionBias(3, bidirectional=True, num_buckets=8,
                                                  max_distance=16)
    bias = layer.for_length(5).numpy()  # [1, 3, 5, 5]
    table = layer.embeddings.numpy()
    buckets = relative_buckets.relative_position_buckets(
        tf.range(5)[None, :] - tf.range(5)[:, None], True, 8, 16).numpy()
    np.testing.assert_allclose(bias[0], np.transpose(table[buckets], [2, 0, 1]))
    with pytest.raises(ValueError, match="relative_attention_num_buckets=1"):
        relative_buckets.RelativePositionBias(2, True, num_buckets=1)


def test_gated_feed_forward_and_activations():
    layer = feed_forward.DenseGatedDense(6, 4, activation_name="gelu_tanh", name="ffn")
    x = tf.random.normal([2, 3, 4], seed=1)
    y = layer(x).numpy()
    w0, w1, w2 = (layer.inner.kernel.numpy(), layer.linear.kernel.numpy(),
                  layer.outer.kernel.numpy())
    h = x.numpy() @ w0
    gelu = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    np.testing.assert_allclose(y, (gelu * (x.numpy() @ w1)) @ w2, atol=1e-5)
    assert not layer.inner.use_bias
    swish = feed_forward.DenseReluDense(6, 4, activation_name="swish", use_bias=True)
    h = swish.inner(x).numpy()
    np.testing.assert_allclose(swish(x).numpy(), swish.outer(h / (1 + np.exp(-h))).numpy(),
                               atol=1e-5)
    with pytest.raises(ValueError, match="Unknown ffn_activation 'tanh'"):
        feed_forward.DenseReluDense(6, 4, activation_name="tanh")


def test_rms_norm_and_softmax_options():
    model = make("transformer_t5", TINY)
    norm = model.encoder.final.norm
    x = tf.random.normal([2, 16], seed=3)
    expected = x.numpy() / np.sqrt((x.numpy() ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(norm(x).numpy(), expected * norm.scale.numpy(), atol=1e-5)
    modality = model.targets_modality  # tied, input scaled by hidden**-0.5
    body = tf.random.normal([1, 2, 16], seed=4)
    np.testing.assert_allclose(modality.top(body).numpy(),
                               body.numpy() / 4.0 @ modality.embedding.numpy().T, atol=1e-5)
    marian = make("transformer_opus_mt", TINY).targets_modality  # a bias on the logits
    np.testing.assert_allclose(
        marian.top(body).numpy(),
        body.numpy() @ marian.embedding.numpy().T + marian.softmax_bias.numpy(), atol=1e-5)


# --------------------------------------------------------------- the model
@pytest.mark.parametrize("name", ["marian", "t5_v1_1", "t5_packed_buckets"])
def test_cached_greedy_and_beam_equal_full_passes(name):
    model = make(*OPTIONS[name])
    inputs = tf.constant([[3, 4, 5, 6, 1, 0], [7, 8, 1, 0, 0, 0]])
    for kwargs in ({}, {"beam_size": 3, "alpha": 0.6}):
        cached = infer_lib.infer(model, {"inputs": inputs}, decode_length=7, **kwargs)
        uncached = infer_lib.infer(model, {"inputs": inputs}, decode_length=7, use_cache=False,
                                   **kwargs)
        np.testing.assert_array_equal(cached["outputs"].numpy(), uncached["outputs"].numpy())
        np.testing.assert_allclose(cached["scores"].numpy(), uncached["scores"].numpy(), atol=1e-4)


@pytest.mark.parametrize("name", ["marian", "t5_packed_buckets"])
def test_packed_examples_equal_separate_examples(name):
    model = make(*OPTIONS[name])
    packed = {
        "inputs": tf.constant([[3, 4, 5, 9, 10, 0]]),
        "inputs_segmentation": tf.constant([[1, 1, 1, 2, 2, 0]]),
        "inputs_position": tf.constant([[0, 1, 2, 0, 1, 0]]),
        "targets": tf.constant([[6, 7, 8, 1, 11, 1, 0]]),
        "targets_segmentation": tf.constant([[1, 1, 1, 1, 2, 2, 0]]),
        "targets_position": tf.constant([[0, 1, 2, 3, 0, 1, 0]]),
    }
    separate = {"inputs": tf.constant([[3, 4, 5], [9, 10, 0]]),
                "targets": tf.constant([[6, 7, 8, 1], [11, 1, 0, 0]])}
    packed_logits = model(packed, training=False)[0].numpy()
    separate_logits = model(separate, training=False)[0].numpy()
    np.testing.assert_allclose(packed_logits[0, :4], separate_logits[0, :4], atol=1e-4)
    np.testing.assert_allclose(packed_logits[0, 4:6], separate_logits[1, :2], atol=1e-4)


def test_t5_decoder_starts_from_the_pad_embedding():
    model = make("transformer_t5", TINY)
    features = {"inputs": tf.constant([[3, 4, 1]]), "targets": tf.constant([[5, 1]])}
    logits = model(features, training=False)[0].numpy()
    model.targets_modality.embedding[0].assign(tf.zeros([16]))
    zeroed = model(features, training=False)[0].numpy()
    assert np.abs(logits - zeroed).max() > 1e-3  # the start reads embedding row 0
    zero_start = make("transformer_t5", TINY + ",decoder_start_embedding=zeros")
    zero_start.set_weights(model.get_weights())
    np.testing.assert_allclose(zero_start(features, training=False)[0].numpy(), zeroed, atol=1e-5)


def test_bad_option_values_name_the_choices():
    for overrides, message in (("pos=learned", "Unknown pos 'learned'"),
                               ("decoder_start_embedding=bos", "decoder_start_embedding 'bos'"),
                               ("multiply_softmax_input_mode=sqrt", "multiply_softmax_input_mode"),
                               ("ffn_layer=conv", "Unsupported ffn_layer 'conv'")):
        with pytest.raises(ValueError, match=message):
            make("transformer_tiny", overrides)


def test_defaults_keep_tensor2tensors_transformer():
    hp = basic.create_hparams("transformer_base")
    assert (hp.pos, hp.ffn_activation, hp.ffn_use_bias, hp.attention_use_bias,
            hp.attention_scale_queries, hp.softmax_bias, hp.multiply_softmax_input_mode,
            hp.decoder_start_embedding) == ("timing", "relu", True, False, True, False, "none",
                                            "zeros")
