"""infer.infer: decoding any model through its step interface (t2t.models.step_interface).

The search algorithms themselves are tested in test_greedy, test_beam_search and
test_sampling; the models' step functions in tests/models."""

import numpy as np
import pytest
import tensorflow as tf

from t2t.decoding import infer
from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model

VOCAB = 6


def _model(problem):
    tf.random.set_seed(3)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"), "infer",
                                   problem)
    model.build_weights()
    return model


def test_class_label_problems_return_the_best_classes_first():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "class_label"},
                             vocab_size={"inputs": VOCAB, "targets": 4})
    model = _model(problem)
    inputs = tf.constant([[2, 3, 1], [4, 1, 0]])
    result = infer.infer(model, {"inputs": inputs}, top_beams=3)
    assert result["outputs"].shape == (2, 3, 1) and result["scores"].shape == (2, 3)
    scores = result["scores"].numpy()
    assert np.all(scores[:, :-1] >= scores[:, 1:])
    best = infer.infer(model, {"inputs": inputs})
    np.testing.assert_array_equal(best["outputs"].numpy()[:, 0], result["outputs"].numpy()[:, 0, 0])


def test_targets_given_are_ignored_and_bad_beams_refused():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                             vocab_size={"inputs": VOCAB, "targets": VOCAB})
    model = _model(problem)
    inputs = tf.constant([[2, 3, 1]])
    plain = infer.infer(model, {"inputs": inputs}, decode_length=4)
    with_targets = infer.infer(model, {"inputs": inputs, "targets": tf.ones([1, 9], tf.int32)},
                               decode_length=4)
    np.testing.assert_array_equal(plain["outputs"].numpy(), with_targets["outputs"].numpy())
    with pytest.raises(ValueError, match="1 <= top_beams <= beam_size"):
        infer.infer(model, {"inputs": inputs}, decode_length=3, beam_size=2, top_beams=3)


def _until_eos(row: list[int]) -> list[int]:
    return row[: row.index(1)] if 1 in row else row


def test_force_decode_length_gives_exact_lengths_per_row_with_beams_and_prompts():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                             vocab_size={"inputs": VOCAB, "targets": VOCAB})
    model = _model(problem)
    inputs = tf.constant([[2, 3, 1], [4, 1, 0]])
    greedy = infer.infer(model, {"inputs": inputs}, tf.constant([2, 5]), force_decode_length=True)
    rows = greedy["outputs"].numpy().tolist()
    assert [len(_until_eos(r)) for r in rows] == [2, 5] and all(1 in r for r in rows)
    beams = infer.infer(model, {"inputs": inputs}, 4, beam_size=3, top_beams=3,
                        force_decode_length=True)["outputs"].numpy()
    assert [len(_until_eos(b)) for row in beams.tolist() for b in row] == [4] * 6
    # After a forced prefix: exactly the budget's tokens after each row's own prefix.
    prompt = tf.constant([[5, 5, 5], [3, 0, 0]])
    after = infer.infer(model, {"inputs": inputs, "prompt": prompt}, tf.constant([1, 3]),
                        force_decode_length=True, num_samples=2, temperature=1.0, seed=1)
    assert [len(_until_eos(s)) for row in after["outputs"].numpy().tolist() for s in row] == \
        [1, 1, 3, 3]


def test_first_sample_numbers_a_rows_samples():
    problem = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                             vocab_size={"inputs": VOCAB, "targets": VOCAB})
    model = _model(problem)
    inputs = tf.constant([[2, 3, 1], [4, 1, 0]])
    three = infer.infer(model, {"inputs": inputs}, 5, temperature=1.0, seed=7, num_samples=3)
    third = infer.infer(model, {"inputs": inputs}, 5, temperature=1.0, seed=7, first_sample=2)
    np.testing.assert_array_equal(three["outputs"].numpy()[:, 2], third["outputs"].numpy())
    np.testing.assert_allclose(three["scores"].numpy()[:, 2], third["scores"].numpy(), atol=1e-5)
