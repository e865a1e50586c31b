"""Word and character error rates of transcripts (jiwer), for speech recognition.

`error_rates(hypotheses, references)` normalizes both sides the same way (NORMALIZATION:
lowercased, every character that is not a letter, digit, apostrophe or space replaced by
a space, whitespace collapsed), then computes corpus-level rates with `jiwer`: WER =
(substitutions + deletions + insertions) / reference words, summed over all utterances
(not a mean of per-utterance rates), CER the same over characters. Rates are percentages
and can exceed 100 (insertions). A pair whose reference normalizes to nothing has no
words to divide by: it is left out and counted ("skipped").

`format_error_rates` gives t2t-decoder's report line with the normalization and jiwer's
version, as sacrebleu's signature does for BLEU.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Sequence

from t2t.utils import optional_deps

NORMALIZATION = "lowercase,keep:letters+digits+apostrophe,collapse-spaces"
METRICS = ("wer", "cer")


def wants_error_rates(metric_names: Iterable[str]) -> bool:
    """Whether a problem's metric names (`problem.eval_metrics()`) ask for WER/CER."""
    return any(name in METRICS for name in metric_names)


def normalize(text: str) -> str:
    """`text` as it is scored: lowercased, only letters, digits, apostrophes and single
    spaces."""
    kept = "".join(c if c.isalnum() or c in "' " else " " for c in text.lower())
    return " ".join(kept.split())


def error_rates(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Corpus WER and CER (0-100) of line-aligned transcripts.

    Returns {"wer", "cer", "substitutions", "deletions", "insertions", "words" (reference
    words), "characters", "count" (pairs scored), "skipped" (empty references)}.

    Raises:
      ValueError: the lists differ in length, or no reference has a word.
      MissingDependencyError: jiwer (setup.py's extra "speech") is not installed.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: "
                         f"they must be aligned, one per utterance.")
    jiwer = optional_deps.require("jiwer", "speech", "WER/CER")
    pairs = [(normalize(h), normalize(r)) for h, r in zip(hypotheses, references, strict=True)]
    scored = [(h, r) for h, r in pairs if r]
    if not scored:
        raise ValueError("no reference transcript has a word to score against.")
    hyps, refs = [h for h, _ in scored], [r for _, r in scored]
    words = jiwer.process_words(refs, hyps)
    chars = jiwer.process_characters(refs, hyps)
    ref_words = sum(len(r.split()) for r in refs)
    return {"wer": 100.0 * words.wer, "cer": 100.0 * chars.cer,
            "substitutions": float(words.substitutions), "deletions": float(words.deletions),
            "insertions": float(words.insertions), "words": float(ref_words),
            "characters": float(sum(len(r) for r in refs)), "count": float(len(scored)),
            "skipped": float(len(pairs) - len(scored))}


def signature() -> str:
    """"norm:...|agg:corpus|jiwer:4.0.0": how `error_rates` scored."""
    try:
        version = importlib.metadata.version("jiwer")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"norm:{NORMALIZATION}|agg:corpus|jiwer:{version}"


def format_error_rates(rates: dict[str, float]) -> list[str]:
    """Report lines, e.g. "WER|norm:...|jiwer:4.0.0 = 12.50 (S 3, D 1, I 1 of 40 words)"."""
    sig = signature()
    skipped = (f"; {int(rates['skipped'])} empty reference(s) left out"
               if rates.get("skipped") else "")
    return [f"WER|{sig} = {rates['wer']:.2f} (S {int(rates['substitutions'])}, "
            f"D {int(rates['deletions'])}, I {int(rates['insertions'])} of "
            f"{int(rates['words'])} words in {int(rates['count'])} utterances{skipped})",
            f"CER|{sig} = {rates['cer']:.2f} (of {int(rates['characters'])} characters)"]


def decode_scores(hypotheses: Sequence[str], references: Sequence[str], report: list[str]
                  ) -> dict[str, object]:
    """t2t-decoder's WER/CER entries: {"wer", "cer", "error_rates": `error_rates`' dict,
    "error_rates_signature"}; appends `format_error_rates`' lines to `report`."""
    rates = error_rates(hypotheses, references)
    report += format_error_rates(rates)
    return {"wer": rates["wer"], "cer": rates["cer"], "error_rates": rates,
            "error_rates_signature": signature()}
