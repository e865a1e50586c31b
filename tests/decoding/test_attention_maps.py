"""Encoder-decoder attention heat maps: the weights (shape, normalisation, equal to a
step-by-step recomputation on a decoded sequence), the maps of texts, and the HTML."""

import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.decoding import attention_maps
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import infer as infer_lib
from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model

PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def problem_and_model(tmp_path_factory):
    keras.utils.set_random_seed(3)
    data_dir = str(tmp_path_factory.mktemp("attention") / "data")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"),
                                   problem_lib.PREDICT, problem.hparams(data_dir))
    model.build_weights()
    return problem, model, data_dir


def _recomputed(model, inputs, targets):
    """[B, layers, heads, T, S] from the decoder's sublayers, one layer at a time, with
    the softmax written out here (not through return_attention)."""
    embedded = model.bottom({"inputs": inputs, "targets": targets}, training=False)
    memory, _, nonpadding = model.encode(embedded["inputs"], {}, training=False)
    memory_bias = model._memory_bias(nonpadding, {})
    x = model.shift_right(embedded["targets"], {})
    from t2t.layers import positional

    x = positional.add_timing_signal(x)
    self_bias = model.decoder_self_bias(tf.shape(x)[1], {})
    found = []
    for layer in model.decoder.stack_layers:
        x = layer.self_attention(x, training=False, bias=self_bias)
        sub = layer.encdec_attention
        att = sub.inner
        query = sub.pre(x, training=False)
        q = att._split_heads(att.q(query), att.key_depth) * att.key_depth**-0.5
        k = att._split_heads(att.k(memory), att.key_depth)
        logits = tf.matmul(q, k, transpose_b=True) + memory_bias
        found.append(tf.nn.softmax(logits, axis=-1).numpy())
        x = sub(x, training=False, memory=memory, bias=memory_bias)
        x = layer.ffn(x, training=False)
    return np.stack(found, axis=1)


def test_weights_of_a_decoded_batch(problem_and_model):
    _, model, _ = problem_and_model
    inputs = np.array([[3, 2, 3, 3, 2, 1], [2, 3, 1, 0, 0, 0]], np.int32)  # padded row 2
    decoded = infer_lib.infer(model, {"inputs": tf.constant(inputs)}, 6)["outputs"].numpy()
    weights = attention_maps.attention_weights(model, inputs, decoded)
    hp = model.hparams
    assert weights.shape == (2, hp.num_hidden_layers, hp.num_heads, decoded.shape[1], 6)
    assert weights.dtype == np.float32
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # every row is a distribution
    assert np.all(weights[1, ..., 3:] == 0.0)  # the padding of input 2 gets no attention
    assert np.all(weights[1, ..., :3] > 0.0)
    np.testing.assert_allclose(weights, _recomputed(model, inputs, decoded), atol=1e-5)
    # One example alone: the same map as in the padded batch.
    alone = attention_maps.attention_weights(model, inputs[1:, :3], decoded[1:])
    np.testing.assert_allclose(alone[0], weights[1, ..., :3], atol=1e-5)


def test_maps_of_texts_and_their_html(problem_and_model, tmp_path):
    problem, model, data_dir = problem_and_model
    decoder = decoder_lib.Decoder(problem, model, data_dir,
                                  decoder_lib.DecodeHParams.parse("beam_size=1,batch_size=1"))
    maps = attention_maps.maps_for_texts(decoder, ["1 0 1 1", "0"], ["1 1", "0 1 0"])
    assert [m.source_tokens for m in maps] == [["1", "0", "1", "1", "<EOS>"], ["0", "<EOS>"]]
    assert [m.target_tokens for m in maps] == [["1", "1", "<EOS>"], ["0", "1", "0", "<EOS>"]]
    hp = model.hparams
    assert maps[1].weights.shape == (hp.num_hidden_layers, hp.num_heads, 4, 2)
    ids = decoder.encode_text("0")[None]
    np.testing.assert_allclose(
        maps[1].weights, attention_maps.attention_weights(model, ids, [[2, 3, 2, 1]])[0])
    path = tmp_path / "out.attention.html"
    attention_maps.write_html(str(path), maps, title="transformer <test>")
    page = path.read_text(encoding="utf-8")
    assert "<title>transformer &lt;test&gt;</title>" in page
    assert '"source": ["1", "0", "1", "1", "\\u003cEOS>"]' in page  # tokens, "<" escaped
    assert "src=" not in page and "http" not in page  # self-contained
    assert f'"layers": {hp.num_hidden_layers}, "heads": {hp.num_heads}' in page


def test_html_escapes_tokens_that_would_end_the_script():
    weights = np.full([1, 1, 1, 1], 1.0, np.float32)
    page = attention_maps.render_html(
        [attention_maps.AttentionMap(["</script><b>"], ["x"], weights)], "t")
    assert page.count("</script>") == 2  # the data block's and the code's own
    assert "\\u003c/script>\\u003cb>" in page


def test_models_without_encoder_decoder_attention_are_refused():
    language_model = types.SimpleNamespace(problem_hparams=ProblemHParams(
        modality={"targets": "symbol"}, vocab_size={"targets": 5}))
    with pytest.raises(attention_maps.AttentionError, match="without inputs"):
        attention_maps.check_model(language_model, "transformer")
    classifier = types.SimpleNamespace(problem_hparams=ProblemHParams(
        modality={"inputs": "symbol", "targets": "class_label"},
        vocab_size={"inputs": 5, "targets": 3}))
    with pytest.raises(attention_maps.AttentionError, match="class_label targets"):
        attention_maps.check_model(classifier)
    other = types.SimpleNamespace(problem_hparams=ProblemHParams(
        modality={"inputs": "symbol", "targets": "symbol"}, vocab_size={"inputs": 5,
                                                                         "targets": 5}))
    with pytest.raises(attention_maps.AttentionError, match="model lstm_seq2seq has no"):
        attention_maps.check_model(other, "lstm_seq2seq")


def test_a_transformer_subclass_with_another_decoder_is_refused_by_name():
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 5, "targets": 5})
    hparams = create_hparams("universal_transformer_tiny")
    model = t2t_model.create_model("universal_transformer", hparams, "infer", php)
    model.build_weights()
    with pytest.raises(attention_maps.AttentionError, match="UniversalTransformer has no"):
        attention_maps.attention_weights(model, [[3, 1]], [[3, 1]])


def test_serving_attention_signature_equals_the_maps(problem_and_model):
    from t2t.decoding import settings as settings_lib
    from t2t.serving import serving_module

    problem, model, data_dir = problem_and_model
    dhp = decoder_lib.DecodeHParams.parse("beam_size=1")
    encoders = problem.feature_encoders(data_dir)
    _, signatures = serving_module.build_serving_module(
        model, problem, encoders, settings_lib.resolve(dhp, model))
    inputs, outputs = ["1 0 1 1", "0"], ["1 1", "0 1 0"]
    served = signatures[serving_module.ATTENTION_SIGNATURE](
        inputs=tf.constant(inputs), outputs=tf.constant(outputs))
    maps = attention_maps.maps_for_texts(decoder_lib.Decoder(problem, model, data_dir, dhp),
                                         inputs, outputs)
    assert served["weights"].shape == (2, 2, 2, 4, 5)
    assert served["source_length"].numpy().tolist() == [5, 2]
    assert served["target_length"].numpy().tolist() == [3, 4]
    for row, expected in enumerate(maps):
        t, s = len(expected.target_tokens), len(expected.source_tokens)
        np.testing.assert_allclose(served["weights"][row, :, :, :t, :s], expected.weights,
                                   atol=1e-5)
        tokens = [x.decode() for x in served["source_tokens"][row].numpy()]
        assert tokens == expected.source_tokens + [""] * (5 - s)  # "" pads the batch
        tokens = [x.decode() for x in served["target_tokens"][row].numpy()]
        assert tokens == expected.target_tokens + [""] * (4 - t)


def test_attention_signature_only_for_text_models_with_encoder_decoder_attention():
    from t2t.serving import serving_module

    def fake(targets, has=True):
        php = ProblemHParams(modality={"inputs": "symbol", "targets": targets},
                             vocab_size={"inputs": 5, "targets": 5})
        return types.SimpleNamespace(problem_hparams=php, has_encdec_attention=has)

    assert serving_module.has_attention_signature(fake("symbol"), is_image=False)
    assert not serving_module.has_attention_signature(fake("symbol"), is_image=True)
    assert not serving_module.has_attention_signature(fake("class_label"), is_image=False)
    assert not serving_module.has_attention_signature(fake("symbol", False), is_image=False)
