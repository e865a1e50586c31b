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
