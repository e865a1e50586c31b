"""SavedModel export of a trained model, checked against t2t's own decoding.

    version_dir = export(problem, "transformer", hparams, data_dir, "RUN",
                         "RUN/export", DecodeHParams.parse("beam_size=4,alpha=0.6"))

writes RUN/export/<unix timestamp>/ (TF Serving's layout) holding

  saved_model.pb, variables/     the model's weights and two signatures:
    serving_default   {"inputs": string [B]} raw text (image problems: encoded PNG/JPEG
                      bytes) -> {"outputs": string [B] decoded text (or class name),
                      "scores": float32 [B]} (+ "beams" string [B, K], "beam_scores"
                      float32 [B, K] with return_beams). Tokenization is in the graph.
    serve_tf_example  {"examples": string [B]} serialized tf.train.Examples with int64
                      "inputs" token ids as t2t-datagen writes them (image problems:
                      "image/encoded") -> {"outputs": int64 [B, L] ids (0 after EOS),
                      "scores"} (+ "beams" int64 [B, K, L], "beam_scores"). Stock ops only.
  assets/                        the vocabulary files (token/character/class lists,
                                 SentencePiece model), for reference
  assets.extra/t2t_export.json   problem, model, checkpoint, decode settings, encoders,
                                 signatures, versions; assets.extra/hparams.json

An ensemble (t2t.decoding.ensemble.EnsembleModel, passed as `model`) exports like one
model: its signatures decode with the combined log-probabilities, its variables are all
the members'; t2t_export.json's "checkpoint" joins the members' with ":" and its
"ensemble" names them and the combination; hparams.json holds each member's hparams
(a list, in member order).

The decode settings (beam_size, alpha, extra_length, temperature, top_k, top_p,
return_beams, max_input_length) are fixed at export time; as in t2t's Decoder, the
decode length is the longest input of a request (EOS included) + extra_length.

SentencePiece problems: their text signature uses tensorflow_text ops, and a SavedModel
holding them cannot even be loaded (tf.saved_model.load: "Op type not registered")
where tensorflow_text is not imported. So their export also writes a second, ids-only
SavedModel at EXPORT_DIR_ids_only/<same version>/ (TF Serving's layout): serving_default
and serve_tf_example are both the tf.Example signature above, stock ops only, the
vocabulary still in assets/. Each one's t2t_export.json names both ("text_export",
"ids_only_export"). Other problems' text signatures use stock ops already: one
SavedModel. `text_signature=False` writes only the ids-only SavedModel, in EXPORT_DIR.

The module and its signatures are built by t2t.serving.serving_module; the parity gate
(t2t.serving.parity) runs before the export is moved to its version directory: a fresh
Python process that imports only TensorFlow loads it and must decode dev examples
exactly as t2t's Decoder does, otherwise the export is deleted. With a sibling, both
are checked and moved in only when both passed; a failure leaves neither.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging as std_logging
import os
import shutil
import tempfile
import time
from typing import Any

from absl import logging

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import ensemble as ensemble_lib
from t2t.decoding import settings as settings_lib
from t2t.hparams.hparams import HParams
from t2t.serving.parity import EXPORT_INFO_FILE, ParityError, check_parity, quiet
from t2t.serving.serving_module import (
    EXAMPLES_SIGNATURE,
    TEXT_SIGNATURE,
    ExportError,
    build_serving_module,
)
from t2t.utils import write_errors

__all__ = ["EXAMPLES_SIGNATURE", "EXPORT_INFO_FILE", "ExportError", "ExportWriteError",
           "HPARAMS_FILE",
           "IDS_ONLY_SUFFIX", "ParityError", "TEXT_SIGNATURE", "build_serving_module",
           "check_parity", "export", "ids_only_export_dir"]

HPARAMS_FILE = "hparams.json"
IDS_ONLY_SUFFIX = "_ids_only"  # EXPORT_DIR + this: a SentencePiece problem's ids-only export
PARITY_EXAMPLES = 6  # dev examples decoded by the parity gate (ExportConfig.parity_examples)


def _signature_info(signatures: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf

    info = {}
    for name, fn in signatures.items():
        inputs = {spec.name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                  for spec in tf.nest.flatten(fn.structured_input_signature)}
        outputs = {key: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                   for key, spec in fn.structured_outputs.items()}
        info[name] = {"inputs": inputs, "outputs": outputs}
    return info


# ----------------------------------------------------------------- assets
def write_vocab_assets(encoders: dict[str, Any], folder: str) -> list[str]:
    """Writes each feature's vocabulary file into folder; returns the paths."""
    paths = []
    for feature, encoder in sorted(encoders.items()):
        if encoder is None:
            continue
        kind = getattr(encoder, "type_name", "")
        if kind == "sentencepiece":
            path = os.path.join(folder, f"{feature}.sentencepiece.model")
            with open(path, "wb") as f:
                f.write(encoder.model_proto)
        elif kind in ("token", "character", "class_label"):
            path = os.path.join(folder, f"{feature}.{kind}.txt")
            encoder.save(path)
        elif kind == "subword":  # a copy: store_to_file would point the encoder at it
            path = os.path.join(folder, f"{feature}.subwords")
            copy.copy(encoder).store_to_file(path)
        else:
            continue
        paths.append(path)
    return paths


def describe(encoder: Any) -> dict[str, Any] | None:
    if encoder is None:
        return None
    try:
        return encoder.describe()
    except ValueError:  # a SentencePiece model never saved to a file
        return {"type": encoder.type_name, "vocab_size": encoder.vocab_size}


def versions() -> dict[str, str]:
    import tensorflow as tf

    import t2t

    versions = {"t2t": t2t.__version__, "tensorflow": tf.__version__}
    try:
        import tensorflow_text

        versions["tensorflow_text"] = tensorflow_text.__version__
    except ImportError:
        pass
    return versions


def new_version(*export_dirs: str) -> str:
    """A unix timestamp that is a version in none of export_dirs."""
    version = int(time.time())
    while any(os.path.exists(os.path.join(d, str(version))) for d in export_dirs):
        version += 1
    return str(version)


def ids_only_export_dir(export_dir: str) -> str:
    """Where the ids-only sibling of export_dir's SentencePiece exports goes: RUN/export
    -> RUN/export_ids_only (its own TF Serving model base path)."""
    return os.path.abspath(os.path.expanduser(export_dir)).rstrip(os.sep) + IDS_ONLY_SUFFIX


def _needs_tensorflow_text(module: Any) -> bool:
    return any(getattr(getattr(module, name, None), "needs_tensorflow_text", False)
               for name in ("inputs_tokenizer", "targets_tokenizer"))


# ------------------------------------------------------------------ export
def write_json(path: str, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def _save_module(module: Any, signatures: dict[str, Any], encoders: dict[str, Any],
                 staging: str) -> None:
    """tf.saved_model.save of the module, with the vocabularies as assets."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as vocab_dir:
        module.vocabulary = {
            os.path.basename(p): tf.saved_model.Asset(p)
            for p in write_vocab_assets(encoders, vocab_dir)
        }
        with quiet("tensorflow", std_logging.WARNING):  # renamed-capture chatter
            tf.saved_model.save(module, staging, signatures=signatures)


@dataclasses.dataclass
class _Source:
    """What every SavedModel of one export is made from."""

    problem: Any
    model_name: str
    model: Any
    checkpoint: str
    dhp: DecodeHParams
    settings: settings_lib.DecodeSettings
    encoders: dict[str, Any]
    data_dir: str | None


@dataclasses.dataclass
class _Target:
    """One SavedModel of an export: staged in `staging`, then moved to `version_dir`."""

    module: Any
    signatures: dict[str, Any]
    text_signature: bool
    version_dir: str
    staging: str
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


def _export_info(source: _Source, target: _Target, version: str) -> dict[str, Any]:
    """What assets.extra/t2t_export.json records about an export."""
    model = source.model
    ensemble = isinstance(model, ensemble_lib.EnsembleModel)
    return {
        "problem": source.problem.name,
        "model": source.model_name,
        "checkpoint": ":".join(os.path.abspath(c) for c in ensemble_lib.split_members(
            source.checkpoint)) if ensemble else os.path.abspath(source.checkpoint),
        **({"ensemble": model.describe()} if ensemble else {}),
        "decode_hparams": dataclasses.asdict(source.dhp),
        "serving_settings": source.settings.to_dict(),
        "problem_hparams": model.problem_hparams.to_dict(),
        "encoders": {k: describe(v) for k, v in sorted(source.encoders.items())},
        "signatures": _signature_info(target.signatures),
        "needs_tensorflow_text": _needs_tensorflow_text(target.module),
        "text_signature": target.text_signature,
        "versions": versions(),
        "exported_at": int(version),
    }


def _ids_only_module(source: _Source) -> tuple[Any, dict[str, Any]]:
    """The module and signatures of an ids-only SavedModel: stock TF ops only."""
    module, signatures = build_serving_module(source.model, source.problem, source.encoders,
                                              source.settings, text_signature=False)
    for name in ("inputs_tokenizer", "targets_tokenizer"):
        # No ids-only signature uses a tokenizer, but a tracked one (a language model's)
        # would save its tensorflow_text resource, and loading would need tensorflow_text.
        if hasattr(module, name):
            delattr(module, name)
    return module, signatures


def _stage(source: _Source, target: _Target, version: str, links: dict[str, str]) -> None:
    """Saves target's SavedModel and its assets.extra into target.staging."""
    _save_module(target.module, target.signatures, source.encoders, target.staging)
    target.info = {**_export_info(source, target, version), **links}
    extra = os.path.join(target.staging, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    write_json(os.path.join(extra, EXPORT_INFO_FILE), target.info)
    model = source.model
    write_json(os.path.join(extra, HPARAMS_FILE),
                [m.hparams.values() for m in model.members]
                if isinstance(model, ensemble_lib.EnsembleModel) else model.hparams.values())


class ExportWriteError(ExportError):
    """An export could not be written (a full disk, a file-size limit); nothing of it is
    left and the exports already there are untouched."""


def _write_error(target: _Target, error: BaseException) -> ExportWriteError:
    why, fix, text = write_errors.describe(error)
    folder = os.path.dirname(target.version_dir)
    versions = sorted(v for v in os.listdir(folder) if v.isdigit()) if os.path.isdir(folder) else []
    kept = (f"the exports already there ({', '.join(versions)}) are kept as they were"
            if versions else "no earlier export is there")
    return ExportWriteError(
        f"Could not write the export {target.version_dir}: {why} ({text[:240]}). Its staging "
        f"folder was deleted and {kept}. {fix}, then run the same command again.")


def _write_all(source: _Source, targets: list[_Target], version: str, parity_check: bool,
               parity_examples: int) -> None:
    """Stages every target, runs the parity gate on each, then moves them all in; on any
    failure none is left (staging deleted, versions moved in taken out again)."""
    import tensorflow as tf

    links = {}
    if len(targets) > 1:
        links = {"text_export": targets[0].version_dir, "ids_only_export": targets[1].version_dir}
    moved: list[str] = []
    try:
        for target in targets:
            _stage(source, target, version, links)
        if parity_check:
            for target in targets:
                target.info["parity"] = check_parity(
                    target.staging, source.problem, source.model, source.data_dir, source.dhp,
                    parity_examples, info=target.info)
                write_json(os.path.join(target.staging, "assets.extra", EXPORT_INFO_FILE),
                            target.info)
        for target in targets:
            os.replace(target.staging, target.version_dir)
            moved.append(target.version_dir)
    except BaseException as e:
        for path in [*moved, *(t.staging for t in targets)]:
            shutil.rmtree(path, ignore_errors=True)
        if isinstance(e, (OSError, tf.errors.OpError)) and write_errors.is_out_of_space(e):
            raise _write_error(targets[0], e) from e
        raise


def _checkpoint_and_run(checkpoint_path: str, model: Any) -> tuple[str, str]:
    """(the checkpoint prefix, or an ensemble's joined with ":"; the run folder whose
    export/ is the default export_dir: an ensemble's first member's)."""
    if isinstance(model, ensemble_lib.EnsembleModel):
        return model.checkpoint_path, os.path.dirname(model.names[0])
    checkpoint = decoder_lib.resolve_checkpoint(checkpoint_path)
    run = checkpoint_path if os.path.isdir(checkpoint_path) else os.path.dirname(checkpoint)
    return checkpoint, run


def export(
    problem: problem_lib.Problem,
    model_name: str,
    hparams: HParams,
    data_dir: str | None,
    checkpoint_path: str,
    export_dir: str | None = None,
    decode_hparams: DecodeHParams | str | None = None,
    *,
    parity_check: bool = True,
    parity_examples: int = PARITY_EXAMPLES,
    text_signature: bool = True,
    model: Any = None,
) -> str:
    """Exports the checkpoint as a SavedModel in export_dir/<timestamp>; returns that path.

    `checkpoint_path`: a checkpoint prefix or a run directory (its latest checkpoint);
    `export_dir` defaults to RUN/export. `decode_hparams`: DecodeHParams or their string.
    When the text signature needs tensorflow_text (SentencePiece), the ids-only sibling
    goes to ids_only_export_dir(export_dir)/<same timestamp> (its t2t_export.json and
    the returned one's name it: "ids_only_export").
    `model` may be an ensemble (t2t.decoding.ensemble.load_ensemble): `checkpoint_path`
    is then not read (the members' checkpoints are the ensemble's).
    `text_signature=False` leaves out the in-graph tokenizers (serving_default is then
    the tf.Example signature): no tensorflow_text ops even for SentencePiece problems,
    and no sibling. `model`: an already loaded model (load_model) to reuse. With
    `parity_check` (the default) each SavedModel is verified in a fresh process (see
    t2t.serving.parity).
    """
    dhp = decode_hparams
    if dhp is None or isinstance(dhp, str):
        dhp = DecodeHParams.parse(dhp or "")
    checkpoint, run = _checkpoint_and_run(checkpoint_path, model)
    if export_dir is None:
        export_dir = os.path.join(run, "export")
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    encoders = problem.feature_encoders(data_dir)
    source = _Source(problem, model_name, model, checkpoint, dhp,
                     settings_lib.resolve(dhp, model), encoders, data_dir)
    if text_signature:
        built = [build_serving_module(model, problem, encoders, source.settings,
                                      text_signature=True)]
        if _needs_tensorflow_text(built[0][0]):
            built.append(_ids_only_module(source))
    else:
        built = [_ids_only_module(source)]
    dirs = [export_dir, ids_only_export_dir(export_dir)][:len(built)]
    created = [d for d in dirs if not os.path.isdir(d)]
    for folder in dirs:
        os.makedirs(folder, exist_ok=True)
    version = new_version(*dirs)
    targets = [_Target(module, signatures, text_signature and index == 0,
                       os.path.join(folder, version),
                       os.path.join(folder, f"temp-{version}-{os.getpid()}"))
               for index, ((module, signatures), folder) in enumerate(zip(built, dirs, strict=True))]
    try:
        _write_all(source, targets, version, parity_check, parity_examples)
    except BaseException:
        for folder in created:  # an ids-only folder this failed export made, now empty
            if folder == export_dir:
                continue
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise
    for target in targets:
        logging.info("Exported %s to %s.", checkpoint, target.version_dir)
    return targets[0].version_dir
