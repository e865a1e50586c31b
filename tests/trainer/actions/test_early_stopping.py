"""The early-stopping action: names checked at start, the rule read from eval_results."""

import pytest

from t2t.trainer import run_dir
from t2t.trainer.actions.base import EvalOutcome
from t2t.trainer.actions.early_stopping import EarlyStopping
from t2t.trainer.early_stopping import MetricNameError


def _outcome(step, loss):
    return EvalOutcome(step, {"loss": loss}, None, None)


def test_stops_once_the_recorded_metric_has_plateaued(tmp_path):
    out = str(tmp_path)
    action = EarlyStopping(out, "dev", "loss", steps=20, delta=0.1, minimize=None)
    assert action.start(["loss", "accuracy"]) == []
    for step, loss in [(10, 3.0), (20, 2.0), (30, 1.97)]:
        run_dir.append_eval_results(out, step, {"loss": loss})
        assert action.after_eval(_outcome(step, loss)) is None
    run_dir.append_eval_results(out, 40, {"loss": 1.96})
    reason = action.after_eval(_outcome(40, 1.96))
    assert reason.startswith("Early stopping at step 40: loss has not decreased by 0.1")


def test_another_splits_history_and_bad_names(tmp_path):
    out = str(tmp_path)
    action = EarlyStopping(out, "test", "loss", steps=10, delta=0.1, minimize=None)
    action.start(["loss"])
    for step in (10, 20, 30):  # a dev plateau says nothing about the test split
        run_dir.append_eval_results(out, step, {"loss": 1.0})
    assert action.after_eval(_outcome(30, 1.0)) is None
    with pytest.raises(MetricNameError, match="Did you mean: accuracy"):
        EarlyStopping(out, "dev", "acuracy", 10, 0.1, None).start(["loss", "accuracy"])
    with pytest.raises(RuntimeError, match="before start"):
        EarlyStopping(out, "dev", "loss", 10, 0.1, None).after_eval(_outcome(10, 1.0))
