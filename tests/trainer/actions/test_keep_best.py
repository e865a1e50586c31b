"""The best-checkpoint action: a real checkpoint offered after each evaluation."""

import os

import pytest
import tensorflow as tf

from t2t.trainer import best_checkpoints
from t2t.trainer.actions.base import EvalOutcome
from t2t.trainer.actions.keep_best import KeepBest
from t2t.trainer.early_stopping import MetricNameError


def test_keeps_the_best_evaluated_checkpoint_and_says_so(tmp_path, capsys):
    out = str(tmp_path)
    weight = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(weight=weight)
    action = KeepBest(out, "dev", keep=1, metric="accuracy", minimize=None, flag="best_metric")
    assert action.saves_evaluated_steps and action.start(["loss", "accuracy"]) == []
    for step, accuracy in [(10, 0.5), (20, 0.7), (30, 0.6)]:
        weight.assign(float(step))
        prefix = checkpoint.write(os.path.join(out, f"ckpt-{step}"))
        action.after_eval(EvalOutcome(step, {"accuracy": accuracy}, prefix, None))
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "Best accuracy so far (0.5000 at step 10): best/ckpt-10 (t2t-decoder --checkpoint_path=best).",
        "Best accuracy so far (0.7000 at step 20): best/ckpt-20 (t2t-decoder --checkpoint_path=best).",
    ]
    record = best_checkpoints.read_record(out)
    assert record["minimize"] is False and [c["step"] for c in record["checkpoints"]] == [20]
    restored = tf.Variable(0.0)
    tf.train.Checkpoint(weight=restored).read(os.path.join(out, "best", "ckpt-20")).expect_partial()
    assert float(restored) == 20.0
    # Not saved at the evaluated step, or without the metric: nothing is offered.
    action.after_eval(EvalOutcome(40, {"accuracy": 0.9}, None, None))
    action.after_eval(EvalOutcome(50, {"loss": 0.1}, prefix, None))
    assert [c["step"] for c in best_checkpoints.read_record(out)["checkpoints"]] == [20]


def test_names_and_counts_are_checked_at_start(tmp_path):
    with pytest.raises(MetricNameError, match="--best_metric=acuracy.*Did you mean: accuracy"):
        KeepBest(str(tmp_path), "dev", 1, "acuracy", None, "best_metric").start(["accuracy"])
    with pytest.raises(ValueError, match="--keep_best=-1: give how many"):
        KeepBest(str(tmp_path), "dev", -1, "loss", None, "best_metric").start(["loss"])
