"""Tests of t2t.utils.metrics: Tensor2Tensor's metric names and t2t's for them."""

import pytest

from t2t.trainer import metrics as trainer_metrics
from t2t.utils import metrics


def test_constants_are_t2ts_strings():
    assert metrics.Metrics.ACC == "accuracy" and metrics.Metrics.ACC_TOP5 == "accuracy_top5"
    assert metrics.Metrics.NEG_LOG_PERPLEXITY == "neg_log_perplexity"
    assert metrics.Metrics.APPROX_BLEU == "approx_bleu_score"
    assert metrics.Metrics.ROUGE_L_F == "rouge_L_fscore"


def test_every_mapped_name_is_one_t2t_computes():
    known = set(trainer_metrics.TRAINABLE_METRICS) | set(trainer_metrics.DECODE_METRICS)
    assert set(metrics.T2T_TO_T2T.values()) <= known


def test_unsupported_names_say_what_to_use():
    with pytest.raises(metrics.UnsupportedMetricError, match="edit_distance.*'cer'"):
        metrics.canonical_metric_names(["accuracy", "edit_distance"], "my_problem")
    with pytest.raises(metrics.UnsupportedMetricError, match="my_problem: eval metric 'pearson'"):
        metrics.canonical_metric_names(["pearson"], "my_problem")
    # Names that are not T2T's pass through (the trainer checks them).
    assert metrics.canonical_metric_names(["wer", "cer"]) == ["wer", "cer"]
    assert metrics.canonical_metric_names(["image_summary"]) == []
