"""Tests of t2t.decoding.text_metrics (ROUGE via Google's rouge-score)."""

from __future__ import annotations

import pytest

from t2t.decoding import text_metrics

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
