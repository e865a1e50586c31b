"""Decode-time metrics at each evaluation: WER/CER of speech, BLEU/chrF of translation.

Teacher-forced accuracy and loss come from the evaluation batches; a word error rate
needs the model's own transcripts. So at each evaluation the loop greedily decodes the
first `examples` utterances of the eval split (t2t.decoding.decoder, the code
t2t-decoder runs) and scores them against their targets (t2t.decoding.decode_scores).
The figures join the evaluation's results: eval_results.jsonl, TensorBoard, the log.
"""

from __future__ import annotations

from typing import Any

AUTO = -1  # TrainerConfig.eval_decode_examples: decode where the problem needs it
AUTO_EXAMPLES = 200
_DECODE_BATCH = 16
# The problem's eval metric -> the scores of decode_scores.score_decodes it reports.
_REPORTED = {"wer": ("wer",), "cer": ("cer",), "bleu": ("bleu", "chrf")}
# Metrics without a teacher-forced stand-in, decoded by default (translation has
# accuracy and loss to watch; its BLEU is t2t-decoder's, or asked for here).
_DECODED_BY_DEFAULT = ("wer", "cer")


def examples_to_decode(requested: int, metric_names: list[str]) -> int:
    """How many eval examples to decode: `requested` (0: none), or with AUTO,
    AUTO_EXAMPLES when the problem reports WER/CER and 0 otherwise."""
    if requested < AUTO:
        raise ValueError(f"eval_decode_examples={requested}: use a count >= 0, or -1 for "
                         f"the default ({AUTO_EXAMPLES} for speech problems, else 0).")
    if not any(name in _REPORTED for name in metric_names):
        return 0
    if requested == AUTO:
        return AUTO_EXAMPLES if any(n in _DECODED_BY_DEFAULT for n in metric_names) else 0
    return requested


class EvalDecoder:
    """Greedy decodes of the first `examples` examples of `split`, scored: calling it
    gives {"wer", "cer"} or {"bleu", "chrf"} as the problem's eval_metrics name them.
    WER/CER (jiwer, t2t.decoding.speech_metrics) and BLEU/chrF are percentages.
    The decoder (and its traced decode) is kept from one evaluation to the next."""

    def __init__(self, model: Any, problem: Any, data_dir: str, split: str, examples: int):
        from t2t.config import DecodeHParams
        from t2t.decoding import decoder

        self.problem, self.split, self.examples = problem, split, examples
        self.decoder = decoder.Decoder(problem, model, data_dir,
                                       DecodeHParams(beam_size=1, batch_size=_DECODE_BATCH))

    def __call__(self) -> dict[str, float]:
        from t2t.decoding import decode_scores

        batches = -(-self.examples // _DECODE_BATCH)
        triples = self.decoder.decode_dev_set(batches, self.split)[: self.examples]
        names = list(self.problem.eval_metrics())
        scores = decode_scores.score_decodes([t[2] for t in triples], [t[1] for t in triples],
                                             names)
        return {key: float(scores[key]) for name in names for key in _REPORTED.get(name, ())}
