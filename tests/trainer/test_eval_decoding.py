"""Tests of t2t.trainer.eval_decoding without a model: which problems get decode metrics
at evaluation, how many examples they decode, the line said at the start, the checks made
before the first step, and the decoded accuracy's arithmetic. (Decoding a trained model
at each evaluation: tests/trainer/test_decoded_evaluation.py; the WER of a speech model
equal to t2t-decoder's: tests/bin/test_speech_binaries.py.)"""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest

from t2t.hparams.hparams import HParams
from t2t.trainer import eval_decoding
from t2t.utils import optional_deps

SPEECH = ["accuracy", "neg_log_perplexity", "wer", "cer"]
TRANSLATION = ["accuracy", "neg_log_perplexity", "bleu"]
SUMMARIZATION = ["accuracy", "neg_log_perplexity", "rouge_2", "rouge_l"]
ALGORITHMIC = ["accuracy", "accuracy_per_sequence"]
TEXT = {"inputs": "symbol", "targets": "symbol"}


class _Problem:
    name = "tiny_problem"

    def __init__(self, metrics):
        self.metrics = metrics

    def eval_metrics(self):
        return list(self.metrics)


def _task(metrics, autoregressive=False, modality=None, parts=1):
    """What plan_decoded_eval reads of a t2t.trainer.task.Task."""
    return types.SimpleNamespace(
        problem=_Problem(metrics), hparams=HParams(eval_run_autoregressive=autoregressive),
        eval_split="dev", problem_hparams=types.SimpleNamespace(modality=modality or TEXT),
        eval_parts=lambda: [("", None)] * parts)


def test_by_default_every_problem_naming_a_decode_metric_decodes():
    assert eval_decoding.examples_to_decode(-1, SPEECH) == 200
    assert eval_decoding.examples_to_decode(-1, TRANSLATION) == 100
    assert eval_decoding.examples_to_decode(-1, SUMMARIZATION) == 100
    assert eval_decoding.examples_to_decode(-1, ["bleu", "cer"]) == 200  # the largest
    assert eval_decoding.examples_to_decode(-1, ALGORITHMIC) == 0


def test_a_count_asks_for_decodes_where_a_decode_metric_is_named():
    assert eval_decoding.examples_to_decode(50, SPEECH) == 50
    assert eval_decoding.examples_to_decode(50, TRANSLATION) == 50
    assert eval_decoding.examples_to_decode(50, ALGORITHMIC) == 0  # nothing to score
    assert eval_decoding.examples_to_decode(0, SPEECH) == 0


def test_a_negative_count_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"eval_decode_examples=-2: use a count >= 0, or -1"):
        eval_decoding.examples_to_decode(-2, SPEECH)
    with pytest.raises(ValueError, match=r"eval_decode_examples=-2: "):
        eval_decoding.plan_decoded_eval(_task(TRANSLATION), -2, 1)


def test_the_start_line_says_what_each_evaluation_decodes_and_how_to_stop_it():
    plan = eval_decoding.plan_decoded_eval(_task(TRANSLATION), -1, 1)
    assert plan.enabled and plan.examples == 100 and not plan.autoregressive
    assert plan.announcement == ("Decoded evaluation: BLEU/chrF on the first 100 dev examples "
                                 "each evaluation (--eval_decode_examples=0 turns it off)")
    assert plan.reported_keys == ["bleu", "chrf"]
    summary = eval_decoding.plan_decoded_eval(_task(["bleu", *SUMMARIZATION]), 30, 1)
    assert summary.announcement.startswith(
        "Decoded evaluation: BLEU/chrF, ROUGE-1/2/L on the first 30 dev examples")
    assert summary.reported_keys == ["bleu", "chrf", "rouge_1", "rouge_2", "rouge_l"]
    speech = eval_decoding.plan_decoded_eval(_task(SPEECH), -1, 1)
    assert "WER/CER on the first 200 dev examples" in speech.announcement

    off = eval_decoding.plan_decoded_eval(_task(SUMMARIZATION), 0, 1)
    assert not off.enabled and off.reported_keys == []
    assert off.announcement == (
        "Decoded evaluation: off (--eval_decode_examples=0): ROUGE-1/2/L not computed during "
        "training; t2t-decoder --decode_reference scores decodes")
    multi = eval_decoding.plan_decoded_eval(_task(TRANSLATION, parts=2), -1, 1)
    assert not multi.enabled and "off for a multi-problem" in multi.announcement
    nothing = eval_decoding.plan_decoded_eval(_task(ALGORITHMIC), -1, 1)
    assert not nothing.enabled and nothing.announcement == ""


def test_eval_run_autoregressive_decodes_every_example_read():
    plan = eval_decoding.plan_decoded_eval(_task(TRANSLATION, autoregressive=True), 0, 2)
    assert plan.enabled and plan.autoregressive and plan.examples == 0
    assert plan.reported_keys == ["bleu", "chrf", "decoded/accuracy",
                                  "decoded/accuracy_per_sequence"]
    assert plan.announcement == (
        "Decoded evaluation: BLEU/chrF, decoded/accuracy, decoded/accuracy_per_sequence of "
        "greedy decodes of every dev example each evaluation reads (2 batches; hparams "
        "eval_run_autoregressive=False turns it off)")
    # Without decode metrics: the decoded accuracies alone (T2T's use), the whole split.
    alone = eval_decoding.plan_decoded_eval(_task(ALGORITHMIC, autoregressive=True), -1, 0)
    assert alone.reported_keys == ["decoded/accuracy", "decoded/accuracy_per_sequence"]
    assert "(the whole split;" in alone.announcement


@pytest.mark.parametrize("modality, parts, why", [
    ({"targets": "symbol"}, 1, "has no inputs"),
    ({"inputs": "image", "targets": "class_label"}, 1, "has class_label targets"),
    (TEXT, 2, "is a multi-problem (its tasks are evaluated apart)"),
])
def test_eval_run_autoregressive_is_refused_where_nothing_can_be_decoded(modality, parts, why):
    task = _task(ALGORITHMIC, autoregressive=True, modality=modality, parts=parts)
    with pytest.raises(ValueError, match=re.escape(
            f"hparams eval_run_autoregressive=True: tiny_problem {why};")) as error:
        eval_decoding.plan_decoded_eval(task, -1, 1)
    assert str(error.value).endswith("Set eval_run_autoregressive=False (t2t-decoder decodes "
                                     "the others).")


def test_eval_run_autoregressive_is_refused_on_packed_rows():
    task = _task(TRANSLATION, autoregressive=True)
    task.hparams.add_hparam("pack_dataset", True)
    with pytest.raises(ValueError, match=re.escape(
            "hparams eval_run_autoregressive=True and pack_dataset=True: packed evaluation "
            "rows hold several examples, which are not decoded apart. Set one of them False.")):
        eval_decoding.plan_decoded_eval(task, -1, 1)


@pytest.mark.parametrize("hidden, metrics, message", [
    (("rouge_score", "rouge_score.rouge_scorer"), SUMMARIZATION,
     "ROUGE needs rouge_score, which is not installed: pip install 't2t[summarization]'"),
    (("sacrebleu", "sacrebleu.metrics"), TRANSLATION,
     "BLEU and chrF need sacrebleu, which is not installed: pip install sacrebleu"),
    (("jiwer",), SPEECH, "WER/CER needs jiwer, which is not installed: pip install 't2t[speech]'"),
])
def test_a_missing_scorer_fails_when_the_loop_is_planned(monkeypatch, hidden, metrics, message):
    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(optional_deps.MissingDependencyError, match=re.escape(message)):
        eval_decoding.plan_decoded_eval(_task(metrics), -1, 1)
    # Nothing decoded, nothing needed.
    assert not eval_decoding.plan_decoded_eval(_task(metrics), 0, 1).enabled


def test_decoded_accuracy_compares_outputs_with_targets_position_by_position():
    # EOS is 1, padding 0; outputs are 0 after their EOS (greedy's).
    targets = np.array([[5, 6, 1, 0],    # exact
                        [5, 6, 7, 1],    # the output stops one token early
                        [5, 1, 0, 0],    # the output runs on past the target's EOS
                        [0, 0, 0, 0]])   # padding row: not counted
    outputs = np.array([[5, 6, 1, 0, 0],
                        [5, 6, 1, 0, 0],
                        [5, 6, 6, 6, 6],
                        [4, 1, 0, 0, 0]])
    sums = eval_decoding.decoded_accuracy_sums(outputs, targets)
    # tokens: 3 + 4 + 2 = 9; correct: 3 + 2 (5, 6) + 1 (5) = 6; sequences: 1 of 3.
    assert sums.tolist() == [6.0, 9.0, 1.0, 3.0]
    short = eval_decoding.decoded_accuracy_sums(np.array([[5]]), np.array([[5, 1]]))
    assert short.tolist() == [1.0, 2.0, 0.0, 1.0]  # a shorter output is padded, not cut
    with pytest.raises(ValueError, match=r"must be \[batch, length\] of the same batch"):
        eval_decoding.decoded_accuracy_sums(np.zeros([2, 3]), np.zeros([3, 3]))


def test_reported_scores_are_the_problems_figures_in_percent():
    from t2t.decoding import decode_scores

    hypotheses = ["the cat sat on the mat today", "a dog ran to the red house"]
    references = ["the cat sat on the mat", "a dog ran to the red house"]
    scores = decode_scores.score_decodes(hypotheses, references, SUMMARIZATION + ["bleu"])
    reported = eval_decoding.reported_scores(scores, SUMMARIZATION + ["bleu"])
    assert sorted(reported) == ["bleu", "chrf", "rouge_1", "rouge_2", "rouge_l"]
    # The first pair: 6 of 7 words (5 of 6 bigrams) found, all 6 (5) of the reference's:
    # F = 12/13 (10/11); the second pair is exact. The means, in percent.
    assert reported["rouge_1"] == pytest.approx(100 * (12 / 13 + 1) / 2)
    assert reported["rouge_2"] == pytest.approx(100 * (10 / 11 + 1) / 2)
    assert 0 < reported["bleu"] < 100 and reported["bleu"] == scores["bleu"]


def test_an_evaluation_reads_eval_steps_batches_per_local_replica():
    def hooks(replicas, parameter_server=False, mesh=None):
        devices = tuple(f"/cpu:{i}" for i in range(replicas))
        return types.SimpleNamespace(
            parameter_server=parameter_server,
            runtime=types.SimpleNamespace(mesh=mesh, num_replicas=replicas),
            strategy=types.SimpleNamespace(extended=types.SimpleNamespace(
                worker_devices=devices)))

    assert eval_decoding.eval_batches(3, hooks(1)) == 3
    assert eval_decoding.eval_batches(3, hooks(2)) == 6  # one batch per replica a step
    assert eval_decoding.eval_batches(3, hooks(2, parameter_server=True)) == 3
    assert eval_decoding.eval_batches(3, hooks(2, mesh="2x1")) == 3
    assert eval_decoding.eval_batches(0, hooks(2)) == 0  # the whole split
