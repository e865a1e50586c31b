"""An imported model's vocabulary as plain t2t SentencePiece models, on disk.

A folder holds a record `PREFIX.json` and two serialized SentencePiece models over ONE
id space of V ids (the model's embedding rows): "inputs" segments source text,
"targets" segments target text and decodes ids to text. Ids follow t2t's conventions
(0 pad and 1 EOS are CONTROL pieces, 2 is the UNKNOWN piece; trainer_spec pad_id=0,
eos_id=1, unk_id=2, bos_id=-1), so t2t-datagen, the trainer, t2t-decoder, the exporter's
in-graph tokenizer and t2t-serve use them as any t2t SentencePiece vocabulary.

    {"format": 1, "kind": "marian" | "t5", "vocab_size": V,
     "inputs": "PREFIX.inputs.model", "targets": "PREFIX.targets.model",
     "source": "/absolute/path/of/the/hugging_face/folder"}

Models with the same bytes (T5) are one file, `PREFIX.model`, named twice. An imported
run folder uses PREFIX = "vocab.pretrained"; a data_dir a problem filled with it uses
`vocab.{dataset_filename}.pretrained`. Imports no TensorFlow.
"""

from __future__ import annotations

import json
import os
from typing import Any

from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder
from t2t.data.encoders.vocab_files import PathLike, atomic_write, missing_file_error
from t2t.features import EOS_ID, PAD_ID

RECORD_PREFIX = "vocab.pretrained"
FORMAT = 1
KINDS = ("marian", "t5")
UNK_ID = 2
FEATURES = ("inputs", "targets")
IMPORTED_RUN_HINT = ("give the folder t2t-import wrote (an imported run), which holds "
                     f"{RECORD_PREFIX}.json and its models")


class PretrainedVocabError(ValueError):
    """A pretrained-vocabulary record or model that is damaged, inconsistent, or would
    replace a different vocabulary."""


def record_path(folder: PathLike, prefix: str = RECORD_PREFIX) -> str:
    """The record `folder/PREFIX.json`."""
    return os.path.join(os.fspath(folder), f"{prefix}.json")


def has_pretrained_vocab(folder: PathLike, prefix: str = RECORD_PREFIX) -> bool:
    """Whether `folder` holds the record `PREFIX.json` (written last: its models are
    complete when it exists)."""
    return os.path.isfile(record_path(folder, prefix))


def _check_model(model: bytes, what: str) -> int:
    """The number of pieces of the serialized SentencePiece model `model`, after checking
    t2t's reserved ids; PretrainedVocabError naming `what` otherwise."""
    import sentencepiece as spm

    if not isinstance(model, bytes) or not model:
        raise PretrainedVocabError(f"{what}: not a serialized SentencePiece model "
                                   f"(got {type(model).__name__} of length {len(model or b'')}).")
    try:
        sp = spm.SentencePieceProcessor(model_proto=model)
    except RuntimeError as e:
        raise PretrainedVocabError(f"{what}: not a readable SentencePiece model ({e}).") from e
    ids = {"pad_id": (sp.pad_id(), PAD_ID), "eos_id": (sp.eos_id(), EOS_ID),
           "unk_id": (sp.unk_id(), UNK_ID), "bos_id": (sp.bos_id(), -1)}
    wrong = [f"{name}={got} (t2t needs {want})" for name, (got, want) in ids.items() if got != want]
    size = sp.get_piece_size()
    if not wrong and size > UNK_ID:
        if not (sp.is_control(PAD_ID) and sp.is_control(EOS_ID)):
            wrong.append("ids 0 and 1 must be CONTROL pieces")
        if not sp.is_unknown(UNK_ID):
            wrong.append("id 2 must be the UNKNOWN piece")
    if wrong or size <= UNK_ID:
        raise PretrainedVocabError(f"{what}: not laid out as t2t's ids (0 pad, 1 EOS, 2 unk, "
                                   f"no BOS): {'; '.join(wrong) or f'only {size} pieces'}.")
    return size


def _model_names(prefix: str, inputs_model: bytes, targets_model: bytes) -> dict[str, str]:
    if inputs_model == targets_model:
        return {"inputs": f"{prefix}.model", "targets": f"{prefix}.model"}
    return {feature: f"{prefix}.{feature}.model" for feature in FEATURES}


def _describe(record: dict[str, Any]) -> str:
    return (f"{record.get('kind')}, {record.get('vocab_size')} ids, from "
            f"{record.get('source')!r}")


def write_pretrained_vocab(folder: str, inputs_model: bytes, targets_model: bytes, *,
                           kind: str, source: str, prefix: str = RECORD_PREFIX) -> str:
    """Writes the models and the record `folder/PREFIX.json` (models first, each file
    atomically; the record last) and returns the record's path.

    `kind`: one of KINDS; `source`: the Hugging Face folder the models came from (made
    absolute). An existing record with the same models is kept as it is; one with other
    models raises PretrainedVocabError and nothing is written."""
    if kind not in KINDS:
        raise PretrainedVocabError(f"kind {kind!r} is not a pretrained vocabulary kind; use "
                                   f"one of {KINDS}.")
    size = _check_model(inputs_model, "the inputs model")
    targets_size = _check_model(targets_model, "the targets model")
    if targets_size != size:
        raise PretrainedVocabError(f"the inputs model has {size} pieces and the targets model "
                                   f"{targets_size}: both must lay out the one id space of "
                                   f"the model's embedding rows.")
    path = record_path(folder, prefix)
    if os.path.exists(path):
        _refuse_other_vocab(folder, prefix, inputs_model, targets_model)
        return path
    names = _model_names(prefix, inputs_model, targets_model)
    for feature, model in (("inputs", inputs_model), ("targets", targets_model)):
        atomic_write(os.path.join(folder, names[feature]), model)
    record = {"format": FORMAT, "kind": kind, "vocab_size": size, "inputs": names["inputs"],
              "targets": names["targets"], "source": os.path.abspath(os.path.expanduser(source))}
    atomic_write(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return path


def _refuse_other_vocab(folder: str, prefix: str, inputs_model: bytes,
                        targets_model: bytes) -> None:
    """Raises PretrainedVocabError unless `folder`'s PREFIX record holds these models."""
    path = record_path(folder, prefix)
    fix = (f"nothing was overwritten: write to another folder (for a problem's data: a new "
           f"--data_dir), or remove {path} and the models it names")
    try:
        record, existing = read_models(folder, prefix)
    except (PretrainedVocabError, OSError) as e:
        raise PretrainedVocabError(f"{path} exists but cannot be read ({e}); {fix}.") from e
    if existing != {"inputs": inputs_model, "targets": targets_model}:
        files = sorted({record["inputs"], record["targets"]})
        raise PretrainedVocabError(
            f"{path} already holds another vocabulary ({_describe(record)}; models "
            f"{', '.join(files)}): a different one would change what every id of the data "
            f"written with it means; {fix}.")


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_models(folder: PathLike, prefix: str = RECORD_PREFIX, *,
                hint: str | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the checked record, {"inputs": bytes, "targets": bytes}) of `folder`'s PREFIX
    vocabulary; FileNotFoundError (with `hint`) for a missing record or model."""
    folder = os.fspath(folder)
    record = read_record(folder, prefix, hint=hint)
    models = {}
    for feature in FEATURES:
        path = os.path.join(folder, record[feature])
        if not os.path.isfile(path):
            raise missing_file_error(path, f"{feature} SentencePiece model of "
                                     f"{record_path(folder, prefix)}", hint)
        models[feature] = _read_bytes(path)
    return record, models


def same_pretrained_vocab(folder: PathLike, prefix: str, other_folder: PathLike,
                          other_prefix: str) -> bool:
    """Whether two records hold the same models (byte for byte); errors as read_models."""
    return read_models(folder, prefix)[1] == read_models(other_folder, other_prefix)[1]


def read_record(folder: PathLike, prefix: str = RECORD_PREFIX, *,
                hint: str | None = None) -> dict[str, Any]:
    """The checked record `folder/PREFIX.json`: FileNotFoundError (with `hint`) when
    missing, PretrainedVocabError naming what is wrong when damaged."""
    path = record_path(folder, prefix)
    if not os.path.isfile(path):
        raise missing_file_error(path, "pretrained vocabulary record", hint)
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise PretrainedVocabError(f"{path} is not a JSON record ({e}); write it again "
                                   f"(t2t-import, or t2t-datagen --use_vocab_from).") from e
    problems = []
    if not isinstance(record, dict):
        problems.append(f"holds a {type(record).__name__}, not an object")
    else:
        if record.get("format") != FORMAT:
            problems.append(f"format {record.get('format')!r} (this t2t reads {FORMAT})")
        if record.get("kind") not in KINDS:
            problems.append(f"kind {record.get('kind')!r} (one of {KINDS})")
        size = record.get("vocab_size")
        if isinstance(size, bool) or not isinstance(size, int) or size <= UNK_ID:
            problems.append(f"vocab_size {size!r} (an int > {UNK_ID})")
        for feature in FEATURES:
            name = record.get(feature)
            if not isinstance(name, str) or not name or os.path.basename(name) != name:
                problems.append(f"{feature} {name!r} (a file name in the same folder)")
    if problems:
        raise PretrainedVocabError(f"{path} is not a pretrained vocabulary record: "
                                   f"{'; '.join(problems)}.")
    return record


def load_pretrained_encoders(folder: str, prefix: str = RECORD_PREFIX, *,
                             hint: str | None = None) -> dict[str, SentencePieceEncoder]:
    """{"inputs": ..., "targets": ...}: the record's models as SentencePieceEncoders
    loaded from their files (describe() names them; one encoder for both when the
    record names one file twice). FileNotFoundError (with `hint`) for a missing record
    or model, PretrainedVocabError for a damaged one or a piece count other than
    vocab_size."""
    record = read_record(folder, prefix, hint=hint)
    encoders: dict[str, SentencePieceEncoder] = {}
    for feature in FEATURES:
        if record[feature] == record["inputs"] and "inputs" in encoders:
            encoders[feature] = encoders["inputs"]
            continue
        model_file = os.path.join(folder, record[feature])
        if not os.path.isfile(model_file):
            raise missing_file_error(model_file, f"{feature} SentencePiece model of "
                                     f"{record_path(folder, prefix)}", hint)
        what = f"{model_file} ({feature} model of {record_path(folder, prefix)})"
        size = _check_model(_read_bytes(model_file), what)
        if size != record["vocab_size"]:
            raise PretrainedVocabError(f"{what} has {size} pieces; the record says "
                                       f"vocab_size {record['vocab_size']}.")
        encoders[feature] = SentencePieceEncoder(model_file=model_file)
    return encoders


def copy_pretrained_vocab(source_folder: str, folder: str, prefix: str, *,
                          source_prefix: str = RECORD_PREFIX) -> str:
    """Copies the vocabulary of `source_folder` (its SOURCE_PREFIX record: an imported
    run's vocab.pretrained.json) into `folder` under `prefix`; returns the new record's
    path. Same refusal as write_pretrained_vocab for a different vocabulary there."""
    record, models = read_models(source_folder, source_prefix, hint=IMPORTED_RUN_HINT)
    return write_pretrained_vocab(folder, models["inputs"], models["targets"],
                                  kind=record["kind"], source=record["source"], prefix=prefix)
