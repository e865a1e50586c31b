"""Warm-up of a model version before it serves: its first real request should not pay
the graph optimizations and kernel set-up a loaded SavedModel does on its first call
(~1 s for a small transformer here).

    report = run_warmup(version_dir, signatures, info, run)   # WarmupError on a failure

What runs, as TensorFlow Serving does (https://www.tensorflow.org/tfx/serving/saved_model_warmup):

  assets.extra/tf_serving_warmup_requests   when the version has it: a TFRecord file of
      tensorflow.serving.PredictionLog protos, each a predict_log whose request names a
      signature (model_spec.signature_name, default serving_default) and its inputs
      (TensorProtos); at most MAX_WARMUP_RECORDS (1,000, TF Serving's limit) records.
  otherwise t2t's own requests               one small request per signature, made from
      the signature's inputs and what assets.extra/t2t_export.json says about them: a dev
      input the parity gate decoded (text), a blank image of the model's size, a short
      silent WAV at the problem's sample rate, a tf.Example of ids; a language model's
      generate settings greedy with one new token. A signature whose inputs are all
      outputs of one warmed before it is then called once with those outputs (a chain:
      the LM streaming step, generate_step, gets generate_start's decoding state, so a
      stream's first step is as fast as its next ones). A SavedModel t2t did not export
      (no t2t_export.json) gets none, as in TF Serving, and a signature with an input
      nothing describes is skipped; both are logged: give such a model a warm-up file.

`run(signature, inputs)` runs one request ({input: array [B, ...]}) and raises with a
message fit for a client on a failure. Every failure is a WarmupError naming the record
or request and the reason (never a server path): the version's load fails, and the
versions already serving keep serving.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import time
import wave
from collections.abc import Callable
from typing import Any

import numpy as np
from absl import logging

from t2t.serving.rest_api import DEFAULT_SIGNATURE, SignatureSpec, TensorInfo

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_WARMUP_RECORDS = 1000  # TF Serving's WarmupConsts::kMaxNumRecords
SILENCE_SECONDS = 0.25  # the t2t warm-up WAV of a speech export

RunFn = Callable[[str, dict[str, np.ndarray]], dict[str, np.ndarray]]


class WarmupError(ValueError):
    """A warm-up that failed: the message names the request and the reason."""


@dataclasses.dataclass(frozen=True)
class WarmupRequest:
    """One warm-up call: `inputs` {name: array [B, ...]} of `signature`; `origin` says
    where it came from ("tf_serving_warmup_requests record 3", "t2t")."""

    signature: str
    inputs: dict[str, np.ndarray]
    origin: str


@dataclasses.dataclass(frozen=True)
class WarmupReport:
    """What a warm-up ran: `source` "tf_serving_warmup_requests", "t2t" or "none"."""

    source: str
    requests: int
    seconds: float
    skipped: tuple[str, ...] = ()


# ----------------------------------------------------------------- TF Serving's file
def _check_inputs(inputs: dict[str, np.ndarray], spec: SignatureSpec, where: str) -> None:
    """WarmupError unless `inputs` are the signature's, with its dtypes and shapes."""
    unknown, missing = sorted(set(inputs) - set(spec.inputs)), sorted(set(spec.inputs) - set(inputs))
    if unknown or missing:
        raise WarmupError(f"{where}: signature {spec.name!r} takes inputs {sorted(spec.inputs)}; "
                          f"the request has unknown {unknown} and lacks {missing}")
    batch_sizes = set()
    for name, array in sorted(inputs.items()):
        info = spec.inputs[name]
        got = "string" if array.dtype == object else array.dtype.name
        if got != info.dtype:
            raise WarmupError(f"{where}: input {name!r} is {got}; signature {spec.name!r} "
                              f"takes {info.dtype}")
        if array.ndim != len(info.shape) or any(
                want is not None and want != size
                for want, size in zip(info.shape, array.shape, strict=False)):
            raise WarmupError(f"{where}: input {name!r} has shape {list(array.shape)}; "
                              f"signature {spec.name!r} takes {_shape_text(info.shape)}")
        if array.ndim:
            batch_sizes.add(array.shape[0])
    if 0 in batch_sizes or len(batch_sizes) > 1:
        raise WarmupError(f"{where}: the inputs' batch sizes are {sorted(batch_sizes)}; send one "
                          "batch size >= 1")


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


def _records(path: str) -> list[bytes]:
    """The records of a TFRecord file, at most MAX_WARMUP_RECORDS (WarmupError beyond)."""
    import tensorflow as tf

    records = []
    try:
        for record in tf.data.TFRecordDataset(path).take(MAX_WARMUP_RECORDS + 1):
            records.append(record.numpy())
    except tf.errors.OpError as e:
        raise WarmupError(f"{WARMUP_FILE} is not a readable TFRecord file ({type(e).__name__}); "
                          "write it with tf.io.TFRecordWriter") from None
    if len(records) > MAX_WARMUP_RECORDS:
        raise WarmupError(f"{WARMUP_FILE} has more than {MAX_WARMUP_RECORDS} records, TF "
                          "Serving's limit; keep a few representative requests")
    return records


def read_warmup_file(path: str, signatures: dict[str, SignatureSpec]) -> list[WarmupRequest]:
    """The predict requests of a tf_serving_warmup_requests file, checked against
    `signatures`; WarmupError naming the first bad record."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for index, record in enumerate(_records(path)):
        where = f"{WARMUP_FILE} record {index}"
        try:
            log = prediction_log_pb2.PredictionLog.FromString(record)
        except DecodeError:
            raise WarmupError(f"{where} is not a tensorflow.serving.PredictionLog") from None
        kind = log.WhichOneof("log_type")
        if kind != "predict_log":
            raise WarmupError(f"{where} is a {kind or 'empty PredictionLog'}; t2t-serve's "
                              "models have predict signatures: write predict_log records")
        request = log.predict_log.request
        name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        if name not in signatures:
            raise WarmupError(f"{where} names signature {name!r}; the model has "
                              f"{sorted(signatures)}")
        inputs = {}
        for key, proto in request.inputs.items():
            try:
                inputs[key] = tf.make_ndarray(proto)
            except (TypeError, ValueError) as e:
                raise WarmupError(f"{where}: input {key!r} is not a valid TensorProto "
                                  f"({e})") from None
        _check_inputs(inputs, signatures[name], where)
        requests.append(WarmupRequest(name, inputs, where))
    return requests


def write_warmup_file(path: str, requests: list[WarmupRequest], model_name: str = "") -> None:
    """Writes `requests` as TF Serving's warm-up file (a TFRecord of PredictionLogs)."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for item in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=item.signature),
                inputs={name: tf.make_tensor_proto(value) for name, value in item.inputs.items()})
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


# ----------------------------------------------------------------- t2t's own requests
def silent_wav(sample_rate: int, seconds: float = SILENCE_SECONDS) -> bytes:
    """A mono 16-bit WAV file of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(sample_rate)
        f.writeframes(b"\0\0" * int(sample_rate * seconds))
    return buffer.getvalue()


def blank_png(shape: list[int]) -> bytes:
    """A PNG of mid-grey pixels [height, width, channels]."""
    import tensorflow as tf

    height, width, channels = shape
    channels = channels if channels in (1, 3, 4) else 3
    return tf.io.encode_png(tf.fill([height, width, channels], tf.constant(128, tf.uint8))).numpy()


def sample_text(info: dict[str, Any], feature: str = "inputs") -> str:
    """A text the export reads: a dev input its parity gate decoded, else a few tokens
    of its vocabulary, else ""."""
    for sample in (info.get("parity") or {}).get("samples") or []:
        try:  # the gate records repr(text); "<image>" and "<N bytes of WAV>" are no text
            text = ast.literal_eval(str(sample.get("input", "")))
        except (ValueError, SyntaxError):
            continue
        if isinstance(text, str) and text.strip():
            return text
    encoder = (info.get("encoders") or {}).get(feature) or {}
    if encoder.get("type") == "token" and encoder.get("vocab"):
        return " ".join([t for t in encoder["vocab"] if not t.startswith("<")][:4])
    if encoder.get("type") == "character" and encoder.get("chars"):
        return "".join(encoder["chars"][:4])
    return ""


def _tf_example(features: dict[str, bytes | list[int]]) -> bytes:
    import tensorflow as tf

    feature = {}
    for name, value in features.items():
        if isinstance(value, bytes):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


class _T2tInputs:
    """The warm-up value of one example of each kind of t2t export input."""

    def __init__(self, info: dict[str, Any]):
        php = info.get("problem_hparams") or {}
        self.kind = (php.get("modality") or {}).get("inputs")
        self.image_shape = php.get("image_shape")
        self.sample_rate = int(php.get("audio_sample_rate") or 16000)
        self.is_lm = "inputs" not in (php.get("modality") or {})
        self.text = sample_text(info, "targets" if self.is_lm else "inputs")
        self.target_text = sample_text(info, "targets")

    def raw(self) -> bytes:
        """serving_default's "inputs": text, encoded image or WAV bytes."""
        if self.kind == "image" and self.image_shape:
            return blank_png(self.image_shape)
        if self.kind == "audio":
            return silent_wav(self.sample_rate)
        return self.text.encode("utf-8")

    def example(self) -> bytes:
        """serve_tf_example's "examples": a tf.Example as t2t-datagen stores one."""
        if self.kind == "image" and self.image_shape:
            return _tf_example({"image/encoded": blank_png(self.image_shape)})
        if self.kind == "audio":
            pcm = b"\0\0" * int(self.sample_rate * SILENCE_SECONDS)
            return _tf_example({"audio/encoded": pcm})
        return _tf_example({"targets" if self.is_lm else "inputs": [2, 1]})  # a token, EOS


# Values of the LM "generate" signature's settings: greedy, one new token.
_SETTING_VALUES = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 1, "seed": 1}


def _t2t_value(name: str, info: TensorInfo, values: _T2tInputs) -> np.ndarray | None:
    """One example of input `name` with a batch dimension (scalars: a scalar), or None
    when nothing says what the input holds."""
    shape = [1 if size is None else size for size in info.shape]
    if info.dtype != "string":
        known = name in _SETTING_VALUES  # other numbers (a decoding state) are not guessed
        return np.full(shape, _SETTING_VALUES[name], info.numpy_dtype) if known else None
    if len(shape) != 1:
        return None
    value = {"inputs": values.raw, "examples": values.example,
             "outputs": lambda: values.target_text.encode("utf-8")}.get(name)
    return None if value is None else np.array([value()] * shape[0], dtype=object)


def t2t_warmup_requests(signatures: dict[str, SignatureSpec], info: dict[str, Any]
                        ) -> tuple[list[WarmupRequest], list[str]]:
    """(one request per signature that can be made, the skipped signatures with why);
    `info`: the export's t2t_export.json ({} for a SavedModel t2t did not export: no
    request is made up for it, as TF Serving makes none)."""
    if not info.get("problem_hparams"):
        return [], [f"{name} (not a t2t export)" for name in sorted(signatures)]
    values = _T2tInputs(info)
    requests, skipped = [], []
    for name, spec in sorted(signatures.items()):
        inputs = {key: _t2t_value(key, tensor, values) for key, tensor in spec.inputs.items()}
        unknown = sorted(key for key, value in inputs.items() if value is None)
        if unknown:
            skipped.append(f"{name} (nothing describes its input(s) {unknown})")
            continue
        requests.append(WarmupRequest(name, inputs, f"t2t warm-up of {name!r}"))
    return requests, skipped


def chained_requests(signatures: dict[str, SignatureSpec],
                     outputs: dict[str, dict[str, np.ndarray]]) -> list[WarmupRequest]:
    """A request for each signature not in `outputs` ({signature warmed: its outputs})
    whose every input is an output of one warmed signature, with that output's dtype
    and shape: generate_step fed generate_start's decoding state."""
    requests = []
    for name, spec in sorted(signatures.items()):
        if name in outputs or not spec.inputs:
            continue
        for source, produced in sorted(outputs.items()):
            if not set(spec.inputs) <= set(produced):
                continue
            inputs = {key: np.asarray(produced[key]) for key in spec.inputs}
            try:
                _check_inputs(inputs, spec, "")
            except WarmupError:
                continue
            requests.append(WarmupRequest(name, inputs, f"t2t warm-up of {name!r} with the "
                                                        f"outputs of {source!r}"))
            break
    return requests


# ----------------------------------------------------------------- running
def _run_one(run: RunFn, request: WarmupRequest) -> dict[str, np.ndarray]:
    """`request`'s outputs; WarmupError naming it on a failure."""
    try:
        return run(request.signature, request.inputs)
    except Exception as e:  # noqa: BLE001 - any failure fails the load, named
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WarmupError(f"warm-up failed: {request.origin} (signature "
                          f"{request.signature!r}): {reason}") from None


def run_warmup(version_dir: str, signatures: dict[str, SignatureSpec], info: dict[str, Any],
               run: RunFn) -> WarmupReport:
    """Runs the version's warm-up requests (TF Serving's file, else t2t's own) through
    `run`; WarmupError on the first failure."""
    start = time.perf_counter()
    skipped: list[str] = []
    if os.path.exists(os.path.join(version_dir, WARMUP_FILE)):
        source = "tf_serving_warmup_requests"
        requests = read_warmup_file(os.path.join(version_dir, WARMUP_FILE), signatures)
    else:
        source = "t2t"
        requests, skipped = t2t_warmup_requests(signatures, info)
    outputs = {request.signature: _run_one(run, request) for request in requests}
    if source == "t2t":
        for request in chained_requests(signatures, outputs):
            _run_one(run, request)
            requests.append(request)
            skipped = [s for s in skipped if not s.startswith(f"{request.signature} (")]
    seconds = time.perf_counter() - start
    logging.info("t2t-serve: warmed up %s: %d request(s) (%s) in %.2f s.", version_dir,
                 len(requests), source, seconds)
    if skipped:
        logging.info("t2t-serve: warm-up skipped signature(s) %s; add %s to warm them.",
                     "; ".join(skipped), WARMUP_FILE)
    return WarmupReport(source if requests else "none", len(requests), seconds, tuple(skipped))
