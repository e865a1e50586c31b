"""Looking at prepared data: decoded examples, length statistics, label balance, and
the text of a split (the input and reference files of `t2t-decoder`)."""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any

import numpy as np

from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.data.inspection import overlap as overlap_lib
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


@dataclasses.dataclass
class LengthStats:
    """Token lengths of one feature (EOS included)."""

    count: int
    min: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: int
    total_tokens: int


@dataclasses.dataclass
class InspectReport:
    problem: str
    split: str
    examples_read: int
    examples: list[dict[str, str]]  # the first few, decoded
    lengths: dict[str, LengthStats]
    label_counts: dict[str, int]  # class name -> count (class problems)
    truncated: bool  # stopped at max_records
    overlap: overlap_lib.Overlap | None = None  # dev examples also in train

    def format(self) -> str:
        lines = [f"{self.problem} [{self.split}]: {self.examples_read:,} examples"
                 + (" (stopped at max_records)" if self.truncated else "")]
        for i, example in enumerate(self.examples):
            lines.append(f"--- example {i}")
            lines.extend(f"  {name}: {text}" for name, text in example.items())
        if self.lengths:
            lines.append("--- lengths (tokens, EOS included)")
            lines.append(f"  {'feature':<10} {'min':>6} {'mean':>8} {'p50':>6} {'p90':>6} "
                         f"{'p99':>6} {'max':>6} {'tokens':>12}")
            for name, s in self.lengths.items():
                lines.append(f"  {name:<10} {s.min:>6} {s.mean:>8.1f} {s.p50:>6.0f} {s.p90:>6.0f} "
                             f"{s.p99:>6.0f} {s.max:>6} {s.total_tokens:>12,}")
        if self.label_counts:
            total = sum(self.label_counts.values())
            lines.append("--- label balance")
            for label, count in sorted(self.label_counts.items(), key=lambda kv: -kv[1]):
                lines.append(f"  {label:<20} {count:>8,} {100 * count / total:6.1f}%")
        if self.overlap is not None:
            lines.append("--- " + self.overlap.format())
        return "\n".join(lines)


def _describe_value(name: str, value: np.ndarray, encoder: Any) -> str:
    if value.dtype == np.uint8 and value.ndim == 3:
        return f"image {'x'.join(map(str, value.shape))}, mean pixel {value.mean():.1f}"
    ids = value.reshape(-1).tolist()
    if isinstance(encoder, text_encoder.ClassLabelEncoder):
        return f"{encoder.decode(ids[0])} (id {ids[0]})"
    if encoder is not None:
        return f"{encoder.decode(ids)!r}  ids={ids[:20]}{' ...' if len(ids) > 20 else ''}"
    return str(ids[:20])


def inspect_problem(
    problem: problem_lib.Problem,
    data_dir: str,
    split: str = problem_lib.TRAIN_SPLIT,
    *,
    num_examples: int = 5,
    max_records: int = 100_000,
    check_overlap: bool = True,
) -> InspectReport:
    """Reads up to `max_records` examples of `split` and summarizes them; with
    `check_overlap`, also counts the dev examples that occur in train."""
    report = _read(problem, data_dir, split, num_examples, max_records)
    if check_overlap:
        report.overlap = overlap_lib.check_overlap(problem, data_dir)
    return report


def _read(problem, data_dir, split, num_examples, max_records) -> InspectReport:
    encoders = problem.feature_encoders(data_dir)
    # EVAL mode: inspection shows the stored data, without training-time augmentation.
    dataset = problem.dataset(
        problem_lib.EVAL, data_dir, shuffle_files=False, deterministic=True, split=split
    )
    lengths: dict[str, list[int]] = collections.defaultdict(list)
    labels: collections.Counter = collections.Counter()
    shown: list[dict[str, str]] = []
    hparams = problem.hparams(data_dir)
    count = 0
    for example in dataset.take(max_records + 1).as_numpy_iterator():
        if count == max_records:
            return _report(problem, split, count, shown, lengths, labels, encoders, True)
        count += 1
        if len(shown) < num_examples:
            shown.append({k: _describe_value(k, np.asarray(v), encoders.get(k))
                          for k, v in example.items()})
        for name, value in example.items():
            modality = hparams.modality.get(name)
            if modality == problem_lib.Modality.SYMBOL:
                lengths[name].append(int(np.asarray(value).size))
            elif modality == problem_lib.Modality.CLASS_LABEL:
                labels[int(np.asarray(value).reshape(-1)[0])] += 1
    return _report(problem, split, count, shown, lengths, labels, encoders, False)


def _report(problem, split, count, shown, lengths, labels, encoders, truncated) -> InspectReport:
    stats = {}
    for name, values in lengths.items():
        array = np.asarray(values)
        stats[name] = LengthStats(
            count=array.size, min=int(array.min()), mean=float(array.mean()),
            p50=float(np.percentile(array, 50)), p90=float(np.percentile(array, 90)),
            p99=float(np.percentile(array, 99)), max=int(array.max()), total_tokens=int(array.sum()),
        )
    encoder = encoders.get("targets")
    named = {}
    for label, n in labels.items():
        name = encoder.decode(label) if isinstance(encoder, text_encoder.ClassLabelEncoder) else str(label)
        named[name] = n
    return InspectReport(problem.name, split, count, shown, stats, named, truncated)


def feature_text(ids: Any, encoder: Any) -> str:
    """The text of one stored sequence feature: decoded by its encoder, cut at EOS; the
    ids themselves, space separated, for a feature without one."""
    if encoder is None:
        return " ".join(str(i) for i in text_encoder.strip_extraneous(ids))
    if isinstance(encoder, text_encoder.ClassLabelEncoder):
        return encoder.decode(int(np.asarray(ids).reshape(-1)[0]))
    return encoder.decode(ids, strip_extraneous=True)


def write_text(
    problem: problem_lib.Problem, data_dir: str, split: str, prefix: str,
    *, max_records: int | None = None,
) -> dict[str, str]:
    """Writes each text feature of `split` to `{prefix}.{feature}` (inputs, targets), one
    example per line in the data's order: a decode input and its reference for
    `t2t-decoder --decode_from_file --decode_reference`. An audio feature is written as
    16-bit WAV files in `{prefix}.{feature}.audio/` and its line is the file's path.

    Returns {feature: path}. Files are written whole under a temporary name and then
    renamed, so an interrupted call leaves no half-written file behind.
    """
    hparams = problem.hparams(data_dir)
    encoders = problem.feature_encoders(data_dir)
    features = [name for name in ("inputs", "targets")
                if hparams.modality.get(name) in (problem_lib.Modality.SYMBOL,
                                                  problem_lib.Modality.CLASS_LABEL,
                                                  problem_lib.Modality.AUDIO)]
    if not features:
        raise ValueError(f"{problem.name} has no text features to write (its modalities: "
                         f"{dict(hparams.modality)}).")
    dataset = problem.dataset(
        problem_lib.EVAL, data_dir, shuffle_files=False, deterministic=True, split=split
    )
    if max_records is not None:
        dataset = dataset.take(max_records)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    paths = {name: f"{prefix}.{name}" for name in features}
    files = {name: open(path + ".incomplete", "w", encoding="utf-8")
             for name, path in paths.items()}
    try:
        for index, example in enumerate(dataset.as_numpy_iterator()):
            for name, f in files.items():
                if hparams.modality[name] == problem_lib.Modality.AUDIO:
                    text = _audio_file(example[name], f"{prefix}.{name}.audio", index, hparams)
                else:
                    text = feature_text(example[name], encoders.get(name))
                f.write(" ".join(text.split()) + "\n")  # one example, one line
    finally:
        for f in files.values():
            f.close()
    for path in paths.values():
        os.replace(path + ".incomplete", path)
    return paths


def _audio_file(ids: Any, folder: str, index: int, hparams: Any) -> str:
    """Writes one example's PCM ids as `folder`/NNNNNN.wav; returns its absolute path."""
    from t2t.data.bases import speech  # soundfile is the speech extra's: only when needed

    os.makedirs(folder, exist_ok=True)
    path = os.path.abspath(os.path.join(folder, f"{index:06d}.wav"))
    speech.write_waveform_ids(path, ids, hparams.audio_sample_rate)
    return path
