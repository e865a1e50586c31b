"""Every registered sequence model speaks the step interface decoding drives."""

import pytest
import tensorflow as tf

from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import step_interface, t2t_model

SEQ2SEQ = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                         vocab_size={"inputs": 6, "targets": 6})


@pytest.mark.parametrize("name, hparams_set, cached", [
    ("transformer", "transformer_test", True),
    ("lstm_seq2seq", "lstm_seq2seq", False),
])
def test_one_step_gives_logits_over_the_vocabulary(name, hparams_set, cached):
    model = t2t_model.create_model(name, create_hparams(hparams_set, "hidden_size=8"),
                                   "infer", SEQ2SEQ)
    model.build_weights()
    assert isinstance(model, step_interface.Decodable) and model.has_decode_cache == cached
    inputs = tf.constant([[2, 3, 1], [4, 1, 0]])
    init = model.decode_init_cached if cached else model.decode_init
    step = model.decode_step_cached if cached else model.decode_step
    state = init({"inputs": inputs}, tf.constant(5))
    logits, state = step(tf.zeros([2], tf.int32), tf.constant(0), state)
    assert logits.shape == (2, 6) and logits.dtype == tf.float32
    if cached:
        assert step_interface.SLOTS in state
