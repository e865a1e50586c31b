"""Names of tfds_ problems: `tfds_<dataset>[__<config>]` <-> the TFDS name.

`glue/sst2` <-> `tfds_glue__sst2`; `-` and `.` of config names are written `_`
(`wmt14_translate/de-en` <-> `tfds_wmt14_translate__de_en`). Imports TensorFlow
Datasets only to look a data set up (`tfds_name_for`).
"""

from __future__ import annotations

import re

from t2t import registry
from t2t.utils.lazy_import import lazy_module

tfds = lazy_module("tensorflow_datasets")

PREFIX = "tfds_"
CONFIG_SEPARATOR = "__"


def normalize(name: str) -> str:
    """`name` lower-cased, with every character but a-z, 0-9 and _ written `_`."""
    return re.sub(r"[^a-z0-9_]", "_", name.lower())


def problem_name_for(tfds_name: str) -> str:
    """`glue/sst2` -> `tfds_glue__sst2` (versions are not part of problem names)."""
    base, _, config = tfds_name.split(":")[0].partition("/")
    return PREFIX + normalize(base) + (CONFIG_SEPARATOR + normalize(config) if config else "")


def tfds_name_for(problem_name: str) -> str:
    """`tfds_glue__sst2` -> `glue/sst2`; UnknownNameError if TFDS has no such data set."""
    if not problem_name.startswith(PREFIX) or len(problem_name) == len(PREFIX):
        raise ValueError(f"{problem_name!r} is not a tfds_ problem name (tfds_<dataset>).")
    rest = problem_name[len(PREFIX):]
    base, _, config = rest.partition(CONFIG_SEPARATOR)
    try:
        builder_cls = tfds.builder_cls(base)
    except Exception as e:  # DatasetNotFoundError (a ValueError); import errors too
        if type(e).__name__ != "DatasetNotFoundError":
            raise
        from tensorflow_datasets.core import registered

        known = [problem_name_for(n) for n in registered.list_imported_builders()]
        matches = registry.close_matches(problem_name, known)
        raise registry.UnknownNameError(
            f"Unknown problem {problem_name!r}: TensorFlow Datasets has no data set "
            f"{base!r}." + (f" Did you mean: {', '.join(matches)}?" if matches else "")
            + " tfds_ problems are named tfds_<dataset> or tfds_<dataset>__<config>."
        ) from None
    configs = [c.name for c in (getattr(builder_cls, "BUILDER_CONFIGS", None) or [])]
    if not config:
        return base
    by_normal = {normalize(c): c for c in configs}
    if normalize(config) not in by_normal:
        raise registry.UnknownNameError(
            f"Unknown problem {problem_name!r}: TFDS data set {base!r} has no config "
            f"{config!r}; its configs are: "
            f"{', '.join(problem_name_for(base + '/' + c) for c in configs) or 'none'}."
        )
    return f"{base}/{by_normal[normalize(config)]}"
