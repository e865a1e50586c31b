"""One decoded input (`DecodeResult`) and its line in a decodes file (`format_result`).

    format_result(DecodeResult("0 1", -0.3, [("0 1", -0.3)]), DecodeHParams())  # "0 1"
"""

from __future__ import annotations

import dataclasses

from t2t.config import DecodeHParams


@dataclasses.dataclass
class DecodeResult:
    """One decoded input: the best output, its score, and every beam (text, score)."""

    text: str
    score: float
    beams: list[tuple[str, float]]


def one_line(text: str, tabs: bool) -> str:
    """Text made safe for one line of a decodes file (and tab-free if tabs separate)."""
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return text.replace("\t", " ") if tabs else text


def format_result(result: DecodeResult, decode_hparams: DecodeHParams) -> str:
    """One output line: the best text, or every beam tab-separated (with scores)."""
    scores = decode_hparams.write_beam_scores
    every = decode_hparams.return_beams or decode_hparams.num_samples > 1
    tabs = scores or every
    beams = result.beams if every else [(result.text, result.score)]
    parts = []
    for text, score in beams:
        parts.append(one_line(text, tabs))
        if scores:
            parts.append(f"{score:.4f}")
    return "\t".join(parts)
