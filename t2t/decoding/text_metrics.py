"""Scores of decoded text against references: ROUGE, for summarization.

`rouge_scores(hypotheses, references)` computes ROUGE-1, ROUGE-2 and ROUGE-L with
Google's `rouge-score` package (a maintained Python reimplementation of the official
ROUGE-1.5.5 Perl script, `pip install rouge-score`), and averages each pair's
precision, recall and F-measure over the corpus, as summarization papers report them
(ROUGE-1.5.5's "average" model). Scores are on a 0-100 scale, like BLEU's.

The names match the decode-time metric names of `t2t.trainer.metrics`: "rouge_1",
"rouge_2" and "rouge_l" are F-measures (ROUGE-L on the longest common subsequence of the
whole text, not the per-sentence "summary-level" ROUGE-Lsum). A problem naming any of
them gets all three from t2t-decoder --decode_reference and at each training
evaluation (t2t.trainer.eval_decoding).

rouge-score's default tokenizer lower-cases and keeps only ASCII letters and digits,
so it suits English; `use_stemmer` (on by default, as ROUGE-1.5.5's `-m` option that
summarization results are usually computed with) applies NLTK's Porter stemmer, which
needs no data download.

`rouge_signature()` names those settings and the package version, as sacrebleu's
signatures do ("nrefs:1|tok:default|stem:porter|agg:mean|version:0.1.2"), and
`format_rouge` gives t2t-decoder's report lines, one per ROUGE type.
"""

from __future__ import annotations

import importlib.metadata
import types
from collections.abc import Iterable, Sequence
from typing import Any

from t2t.utils import optional_deps

# rouge-score's type name -> the name reported here.
ROUGE_TYPES = {"rouge1": "rouge_1", "rouge2": "rouge_2", "rougeL": "rouge_l"}
# The reported name -> its name in report lines.
ROUGE_LABELS = {"rouge_1": "ROUGE-1", "rouge_2": "ROUGE-2", "rouge_l": "ROUGE-L"}


def wants_rouge(metric_names: Iterable[str]) -> bool:
    """Whether a problem's metric names (`problem.eval_metrics()`) ask for ROUGE."""
    return any(name in ROUGE_LABELS for name in metric_names)


def require_rouge() -> types.ModuleType:
    """rouge-score's `rouge_scorer` module.

    Raises:
      MissingDependencyError: rouge-score (setup.py's extra "summarization") is not
        installed; the message is one line naming the pip command.
    """
    return optional_deps.require("rouge_score.rouge_scorer", "summarization", "ROUGE")


def rouge_scores(
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    use_stemmer: bool = True,
    tokenizer: Any = None,
) -> dict[str, float]:
    """Mean ROUGE-1/2/L of line-aligned hypotheses and references, 0-100.

    Returns {"rouge_1", "rouge_2", "rouge_l": mean F-measures, the same names with
    "_p" / "_r" appended: mean precisions / recalls, "count": number of pairs}.
    An empty hypothesis scores 0 against its reference.

    Raises:
      ValueError: the two lists differ in length or are empty.
      MissingDependencyError (an ImportError): rouge-score, setup.py's extra
        "summarization", is not installed.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: they must be "
            "aligned, one per example."
        )
    if not hypotheses:
        raise ValueError("no hypotheses to score")
    rouge_scorer = require_rouge()
    scorer = rouge_scorer.RougeScorer(
        list(ROUGE_TYPES), use_stemmer=use_stemmer, tokenizer=tokenizer
    )
    sums = {f"{name}{part}": 0.0 for name in ROUGE_TYPES.values() for part in ("", "_p", "_r")}
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        scores = scorer.score(reference, hypothesis)  # (target, prediction)
        for rouge_type, name in ROUGE_TYPES.items():
            score = scores[rouge_type]
            sums[name] += score.fmeasure
            sums[f"{name}_p"] += score.precision
            sums[f"{name}_r"] += score.recall
    result = {key: 100.0 * value / len(hypotheses) for key, value in sums.items()}
    result["count"] = float(len(hypotheses))
    return result


def rouge_signature(*, use_stemmer: bool = True, tokenizer: Any = None) -> str:
    """The settings `rouge_scores` ran with, e.g.
    "nrefs:1|tok:default|stem:porter|agg:mean|version:0.1.2" (version: rouge-score's)."""
    try:
        version = importlib.metadata.version("rouge-score")
    except importlib.metadata.PackageNotFoundError:  # imported from a source tree
        version = "unknown"
    tok = "default" if tokenizer is None else type(tokenizer).__name__
    stem = "porter" if use_stemmer else "no"
    return f"nrefs:1|tok:{tok}|stem:{stem}|agg:mean|version:{version}"


def format_rouge(scores: dict[str, float], signature: str) -> list[str]:
    """Report lines of `rouge_scores`' result, one per type: F-measure first, e.g.
    "ROUGE-2|nrefs:1|...|version:0.1.2 = 12.34 F (P 10.00, R 20.00)"."""
    return [
        f"{label}|{signature} = {scores[name]:.2f} F "
        f"(P {scores[name + '_p']:.2f}, R {scores[name + '_r']:.2f})"
        for name, label in ROUGE_LABELS.items()
    ]
