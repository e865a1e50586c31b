"""Tests of t2t.decoding.text_metrics (ROUGE via Google's rouge-score)."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from t2t.decoding import text_metrics
from t2t.trainer.metrics import DECODE_METRICS
from t2t.utils.optional_deps import MissingDependencyError

pytest.importorskip("rouge_score")


def test_identical_texts_score_100():
    scores = text_metrics.rouge_scores(["the cat sat on the mat ."], ["the cat sat on the mat ."])
    for name in ("rouge_1", "rouge_2", "rouge_l"):
        assert scores[name] == pytest.approx(100.0)
        assert scores[f"{name}_p"] == scores[f"{name}_r"] == pytest.approx(100.0)
    assert scores["count"] == 1


def test_known_values_and_mean_over_pairs():
    hyp, ref = "the cat was on the mat", "the cat sat on the mat"
    one = text_metrics.rouge_scores([hyp], [ref])
    # Bigrams: 3 of 5 shared -> 60; LCS "the cat on the mat" = 5 of 6 tokens -> 83.3.
    assert one["rouge_2"] == pytest.approx(60.0)
    assert one["rouge_l"] == pytest.approx(500 / 6)
    assert one["rouge_1"] == pytest.approx(500 / 6)
    two = text_metrics.rouge_scores([hyp, ref], [ref, ref])
    assert two["rouge_2"] == pytest.approx((60.0 + 100.0) / 2) and two["count"] == 2


def test_precision_recall_and_empty_hypothesis():
    scores = text_metrics.rouge_scores(["the cat"], ["the cat sat on the mat"])
    assert scores["rouge_1_p"] == pytest.approx(100.0)
    assert scores["rouge_1_r"] == pytest.approx(200 / 6)
    assert text_metrics.rouge_scores([""], ["the cat"])["rouge_l"] == 0.0


def test_stemming():
    stemmed = text_metrics.rouge_scores(["cats running"], ["cat runs"])
    plain = text_metrics.rouge_scores(["cats running"], ["cat runs"], use_stemmer=False)
    assert stemmed["rouge_1"] == pytest.approx(100.0) and plain["rouge_1"] == 0.0


def test_misaligned_or_empty_input():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        text_metrics.rouge_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no hypotheses"):
        text_metrics.rouge_scores([], [])


def test_wants_rouge_and_the_decode_metric_names():
    assert text_metrics.wants_rouge(["accuracy", "rouge_2", "rouge_l"])
    assert text_metrics.wants_rouge(("rouge_1",))
    assert not text_metrics.wants_rouge(["accuracy", "bleu"]) and not text_metrics.wants_rouge([])
    # The names problems declare (trainer.metrics.DECODE_METRICS) are names reported here.
    declared = [name for name in DECODE_METRICS if name.startswith("rouge")]
    assert declared and set(declared) <= set(text_metrics.ROUGE_LABELS)
    assert set(text_metrics.ROUGE_LABELS) == set(text_metrics.ROUGE_TYPES.values())


def test_signature_and_report_lines():
    version = importlib.metadata.version("rouge-score")
    assert text_metrics.rouge_signature() == (
        f"nrefs:1|tok:default|stem:porter|agg:mean|version:{version}")
    assert "|stem:no|" in text_metrics.rouge_signature(use_stemmer=False)
    scores = text_metrics.rouge_scores(["the cat was on the mat"], ["the cat sat on the mat"])
    lines = text_metrics.format_rouge(scores, "SIG")
    assert lines == ["ROUGE-1|SIG = 83.33 F (P 83.33, R 83.33)",
                     "ROUGE-2|SIG = 60.00 F (P 60.00, R 60.00)",
                     "ROUGE-L|SIG = 83.33 F (P 83.33, R 83.33)"]
    short = text_metrics.format_rouge(text_metrics.rouge_scores(["the cat"], ["the cat sat"]), "S")
    assert short[0] == "ROUGE-1|S = 80.00 F (P 100.00, R 66.67)"


def test_require_rouge_names_the_extra(monkeypatch):
    assert text_metrics.require_rouge().RougeScorer
    monkeypatch.setitem(sys.modules, "rouge_score", None)  # import fails: not installed
    monkeypatch.setitem(sys.modules, "rouge_score.rouge_scorer", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 't2t\[summarization\]'"):
        text_metrics.require_rouge()
    with pytest.raises(MissingDependencyError, match="^ROUGE needs rouge_score"):
        text_metrics.rouge_scores(["a"], ["a"])
