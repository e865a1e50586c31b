"""Keras-native export: a `.keras` file to reload and fine-tune, and a TFSMLayer SavedModel.

    version_dir = export_keras(problem, "transformer", hparams, data_dir, "RUN",
                               "RUN/export_keras")

writes RUN/export_keras/<unix timestamp>/ holding

  model.keras                   the trained model as a Keras 3 file: a T2TKerasModel
                                (a keras.Model registered as "t2t>T2TKerasModel") whose
                                config names the problem, the model and its hparams
                                (no data_dir needed to load it).
                                `import t2t.serving.keras_export` (registers the class),
                                then `keras.saving.load_model(path)`. Its call takes the
                                feature dict the model trains on ({"inputs", "targets"}
                                int32 ids [B, L]; images uint8 [B, H, W, C]) and returns
                                the logits float32 ([B, T, V] for text). compile() without
                                a loss trains with the model's own loss (padding-masked
                                cross-entropy, label smoothing as hparams say).
  saved_model/                  Keras 3's model.export() of the same call (endpoint
                                "serve"): keras.layers.TFSMLayer(path,
                                call_endpoint="serve") loads it where t2t is not installed.
  assets.extra/t2t_export.json  problem, model, checkpoint, hparams, feature specs,
                                files, versions (report_lines reads it)

Before the version directory appears (staging folder, then a rename, as t2t.serving.export
does), the .keras file is reloaded and must give the checkpoint's logits on a batch of
the problem's features; otherwise ExportError names the model and why.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.features import Modality, ProblemHParams
from t2t.hparams.hparams import HParams
from t2t.models import t2t_model
from t2t.serving import export as export_lib
from t2t.serving.export import EXPORT_INFO_FILE, ExportError

__all__ = ["ENDPOINT", "EXPORT_INFO_FILE", "KERAS_FILE", "SAVED_MODEL_DIR", "ExportError",
           "T2TKerasModel", "export_keras", "feature_specs", "report_lines"]

KERAS_FILE = "model.keras"
SAVED_MODEL_DIR = "saved_model"
ENDPOINT = "serve"  # the SavedModel's call endpoint (TFSMLayer's call_endpoint)
_ATOL = 1e-4  # reloaded logits vs the checkpoint's (float32, same graph)


def feature_specs(problem_hparams: ProblemHParams) -> dict[str, tf.TensorSpec]:
    """The batched features the model trains on: text ids int32 [None, None], class
    labels int32 [None, 1], images uint8 [None, H, W, C], real values float32."""
    specs = {}
    for name, kind in sorted(problem_hparams.modality.items()):
        if kind == Modality.IMAGE:
            shape = list(problem_hparams.image_shape or [None, None, 3])
            specs[name] = tf.TensorSpec([None, *shape], tf.uint8, name=name)
        elif kind == Modality.CLASS_LABEL:
            specs[name] = tf.TensorSpec([None, 1], tf.int32, name=name)
        elif kind == Modality.REAL:
            depth = problem_hparams.vocab_size.get(name) or 1
            specs[name] = tf.TensorSpec([None, None, depth], tf.float32, name=name)
        else:
            specs[name] = tf.TensorSpec([None, None], tf.int32, name=name)
    return specs


@keras.saving.register_keras_serializable(package="t2t")
class T2TKerasModel(keras.Model):
    """A t2t model as a plain keras.Model: features dict in, float32 logits out.

    Its config records what rebuilds the t2t model through t2t.registry (problem and
    model names, hparams values, problem hparams); the weights travel in the .keras
    file. `t2t_model_instance`: an already built model to wrap (e.g. from a checkpoint);
    `wrap` is the short way to make one.
    """

    def __init__(self, problem_name: str, model_name: str, hparams: dict[str, Any],
                 problem_hparams: dict[str, Any], t2t_model_instance: Any = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        # JSON text, not dicts: Keras would wrap attribute dicts in its tracking types.
        self._t2t_config = json.dumps({"problem_name": problem_name, "model_name": model_name,
                                       "hparams": hparams, "problem_hparams": problem_hparams})
        if t2t_model_instance is None:
            t2t_model_instance = t2t_model.create_model(
                model_name, HParams(**hparams), t2t_model.PREDICT,
                ProblemHParams.from_dict(problem_hparams))
        self.t2t_model = t2t_model_instance
        if not self.t2t_model.built or not self.t2t_model.weights:
            self.t2t_model.build_weights()  # every weight exists before .keras loads them
        self.built = True

    @classmethod
    def wrap(cls, model: Any, problem_name: str, model_name: str) -> T2TKerasModel:
        """The wrapper of a built t2t model (its hparams and problem hparams recorded)."""
        return cls(problem_name, model_name, model.hparams.values(),
                   model.problem_hparams.to_dict(), t2t_model_instance=model,
                   name=f"{model_name}_keras")

    @property
    def t2t_config(self) -> dict[str, Any]:
        """problem_name, model_name, hparams, problem_hparams."""
        return json.loads(self._t2t_config)

    def call(self, features: dict[str, tf.Tensor], training: bool | None = None) -> tf.Tensor:
        logits, losses = self.t2t_model(dict(features), training=bool(training))
        if training:  # a model's extra losses (e.g. mixture-of-experts balance) count too
            for name, (value, _) in losses.items():
                if name != "training":
                    self.add_loss(value)
        return tf.cast(logits, tf.float32)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """With no loss given to compile(): the model's own training loss on x["targets"]
        (or y), sum of weighted token losses / sum of weights, plus extra losses."""
        # Keras 3 keeps compile(loss=...) here; None when compile() got no loss.
        if getattr(self, "_compile_loss", None) is not None:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        targets = y if y is not None else x["targets"]
        numerator, denominator = self.t2t_model.loss(y_pred, {**x, "targets": targets},
                                                     bool(training))
        total = tf.cast(numerator, tf.float32) / tf.maximum(tf.cast(denominator, tf.float32), 1.0)
        for extra in self.losses:
            total += tf.cast(extra, tf.float32)
        return total

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable, **self.t2t_config}


# ------------------------------------------------------------------ export
def _sample_batch(problem: Any, data_dir: str | None, specs: dict[str, tf.TensorSpec],
                  php: ProblemHParams) -> tuple[dict[str, tf.Tensor], str]:
    """(batch, where from): up to 4 dev examples, padded; the model's one-example
    features when data_dir holds no dev data of the problem."""
    if data_dir is not None:
        try:
            examples = problem.dataset("eval", data_dir, deterministic=True)
            batch = next(iter(examples.map(lambda ex: {k: ex[k] for k in specs}).padded_batch(4)))
            return {k: tf.cast(v, specs[k].dtype) for k, v in batch.items()}, "dev"
        except problem_lib.DataMissingError:
            pass
    features = t2t_model.example_features(php)
    return {k: tf.cast(features[k], specs[k].dtype) for k in specs}, "example_features"


def _write_files(wrapper: T2TKerasModel, specs: dict[str, tf.TensorSpec], staging: str,
                 model_name: str) -> None:
    """model.keras and saved_model/ into staging; ExportError naming the model and why."""
    what = "the .keras file"
    try:
        wrapper.save(os.path.join(staging, KERAS_FILE))
        what = "the SavedModel (model.export)"
        wrapper.export(os.path.join(staging, SAVED_MODEL_DIR), format="tf_saved_model",
                       input_signature=[specs], verbose=False)
    except Exception as e:  # noqa: BLE001 - reported with the model's name
        raise ExportError(
            f"Model {model_name!r} cannot be written as {what}: {type(e).__name__}: "
            f"{str(e).strip()[:400]}. Export it as a SavedModel (--format=saved_model) "
            f"instead.") from e


def _check_reload(staging: str, batch: dict[str, tf.Tensor], want: np.ndarray,
                  model_name: str) -> None:
    """The .keras file, loaded back, gives the checkpoint's logits on batch."""
    try:
        reloaded = keras.saving.load_model(os.path.join(staging, KERAS_FILE))
        got = reloaded(batch, training=False).numpy()
    except Exception as e:  # noqa: BLE001 - reported with the model's name
        raise ExportError(
            f"Model {model_name!r}: its .keras file does not load back "
            f"({type(e).__name__}: {str(e).strip()[:400]}).") from e
    if got.shape != want.shape or not np.allclose(got, want, atol=_ATOL):
        worst = float(np.max(np.abs(got - want))) if got.shape == want.shape else "shape"
        raise ExportError(
            f"Model {model_name!r}: its .keras file loads back with other logits than the "
            f"checkpoint (largest difference {worst}, shapes {got.shape} vs {want.shape}); "
            f"nothing was exported.")


def _info(problem: Any, model_name: str, model: Any, checkpoint: str,
          specs: dict[str, tf.TensorSpec], want: np.ndarray, version: str) -> dict[str, Any]:
    return {
        "format": "keras",
        "problem": problem.name,
        "model": model_name,
        "checkpoint": os.path.abspath(checkpoint),
        "hparams": model.hparams.values(),
        "problem_hparams": model.problem_hparams.to_dict(),
        "features": {k: {"dtype": s.dtype.name, "shape": s.shape.as_list()}
                     for k, s in specs.items()},
        "logits": {"dtype": "float32", "shape": [None] * (want.ndim - 1) + [want.shape[-1]]},
        "files": {"keras": KERAS_FILE, "saved_model": SAVED_MODEL_DIR},
        "endpoint": ENDPOINT,
        "versions": {**export_lib.versions(), "keras": keras.__version__},
        "exported_at": int(version),
    }


def export_keras(problem: Any, model_name: str, hparams: HParams, data_dir: str | None,
                 checkpoint_path: str, export_dir: str | None = None, *,
                 model: Any = None) -> str:
    """Writes the Keras files of the checkpoint to export_dir/<timestamp>; returns that path.

    `checkpoint_path`: a checkpoint prefix or a run directory (its latest checkpoint);
    `export_dir` defaults to RUN/export_keras; `model`: an already loaded model
    (decoder.load_model) to reuse. ExportError when the model cannot be saved this way.
    """
    checkpoint = decoder_lib.resolve_checkpoint(checkpoint_path)
    if export_dir is None:
        run = checkpoint_path if os.path.isdir(checkpoint_path) else os.path.dirname(checkpoint)
        export_dir = os.path.join(run, "export_keras")
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    specs = feature_specs(model.problem_hparams)
    wrapper = T2TKerasModel.wrap(model, problem.name, model_name)
    batch, source = _sample_batch(problem, data_dir, specs, model.problem_hparams)
    want = wrapper(batch, training=False).numpy()
    os.makedirs(export_dir, exist_ok=True)
    version = export_lib.new_version(export_dir)
    staging = os.path.join(export_dir, f"temp-{version}-{os.getpid()}")
    version_dir = os.path.join(export_dir, version)
    try:
        os.makedirs(os.path.join(staging, "assets.extra"))
        _write_files(wrapper, specs, staging, model_name)
        _check_reload(staging, batch, want, model_name)
        info = _info(problem, model_name, model, checkpoint, specs, want, version)
        info["reload_check"] = {"examples": int(want.shape[0]), "batch": source}
        export_lib.write_json(os.path.join(staging, "assets.extra", EXPORT_INFO_FILE), info)
        os.replace(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return version_dir


# ------------------------------------------------------------------ report
def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(path) for f in files)


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def report_lines(version_dir: str) -> list[str]:
    """What t2t-exporter prints after "Exported: DIR": each file, its size, how to load it."""
    with open(os.path.join(version_dir, "assets.extra", EXPORT_INFO_FILE), encoding="utf-8") as f:
        info = json.load(f)
    keras_path = os.path.join(version_dir, info["files"]["keras"])
    saved_path = os.path.join(version_dir, info["files"]["saved_model"])
    show = ", ".join(f"{k}: {v['dtype']}{v['shape']}" for k, v in sorted(info["features"].items()))
    logits = info["logits"]
    check = info["reload_check"]
    return [
        f"Reloaded model.keras gave the checkpoint's logits on {check['examples']} "
        f"example(s) ({check['batch']}).",
        f"Features: ({show}) -> logits: {logits['dtype']}{logits['shape']}",
        f"  {keras_path} ({_human(_size(keras_path))}): with t2t installed, "
        "`import t2t.serving.keras_export` then `keras.saving.load_model(path)`; "
        "compile(optimizer) without a loss fine-tunes with the model's own loss.",
        f"  {saved_path} ({_human(_size(saved_path))}): without t2t, "
        f"`keras.layers.TFSMLayer(path, call_endpoint={info['endpoint']!r})`.",
    ]
