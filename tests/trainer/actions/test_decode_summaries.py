"""The decoded-examples action with a real (untrained) transformer and a real problem."""

import copy
import logging

import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.hparams.basic import create_hparams
from t2t.trainer.actions.base import EvalOutcome
from t2t.trainer.actions.decode_summaries import DecodeSummaries
from t2t.trainer.task import Task

PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    return Task(problem, "transformer", create_hparams("transformer_test", "batch_size=256"),
                data_dir, "dev")


def _texts(events_dir):
    found = []
    for path in tf.io.gfile.glob(f"{events_dir}/events.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.append((value.tag, tf.make_ndarray(value.tensor).item().decode()))
    return found


def test_the_batch_is_the_first_dev_examples_padded(task):
    batch = DecodeSummaries(task, count=3).summary_batch()
    dev = list(task.problem.dataset("eval", task.data_dir, deterministic=True).take(3))
    assert set(batch) == {"inputs", "targets"} and batch["inputs"].shape[0] == 3
    for key in ("inputs", "targets"):
        longest = max(int(tf.shape(example[key])[0]) for example in dev)
        assert batch[key].shape[1] == longest
        for row, example in zip(batch[key].numpy(), dev, strict=True):
            length = int(tf.shape(example[key])[0])
            assert row[:length].tolist() == example[key].numpy().tolist()
            assert not row[length:].any()  # padded with 0


@pytest.mark.slow  # ~10 CPU-s of decoding; the loop's decodes: tests/trainer/test_trainer.py
def test_decodes_the_first_dev_examples_greedily(task, tmp_path):
    model = task.build_model()
    action = DecodeSummaries(task, count=2)
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=10):
        action.after_eval(EvalOutcome(10, {"loss": 1.0}, None, model))
    writer.flush()
    [(tag, text)] = _texts(str(tmp_path))
    assert tag == "decoded_examples"
    encoder = task.problem.feature_encoders(task.data_dir)["targets"]
    dev = list(task.problem.dataset("eval", task.data_dir, deterministic=True).take(2))
    blocks = text.split("\n\n")
    assert len(blocks) == 2
    for block, example in zip(blocks, dev, strict=True):
        inputs, targets, outputs = block.split("  \n")
        assert inputs == "inputs: " + encoder.decode(example["inputs"].numpy().tolist(),
                                                     strip_extraneous=True)
        assert targets == "targets: " + encoder.decode(example["targets"].numpy().tolist(),
                                                       strip_extraneous=True)
        length = int(tf.shape(example["targets"])[0]) + 10
        ids = infer_lib.infer(model, {"inputs": example["inputs"][None]}, decode_length=length)
        assert outputs == "outputs: " + encoder.decode(ids["outputs"][0].numpy().tolist(),
                                                       strip_extraneous=True)


def test_bad_counts_fail_and_a_failure_is_logged_not_raised(task, caplog, tmp_path):
    with pytest.raises(ValueError, match="decode_summaries=-1: give the number"):
        DecodeSummaries(task, count=-1)
    assert DecodeSummaries(task, count=3).decodes
    missing = copy.copy(task)
    missing.data_dir = str(tmp_path)  # no dev data there
    with caplog.at_level(logging.WARNING):
        DecodeSummaries(missing, count=1).after_eval(EvalOutcome(10, {}, None, None))
    assert "Could not decode examples for TensorBoard" in caplog.text
