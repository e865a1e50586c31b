"""Tests of beam search and greedy decoding, and of the Transformer's cached decoder."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.problem import ProblemHParams
from t2t.decoding import beam_search
from t2t.decoding import infer as infer_lib
from t2t.hparams.basic import create_hparams
from t2t.models.t2t_model import example_features

VOCAB, EOS = 4, 1
# A first-order Markov "model": log P(next | previous), rows sum to 1.
TABLE = np.log(np.array([
    [0.05, 0.15, 0.5, 0.3],   # after id 0 (the start)
    [0.25, 0.25, 0.25, 0.25],  # after EOS (never used)
    [0.1, 0.5, 0.1, 0.3],
    [0.1, 0.2, 0.6, 0.1],
], np.float32))


def markov_step(previous_ids, index, state):
    return tf.gather(tf.constant(TABLE), previous_ids), state


def _exhaustive(length, alpha):
    """Every sequence up to `length`, ending at EOS or at the length limit."""
    best = []
    for n in range(1, length + 1):
        for seq in itertools.product(range(VOCAB), repeat=n):
            if EOS in seq[:-1] or (seq[-1] != EOS and n < length) or 0 in seq:
                continue
            previous = (0,) + seq[:-1]
            log_prob = sum(TABLE[p, s] for p, s in zip(previous, seq, strict=True))
            best.append((log_prob / ((5 + n) / 6) ** alpha, seq))
    return sorted(best, reverse=True)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_beam_search_finds_the_best_sequences(alpha):
    length, beam = 4, 8
    ids, scores = beam_search.beam_search(markov_step, {"dummy": tf.zeros([beam, 1])},
                                          tf.constant(1), beam, length, VOCAB, alpha=alpha,
                                          eos_id=EOS, top_beams=3)
    expected = [e for e in _exhaustive(length, alpha) if e[1][-1] == EOS][:3]
    got = [tuple(int(t) for t in row if t) for row in ids.numpy()[0]]
    assert got == [seq for _, seq in expected]
    np.testing.assert_allclose(scores.numpy()[0], [s for s, _ in expected], rtol=1e-5)


def test_length_penalty_and_tiling():
    assert float(beam_search.length_penalty(5, 1.0)) == pytest.approx(10 / 6)
    assert float(beam_search.length_penalty(7, 0.0)) == 1.0
    tiled = beam_search.tile_beams(tf.constant([[1, 2], [3, 4]]), 3)
    assert tiled.numpy().tolist() == [[1, 2]] * 3 + [[3, 4]] * 3


@pytest.fixture(scope="module")
def model():
    php = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 12, "targets": 12})
    m = registry.model("transformer")(create_hparams("transformer_test"), "infer", php)
    m.build_for(example_features(php))
    return m


@pytest.mark.parametrize("kwargs", [{}, {"beam_size": 4, "alpha": 0.6},
                                    {"beam_size": 3, "top_beams": 2, "alpha": 0.0}])
def test_cached_decoding_equals_uncached(model, kwargs):
    inputs = tf.constant([[3, 4, 5, 6, 1, 0], [7, 8, 1, 0, 0, 0], [2, 9, 9, 9, 9, 1]])
    cached = infer_lib.infer(model, {"inputs": inputs}, decode_length=9, **kwargs)
    uncached = infer_lib.infer(model, {"inputs": inputs}, decode_length=9, use_cache=False, **kwargs)
    np.testing.assert_array_equal(cached["outputs"].numpy(), uncached["outputs"].numpy())
    np.testing.assert_allclose(cached["scores"].numpy(), uncached["scores"].numpy(), atol=1e-4)
    expected_shape = [3, kwargs["top_beams"], 9] if kwargs.get("top_beams", 1) > 1 else [3, 9]
    assert cached["outputs"].shape.as_list() == expected_shape


def test_beam_one_equals_greedy(model):
    inputs = tf.constant([[3, 4, 5, 1], [7, 8, 1, 0]])
    greedy_out = infer_lib.infer(model, {"inputs": inputs}, decode_length=7)
    beam_out = infer_lib.infer(model, {"inputs": inputs}, decode_length=7, beam_size=1)
    np.testing.assert_array_equal(greedy_out["outputs"].numpy(), beam_out["outputs"].numpy())


def test_infer_in_a_tf_function_with_dynamic_length(model):
    @tf.function
    def decode(inputs):
        return infer_lib.infer(model, {"inputs": inputs}, decode_length=tf.shape(inputs)[1] + 3, beam_size=2)

    assert decode(tf.constant([[3, 4, 1]]))["outputs"].shape.as_list() == [1, 6]
    assert decode(tf.constant([[3, 4, 5, 6, 1]]))["outputs"].shape.as_list() == [1, 8]


def test_bad_beam_arguments(model):
    with pytest.raises(ValueError, match="top_beams <= beam_size"):
        infer_lib.infer(model, {"inputs": tf.constant([[3, 1]])}, decode_length=3, beam_size=2, top_beams=3)


def test_transformers_rule_keeps_only_eos_candidates_among_the_best_beams():
    """beam_search_rule "transformers" (generate's): an EOS candidate counts as finished
    only within the k best of the step's 2k candidates, and at the last position the k
    best count, ended or cut. 2 beams, length 2: at step 0 EOS (0.15) is the 3rd
    candidate, kept by t2t only; at step 1 the cut [3, 2] (0.18) is the 2nd best, kept by
    transformers only."""
    def run(rule):
        ids, scores = beam_search.beam_search(
            markov_step, {"dummy": tf.zeros([2, 1])}, tf.constant(1), 2, 2, VOCAB,
            alpha=0.0, eos_id=EOS, top_beams=2, rule=rule)
        return ([[int(t) for t in row if t] for row in ids.numpy()[0]],
                np.exp(scores.numpy()[0]))

    t2t, t2t_probabilities = run("t2t")
    assert t2t == [[2, 1], [1]]
    np.testing.assert_allclose(t2t_probabilities, [0.25, 0.15], rtol=1e-5)
    transformers, probabilities = run("transformers")
    assert transformers == [[2, 1], [3, 2]]
    np.testing.assert_allclose(probabilities, [0.25, 0.18], rtol=1e-5)
    with pytest.raises(ValueError, match="Unknown beam_search_rule 'hf'"):
        run("hf")
