"""Whether sampled images are what was asked for: a classifier labels class -> image samples.

After a class-conditional generation case (`Case.sample_agreement` names a classifier
case of the same data), the runner trains that classifier beside it, samples
SAMPLES_PER_CLASS images of every class from the generator (t2t-decoder: rows are the
classes in label order), has the classifier decode the sample files, and reports
"sample_agreement": the fraction of samples labelled as the class they were drawn for.
A random generator scores about 1 / classes; samples that look like their class score
near the classifier's own accuracy.
"""

from __future__ import annotations

import os
from typing import Any

SAMPLES_PER_CLASS = 10
SAMPLES_GRID = "samples.png"
CLASSIFIER_DIR = "classifier"
LABELS_FILE = "samples.labels.txt"
METRIC = "sample_agreement"


def commands(case: Any, classifier: Any, case_dir: str, data_dir: str,
             tool_command: Any) -> list[list[str]]:
    """Train the classifier, sample every class, label the samples."""
    samples = os.path.join(case_dir, os.path.splitext(SAMPLES_GRID)[0])
    classifier_dir = os.path.join(case_dir, CLASSIFIER_DIR)
    return [
        [*tool_command("t2t-trainer"), *classifier.trainer_args(), f"--data_dir={data_dir}",
         f"--output_dir={classifier_dir}"],
        [*tool_command("t2t-decoder"), f"--output_dir={case_dir}", f"--data_dir={data_dir}",
         f"--decode_hparams=num_samples={SAMPLES_PER_CLASS},temperature=1.0,seed=1",
         f"--decode_to_file={os.path.join(case_dir, SAMPLES_GRID)}"],
        [*tool_command("t2t-decoder"), f"--output_dir={classifier_dir}",
         f"--data_dir={data_dir}", f"--decode_from_file={os.path.join(samples, 'paths.txt')}",
         f"--decode_to_file={os.path.join(case_dir, LABELS_FILE)}"],
    ]


def agreement(case_dir: str, class_labels: list[str]) -> float:
    """The fraction of samples (file RRR_..., row RRR = class id) labelled as class RRR."""
    folder = os.path.join(case_dir, os.path.splitext(SAMPLES_GRID)[0])
    with open(os.path.join(folder, "paths.txt"), encoding="utf-8") as f:
        paths = f.read().splitlines()
    with open(os.path.join(case_dir, LABELS_FILE), encoding="utf-8") as f:
        labels = f.read().splitlines()
    if len(labels) != len(paths) or not paths:
        raise ValueError(f"{len(labels)} labels for {len(paths)} samples in {case_dir}")
    wanted = [class_labels[int(os.path.basename(p)[:3])] for p in paths]
    return sum(w == got.strip() for w, got in zip(wanted, labels, strict=True)) / len(paths)
