"""Scoring text with a trained model: the log-probability of each line (t2t-decoder
--score_file), and corpus figures (per-token NLL, perplexity, bits per byte).

    model = load_model(problem, "transformer", hparams, data_dir, output_dir)
    scorer = Scorer(problem, model, data_dir, batch_size=32)
    scores = scorer.score_texts(["a line", "another"])       # [LineScore, ...]
    corpus = scorer.score_file("test.txt", "test.txt.scores")  # CorpusScore
    write_corpus_score("test.txt.scores.json", corpus)

A language model (a problem without "inputs") scores each line as a text: the sum over
its tokens and the final EOS of log p(token | previous tokens), in nats. A seq2seq
problem reads `source<TAB>target` lines and scores log p(target + EOS | source + EOS).
Each batch takes one teacher-forced forward pass (the model shifts the targets right
itself); the log-softmax runs in float32 whatever the model's compute dtype.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any

import numpy as np
from absl import logging

from t2t.data import problem as problem_lib
from t2t.decoding.decoder import FILE_CHUNK_LINES, DecodeError, iter_line_chunks
from t2t.decoding.output_file import atomic_writer
from t2t.features import EOS_ID, PAD_ID, Modality

SEQ2SEQ_FORMAT = "source<TAB>target"


class ScoreError(DecodeError):
    """A scoring request that cannot be served (bad line, empty file, wrong problem)."""


@dataclasses.dataclass(frozen=True)
class LineScore:
    """The score of one line.

    log_prob: natural log of the probability of the scored tokens (nats, <= 0).
    tokens: tokens scored, the EOS included (unless the line was truncated).
    bytes: UTF-8 bytes of the scored text + 1 for the EOS (the newline it stands for);
      for a truncated line, the bytes of the text of the scored tokens.
    truncated: whether only the first max_length tokens were scored.
    """

    log_prob: float
    tokens: int
    bytes: int
    truncated: bool = False


@dataclasses.dataclass
class CorpusScore:
    """Totals over scored lines; the derived figures are properties (see `to_dict`)."""

    lines: int = 0
    tokens: int = 0
    bytes: int = 0
    total_log_prob: float = 0.0  # nats

    def add(self, line: LineScore) -> None:
        self.lines += 1
        self.tokens += line.tokens
        self.bytes += line.bytes
        self.total_log_prob += line.log_prob

    @classmethod
    def of(cls, lines: Iterable[LineScore]) -> CorpusScore:
        total = cls()
        for line in lines:
            total.add(line)
        return total

    @property
    def nll_per_token(self) -> float:
        """Mean negative log-likelihood per token, in nats (nan without tokens)."""
        return -self.total_log_prob / self.tokens if self.tokens else math.nan

    @property
    def perplexity(self) -> float:
        """exp(nll_per_token); inf when that overflows."""
        try:
            return math.exp(self.nll_per_token)
        except OverflowError:
            return math.inf

    @property
    def bits_per_byte(self) -> float:
        """-total_log_prob / ln 2 / bytes: comparable across vocabularies."""
        return -self.total_log_prob / math.log(2) / self.bytes if self.bytes else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines, "tokens": self.tokens, "bytes": self.bytes,
            "total_log_prob": self.total_log_prob, "nll_per_token": self.nll_per_token,
            "perplexity": self.perplexity, "bits_per_byte": self.bits_per_byte,
        }


def write_corpus_score(path: str, score: CorpusScore) -> None:
    """Writes the corpus figures (`score.to_dict()`) as JSON, atomically."""
    f, tmp = atomic_writer(path)
    try:
        with f:
            # nan/inf are written as NaN/Infinity (what Python's json reads back).
            json.dump(score.to_dict(), f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


@dataclasses.dataclass
class _Encoded:
    """One line ready to score: target ids [T] (and input ids [S] for seq2seq)."""

    targets: np.ndarray
    inputs: np.ndarray | None
    bytes: int
    truncated: bool


class Scorer:
    """A loaded model and the problem's encoders, scoring lines of text.

    Lines longer than `max_length` tokens (0: the model's hparams.max_length; no limit
    when that is 0 too) are not refused: only their first max_length tokens are scored
    (the EOS is then not among them), with a warning naming the line. Without a limit a
    line is scored whole in one pass, which a transformer with sinusoidal positions can
    do at any length. Seq2seq inputs are cut to max_length tokens (EOS included) the
    same way. Empty lines score just the EOS (the probability of an empty text).
    """

    def __init__(self, problem: problem_lib.Problem, model: Any, data_dir: str | None, *,
                 batch_size: int = 32, max_length: int = 0):
        if batch_size < 1:
            raise ScoreError(f"batch_size must be at least 1, not {batch_size}.")
        if max_length < 0:
            raise ScoreError(f"max_length must be >= 0 (0: the model's), not {max_length}.")
        self.problem, self.model, self.data_dir = problem, model, data_dir
        self.batch_size = batch_size
        php = model.problem_hparams
        targets_kind = php.modality.get("targets")
        if php.is_classifier or targets_kind != Modality.SYMBOL:
            raise ScoreError(
                f"{problem.name} has {targets_kind} targets: scoring computes the probability "
                f"of token sequences (language models and seq2seq problems), not of "
                f"class labels or other targets."
            )
        self.has_inputs = php.has_inputs
        if self.has_inputs and php.modality["inputs"] != Modality.SYMBOL:
            raise ScoreError(
                f"{problem.name} has {php.modality['inputs']} inputs: only text inputs can be "
                f"scored from text."
            )
        self.encoders = problem.feature_encoders(data_dir)
        hparams = getattr(model, "hparams", None)
        model_max = hparams.max_length if hparams is not None and "max_length" in hparams else 0
        self.max_length = max_length or model_max or 0
        self.traces = 0  # how many times the scoring function was traced
        self._fn: Any = None

    # -------------------------------------------------------------- the model
    def _score_fn(self) -> Any:
        """(inputs?, targets [B, T] int32) -> log p(target token) [B, T] float32, traced
        once for every batch size and length."""
        if self._fn is None:
            import tensorflow as tf

            model = self.model

            def token_log_probs(features: dict[str, Any]) -> Any:
                self.traces += 1
                targets = features["targets"]
                logits, _ = model(features, training=False)
                shape = tf.shape(targets)
                # float32 before the softmax: bfloat16/float16 logits lose the tail.
                logits = tf.reshape(tf.cast(logits, tf.float32), [shape[0], shape[1], -1])
                return -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                       logits=logits)

            spec = tf.TensorSpec([None, None], tf.int32)
            if self.has_inputs:
                def fn(inputs, targets):
                    return token_log_probs({"inputs": inputs, "targets": targets})

                signature = [spec, spec]
            else:
                def fn(targets):
                    return token_log_probs({"targets": targets})

                signature = [spec]
            self._fn = tf.function(fn, input_signature=signature, reduce_retracing=True)
        return self._fn

    def _run_batch(self, batch: list[_Encoded]) -> list[float]:
        """Log-probabilities (nats) of a batch of encoded lines, in the batch's order."""
        targets = _pad([e.targets for e in batch])
        if self.has_inputs:
            inputs = _pad([e.inputs for e in batch])  # type: ignore[misc]
            token_log_probs = self._score_fn()(inputs, targets)
        else:
            token_log_probs = self._score_fn()(targets)
        values = np.asarray(token_log_probs, np.float64)
        return [float(values[row, : len(e.targets)].sum()) for row, e in enumerate(batch)]

    def score_encoded(self, encoded: Sequence[_Encoded]) -> list[float]:
        """Log-probabilities of encoded lines, in their order; batches are sorted by
        length (longest first) so that each pads little."""
        results: list[float] = [0.0] * len(encoded)

        def size(i: int) -> int:
            e = encoded[i]
            return len(e.targets) + (len(e.inputs) if e.inputs is not None else 0)

        order = sorted(range(len(encoded)), key=lambda i: -size(i))
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            scores = self._run_batch([encoded[i] for i in indices])
            for i, score in zip(indices, scores, strict=True):
                results[i] = score
        return results

    # ------------------------------------------------------------------- text
    def _ids(self, feature: str, text: str, where: str) -> list[int]:
        encoder = self.encoders.get(feature)
        try:
            if encoder is None:
                return [int(w) for w in text.split()]
            return list(encoder.encode(text))
        except ValueError as e:
            raise ScoreError(f"{where} cannot be encoded: {e}") from None

    def _text_bytes(self, feature: str, ids: Sequence[int]) -> int:
        """UTF-8 bytes of the text of `ids` (for a truncated line)."""
        encoder = self.encoders.get(feature)
        if encoder is None:
            return len(" ".join(str(i) for i in ids).encode("utf-8"))
        return len(encoder.decode(list(ids)).encode("utf-8"))

    def encode_line(self, line: str, where: str) -> _Encoded:
        """A line as ids (+EOS), cut to max_length with a warning; `where` names it."""
        inputs = None
        text = line
        if self.has_inputs:
            source, tab, text = line.partition("\t")
            if not tab:
                raise ScoreError(
                    f"{where} has no tab: {self.problem.name} is a seq2seq problem, so each "
                    f"line to score must be {SEQ2SEQ_FORMAT} (the target is scored given the "
                    f"source)."
                )
            source_ids = [*self._ids("inputs", source, f"The source of {where}"), EOS_ID]
            if self.max_length and len(source_ids) > self.max_length:
                logging.warning("The source of %s has %d tokens: cut to the first %d "
                                "(max_length).", where, len(source_ids), self.max_length)
                source_ids = [*source_ids[: self.max_length - 1], EOS_ID]
            inputs = np.asarray(source_ids, np.int32)
        ids = [*self._ids("targets", text, where), EOS_ID]
        size, truncated = len(text.encode("utf-8")) + 1, False
        if self.max_length and len(ids) > self.max_length:
            logging.warning("%s has %d tokens: only the first %d are scored (max_length).",
                            where, len(ids), self.max_length)
            ids, truncated = ids[: self.max_length], True
            size = self._text_bytes("targets", ids)
        return _Encoded(np.asarray(ids, np.int32), inputs, size, truncated)

    def _score_lines(self, lines: Sequence[str], first_line_number: int,
                     source: str | None) -> list[LineScore]:
        of = f" of {source}" if source else ""
        encoded = [self.encode_line(line, f"line {first_line_number + i}{of}")
                   for i, line in enumerate(lines)]
        scores = self.score_encoded(encoded)
        return [LineScore(log_prob=s, tokens=len(e.targets), bytes=e.bytes, truncated=e.truncated)
                for s, e in zip(scores, encoded, strict=True)]

    def score_texts(self, lines: Sequence[str], first_line_number: int = 1) -> list[LineScore]:
        """The score of each line (a text, or `source<TAB>target` for seq2seq), in the
        order of `lines`; messages count lines from `first_line_number`."""
        return self._score_lines(lines, first_line_number, None)

    def score_file(self, input_path: str, output_path: str) -> CorpusScore:
        """Scores each line of `input_path`; writes one log-probability (nats, "%.6f")
        per line to `output_path` atomically, and returns the corpus totals.

        The input is read FILE_CHUNK_LINES lines at a time (memory stays bounded);
        invalid UTF-8 is replaced with a warning. ScoreError for a file without lines.
        """
        start, total = time.monotonic(), CorpusScore()
        f, tmp = atomic_writer(output_path)
        try:
            with f:
                for chunk in iter_line_chunks(input_path):
                    self._score_chunk(chunk, total, input_path, f)
            if total.lines == 0:
                raise ScoreError(f"{input_path} has no lines to score.")
            os.replace(tmp, output_path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        logging.info("Scored %d lines (%d tokens) of %s into %s in %.1f s: %.4f nats/token, "
                     "perplexity %.3f, %.4f bits/byte.", total.lines, total.tokens, input_path,
                     output_path, time.monotonic() - start, total.nll_per_token,
                     total.perplexity, total.bits_per_byte)
        return total

    def _score_chunk(self, lines: list[str], total: CorpusScore, source: str,
                     f: IO[str]) -> None:
        for score in self._score_lines(lines, total.lines + 1, source):
            f.write(f"{score.log_prob:.6f}\n")
            total.add(score)
        if total.lines > len(lines) or len(lines) == FILE_CHUNK_LINES:
            logging.info("Scored %d lines.", total.lines)


def _pad(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Rows of ids -> [len(rows), longest] int32, padded with PAD_ID."""
    out = np.full([len(rows), max(len(r) for r in rows)], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def score_text_file(problem: problem_lib.Problem, model: Any, data_dir: str | None,
                    input_path: str, output_path: str, *, batch_size: int = 32,
                    max_length: int = 0, summary_path: str | None = None) -> CorpusScore:
    """t2t-decoder --score_file: scores `input_path` into `output_path` (one
    log-probability per line) and, if `summary_path`, writes the corpus figures there
    as JSON. Returns the corpus score."""
    scorer = Scorer(problem, model, data_dir, batch_size=batch_size, max_length=max_length)
    score = scorer.score_file(input_path, output_path)
    if summary_path:
        write_corpus_score(summary_path, score)
    return score
