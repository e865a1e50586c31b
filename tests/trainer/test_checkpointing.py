"""A run's checkpoints: stable names, save/restore, warm start, non-chief scratch."""

import os

import numpy as np
import pytest
import tensorflow as tf

from t2t.features import ProblemHParams
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model, variable_names
from t2t.trainer import optimizers, run_dir
from t2t.trainer.checkpointing import RunCheckpoints

PHP = ProblemHParams(modality={"inputs": "symbol", "targets": "symbol"},
                     vocab_size={"inputs": 5, "targets": 5})


def _model_and_optimizer(seed):
    tf.random.set_seed(seed)
    hparams = create_hparams("transformer_test")
    model = t2t_model.create_model("transformer", hparams, "train", PHP)
    model.build_weights()
    optimizer = optimizers.create_optimizer(hparams, 0.01)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def test_save_then_restore_model_and_optimizer(tmp_path):
    model, optimizer = _model_and_optimizer(1)
    optimizer.iterations.assign(7)
    saver = RunCheckpoints(model, optimizer, str(tmp_path), is_chief=True, keep=2)
    saver.track()
    path = saver.save(7)
    assert path.endswith("ckpt-7") and saver.save(7) == path  # once per step
    assert checkpoints.saved_model_names(path) == set(variable_names.named_variables(model))
    other, other_optimizer = _model_and_optimizer(2)
    reader = RunCheckpoints(other, other_optimizer, str(tmp_path), is_chief=True)
    reader.restore(reader.latest, "transformer")
    assert int(other_optimizer.iterations.numpy()) == 7
    for a, b in zip(model.variables, other.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_warm_start_reads_weights_only_and_names_a_missing_checkpoint(tmp_path):
    model, optimizer = _model_and_optimizer(1)
    optimizer.iterations.assign(4)
    saver = RunCheckpoints(model, optimizer, str(tmp_path / "a"), is_chief=True)
    saver.track()
    saver.save(4)
    other, other_optimizer = _model_and_optimizer(2)
    starter = RunCheckpoints(other, other_optimizer, str(tmp_path / "b"), is_chief=True)
    assert starter.warm_start(str(tmp_path / "a")).endswith("ckpt-4")
    assert int(other_optimizer.iterations.numpy()) == 0
    np.testing.assert_array_equal(model.variables[0].numpy(), other.variables[0].numpy())
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        starter.warm_start(str(tmp_path / "empty"))


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    model, optimizer = _model_and_optimizer(1)
    saver = RunCheckpoints(model, optimizer, str(tmp_path), is_chief=True)
    saver.track()
    saver.save(1)
    hparams = create_hparams("lstm_seq2seq", "hidden_size=8")
    lstm = t2t_model.create_model("lstm_seq2seq", hparams, "train", PHP)
    lstm.build_weights()
    lstm_optimizer = optimizers.create_optimizer(hparams, 0.01)
    lstm_optimizer.build(lstm.trainable_variables)
    reader = RunCheckpoints(lstm, lstm_optimizer, str(tmp_path), is_chief=True)
    with pytest.raises(run_dir.IncompatibleRunError, match="does not match model 'lstm_seq2seq'"):
        reader.restore(reader.latest, "lstm_seq2seq")


def test_non_chief_saves_into_a_scratch_folder_that_it_removes(tmp_path):
    model, optimizer = _model_and_optimizer(1)
    scratch = str(tmp_path / "tmp_workers" / "worker_1")
    saver = RunCheckpoints(model, optimizer, str(tmp_path), is_chief=False, scratch_dir=scratch)
    saver.track()
    assert saver.save(3) is None
    assert not os.path.exists(scratch) and not os.path.exists(os.path.dirname(scratch))
    assert saver.latest is None  # nothing in the run directory
