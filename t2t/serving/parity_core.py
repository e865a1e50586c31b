"""The pieces shared by the parity gates (t2t.serving.parity, t2t.serving.lm_parity).

Serving batches from the export in a fresh process (t2t/serving/parity_worker.py, started
by path), comparing the served outputs with t2t's DecodeResults (texts equal, scores
within SCORE_TOLERANCE) and raising ParityError that lists the differences.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging as std_logging
import os
import subprocess
import sys
import tempfile
from typing import Any

from absl import logging

from t2t.decoding import decoder as decoder_lib
from t2t.serving import parity_worker
from t2t.serving.serving_module import TEXT_SIGNATURE, ExportError

SCORE_TOLERANCE = 1e-3
WORKER_TIMEOUT_S = 1800


class ParityError(ExportError):
    """The SavedModel, loaded in a fresh process, decodes differently from t2t."""


@contextlib.contextmanager
def quiet(name: str, level: int = std_logging.ERROR):
    """Raises the level of the Python logger `name` for a while."""
    logger = std_logging.getLogger(name)
    previous = logger.level
    logger.setLevel(max(level, previous))
    try:
        yield
    finally:
        logger.setLevel(previous)


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """`items` in consecutive batches of `size` (the last one may be shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def encode_batches(batches: list[list[bytes]]) -> list[list[str]]:
    """Byte strings as base64 text (JSON-safe) for the worker."""
    return [[base64.b64encode(v).decode("ascii") for v in b] for b in batches]


def serve_in_fresh_process(export_path: str, info: dict[str, Any],
                           text_batches: list[list[bytes]],
                           example_batches: list[list[dict[str, Any]]],
                           **more: Any) -> dict[str, Any]:
    """The export's outputs for the batches, from parity_worker in a new interpreter
    (`more`: further request entries, see parity_worker)."""
    request = {**more,
        "export_dir": os.path.abspath(export_path),
        "needs_tensorflow_text": info["needs_tensorflow_text"],
        "text_signature": info["text_signature"],
        "text_batches": encode_batches(text_batches),
        "example_batches": [
            [{k: base64.b64encode(v).decode("ascii") if k in ("image", "audio") else v
              for k, v in e.items()} for e in b] for b in example_batches],
    }
    with tempfile.TemporaryDirectory() as tmp:
        request_path, result_path = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(request_path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        process = subprocess.run(
            [sys.executable, parity_worker.__file__, request_path, result_path],
            capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            timeout=WORKER_TIMEOUT_S, cwd=tmp,
        )
        if process.returncode != 0 or not os.path.exists(result_path):
            raise ParityError(
                f"The SavedModel at {export_path} failed to load or run in a fresh process "
                f"(exit {process.returncode}); the export was deleted. Its error:\n"
                f"{process.stderr[-4000:]}"
            )
        with open(result_path, encoding="utf-8") as f:
            served = json.load(f)
    if served["t2t_modules"]:
        raise ParityError(f"the parity process imported t2t ({served['t2t_modules'][:3]})")
    return served


def scores_close(a: float, b: float) -> bool:
    """Whether served score `a` is within SCORE_TOLERANCE (relative above 1) of t2t's `b`."""
    return abs(a - b) <= SCORE_TOLERANCE * max(1.0, abs(b))


@dataclasses.dataclass
class Comparison:
    """Served outputs against t2t's DecodeResults, collecting the differences."""

    sampling: bool  # unseeded: outputs are only checked to run
    compared: int = 0
    differences: list[str] = dataclasses.field(default_factory=list)
    samples: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def add(self, kind: str, label: str, want: decoder_lib.DecodeResult, text: str,
            score: float, beams: list[tuple[str, float]] | None) -> None:
        self.compared += 1
        if kind == TEXT_SIGNATURE and len(self.samples) < 5:
            self.samples.append({"input": label, "output": text})
        if self.sampling:
            return
        problems = []
        if text != want.text:
            problems.append(f"output {text!r} != t2t {want.text!r}")
        if not scores_close(score, want.score):
            problems.append(f"score {score:.5f} != t2t {want.score:.5f}")
        if beams is not None and (
                [t for t, _ in beams] != [t for t, _ in want.beams]
                or not all(scores_close(a, b)
                           for (_, a), (_, b) in zip(beams, want.beams, strict=True))):
            problems.append(f"beams {beams} != t2t {want.beams}")
        if problems:
            self.differences.append(f"[{kind}] input {label}: " + "; ".join(problems))


def raise_differences(comparison: Comparison, export_path: str) -> None:
    """ParityError listing the differences found (if any); a warning when unseeded
    sampling left the outputs unchecked."""
    if comparison.differences:
        shown = "\n  ".join(comparison.differences[:10])
        more = len(comparison.differences) - 10
        raise ParityError(
            f"PARITY CHECK FAILED: the SavedModel decodes {len(comparison.differences)} of "
            f"{comparison.compared} examples differently from t2t's Decoder on the same "
            f"checkpoint; the export at {export_path} was deleted.\n  {shown}"
            f"{f'{chr(10)}  ... and {more} more' if more > 0 else ''}"
        )
    if comparison.sampling:
        logging.warning("temperature > 0 samples without a seed: the parity check only ran "
                        "the signatures (give seed=N in --decode_hparams to compare them).")
