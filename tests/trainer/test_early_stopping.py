"""Early stopping (Tensor2Tensor's plateau rule) and the metric names it accepts."""

import pytest

from t2t.trainer import early_stopping as es


def test_the_plateau_rule_is_tensor2tensors():
    steps = [10, 20, 30, 40]
    # Decreasing by 0.5 per evaluation: never a plateau at delta 0.1.
    assert not es.has_metric_plateaued(steps, [3.0, 2.5, 2.0, 1.5], 20, 0.1)
    # Flat since step 20: within 20 steps of step 40 nothing improved by 0.1.
    assert es.has_metric_plateaued(steps, [3.0, 2.0, 1.99, 1.95], 20, 0.1)
    # Too early: no record 30 steps before the last one.
    assert not es.has_metric_plateaued(steps[:3], [3.0, 3.0, 3.0], 30, 0.1)
    # Upwards (accuracy): improving by 0.05 < delta 0.1 is a plateau.
    assert es.has_metric_plateaued(steps, [0.5, 0.6, 0.62, 0.65], 20, 0.1, decrease=False)
    assert not es.has_metric_plateaued(steps, [0.5, 0.6, 0.7, 0.8], 20, 0.1, decrease=False)
    with pytest.raises(ValueError, match="num_steps=0"):
        es.has_metric_plateaued(steps, [1, 1, 1, 1], 0, 0.1)


def test_metric_names_directions_and_errors():
    assert es.canonical_name("metrics-translate_ende_wmt32k/targets/approx_bleu_score") == "bleu"
    assert es.canonical_name("rouge_L_fscore") == "rouge_l"
    assert es.is_minimized("loss", None) and es.is_minimized("wer", None)
    assert not es.is_minimized("bleu", None) and not es.is_minimized("accuracy", False)
    assert not es.is_minimized("my_metric", False) and es.is_minimized("my_metric", None)
    with pytest.raises(es.MetricNameError, match="bleu improves upwards"):
        es.is_minimized("bleu", True)
    with pytest.raises(es.MetricNameError, match="Did you mean: accuracy"):
        es.check_metric("acuracy", ["loss", "accuracy"], "best_metric")


def test_a_rule_reads_the_history_and_says_why_it_stops():
    rule = es.StoppingRule.create("loss", steps=20, delta=0.1, minimize=None,
                                  reported=["loss", "accuracy"])
    history = [{"step": 10, "loss": 3.0}, {"step": 20, "loss": 2.0},
               {"step": 30, "loss": 1.97}]
    assert rule.check(history) is None  # 2.0 -> 1.97 since step 10's 3.0: improved
    reason = rule.check([*history, {"step": 40, "loss": 1.96}])
    assert reason.startswith("Early stopping at step 40: loss has not decreased by 0.1")
    assert "best 1.9600" in reason
    with pytest.raises(es.MetricNameError, match="eval_early_stopping_steps=-1"):
        es.StoppingRule.create("loss", -1, 0.1, None, ["loss"])
