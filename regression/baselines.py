"""Figures a regression case's metric is compared with, computed on the case's own data.

    xz_bits_per_byte   `xz -9` on the raw text of the problem's test split (its
                       documents, each ended by a newline): bits per byte that a
                       general-purpose compressor achieves, which a language model's test
                       bits per byte must beat. (The model's figure also counts the EOS
                       that ends each example as a byte: for 256-byte examples 1 in 256,
                       which lowers it by ~0.01 against xz.)
"""

from __future__ import annotations

import os
from collections.abc import Callable

from regression.case_spec import Case


def xz_bits_per_byte(case: Case, output_dir: str) -> float:
    """8 * len(xz -9 of the test text) / len(test text) for a text-files problem, whose
    raw data t2t-datagen put in OUTPUT/data/tmp (its default --tmp_dir)."""
    from t2t import registry
    from t2t.problems.text import text_files

    problem = registry.problem(case.problem)
    tmp_dir = os.path.join(output_dir, "data", "tmp")
    # Each document once, ended by a newline (most already end with one).
    text = "".join(d if d.endswith("\n") else d + "\n" for d in problem.documents(tmp_dir, "test"))
    return text_files.xz_bits_per_byte(text)


BASELINES: dict[str, Callable[[Case, str], float]] = {"xz_bits_per_byte": xz_bits_per_byte}


def compute(name: str, case: Case, output_dir: str) -> float:
    """The baseline `name` for `case` run under `output_dir`."""
    if name not in BASELINES:
        raise KeyError(f"Unknown baseline {name!r}; known: {', '.join(BASELINES)}.")
    return BASELINES[name](case, output_dir)
