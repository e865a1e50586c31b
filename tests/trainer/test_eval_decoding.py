"""Tests of t2t.trainer.eval_decoding: which problems get decode metrics at evaluation,
and how many examples they decode. (The decode itself, WER of a trained speech model
at each evaluation equal to t2t-decoder's on the same examples, is tested in
tests/bin/test_speech_binaries.py.)"""

from __future__ import annotations

import pytest

from t2t.trainer import eval_decoding

SPEECH = ["accuracy", "neg_log_perplexity", "wer", "cer"]
TRANSLATION = ["accuracy", "neg_log_perplexity", "bleu"]
ALGORITHMIC = ["accuracy", "accuracy_per_sequence"]


def test_by_default_speech_problems_decode_and_others_do_not():
    assert eval_decoding.examples_to_decode(-1, SPEECH) == eval_decoding.AUTO_EXAMPLES
    assert eval_decoding.examples_to_decode(-1, TRANSLATION) == 0
    assert eval_decoding.examples_to_decode(-1, ALGORITHMIC) == 0


def test_a_count_asks_for_decodes_where_a_decode_metric_is_named():
    assert eval_decoding.examples_to_decode(50, SPEECH) == 50
    assert eval_decoding.examples_to_decode(50, TRANSLATION) == 50
    assert eval_decoding.examples_to_decode(50, ALGORITHMIC) == 0  # nothing to score
    assert eval_decoding.examples_to_decode(0, SPEECH) == 0


def test_a_negative_count_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"eval_decode_examples=-2: use a count >= 0, or -1"):
        eval_decoding.examples_to_decode(-2, SPEECH)
