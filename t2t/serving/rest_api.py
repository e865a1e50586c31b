"""TensorFlow Serving's REST API, as JSON <-> NumPy, for t2t-serve.

    spec = SignatureSpec.from_function("serving_default", loaded.signatures["serving_default"])
    request = parse_predict(body_bytes, {"serving_default": spec}, max_batch_size=64)
    outputs = ...  # {output name: np.ndarray [B, ...]} from running request.inputs
    body = predict_response(outputs, request.row_format)

Request bodies follow TF Serving (https://www.tensorflow.org/tfx/serving/api_rest):

  row format       {"signature_name": S, "instances": [I, ...]}: each instance I is a dict
                   {input name: value} or, for a one-input signature, the bare value;
                   -> {"predictions": [P, ...]}, each P a dict {output name: value} or,
                   with one output, the bare value.
  columnar format  {"signature_name": S, "inputs": {name: [B, ...]} or a bare [B, ...]}
                   -> {"outputs": {name: [B, ...]}} (or the bare value with one output).

As in TF Serving, each columnar input is a tensor of its signature's shape: an input of
shape [] (a scalar, e.g. a language model's generate "temperature") takes one bare value,
`"temperature": 0.8`, not a list. The row format gives every input a batch dimension, so
a signature with scalar inputs takes the columnar format only (a 400 names its scalars).

String values are UTF-8 text or {"b64": "..."} (base64 bytes, e.g. an encoded image or a
serialized tf.Example); string outputs come back as text, or {"b64": ...} when they are not
valid UTF-8. Every malformed request raises RequestError, whose message names the bad
field and what was expected; the server sends it as {"error": message} with its status.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import sys
from typing import Any

import numpy as np

DEFAULT_SIGNATURE = "serving_default"


class RequestError(ValueError):
    """A request the server refuses; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One input or output of a signature: dtype name (e.g. "string") and shape
    (None for unknown sizes; shape[0] is the batch)."""

    dtype: str
    shape: tuple[int | None, ...]
    unknown_rank: bool = False  # shape () then says nothing: any shape with a batch dim

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(object) if self.dtype == "string" else np.dtype(self.dtype)

    @property
    def is_scalar(self) -> bool:
        """Shape []: one value per request, not per example (it has no batch dimension)."""
        return not self.shape and not self.unknown_rank


@dataclasses.dataclass(frozen=True)
class SignatureSpec:
    """A signature's named inputs and outputs."""

    name: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]

    @classmethod
    def from_function(cls, name: str, fn: Any) -> SignatureSpec:
        """From a loaded SavedModel signature (a ConcreteFunction)."""
        import tensorflow as tf

        def info(spec: Any) -> TensorInfo:
            if spec.shape.rank is None:
                return TensorInfo(spec.dtype.name, (), unknown_rank=True)
            return TensorInfo(spec.dtype.name, tuple(spec.shape.as_list()))

        inputs = {spec.name: info(spec) for spec in tf.nest.flatten(fn.structured_input_signature)
                  if isinstance(spec, tf.TensorSpec)}
        outputs = {key: info(spec) for key, spec in fn.structured_outputs.items()}
        return cls(name, inputs, outputs)

    @property
    def scalar_inputs(self) -> list[str]:
        """The names of the inputs of shape [] (one value for the whole request)."""
        return sorted(name for name, info in self.inputs.items() if info.is_scalar)


def examples_in(inputs: dict[str, np.ndarray]) -> int:
    """The batch size of a request's inputs: the first dim of those that have one (all
    agree); 1 when every input is a scalar."""
    sizes = [len(array) for array in inputs.values() if array.ndim]
    return sizes[0] if sizes else 1


@dataclasses.dataclass
class PredictRequest:
    """A parsed predict request: `inputs` {name: np.ndarray [batch, ...]}."""

    signature: SignatureSpec
    inputs: dict[str, np.ndarray]
    batch_size: int
    row_format: bool


# ----------------------------------------------------------------- values
def to_bytes(value: Any, where: str) -> bytes:
    """A JSON string (UTF-8 text) or {"b64": ...} (any bytes) as bytes; RequestError else."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate, e.g. "\ud800" in the JSON
            raise RequestError(f"{where}: not valid Unicode ({value[e.start:e.end]!a} at "
                               f"character {e.start} is half of a UTF-16 pair); send text, "
                               "or {\"b64\": \"...\"} for bytes") from None
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError) as e:
            raise RequestError(f"{where}: invalid base64 in {{\"b64\": ...}} ({e})") from None
    raise RequestError(f"{where}: wants a string (text, or {{\"b64\": \"...\"}} for bytes), "
                       f"got {_describe(value)}")


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _nested_strings(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return [_nested_strings(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return to_bytes(value, where)


def _check_numbers(value: Any, info: TensorInfo, where: str) -> None:
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_numbers(v, info, f"{where}[{i}]")
        return
    ok = (isinstance(value, bool) if info.dtype == "bool" else
          isinstance(value, (int, float)) and not isinstance(value, bool))
    if ok and info.dtype.startswith(("int", "uint")) and isinstance(value, float):
        ok = math.isfinite(value) and value == int(value)
    if not ok:
        raise RequestError(f"{where}: wants {info.dtype}, got {_describe(value)}")


def to_array(value: Any, info: TensorInfo, where: str, batched: bool) -> np.ndarray:
    """The JSON `value` of one input as an array of `info`'s dtype; `batched`: value has
    the batch dimension (columnar format) or is one instance (row format)."""
    if info.dtype == "string":
        data = _nested_strings(value, where)
    else:
        _check_numbers(value, info, where)
        data = value
    try:
        with np.errstate(over="raise"):  # 1e308 is no float32: refused, not made inf
            array = np.array(data, dtype=info.numpy_dtype)
    except FloatingPointError:
        limit = np.finfo(info.numpy_dtype).max
        raise RequestError(f"{where}: a value is outside {info.dtype}'s range (+-{limit:.4g}); "
                           "send finite values within it") from None
    except (ValueError, OverflowError) as e:
        raise RequestError(f"{where}: not a {info.dtype} array ({e})") from None
    if info.dtype == "string" and array.dtype == object and _ragged(data):
        raise RequestError(f"{where}: rows of different lengths; every row needs the same shape")
    if info.is_scalar and array.ndim:
        raise RequestError(f"{where}: a scalar input (shape []) takes one bare {info.dtype} "
                           f"value, got shape {list(array.shape)}; send e.g. "
                           f"{_example_scalar(info)}, not a list")
    if info.unknown_rank:
        if batched and not array.ndim:
            raise RequestError(f"{where}: wants a batch (a list with one value per example), "
                               f"got {_describe(value)}")
        return array
    want = info.shape if batched else info.shape[1:]
    if len(want) != array.ndim:
        raise RequestError(f"{where}: wants {len(want)} dimension(s) "
                           f"{_shape_text(want)}, got shape {list(array.shape)}")
    for size, got in zip(want, array.shape, strict=True):
        if size is not None and size != got:
            raise RequestError(f"{where}: wants shape {_shape_text(want)}, got {list(array.shape)}")
    return array


def _example_scalar(info: TensorInfo) -> str:
    return {"string": '"text"', "bool": "true"}.get(
        info.dtype, "7" if info.dtype.startswith(("int", "uint")) else "0.5")


def _ragged(data: Any) -> bool:
    if not isinstance(data, list) or not data:
        return False
    if any(isinstance(d, list) for d in data):
        if not all(isinstance(d, list) for d in data) or len({len(d) for d in data}) > 1:
            return True
        return any(_ragged(d) for d in data)
    return False


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


# ----------------------------------------------------------------- requests
def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a request body."""
    try:
        value = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RequestError(f"the request body is not UTF-8 JSON ({e})") from None
    except ValueError as e:
        raise RequestError(f"malformed JSON in the request body: {e}") from None
    except RecursionError:
        raise RequestError(f"the request body nests arrays or objects too deeply "
                           f"(beyond ~{sys.getrecursionlimit()} levels)") from None
    if not isinstance(value, dict):
        raise RequestError(f"the request body must be a JSON object with \"instances\" or "
                           f"\"inputs\", got {_describe(value)}")
    return value


def _signature(body: dict[str, Any], signatures: dict[str, SignatureSpec]) -> SignatureSpec:
    name = body.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(name, str):
        raise RequestError(f"\"signature_name\" must be a string, got {_describe(name)}; "
                           f"this model has {sorted(signatures)}")
    if name not in signatures:
        raise RequestError(f"unknown signature_name {name!r}; this model has "
                           f"{sorted(signatures)}", 400)
    return signatures[name]


def _row_inputs(instances: Any, spec: SignatureSpec) -> dict[str, np.ndarray]:
    if spec.scalar_inputs:
        raise RequestError(
            f"signature {spec.name!r} has scalar input(s) {spec.scalar_inputs} (shape [], one "
            "value per request), which the row format (\"instances\") cannot send: use the "
            f"columnar format {{\"signature_name\": \"{spec.name}\", \"inputs\": "
            f"{{{_columnar_example(spec)}}}}}")
    if not isinstance(instances, list):
        raise RequestError(f"\"instances\" must be a list, got {_describe(instances)}")
    if not instances:
        raise RequestError("\"instances\" is empty; send at least one instance")
    names = sorted(spec.inputs)
    rows: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i, instance in enumerate(instances):
        if isinstance(instance, dict) and not (set(instance) == {"b64"} and len(names) == 1):
            _check_names(set(instance), spec, f"instances[{i}]")
            values = instance
        elif len(names) == 1:
            values = {names[0]: instance}
        else:
            raise RequestError(f"instances[{i}]: signature {spec.name!r} has inputs {names}; "
                               f"each instance must be an object naming them")
        for name in names:
            rows[name].append(to_array(values[name], spec.inputs[name],
                                       f"instances[{i}][{name!r}]", batched=False))
    out = {}
    for name in names:
        shapes = {r.shape for r in rows[name]}
        if len(shapes) > 1:
            raise RequestError(f"input {name!r}: instances have different shapes "
                               f"{sorted(list(s) for s in shapes)}; send them in separate "
                               "requests or pad them to one shape")
        out[name] = np.stack(rows[name])
    return out


def _columnar_example(spec: SignatureSpec) -> str:
    """The columnar "inputs" of `spec` as a client writes them: a list for each batched
    input, a bare value for each scalar."""
    parts = [f"\"{name}\": " + (_example_scalar(info) if info.is_scalar else "[...]")
             for name, info in sorted(spec.inputs.items())]
    return ", ".join(parts)


def _check_names(given: set[str], spec: SignatureSpec, where: str) -> None:
    unknown = sorted(given - set(spec.inputs))
    missing = sorted(set(spec.inputs) - given)
    if unknown:
        raise RequestError(f"{where}: unknown input name(s) {unknown}; signature "
                           f"{spec.name!r} takes {sorted(spec.inputs)}")
    if missing:
        raise RequestError(f"{where}: missing input(s) {missing} of signature {spec.name!r}")


def _columnar_inputs(inputs: Any, spec: SignatureSpec) -> dict[str, np.ndarray]:
    names = sorted(spec.inputs)
    if isinstance(inputs, dict) and not (set(inputs) == {"b64"} and len(names) == 1):
        _check_names(set(inputs), spec, "\"inputs\"")
        values = inputs
    elif len(names) == 1:
        values = {names[0]: inputs}
    else:
        raise RequestError(f"\"inputs\" must be an object naming the inputs {names}")
    out = {n: to_array(values[n], spec.inputs[n], f"inputs[{n!r}]", batched=True) for n in names}
    sizes = {len(a) if a.ndim else 0 for n, a in out.items() if not spec.inputs[n].is_scalar}
    if 0 in sizes:
        raise RequestError("\"inputs\" is empty; send at least one example")
    if len(sizes) > 1:
        raise RequestError(f"\"inputs\" have different batch sizes {sorted(sizes)}")
    return out


def parse_predict(body: bytes | dict[str, Any], signatures: dict[str, SignatureSpec],
                  max_batch_size: int = 0) -> PredictRequest:
    """A :predict request body -> PredictRequest; `max_batch_size` > 0 caps the examples
    of one request."""
    if not isinstance(body, dict):
        body = parse_body(body)
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RequestError(f"unknown request field(s) {unknown}; a predict request has "
                           "\"signature_name\" and one of \"instances\" or \"inputs\"")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError("a predict request needs exactly one of \"instances\" (row format) "
                           "or \"inputs\" (columnar format)")
    spec = _signature(body, signatures)
    row_format = "instances" in body
    try:
        inputs = (_row_inputs(body["instances"], spec) if row_format
                  else _columnar_inputs(body["inputs"], spec))
    except RecursionError:
        raise RequestError(f"{'instances' if row_format else 'inputs'}: lists nested too "
                           f"deeply for signature {spec.name!r}") from None
    batch = examples_in(inputs)
    if max_batch_size and batch > max_batch_size:
        raise RequestError(f"{batch} examples in one request; this server takes at most "
                           f"{max_batch_size} (t2t-serve --max_batch_size)", 413)
    return PredictRequest(spec, inputs, batch, row_format)


# ----------------------------------------------------------------- responses
def _json_value(value: Any) -> Any:
    """An output array (or one row of it: an array or a NumPy scalar) as JSON."""
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind == "S":
        return _strings(array.tolist())
    if array.dtype.kind == "f":
        return [_json_value(a) for a in array] if array.ndim else _float(float(array))
    return array.tolist()


def _float(x: float) -> float | str:
    # JSON has no NaN/Infinity; TF Serving writes them as these strings.
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _strings(value: Any) -> Any:
    if isinstance(value, list):
        return [_strings(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def predict_response(outputs: dict[str, np.ndarray], row_format: bool) -> dict[str, Any]:
    """Outputs {name: [B, ...]} -> TF Serving's {"predictions": [...]} (row format) or
    {"outputs": ...} (columnar)."""
    names = sorted(outputs)
    if not row_format:
        if len(names) == 1:
            return {"outputs": _json_value(outputs[names[0]])}
        return {"outputs": {n: _json_value(outputs[n]) for n in names}}
    scalars = [n for n in names if not np.ndim(outputs[n])]
    if scalars:
        raise RequestError(f"output(s) {scalars} of this signature are scalars (shape []), "
                           "which the row format cannot answer; send the columnar format "
                           "(\"inputs\" instead of \"instances\")")
    batch = len(outputs[names[0]])
    if len(names) == 1:
        return {"predictions": [_json_value(outputs[names[0]][i]) for i in range(batch)]}
    return {"predictions": [{n: _json_value(outputs[n][i]) for n in names} for i in range(batch)]}


# TensorFlow's DataType enum names where they differ from "DT_" + the dtype name.
_DT_NAMES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF"}


def _tensor_info_json(info: TensorInfo) -> dict[str, Any]:
    dims = [{"size": str(-1 if s is None else s), "name": ""} for s in info.shape]
    return {"dtype": _DT_NAMES.get(info.dtype, "DT_" + info.dtype.upper()),
            "tensor_shape": {"dim": dims, "unknown_rank": info.unknown_rank}}


def signature_def_json(spec: SignatureSpec) -> dict[str, Any]:
    """One signature in TF Serving's metadata form (signature_def)."""
    return {"inputs": {n: _tensor_info_json(i) for n, i in sorted(spec.inputs.items())},
            "outputs": {n: _tensor_info_json(i) for n, i in sorted(spec.outputs.items())},
            "method_name": "tensorflow/serving/predict"}
