"""KServe's Open Inference Protocol (V2, https://kserve.github.io/website/latest/modelserving/
data_plane/v2_protocol/) on t2t-serve's HTTP port, over the same ModelStore and batch
queues as TF Serving's REST API.

    GET  /v2                                  {"name", "version", "extensions"}
    GET  /v2/health/live                      200 {"live": true} while the process serves
                                              (also while models load)
    GET  /v2/health/ready                     200 {"ready": true} once every model has a
                                              loaded, warmed-up version; else 503 naming
                                              the models that are not
    GET  /v2/models/NAME[/versions/V]/ready   200 {"name", "ready": true}, else 503 / 404
    GET  /v2/models/NAME[/versions/V]         {"name", "versions", "platform", "inputs",
                                              "outputs"} of a signature (serving_default;
                                              ?signature_name=S for another)
    POST /v2/models/NAME[/versions/V]/infer   {"id", "parameters": {"signature_name"},
                                              "inputs": [{"name", "shape", "datatype",
                                              "data"}], "outputs": [{"name"}]}
                                              -> {"model_name", "model_version", "id",
                                              "outputs": [{"name", "shape", "datatype",
                                              "data"}]}

An input the signature declares a scalar (shape [], e.g. a language model's generate
"temperature") is one value for the whole request: "shape": [] or [1] (what tritonclient
sends for a scalar) with one value in "data"; its metadata shape is [].

Tensor data is row-major, flat or nested. Strings (datatype BYTES) are JSON strings
(UTF-8 text) or, for bytes such as an encoded image or a WAV file, {"b64": "..."} with
base64 (TF Serving's REST form); a BYTES output comes back as text, or as {"b64": ...}
where it is not UTF-8. Errors are {"error": message} with 400 (bad request), 404 (unknown
model or version), 413, 429 or 503 (still loading, shutting down).
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from aiohttp import web

import t2t
from t2t.serving.metrics import note_request
from t2t.serving.model_store import ModelStore, ServableVersion, ServedModel
from t2t.serving.rest_api import (
    DEFAULT_SIGNATURE,
    PredictRequest,
    RequestError,
    SignatureSpec,
    examples_in,
    to_bytes,
)

PLATFORM = "tensorflow_savedmodel"  # Triton's name for a TensorFlow SavedModel
SERVER_NAME = "t2t-serve"

# TensorFlow dtype name -> the V2 datatype.
DATATYPES = {"bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
             "uint64": "UINT64", "int8": "INT8", "int16": "INT16", "int32": "INT32",
             "int64": "INT64", "float16": "FP16", "float32": "FP32", "float64": "FP64",
             "bfloat16": "BF16", "string": "BYTES"}
REQUEST_FIELDS = ("id", "parameters", "inputs", "outputs")
TENSOR_FIELDS = ("name", "shape", "datatype", "data", "parameters")


def datatype(dtype: str) -> str:
    """The V2 datatype of a TensorFlow dtype name ("float32" -> "FP32")."""
    return DATATYPES.get(dtype, dtype.upper())


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _close(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


# ----------------------------------------------------------------- request tensors
def _flatten(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise RequestError(f"{where}: \"data\" must be a list (flat or nested, row-major), "
                           f"got {_describe(data)}")
    flat: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat


def _element(value: Any, kind: str, where: str) -> Any:
    """One JSON element of a tensor of V2 datatype `kind`, as a Python value."""
    if kind == "BYTES":
        return to_bytes(value, where)
    if kind == "BOOL":
        if isinstance(value, bool):
            return value
        raise RequestError(f"{where}: BOOL wants true or false, got {_describe(value)}")
    if kind.startswith(("INT", "UINT")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise RequestError(f"{where}: {kind} wants an integer, got {_describe(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if isinstance(value, str) and value in special:
        return special[value]
    raise RequestError(f"{where}: {kind} wants a number, got {_describe(value)}")


def _check_shape(shape: Any, want: tuple[int | None, ...], where: str) -> list[int]:
    if not (isinstance(shape, list) and all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
        raise RequestError(f"{where}: \"shape\" must be a list of sizes >= 0, got "
                           f"{_describe(shape)}")
    wanted = "[" + ", ".join("-1" if s is None else str(s) for s in want) + "]"
    if len(shape) != len(want) or any(
            w is not None and w != s for w, s in zip(want, shape, strict=False)):
        raise RequestError(f"{where}: shape {shape} does not fit the signature's {wanted} "
                           "(-1: any size)")
    return shape


def _check_scalar_shape(shape: Any, where: str) -> list[int]:
    if not (shape == [] or (isinstance(shape, list) and len(shape) == 1
                            and type(shape[0]) is int and shape[0] == 1)):
        raise RequestError(f"{where}: shape {json.dumps(shape)}; the signature takes a scalar "
                           "(one value for the whole request): send \"shape\": [] (or [1]) "
                           "and one value in \"data\"")
    return shape


def _tensor(item: Any, index: int, spec: SignatureSpec) -> tuple[str, np.ndarray]:
    """One entry of "inputs" -> (input name, array of the signature's dtype)."""
    where = f"inputs[{index}]"
    if not isinstance(item, dict):
        raise RequestError(f"{where}: each input is an object {{\"name\", \"shape\", "
                           f"\"datatype\", \"data\"}}, got {_describe(item)}")
    unknown = sorted(set(item) - set(TENSOR_FIELDS))
    missing = [k for k in ("name", "shape", "datatype", "data") if k not in item]
    if unknown or missing:
        raise RequestError(f"{where}: unknown field(s) {unknown} / missing field(s) {missing}; "
                           "an input has \"name\", \"shape\", \"datatype\", \"data\"")
    name = item["name"]
    if not isinstance(name, str) or name not in spec.inputs:
        hint = _close(name, sorted(spec.inputs)) if isinstance(name, str) else ""
        raise RequestError(f"{where}: unknown input {name!r}{hint}; signature {spec.name!r} "
                           f"takes {sorted(spec.inputs)}")
    where = f"input {name!r}"
    _check_params(item.get("parameters"), where, {})
    info = spec.inputs[name]
    kind = datatype(info.dtype)
    if item["datatype"] != kind:
        raise RequestError(f"{where}: datatype {item['datatype']!r} does not match signature "
                           f"{spec.name!r}, which takes {kind}; send \"datatype\": \"{kind}\"")
    if info.is_scalar:  # shape [] or [1]: one value for the whole request
        shape = _check_scalar_shape(item["shape"], where)
    else:
        shape = _check_shape(item["shape"], info.shape, where)
    flat = [_element(v, kind, f"{where} data[{i}]")
            for i, v in enumerate(_flatten(item["data"], where))]
    if len(flat) != math.prod(shape):
        raise RequestError(f"{where}: shape {shape} holds {math.prod(shape)} element(s), "
                           f"\"data\" has {len(flat)}")
    if kind.startswith(("INT", "UINT")):
        limits = np.iinfo(info.numpy_dtype)
        outside = next((v for v in flat if not limits.min <= v <= limits.max), None)
        if outside is not None:
            raise RequestError(f"{where}: {outside} is outside {kind}'s range "
                               f"[{limits.min}, {limits.max}]")
    try:
        array = np.array(flat, dtype=info.numpy_dtype)
        return name, array.reshape(() if info.is_scalar else shape)
    except (ValueError, OverflowError) as e:
        raise RequestError(f"{where}: data does not fit {kind} ({e})") from None


def _check_params(params: Any, where: str, allowed: dict[str, type]) -> dict[str, Any]:
    """`params` (a "parameters" object) checked: only `allowed` keys of their types;
    the binary tensor extension's flags only when false."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise RequestError(f"{where}: \"parameters\" must be an object, got {_describe(params)}")
    for key, value in params.items():
        if key in ("binary_data", "binary_data_output", "binary_data_size"):
            if value is False:
                continue
            raise RequestError(f"{where}: parameter {key!r}: t2t-serve does not take binary "
                               "tensor data; send BYTES as JSON strings or {\"b64\": \"...\"}")
        if key not in allowed:
            raise RequestError(f"{where}: unknown parameter {key!r}; t2t-serve reads "
                               f"{sorted(allowed) or 'none here'}")
        if not isinstance(value, allowed[key]):
            raise RequestError(f"{where}: parameter {key!r} must be a "
                               f"{allowed[key].__name__}, got {_describe(value)}")
    return params


@dataclasses.dataclass
class InferRequest:
    """A parsed V2 infer request: the predict request for the batch queue, the request
    id (None: none given) and the outputs asked for (all: None)."""

    predict: PredictRequest
    id: str | None
    outputs: list[str] | None


def _requested_outputs(outputs: Any, spec: SignatureSpec) -> list[str] | None:
    if outputs is None or outputs == []:
        return None
    if not isinstance(outputs, list):
        raise RequestError(f"\"outputs\" must be a list of {{\"name\": ...}}, got "
                           f"{_describe(outputs)}")
    names = []
    for index, item in enumerate(outputs):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or name not in spec.outputs:
            hint = _close(name, sorted(spec.outputs)) if isinstance(name, str) else ""
            raise RequestError(f"outputs[{index}]: unknown output {name!r}{hint}; signature "
                               f"{spec.name!r} has {sorted(spec.outputs)}")
        _check_params(item.get("parameters"), f"outputs[{index}]", {})
        names.append(name)
    return names


def parse_infer(body: bytes | dict[str, Any], signatures: dict[str, SignatureSpec],
                max_batch_size: int = 0) -> InferRequest:
    """A V2 infer request body -> InferRequest; RequestError naming the bad field."""
    if not isinstance(body, dict):
        try:
            body = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise RequestError(f"the request body is not UTF-8 JSON ({e})") from None
        except RecursionError:
            raise RequestError("the request body nests JSON too deeply; a V2 tensor's "
                               "\"data\" is a flat or row-major nested list") from None
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object with \"inputs\", got "
                           f"{_describe(body)}")
    unknown = sorted(set(body) - set(REQUEST_FIELDS))
    if unknown:
        raise RequestError(f"unknown request field(s) {unknown}; an infer request has "
                           f"{list(REQUEST_FIELDS)}")
    if body.get("id") is not None and not isinstance(body["id"], str):
        raise RequestError(f"\"id\" must be a string, got {_describe(body['id'])}")
    params = _check_params(body.get("parameters"), "the request", {"signature_name": str})
    signature = params.get("signature_name", DEFAULT_SIGNATURE)
    if signature not in signatures:
        raise RequestError(f"unknown signature_name {signature!r}"
                           f"{_close(signature, sorted(signatures))}; this model has "
                           f"{sorted(signatures)}")
    spec = signatures[signature]
    items = body.get("inputs")
    if not isinstance(items, list) or not items:
        raise RequestError(f"\"inputs\" must be a non-empty list of tensors, got "
                           f"{_describe(items)}")
    inputs: dict[str, np.ndarray] = {}
    for index, item in enumerate(items):
        name, array = _tensor(item, index, spec)
        if name in inputs:
            raise RequestError(f"input {name!r} is given twice")
        inputs[name] = array
    missing = sorted(set(spec.inputs) - set(inputs))
    if missing:
        raise RequestError(f"missing input(s) {missing} of signature {spec.name!r}")
    sizes = sorted({array.shape[0] for array in inputs.values() if array.ndim})
    if len(sizes) > 1 or (sizes and sizes[0] == 0):
        raise RequestError(f"the inputs' first (batch) dimensions are {sizes}; they must be "
                           "one size >= 1")
    batch = examples_in(inputs)
    if max_batch_size and batch > max_batch_size:
        raise RequestError(f"{batch} examples in one request; this server takes at most "
                           f"{max_batch_size} (t2t-serve --max_batch_size)", 413)
    outputs = _requested_outputs(body.get("outputs"), spec)
    return InferRequest(PredictRequest(spec, inputs, batch, False), body.get("id"), outputs)


# ----------------------------------------------------------------- responses
def _json_element(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def output_tensor(name: str, array: np.ndarray) -> dict[str, Any]:
    """One output array as a V2 tensor {"name", "datatype", "shape", "data" (flat)}."""
    array = np.asarray(array)
    kind = "BYTES" if array.dtype == object or array.dtype.kind == "S" else datatype(
        array.dtype.name)
    data = [_json_element(v) for v in array.reshape(-1).tolist()]
    return {"name": name, "datatype": kind, "shape": list(array.shape), "data": data}


def infer_response(model_name: str, version: int, request: InferRequest,
                   outputs: dict[str, np.ndarray]) -> dict[str, Any]:
    names = request.outputs or sorted(outputs)
    response: dict[str, Any] = {"model_name": model_name, "model_version": str(version)}
    if request.id is not None:
        response["id"] = request.id
    response["outputs"] = [output_tensor(name, outputs[name]) for name in names]
    return response


def model_metadata(model: ServedModel, spec: SignatureSpec) -> dict[str, Any]:
    """The V2 model metadata of one signature of `model`."""
    def tensors(infos: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": name, "datatype": datatype(info.dtype),
                 "shape": [-1 if s is None else s for s in info.shape]}
                for name, info in sorted(infos.items())]

    return {"name": model.name, "versions": [str(v) for v in sorted(model.versions)],
            "platform": PLATFORM, "inputs": tensors(spec.inputs),
            "outputs": tensors(spec.outputs)}


# ----------------------------------------------------------------- routes
def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status,
                             dumps=lambda v: json.dumps(v, ensure_ascii=False))


def _version(request: web.Request) -> int | None:
    text = request.match_info.get("version")
    if text is None:
        return None
    if not text.isdigit():
        raise RequestError(f"version {text!r} is not a number; versions are the integer names "
                           "of the export folders", 404)
    return int(text)


class OpenInferenceApi:
    """The V2 routes of one server: `shutting_down()` says when to stop taking requests."""

    def __init__(self, store: ModelStore, shutting_down: Callable[[], bool]):
        self.store, self.shutting_down = store, shutting_down

    def _servable(self, model: ServedModel, version: int | None) -> ServableVersion:
        """The version to answer with; 503 while the model (or that version) still loads."""
        if version is None and not model.versions:
            raise RequestError(self.store.ready([model.name])[1][0], 503)
        if version is not None and version in model.loading:
            raise RequestError(f"version {version} of model {model.name!r} is still loading", 503)
        return model.resolve(version)

    async def server_metadata(self, request: web.Request) -> web.Response:
        """GET /v2: the server's name, version and extensions (KServe V2)."""
        note_request(request, "v2_metadata")
        return _json({"name": SERVER_NAME, "version": t2t.__version__, "extensions": []})

    async def live(self, request: web.Request) -> web.Response:
        """GET /v2/health/live: the process is up."""
        return _json({"live": True})

    async def ready(self, request: web.Request) -> web.Response:
        """GET /v2/health/ready: every model has a loaded version (503 otherwise)."""
        if self.shutting_down():
            return _json({"ready": False, "error": "the server is shutting down"}, 503)
        ready, reasons = self.store.ready()
        if not ready:
            return _json({"ready": False, "error": "; ".join(reasons)}, 503)
        return _json({"ready": True})

    async def model_ready(self, request: web.Request) -> web.Response:
        """GET /v2/models/NAME[/versions/N]/ready: that model (version) can answer."""
        labels = note_request(request, "v2_model_ready")
        model = self.store.model(request.match_info["name"])
        labels.model = model.name
        version = _version(request)
        labels.version = "" if version is None else version
        reason = "the server is shutting down" if self.shutting_down() else ""
        if not reason and version is None:
            reason = "; ".join(self.store.ready([model.name])[1])
        elif not reason and version not in model.versions:
            if version in model.loading:
                reason = f"version {version} of model {model.name!r} is still loading"
            elif version in model.failed:
                reason = (f"version {version} of model {model.name!r} failed to load: "
                          f"{model.failed[version][1]}")
            else:
                model.resolve(version)  # 503 unloading, 404 unknown
        if reason:
            return _json({"name": model.name, "ready": False, "error": reason}, 503)
        return _json({"name": model.name, "ready": True})

    async def model_metadata(self, request: web.Request) -> web.Response:
        """GET /v2/models/NAME[/versions/N]: its inputs and outputs (names, types,
        shapes)."""
        labels = note_request(request, "v2_metadata")
        model = self.store.model(request.match_info["name"])
        labels.model = model.name
        servable = self._servable(model, _version(request))
        labels.version = servable.version
        name = request.query.get("signature_name", DEFAULT_SIGNATURE)
        if name not in servable.signatures:
            raise RequestError(f"unknown signature_name {name!r}"
                               f"{_close(name, sorted(servable.signatures))}; this model has "
                               f"{sorted(servable.signatures)}")
        return _json(model_metadata(model, servable.signatures[name]))

    async def infer(self, request: web.Request) -> web.Response:
        """POST /v2/models/NAME[/versions/N]/infer: KServe V2 inference (JSON tensors)."""
        labels = note_request(request, "v2_infer")
        if self.shutting_down():
            raise RequestError("the server is shutting down", 503)
        model = self.store.model(request.match_info["name"])
        labels.model = model.name
        servable = self._servable(model, _version(request))
        labels.version = servable.version
        with servable.in_use():
            body = await request.read()
            parsed = parse_infer(body, servable.signatures, self.store.options.max_batch_size)
            outputs = await servable.predict(parsed.predict)
        return _json(infer_response(model.name, servable.version, parsed, outputs))


def add_routes(app: web.Application, store: ModelStore,
               shutting_down: Callable[[], bool]) -> OpenInferenceApi:
    """Adds the V2 routes over `store` to `app`."""
    api = OpenInferenceApi(store, shutting_down)
    router = app.router
    router.add_get("/v2", api.server_metadata)
    router.add_get("/v2/health/live", api.live)
    router.add_get("/v2/health/ready", api.ready)
    for model in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        router.add_get(model, api.model_metadata)
        router.add_get(model + "/ready", api.model_ready)
        router.add_post(model + "/infer", api.infer)
    return api
