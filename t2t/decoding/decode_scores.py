"""Scores of decodes against references: BLEU and chrF (sacrebleu), and what the
problem's metrics ask for on top (WER/CER: speech_metrics; ROUGE: text_metrics)."""

from __future__ import annotations

import importlib
import types
from collections.abc import Iterable, Sequence
from typing import Any

from t2t.decoding import speech_metrics, text_metrics
from t2t.utils import optional_deps


class DecodeError(ValueError):
    """A decoding request that cannot be served (missing checkpoint, bad settings...)."""


def require_sacrebleu() -> types.ModuleType:
    """sacrebleu's `metrics` module (a dependency of t2t itself, not an extra).

    Raises:
      MissingDependencyError: sacrebleu is not installed; one line with the pip command.
    """
    try:
        return importlib.import_module("sacrebleu.metrics")
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name in ("sacrebleu", "sacrebleu.metrics"):
            why = "which is not installed"
        else:  # installed, but broken or missing a dependency of its own
            why = f"which cannot be imported ({type(e).__name__}: {e})"
        raise optional_deps.MissingDependencyError(
            f"BLEU and chrF need sacrebleu, {why}: pip install sacrebleu",
            name="sacrebleu") from None


def score_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Corpus BLEU and chrF (sacrebleu, default settings) of line-aligned texts.

    Returns {"bleu", "chrf": scores 0-100, "bleu_signature", "chrf_signature":
    e.g. "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
    "bleu_text", "chrf_text": sacrebleu's one-line reports}.

    Raises:
      DecodeError: the two lists are not line-aligned.
      MissingDependencyError: sacrebleu is not installed.
    """
    metrics = require_sacrebleu()
    BLEU, CHRF = metrics.BLEU, metrics.CHRF  # noqa: N806 (sacrebleu's class names)
    if len(hypotheses) != len(references):
        raise DecodeError(
            f"{len(hypotheses)} translations but {len(references)} references: they must "
            f"be line-aligned, one per line."
        )
    hypotheses, references = list(hypotheses), [list(references)]
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, references)
    chrf_score = chrf.corpus_score(hypotheses, references)
    bleu_signature = f"{bleu_score.name}|{bleu.get_signature()}"
    chrf_signature = f"{chrf_score.name}|{chrf.get_signature()}"
    return {
        "bleu": float(bleu_score.score),
        "chrf": float(chrf_score.score),
        "bleu_signature": bleu_signature,
        "chrf_signature": chrf_signature,
        "bleu_text": bleu_score.format(signature=str(bleu.get_signature())),
        "chrf_text": chrf_score.format(signature=str(chrf.get_signature())),
    }


def score_decodes(hypotheses: Sequence[str], references: Sequence[str],
                  metric_names: Iterable[str] = ()) -> dict[str, Any]:
    """`score_bleu`'s scores, with WER/CER (speech_metrics.decode_scores) and ROUGE-1/2/L
    (`text_metrics.rouge_scores`' F, P, R as "rouge", and "rouge_signature") when
    `metric_names` (the problem's `eval_metrics()`) name them; "report": the lines to
    print (BLEU, chrF, then WER, CER or ROUGE-1, -2, -L).

    Raises:
      DecodeError: the two lists are not line-aligned.
      MissingDependencyError: ROUGE is asked for and rouge-score is not installed.
    """
    scores = score_bleu(hypotheses, references)  # checks the alignment
    scores["report"] = [scores["bleu_text"], scores["chrf_text"]]
    if speech_metrics.wants_error_rates(metric_names):
        scores.update(speech_metrics.decode_scores(hypotheses, references, scores["report"]))
    if text_metrics.wants_rouge(metric_names):
        rouge = text_metrics.rouge_scores(hypotheses, references)
        scores["rouge"] = {name: value for name, value in rouge.items() if name != "count"}
        scores["rouge_signature"] = text_metrics.rouge_signature()
        scores["report"] += text_metrics.format_rouge(rouge, scores["rouge_signature"])
    return scores
