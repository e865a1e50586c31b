"""What the input pipeline's length filter drops, counted per split, said before training.

The pipeline (`t2t.data.pipeline.input_pipeline`; in TRAIN after subword sampling, if the
hparams ask for it) cuts "inputs" / "targets" to `max_input_seq_length` /
`max_target_seq_length` ids (Tensor2Tensor's truncation, 0: none), then drops every
example whose length (tokens of its longest sequence feature) is under
`min_length`, or over `max_length` in TRAIN (in EVAL only with
`eval_drop_long_sequences`). Nothing else says so: a corpus cut into 512-token examples
and trained with `max_length=256` silently loses all of them.

`length_report(problem, data_dir, hparams, split)` reads the split's first examples as
the pipeline reads them (batched parse, the problem's preprocessing), at most
`max_examples` of them for at most `max_seconds`, applies the pipeline's own rules
(`input_pipeline.batch_arguments` and `kept_lengths`) and counts what they drop; the
counts are exact for what was read, and an estimate for the split when it holds more.
`report_input_lengths` is what the Trainer calls before the first step: one line per
split, a warning naming the hparam to change (and a value keeping 99%) when more than
2% of the examples or tokens are lost, an info line otherwise.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
from absl import logging

from t2t.data import problem as problem_lib
from t2t.data.pipeline import input_pipeline, subword_sampling
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

__all__ = ["NO_SEQUENCES", "LengthReport", "length_keeping", "length_report",
           "report_input_lengths"]

WARN_FRACTION = 0.02  # warn when more than this share of examples or tokens is lost
KEEP_FRACTION = 0.99  # suggested lengths keep this share of the examples and tokens
_TRUNCATION_HPARAMS = {"inputs": "max_input_seq_length", "targets": "max_target_seq_length"}
_READ_BATCH = 1024  # examples' lengths fetched per step
NO_SEQUENCES = "no variable-length sequence features"  # the setting of a report on none


@dataclasses.dataclass(frozen=True)
class LengthReport:
    """What the length filter and truncation do to the examples read of one split.

    Lengths are tokens of an example's longest sequence feature after truncation (what
    the filter compares); tokens are summed over its sequence features, before
    truncation for `tokens_seen`. `complete`: the whole split was read; otherwise the
    counts cover its first `examples_seen` examples (an estimate for the split).
    `max_length` 0: no upper limit. `setting`: the hparams that set the filter, as a
    user would write them; `advice`: how to keep the dropped examples ("" if none).
    `lengths` int [examples_seen]: every example's length, for further questions.
    A problem without variable-length sequences (images, class labels) gets a report
    of no examples whose `setting` is NO_SEQUENCES.
    """

    split: str
    examples_seen: int
    examples_dropped: int
    tokens_seen: int
    tokens_dropped: int
    longest: int
    complete: bool
    min_length: int = 0
    max_length: int = 0
    examples_too_short: int = 0
    examples_truncated: int = 0
    tokens_truncated: int = 0
    setting: str = ""
    advice: str = ""
    lengths: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros([0], np.int32), repr=False, compare=False)

    @property
    def dropped_fraction(self) -> float:
        return self.examples_dropped / self.examples_seen if self.examples_seen else 0.0

    @property
    def tokens_dropped_fraction(self) -> float:
        return self.tokens_dropped / self.tokens_seen if self.tokens_seen else 0.0

    @property
    def truncated_fraction(self) -> float:
        """Share of the tokens that truncation cuts off."""
        return self.tokens_truncated / self.tokens_seen if self.tokens_seen else 0.0

    def needs_warning(self, fraction: float = WARN_FRACTION) -> bool:
        """Whether more than `fraction` of the examples or tokens is dropped or cut."""
        return max(self.dropped_fraction, self.tokens_dropped_fraction,
                   self.truncated_fraction) > fraction

    def message(self) -> str:
        """One line: what is dropped (and cut) of how many examples, and the fix."""
        read = (f"{self.examples_seen:,} {self.split} examples" if self.complete else
                f"the first {self.examples_seen:,} {self.split} examples read")
        longest = f"longest {self.longest:,}" + (
            "" if self.complete else "; an estimate: the split holds more")
        if not self.examples_seen:
            line = f"Length filter: {self.setting}: no {self.split} examples to count."
        elif self.examples_dropped:
            line = (f"Length filter: {self.setting} drops {self.examples_dropped:,} of {read} "
                    f"({_percent(self.dropped_fraction)}, "
                    f"{_percent(self.tokens_dropped_fraction)} of tokens; {longest}).")
        else:
            line = f"Length filter: {self.setting} keeps all {read} ({longest})."
        if self.examples_truncated:
            line += (f" Truncation cuts {self.examples_truncated:,} examples "
                     f"({_percent(self.truncated_fraction)} of tokens).")
        return f"{line} {self.advice}".rstrip()


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def length_keeping(lengths: np.ndarray, tokens: np.ndarray, fraction: float = KEEP_FRACTION) -> int:
    """The smallest length L such that the examples of length <= L hold at least
    `fraction` of the examples and of the tokens (lengths, tokens: int [n]; 0 if n = 0)."""
    if lengths.size == 0:
        return 0
    order = np.argsort(lengths, kind="stable")
    kept_examples = np.arange(1, lengths.size + 1) / lengths.size
    kept_tokens = np.cumsum(tokens[order]) / max(int(tokens.sum()), 1)
    enough = (kept_examples >= fraction - 1e-9) & (kept_tokens >= fraction - 1e-9)
    first = int(np.argmax(enough))  # the last is always enough
    return int(lengths[order][first])


def _read_lengths(dataset: Any, features: list[str], max_examples: int,
                  max_seconds: float) -> tuple[np.ndarray, bool]:
    """(int [n, len(features)] lengths of the first examples, whether the dataset ended
    before max_examples / max_seconds)."""
    def lengths_of(example: dict[str, Any]) -> Any:
        return tf.stack([tf.shape(example[f], out_type=tf.int32)[0] for f in features])

    batches = dataset.take(max_examples + 1).map(
        lengths_of, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).batch(_READ_BATCH)
    start, parts, count = time.monotonic(), [], 0
    for part in batches.as_numpy_iterator():
        parts.append(part)
        count += len(part)
        if len(part) < _READ_BATCH:  # the last batch: the dataset (or the take) ended
            return np.concatenate(parts)[:max_examples], count <= max_examples
        if count > max_examples or time.monotonic() - start > max_seconds:
            break
    else:
        return np.concatenate(parts or [np.zeros([0, len(features)], np.int32)]), True
    return np.concatenate(parts)[:max_examples], False


@dataclasses.dataclass(frozen=True)
class _Filter:
    """The pipeline's length rules for one mode: keep min_length <= length <= max_length
    (0: no limit) after `truncate`; `setting` and `hparam` name the upper limit."""

    arguments: dict[str, Any]
    min_length: int
    max_length: int
    setting: str
    hparam: str  # the hparam to raise ("" when the problem itself sets the limit)


def _length_filter(problem: Any, data_dir: str, hparams: Any, batching: Any,
                   is_training: bool) -> _Filter:
    arguments = input_pipeline.batch_arguments(problem, data_dir, hparams, batching, is_training)
    names = ("batch_size", "batch_size_means_tokens", "max_length", "drop_long_sequences",
             "pack_length", "static_shapes", "min_length")
    min_keep, max_keep = input_pipeline.kept_lengths(**{n: arguments[n] for n in names})
    asked = int(getattr(hparams, "max_length", 0) or 0)
    prefix = ("" if is_training or arguments["drop_long_sequences"] else
              "static shapes, " if arguments["static_shapes"] else "pack_dataset=True, ")
    prefix = prefix or ("" if is_training else "eval_drop_long_sequences=True, ")
    if not max_keep:
        setting, hparam = ("no max_length" if is_training else
                           "no max_length in EVAL (eval_drop_long_sequences=False)"), ""
    elif asked == max_keep:
        setting, hparam = f"{prefix}max_length={max_keep}", "max_length"
    elif not asked and arguments["batch_size_means_tokens"] and max_keep == arguments["batch_size"]:
        setting, hparam = f"{prefix}max_length=0 (so batch_size={max_keep})", "max_length"
    else:
        setting, hparam = f"{prefix}{problem.name}.max_length()={max_keep}", ""
    if min_keep:
        setting += f", min_length={min_keep}"
    for name, n in arguments["truncate"].items():
        setting += f", {_TRUNCATION_HPARAMS[name]}={n}"
    return _Filter(arguments, min_keep, max_keep, setting, hparam)


def _features(spec: Any, arguments: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    """(the sequence features present, {feature: N} of the variable-length ones the
    pipeline truncates), as `input_pipeline` decides them."""
    def ragged(name: str) -> bool:
        s = spec.get(name) if isinstance(spec, dict) else None
        if s is None or s.shape.rank is None or s.shape.rank < 1:
            return False
        sequence = s.dtype.is_integer and s.shape.rank == 1 and name in arguments["sequence_features"]
        return sequence or not s.shape.is_fully_defined()

    sequence = [f for f in arguments["sequence_features"] if ragged(f)]
    truncate = {f: n for f, n in arguments["truncate"].items() if ragged(f)}
    return sequence, truncate


def _advice(rules: _Filter, lengths: np.ndarray, tokens: np.ndarray, too_long: np.ndarray,
            too_short: np.ndarray, keep_fraction: float, is_training: bool) -> str:
    """How to keep the dropped examples ("" when none is dropped)."""
    advice = []
    if too_long.any():
        fits = ~too_short
        length = length_keeping(lengths[fits], tokens[fits], keep_fraction)
        if not rules.hparam:
            advice.append("The problem sets this limit: cut examples shorter at datagen.")
        else:
            value = f"{rules.hparam}={length}"
            if rules.arguments["batch_size_means_tokens"] and length > rules.arguments["batch_size"]:
                value += f",batch_size={length}"
            which = "them" if length >= lengths[fits].max() else f"{_percent(keep_fraction)} of them"
            which = which.replace("them", "the long ones") if too_short.any() else which
            by_flag = not is_training and rules.arguments["drop_long_sequences"]
            other = ("--hparams=eval_drop_long_sequences=false" if by_flag else
                     "cut examples shorter at datagen")
            advice.append(f"Keep {which} with --hparams={value} (or {other}).")
    if too_short.any():
        advice.append("Keep the short ones with --hparams=min_length=0.")
    return " ".join(advice)


def _truncation_advice(truncate: dict[str, int], features: list[str], raw: np.ndarray,
                       keep_fraction: float) -> str:
    """How to cut fewer examples, per truncated feature that cut any."""
    advice = []
    for name, n in truncate.items():
        column = raw[:, features.index(name)]
        if (column > n).any():
            length = length_keeping(column, column, keep_fraction)
            advice.append(f"Cut fewer with --hparams={_TRUNCATION_HPARAMS[name]}="
                          f"{max(length, n + 1)} (0: no truncation).")
    return " ".join(advice)


def length_report(problem: Any, data_dir: str, hparams: Any, split: str, *,
                  mode: str | None = None, batching: Any = None, max_examples: int = 10_000,
                  max_seconds: float = 10.0, keep_fraction: float = KEEP_FRACTION
                  ) -> LengthReport:
    """Counts what the input pipeline's truncation and length filter do to `split`.

    mode: TRAIN (the train split's default) or EVAL (other splits): which filter applies.
    batching: the pipeline's `input_pipeline.Batching` (default: from hparams).
    Reads at most `max_examples` examples for at most `max_seconds` (exact counts of
    what was read; `complete` says whether that was the whole split).
    keep_fraction: the advice names a length keeping this share of examples and tokens.
    Raises DataMissingError when the split has no data.
    """
    if max_examples < 1 or max_seconds <= 0:
        raise ValueError(f"length_report needs max_examples >= 1 and max_seconds > 0, got "
                         f"{max_examples} and {max_seconds}.")
    mode = mode or (problem_lib.TRAIN if split == problem_lib.TRAIN_SPLIT else problem_lib.EVAL)
    is_training = mode == problem_lib.TRAIN
    batching = batching or input_pipeline.Batching.from_hparams(hparams)
    rules = _length_filter(problem, data_dir, hparams, batching, is_training)
    dataset = problem.dataset(mode, data_dir, shuffle_files=False, hparams=hparams,
                              deterministic=True, split=split)
    if is_training:  # as input_dataset: segmentations sampled anew (usually longer)
        dataset = subword_sampling.resample_dataset(dataset, problem, data_dir, hparams, seed=0)
    sequence, truncate = _features(dataset.element_spec, rules.arguments)
    if not any(dataset.element_spec[f].shape[0] is None for f in sequence):  # labels, images
        return LengthReport(split, 0, 0, 0, 0, 0, True, setting=NO_SEQUENCES)
    features = sequence + [f for f in truncate if f not in sequence]
    raw, complete = _read_lengths(dataset, features, max_examples, max_seconds)
    cut = raw.copy()
    for name, n in truncate.items():
        column = features.index(name)
        cut[:, column] = np.minimum(cut[:, column], n)
    lengths = cut[:, : len(sequence)].max(axis=1) if len(cut) else np.zeros([0], np.int32)
    tokens = cut.sum(axis=1)
    too_short = lengths < rules.min_length
    too_long = (lengths > rules.max_length) if rules.max_length else np.zeros_like(too_short)
    dropped = too_short | too_long
    return LengthReport(
        split, examples_seen=len(raw), examples_dropped=int(dropped.sum()),
        tokens_seen=int(raw.sum()), tokens_dropped=int(tokens[dropped].sum()),
        longest=int(lengths.max()) if len(lengths) else 0, complete=complete,
        min_length=rules.min_length, max_length=rules.max_length,
        examples_too_short=int(too_short.sum()),
        examples_truncated=int((raw != cut).any(axis=1).sum()),
        tokens_truncated=int((raw - cut).sum()), setting=rules.setting,
        advice=" ".join(filter(None, (
            _advice(rules, lengths, tokens, too_long, too_short, keep_fraction, is_training),
            _truncation_advice(truncate, features, raw, keep_fraction)))),
        lengths=lengths)


def _beyond_training(report: LengthReport, train_rules: _Filter, fraction: float
                     ) -> tuple[str, bool]:
    """(a sentence on the eval examples longer than training keeps, whether to warn)."""
    if not train_rules.max_length or report.max_length or not report.examples_seen:
        return "", False
    over = int((report.lengths > train_rules.max_length).sum())
    if not over:
        return "", False
    share = over / report.examples_seen
    fix = (f" Train on them with --hparams={train_rules.hparam}="
           f"{max(int(report.lengths.max()), train_rules.max_length)}, or evaluate like "
           f"training with --hparams=eval_drop_long_sequences=true." if train_rules.hparam else "")
    return (f" {over:,} of the {report.examples_seen:,} {report.split} examples read "
            f"({_percent(share)}) are longer than training keeps "
            f"({train_rules.setting}): evaluated at lengths the model never trains on.{fix}",
            share > fraction)


def report_input_lengths(problem: Any, data_dir: str, hparams: Any, batching: Any = None, *,
                         train: bool = True, eval_split: str | None = None,
                         max_examples: int = 10_000, max_seconds: float = 10.0,
                         warn_fraction: float = WARN_FRACTION) -> list[LengthReport]:
    """Says what the length filter drops, one line per split: the train split (if
    `train`) and `eval_split` (if given). A warning (absl logging) when more than
    `warn_fraction` of the examples or tokens is dropped or cut, or when more than that
    share of the eval examples is longer than training keeps; else a printed info line.
    A split without data, or a problem without sequences, is skipped. Returns the reports.
    """
    batching = batching or input_pipeline.Batching.from_hparams(hparams)
    splits = [(problem_lib.TRAIN_SPLIT, problem_lib.TRAIN)] if train else []
    splits += [(eval_split, problem_lib.EVAL)] if eval_split else []
    reports = []
    for split, mode in splits:
        try:
            report = length_report(problem, data_dir, hparams, split, mode=mode, batching=batching,
                                   max_examples=max_examples, max_seconds=max_seconds)
        except problem_lib.DataMissingError:
            continue  # the pipeline says so itself when it reads
        if report.setting == NO_SEQUENCES:
            continue
        line, warn = report.message(), report.needs_warning(warn_fraction)
        if mode == problem_lib.EVAL:
            train_rules = _length_filter(problem, data_dir, hparams, batching, True)
            extra, warn_eval = _beyond_training(report, train_rules, warn_fraction)
            line, warn = line + extra, warn or warn_eval
        if warn:
            logging.warning("%s", line)
        else:
            print(line, flush=True)
        reports.append(report)
    return reports
