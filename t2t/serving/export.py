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

The decode settings (beam_size, alpha, extra_length, temperature, top_k, top_p,
return_beams, max_input_length) are fixed at export time; as in t2t's Decoder, the
decode length is the longest input of a request (EOS included) + extra_length.

The module and its signatures are built by t2t.serving.serving_module; the parity gate
(t2t.serving.parity) runs before the export is moved to its version directory: a fresh
Python process that imports only TensorFlow loads it and must decode dev examples
exactly as t2t's Decoder does, otherwise the export is deleted.
"""

from __future__ import annotations

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
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import settings as settings_lib
from t2t.hparams.hparams import HParams
from t2t.problems import problem as problem_lib
from t2t.serving.parity import EXPORT_INFO_FILE, ParityError, check_parity, quiet
from t2t.serving.serving_module import (
    EXAMPLES_SIGNATURE,
    TEXT_SIGNATURE,
    ExportError,
    build_serving_module,
)

__all__ = ["EXAMPLES_SIGNATURE", "EXPORT_INFO_FILE", "ExportError", "HPARAMS_FILE",
           "ParityError", "TEXT_SIGNATURE", "build_serving_module", "check_parity", "export"]

HPARAMS_FILE = "hparams.json"
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
def _write_vocab_assets(encoders: dict[str, Any], folder: str) -> list[str]:
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
        else:
            continue
        paths.append(path)
    return paths


def _describe(encoder: Any) -> dict[str, Any] | None:
    if encoder is None:
        return None
    try:
        return encoder.describe()
    except ValueError:  # a SentencePiece model never saved to a file
        return {"type": encoder.type_name, "vocab_size": encoder.vocab_size}


def _versions() -> dict[str, str]:
    import tensorflow as tf

    import t2t

    versions = {"t2t": t2t.__version__, "tensorflow": tf.__version__}
    try:
        import tensorflow_text

        versions["tensorflow_text"] = tensorflow_text.__version__
    except ImportError:
        pass
    return versions


def _new_version(export_dir: str) -> str:
    version = int(time.time())
    while os.path.exists(os.path.join(export_dir, str(version))):
        version += 1
    return str(version)


# ------------------------------------------------------------------ export
def _write_json(path: str, value: Any) -> None:
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
            for p in _write_vocab_assets(encoders, vocab_dir)
        }
        with quiet("tensorflow", std_logging.WARNING):  # renamed-capture chatter
            tf.saved_model.save(module, staging, signatures=signatures)


def _export_info(problem: Any, model_name: str, model: Any, checkpoint: str,
                 dhp: DecodeHParams, settings: settings_lib.DecodeSettings,
                 encoders: dict[str, Any], module: Any, signatures: dict[str, Any],
                 text_signature: bool, version: str) -> dict[str, Any]:
    """What assets.extra/t2t_export.json records about an export."""
    needs_tensorflow_text = any(
        getattr(getattr(module, name, None), "needs_tensorflow_text", False)
        for name in ("inputs_tokenizer", "targets_tokenizer")
    )
    return {
        "problem": problem.name,
        "model": model_name,
        "checkpoint": os.path.abspath(checkpoint),
        "decode_hparams": dataclasses.asdict(dhp),
        "serving_settings": settings.to_dict(),
        "problem_hparams": model.problem_hparams.to_dict(),
        "encoders": {k: _describe(v) for k, v in sorted(encoders.items())},
        "signatures": _signature_info(signatures),
        "needs_tensorflow_text": needs_tensorflow_text,
        "text_signature": text_signature,
        "versions": _versions(),
        "exported_at": int(version),
    }


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
    `text_signature=False` leaves out the in-graph tokenizers (serving_default is then
    the tf.Example signature): no tensorflow_text ops even for SentencePiece problems.
    `model`: an already loaded model (load_model) to reuse. With `parity_check` (the
    default) the export is verified in a fresh process (see t2t.serving.parity).
    """
    dhp = decode_hparams
    if dhp is None or isinstance(dhp, str):
        dhp = DecodeHParams.parse(dhp or "")
    checkpoint = decoder_lib.resolve_checkpoint(checkpoint_path)
    if export_dir is None:
        run = checkpoint_path if os.path.isdir(checkpoint_path) else os.path.dirname(checkpoint)
        export_dir = os.path.join(run, "export")
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    encoders = problem.feature_encoders(data_dir)
    settings = settings_lib.resolve(dhp, model)
    module, signatures = build_serving_module(model, problem, encoders, settings,
                                              text_signature=text_signature)
    os.makedirs(export_dir, exist_ok=True)
    version = _new_version(export_dir)
    staging = os.path.join(export_dir, f"temp-{version}-{os.getpid()}")
    try:
        _save_module(module, signatures, encoders, staging)
        info = _export_info(problem, model_name, model, checkpoint, dhp, settings, encoders,
                            module, signatures, text_signature, version)
        extra = os.path.join(staging, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        _write_json(os.path.join(extra, EXPORT_INFO_FILE), info)
        _write_json(os.path.join(extra, HPARAMS_FILE), model.hparams.values())
        if parity_check:
            info["parity"] = check_parity(staging, problem, model, data_dir, dhp,
                                          parity_examples, info=info)
            _write_json(os.path.join(extra, EXPORT_INFO_FILE), info)
        version_dir = os.path.join(export_dir, version)
        os.replace(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logging.info("Exported %s to %s.", checkpoint, version_dir)
    return version_dir
