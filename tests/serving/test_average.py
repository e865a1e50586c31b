"""Checkpoint averaging: the mean of the float variables, readable by the decoder."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model, variable_names
from t2t.models.t2t_model import example_features
from t2t.serving import average
from tests.helpers.binaries import run_binary

PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A run with ckpt-10 and ckpt-20 of transformer_test (and an optimizer, as the
    trainer writes them), plus the expected values of each variable."""
    run = str(tmp_path_factory.mktemp("avg") / "run")
    keras.utils.set_random_seed(4)
    php = registry.problem(PROBLEM).hparams(None)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"),
                                   problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model), step=step), run, 5)
    named = variable_names.named_variables(model)
    snapshots = []
    for number in (10, 20):
        for index, variable in enumerate(named.values()):
            if variable.dtype.startswith("float"):
                rng = np.random.default_rng([number, index])
                variable.assign(rng.normal(size=variable.shape).astype(variable.dtype))
        step.assign(number)
        manager.save(checkpoint_number=number)
        snapshots.append({name: np.array(v.numpy()) for name, v in named.items()})
    with open(os.path.join(run, "run.json"), "w") as f:
        json.dump({"problem": PROBLEM, "model": "transformer", "hparams_set": "transformer_test"}, f)
    return run, snapshots


def test_average_of_two_checkpoints_is_their_mean(two_checkpoints, tmp_path, caplog):
    run, (first, second) = two_checkpoints
    written = average.average_checkpoints(run, str(tmp_path / "avg"), n=8)  # only 2 exist
    assert written == str(tmp_path / "avg" / "ckpt-20")
    assert "fewer than n=8" in caplog.text
    assert tf.train.latest_checkpoint(str(tmp_path / "avg")) == written
    assert json.load(open(tmp_path / "avg" / "run.json"))["model"] == "transformer"
    # The decoder's loader accepts it (every model variable matched) ...
    problem = registry.problem(PROBLEM)
    model = decoder_lib.load_model(problem, "transformer", create_hparams("transformer_test"),
                                   None, str(tmp_path / "avg"))
    named = variable_names.named_variables(model)
    floats = 0
    for name, variable in named.items():
        value = variable.numpy()
        if variable.dtype.startswith("float"):
            floats += 1
            np.testing.assert_allclose(value, (first[name] + second[name]) / 2, rtol=1e-6,
                                       err_msg=name)
        else:  # integer states come from the newest checkpoint
            np.testing.assert_array_equal(value, second[name], err_msg=name)
    assert floats > 30
    # ... and only the model is written (no optimizer, no step).
    keys = [k for k, _ in tf.train.list_variables(written)]
    assert not any(k.startswith("step") for k in keys)


def test_n_1_copies_the_newest_and_errors(two_checkpoints, tmp_path):
    run, (_, second) = two_checkpoints
    paths = average.last_checkpoints(run, 1)
    assert [os.path.basename(p) for p in paths] == ["ckpt-20"]
    _, values = average.average_values(paths)
    reader = tf.train.load_checkpoint(paths[0])
    for key, value in values.items():
        np.testing.assert_array_equal(value, reader.get_tensor(key))
    with pytest.raises(average.AverageError, match=f"no checkpoint in {tmp_path}: train first"):
        average.average_checkpoints(str(tmp_path), str(tmp_path / "out"))
    with pytest.raises(average.AverageError, match="must differ"):
        average.average_checkpoints(run, run)


def test_a_relative_run_directory_is_found(two_checkpoints, monkeypatch):
    run, _ = two_checkpoints  # README: t2t-avg-all --model_dir=t2t_train/reverse ...
    monkeypatch.chdir(os.path.dirname(os.path.dirname(run)))
    relative = os.path.relpath(run)
    assert [os.path.basename(p) for p in average.last_checkpoints(relative, 8)] == [
        "ckpt-10", "ckpt-20"]


def test_t2t_avg_all_binary(two_checkpoints, tmp_path):
    run, _ = two_checkpoints
    out = tmp_path / "avg"
    # The binary's main in this process (tests/helpers/binaries.py): no TensorFlow start.
    result = run_binary("t2t-avg-all", f"--model_dir={run}", f"--output_dir={out}", "--n=8")
    assert result.code == 0, result.err[-3000:]
    assert f"Averaged 2 checkpoint(s) of {run} (ckpt-10, ckpt-20) into {out}/ckpt-20" in result.out
    assert "only 2 checkpoint(s)" in result.err
    empty = run_binary("t2t-avg-all", f"--model_dir={tmp_path / 'none'}")
    assert empty.code == 1 and "error: no checkpoint in" in empty.err
    assert not empty.traceback
