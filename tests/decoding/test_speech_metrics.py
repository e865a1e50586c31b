"""Tests of t2t.decoding.speech_metrics: corpus WER/CER (jiwer), normalization, report."""

from __future__ import annotations

import pytest

from t2t.decoding import decode_scores, speech_metrics


def test_normalization_keeps_letters_digits_and_apostrophes():
    assert speech_metrics.normalize("  Hello, World! It's 42.\tOK ") == "hello world it's 42 ok"


def test_wer_is_a_corpus_rate_not_a_mean_of_utterances():
    refs = ["the cat sat on the mat", "hello world"]
    hyps = ["the cat sat on mat", "hello there world"]  # 1 deletion; 1 insertion
    rates = speech_metrics.error_rates(hyps, refs)
    assert rates["wer"] == pytest.approx(100 * 2 / 8)  # per utterance: 16.7% and 50%
    assert (rates["substitutions"], rates["deletions"], rates["insertions"]) == (0, 1, 1)
    assert rates["words"] == 8 and rates["count"] == 2
    # CER: "the " deleted (4 characters) and "there " inserted (6) of 33 (spaces count)
    assert rates["cer"] == pytest.approx(100 * 10 / 33) and rates["characters"] == 33


def test_case_and_punctuation_do_not_count_and_empty_references_are_left_out():
    rates = speech_metrics.error_rates(["Return the ITEMS.", "anything"], ["return the items", " , "])
    assert rates["wer"] == 0.0 and rates["cer"] == 0.0 and rates["skipped"] == 1


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        speech_metrics.error_rates(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no reference transcript has a word"):
        speech_metrics.error_rates(["a"], ["!"])


def test_the_report_states_the_normalization_and_counts():
    lines = speech_metrics.format_error_rates(
        speech_metrics.error_rates(["the cat sat"], ["the cat sat down"]))
    assert lines[0].startswith("WER|norm:lowercase,keep:letters+digits+apostrophe")
    assert "|jiwer:" in lines[0] and "= 25.00 (S 0, D 1, I 0 of 4 words in 1 utterances)" in lines[0]
    assert lines[1].startswith("CER|") and "of 16 characters" in lines[1]


def test_score_decodes_adds_wer_when_the_problem_asks():
    plain = decode_scores.score_decodes(["a b"], ["a b c"])
    assert "wer" not in plain
    scores = decode_scores.score_decodes(["a b"], ["a b c"], ["accuracy", "wer", "cer"])
    assert scores["wer"] == pytest.approx(100 / 3)
    assert any(line.startswith("WER|") for line in scores["report"])
