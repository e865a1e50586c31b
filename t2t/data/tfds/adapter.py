"""`tfds_*` problems: any TensorFlow Datasets data set as a t2t Problem.

`tfds_problem("tfds_imdb_reviews")` returns a Problem reading the TFDS data set
`imdb_reviews`. This module registers the `tfds_` problem family with the registry
(`registry.register_problem_family`), so `registry.problem` builds a problem for any
`tfds_` name that is not registered: no data set needs registering by hand. Names: `tfds_<dataset>` or
`tfds_<dataset>__<config>` (`tfds_glue__sst2` -> `glue/sst2`; `-` and `.` of config
names are written `_`: `tfds_wmt14_translate__de_en` -> `wmt14_translate/de-en`).

Features -> inputs/targets, chosen in this order:
  1. the problem's `feature_map` ({"inputs": "text", "targets": "label"}), else the
     entry of KNOWN_FEATURE_MAPS for the data set;
  2. the data set's `supervised_keys` (input, target) when both are usable features;
  3. exactly one ClassLabel feature as targets and exactly one Image (else exactly
     one Text) feature as inputs.
Anything else raises TfdsMappingError listing the features and how to map them. A
`feature_map` may name only "targets" (language modelling on one text feature).

Modalities by feature type: Text -> symbol, with one SentencePiece vocabulary
(`approx_vocab_size` pieces, an upper bound) trained on at most
`max_samples_for_vocab` training examples of all mapped text features and saved in
data_dir (`vocab.<problem>.<size>.model`); every sequence ends with EOS.
ClassLabel -> class_label (its names become the ClassLabelEncoder's labels).
Image (uint8) -> image, stored PNG-encoded (inputs under "image/encoded", as
ImageProblem stores them). The chosen mapping, class names and splits are written to
data_dir/<problem>.tfds.json, which reading uses (no TFDS import to train).

Data: `generate_data` runs `tfds.builder(name, data_dir=$TFDS_DATA_DIR or
tmp_dir/tfds).download_and_prepare()` (TFDS downloads from its own registered URLs and
verifies its own checksums; a local --data_mirror folder is passed as TFDS's
`manual_dir`, for data sets that need files placed by hand; URL mirrors do not apply),
then streams `as_dataset(split, shuffle_files=False)` into t2t's TFRecord shards.
Splits: train = TFDS "train"; dev = "validation", else "dev", else "test"; a data set
with only "train" gives train[:95%] / train[95%:]. Set `train_split` / `dev_split`
(any TFDS split expression) to choose others.

Overrides: subclass and register, e.g.

    @registry.register_problem
    class SquadQuestions(tfds_adapter.TfdsProblem):
        tfds_name = "squad"
        feature_map = {"inputs": "context", "targets": "question"}

Modules: tfds_names (problem names <-> TFDS names), tfds_features (the feature
mapping), tfds_problem_base (the TfdsProblem class); this one creates and registers
the family's classes and re-exports the public names of the others.
"""

from __future__ import annotations

from t2t import registry
from t2t.data.tfds.features import (  # noqa: F401
    CLASS_LABEL,
    IMAGE,
    KINDS,
    KNOWN_FEATURE_MAPS,
    TEXT,
    FeatureSpec,
    TfdsMappingError,
    describe_features,
    feature_kind,
    resolve_feature_map,
)
from t2t.data.tfds.names import CONFIG_SEPARATOR, PREFIX, normalize, problem_name_for, tfds_name_for  # noqa: F401
from t2t.data.tfds.problem_base import TfdsProblem

_CLASSES: dict[str, type[TfdsProblem]] = {}


def _make_class(problem_name: str, tfds_name: str) -> type[TfdsProblem]:
    cls = type(
        "Tfds_" + normalize(tfds_name),
        (TfdsProblem,),
        {
            "tfds_name": tfds_name,
            "__module__": __name__,
            "__doc__": f"The TensorFlow Datasets data set {tfds_name!r} (see tfds_adapter).",
        },
    )
    registry.register_problem(cls, name=problem_name)
    _CLASSES[problem_name] = cls
    return cls


def tfds_problem_class(name: str) -> type[TfdsProblem]:
    """The Problem class of `tfds_<dataset>[__<config>]`, created (and registered) on
    first use; UnknownNameError when TFDS has no such data set."""
    if name not in _CLASSES:
        _make_class(name, tfds_name_for(name))
    return _CLASSES[name]


def tfds_problem(name: str, was_reversed: bool = False) -> TfdsProblem:
    """A Problem for any TFDS data set: `tfds_problem("tfds_imdb_reviews")`.

    A trailing `_rev` (when the name without it is a TFDS data set) swaps inputs and
    targets, as for registered problems.
    """
    if name.endswith(registry.REVERSE_SUFFIX) and name not in _CLASSES:
        try:
            return tfds_problem_class(name)(was_reversed=was_reversed)
        except registry.UnknownNameError:
            name, was_reversed = name[: -len(registry.REVERSE_SUFFIX)], True
    return tfds_problem_class(name)(was_reversed=was_reversed)


for _name in KNOWN_FEATURE_MAPS:
    _make_class(problem_name_for(_name), _name)

registry.register_problem_family(PREFIX, tfds_problem, tfds_problem_class)
