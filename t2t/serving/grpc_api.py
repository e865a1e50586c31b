"""TensorFlow Serving's gRPC messages <-> NumPy, for t2t-serve's gRPC server.

    request = decode(raw_bytes, predict_pb2.PredictRequest, max_request_bytes)
    name, version, label = model_spec_choice(request.model_spec)
    parsed = predict_inputs(request, servable.signatures, max_batch_size, max_request_bytes)
    outputs = await servable.predict(parsed)           # {name: np.ndarray [B, ...]}
    reply = predict_response(outputs, request.output_filter, name, version, parsed)

The messages are TF Serving's own (tensorflow-serving-api's protos): a client written for
tensorflow_model_server talks to t2t-serve unchanged. A TensorProto carries its values in
`tensor_content` (raw little-endian bytes, what tf.make_tensor_proto writes for numbers)
or in the typed field of its dtype (float_val, int64_val, string_val, ...); one value
fills the whole shape (as TensorFlow reads it). An input the signature declares a scalar
(shape [], e.g. a language model's generate "temperature") takes a TensorProto of shape []
only, as in TF Serving (`tf.make_tensor_proto(0.8)`); shape [1] is refused naming the fix.
Every malformed message raises GrpcError whose code is INVALID_ARGUMENT (or
RESOURCE_EXHAUSTED for sizes over the limits) and whose message names the bad field and
the fix; RequestError's HTTP statuses map to gRPC codes with `status_code`, so REST and
gRPC clients read the same one-line errors.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError, Message
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow.core.protobuf import error_codes_pb2, meta_graph_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_pb2,
    predict_pb2,
)

from t2t.serving.rest_api import (
    DEFAULT_SIGNATURE,
    PredictRequest,
    RequestError,
    SignatureSpec,
    TensorInfo,
    examples_in,
)

# RequestError's HTTP status -> the gRPC code TF Serving answers with.
_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
          405: grpc.StatusCode.UNIMPLEMENTED, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
          429: grpc.StatusCode.RESOURCE_EXHAUSTED, 500: grpc.StatusCode.INTERNAL,
          503: grpc.StatusCode.UNAVAILABLE}
METADATA_FIELD = "signature_def"
PREDICT_METHOD = "tensorflow/serving/predict"


class GrpcError(Exception):
    """A call the server refuses: `code` (grpc.StatusCode) and a one-line message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def status_code(http_status: int) -> grpc.StatusCode:
    """The gRPC code of a RequestError's HTTP status (UNKNOWN for an unlisted one)."""
    return _CODES.get(http_status, grpc.StatusCode.UNKNOWN)


def from_request_error(error: RequestError) -> GrpcError:
    return GrpcError(status_code(error.status), str(error))


def _invalid(message: str) -> GrpcError:
    return GrpcError(grpc.StatusCode.INVALID_ARGUMENT, message)


def _too_large(message: str) -> GrpcError:
    return GrpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def _close(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


# ----------------------------------------------------------------- messages
def decode(raw: bytes, message_type: type[Message], max_bytes: int) -> Any:
    """The `message_type` message serialized in `raw`; refuses more than `max_bytes`."""
    if len(raw) > max_bytes:
        raise _too_large(f"the {message_type.DESCRIPTOR.name} is {len(raw)} bytes; the limit is "
                         f"{max_bytes} bytes (t2t-serve --max_request_bytes)")
    try:
        return message_type.FromString(raw)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise _invalid(f"malformed {message_type.DESCRIPTOR.full_name}: the bytes do not parse "
                       f"({e}); send one serialized with tensorflow-serving-api's protos") from None


def model_spec_choice(spec: model_pb2.ModelSpec) -> tuple[str, int | None, str | None]:
    """(model name, version or None, version label or None) of a ModelSpec."""
    if not spec.name:
        raise _invalid("model_spec.name is empty; name the model to call (t2t-serve "
                       "--model_name, or a NAME of --models)")
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        if spec.version.value < 0:
            raise _invalid(f"model_spec.version {spec.version.value} is negative; versions are "
                           "the integer names of the export folders")
        return spec.name, spec.version.value, None
    if choice == "version_label":
        if not spec.version_label:
            raise _invalid("model_spec.version_label is empty; give a label such as 'stable' "
                           "or leave the version unset for the newest")
        return spec.name, None, spec.version_label
    return spec.name, None, None


# ----------------------------------------------------------------- tensors
@dataclasses.dataclass(frozen=True)
class DTypeCodec:
    """How one TensorFlow dtype travels in a TensorProto."""

    name: str  # TensorFlow's name, as TensorInfo.dtype: "float32", "string"
    enum: int  # types_pb2.DataType
    numpy: np.dtype  # little-endian, as tensor_content holds it
    field: str  # the typed values field


def _codecs() -> dict[str, DTypeCodec]:
    rows = [("float32", "DT_FLOAT", "<f4", "float_val"),
            ("float64", "DT_DOUBLE", "<f8", "double_val"),
            ("float16", "DT_HALF", "<f2", "half_val"), ("int32", "DT_INT32", "<i4", "int_val"),
            ("int16", "DT_INT16", "<i2", "int_val"), ("int8", "DT_INT8", "i1", "int_val"),
            ("uint8", "DT_UINT8", "u1", "int_val"), ("uint16", "DT_UINT16", "<u2", "int_val"),
            ("int64", "DT_INT64", "<i8", "int64_val"), ("uint32", "DT_UINT32", "<u4", "uint32_val"),
            ("uint64", "DT_UINT64", "<u8", "uint64_val"), ("bool", "DT_BOOL", "?", "bool_val"),
            ("string", "DT_STRING", "O", "string_val")]
    return {name: DTypeCodec(name, types_pb2.DataType.Value(enum), np.dtype(numpy), field)
            for name, enum, numpy, field in rows}


CODECS = _codecs()
_BY_ENUM = {codec.enum: codec for codec in CODECS.values()}
_VALUE_FIELDS = sorted({c.field for c in CODECS.values()} | {
    "scomplex_val", "dcomplex_val", "resource_handle_val", "variant_val", "float8_val"})


def dtype_enum_name(enum: int) -> str:
    """DT_FLOAT for types_pb2.DT_FLOAT; the number for a value no DataType has."""
    try:
        return types_pb2.DataType.Name(enum)
    except ValueError:
        return f"DataType {enum}"


def _codec(info: TensorInfo, where: str) -> DTypeCodec:
    if info.dtype not in CODECS:
        raise _invalid(f"{where}: the signature's dtype {info.dtype} cannot be sent over gRPC by "
                       f"t2t-serve (it takes {sorted(CODECS)}); use the REST API")
    return CODECS[info.dtype]


def _proto_shape(proto: tensor_pb2.TensorProto, where: str) -> tuple[int, ...]:
    if proto.tensor_shape.unknown_rank:
        raise _invalid(f"{where}: tensor_shape.unknown_rank is set; give the tensor's dims")
    shape = tuple(d.size for d in proto.tensor_shape.dim)
    if any(size < 0 for size in shape):
        raise _invalid(f"{where}: tensor_shape {list(shape)} has a negative dim; a request "
                       "tensor has known sizes")
    return shape


def _typed_values(proto: tensor_pb2.TensorProto, codec: DTypeCodec, where: str) -> np.ndarray:
    """The values of `codec.field` as a 1-D array (range-checked for the narrow ints)."""
    values = getattr(proto, codec.field)
    if codec.name == "string":
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
        return array
    if codec.field in ("int_val", "half_val"):
        array = np.array(values, dtype=np.int64)
        target = np.dtype(np.uint16) if codec.field == "half_val" else codec.numpy
        info = np.iinfo(target)
        bad = array[(array < info.min) | (array > info.max)]
        if bad.size:
            what = "float16 bit pattern" if codec.field == "half_val" else codec.name
            raise _invalid(f"{where}: {codec.field} value {int(bad[0])} is out of range for "
                           f"{what} [{info.min}, {info.max}]")
        array = array.astype(target)
        return array.view(np.float16) if codec.field == "half_val" else array
    return np.array(values, dtype=codec.numpy)


def _stray_fields(proto: tensor_pb2.TensorProto, codec: DTypeCodec) -> list[str]:
    return [f for f in _VALUE_FIELDS if f != codec.field and len(getattr(proto, f))]


def tensor_to_array(proto: tensor_pb2.TensorProto, info: TensorInfo, where: str,
                    max_bytes: int) -> np.ndarray:
    """A request TensorProto as an array of the signature's `info` (dtype and shape,
    shape[0] the batch); `max_bytes` caps the array a few values may fill."""
    codec = _codec(info, where)
    if proto.dtype != codec.enum:
        got = "no dtype (DT_INVALID)" if proto.dtype == 0 else dtype_enum_name(proto.dtype)
        raise _invalid(f"{where}: has {got}; the signature wants {dtype_enum_name(codec.enum)}")
    shape = _proto_shape(proto, where)
    size = math.prod(shape)
    nbytes = size * (1 if codec.name == "string" else codec.numpy.itemsize)
    if nbytes > max_bytes:
        raise _too_large(f"{where}: shape {list(shape)} holds {size} values ({nbytes} bytes), "
                         f"more than the request limit of {max_bytes} bytes (t2t-serve "
                         "--max_request_bytes)")
    stray = _stray_fields(proto, codec)
    if stray:
        raise _invalid(f"{where}: values in {stray}, but {dtype_enum_name(codec.enum)} keeps "
                       f"them in {codec.field} or tensor_content")
    if proto.tensor_content:
        if codec.name == "string":
            raise _invalid(f"{where}: DT_STRING values go in string_val, not tensor_content")
        if len(proto.tensor_content) != nbytes:
            raise _invalid(f"{where}: tensor_content has {len(proto.tensor_content)} bytes; shape "
                           f"{list(shape)} of {codec.name} needs {nbytes}")
        array = np.frombuffer(proto.tensor_content, dtype=codec.numpy).reshape(shape)
    else:
        values = _typed_values(proto, codec, where)
        if len(values) == 1 and size > 1:  # one value fills the shape, as TensorFlow reads it
            values = np.repeat(values, size)
        if len(values) != size:
            raise _invalid(f"{where}: {len(values)} value(s) in {codec.field} for shape "
                           f"{list(shape)} ({size} values); send {size} (or one, repeated)")
        array = values.reshape(shape)
    _check_shape(array.shape, info, where)
    return array.astype(codec.numpy.newbyteorder("="), copy=False)


def _check_shape(got: tuple[int, ...], info: TensorInfo, where: str) -> None:
    """As TF Serving: a scalar input (shape []) takes a TensorProto of shape [] only; any
    other input a tensor of its shape, the first dim the batch."""
    want = info.shape
    if info.is_scalar:
        if got:
            raise _invalid(f"{where}: shape {list(got)}; the signature wants a scalar (shape [], "
                           "one value for the whole request): send a TensorProto with no dims, "
                           "e.g. tf.make_tensor_proto(value, dtype)")
        return
    text = "[" + ", ".join("?" if s is None else str(s) for s in want) + "]"
    if not got:
        raise _invalid(f"{where}: a scalar; the signature wants shape {text} (the first dim is "
                       "the batch)")
    if want and (len(want) != len(got) or any(
            w is not None and w != g for w, g in zip(want, got, strict=True))):
        raise _invalid(f"{where}: shape {list(got)}; the signature wants {text}")


def array_to_tensor(array: np.ndarray) -> tensor_pb2.TensorProto:
    """An output array as a TensorProto with typed values (as TF Serving answers)."""
    array = np.asarray(array)
    proto = tensor_pb2.TensorProto()
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=s)
                                  for s in array.shape)
    if array.dtype == object or array.dtype.kind in "SU":
        proto.dtype = types_pb2.DT_STRING
        proto.string_val.extend(v.encode("utf-8") if isinstance(v, str) else bytes(v)
                                for v in array.ravel().tolist())
        return proto
    codec = CODECS.get(array.dtype.name)
    if codec is None:
        raise RequestError(f"output dtype {array.dtype.name} cannot be sent over gRPC by "
                           "t2t-serve; use the REST API", 500)
    proto.dtype = codec.enum
    flat = array.ravel()
    if codec.field == "half_val":
        flat = flat.view(np.uint16)
    getattr(proto, codec.field).extend(flat.tolist())
    return proto


# ----------------------------------------------------------------- predict
def _signature(name: str, signatures: dict[str, SignatureSpec]) -> SignatureSpec:
    name = name or DEFAULT_SIGNATURE
    if name not in signatures:
        raise _invalid(f"unknown model_spec.signature_name {name!r}{_close(name, signatures)}; "
                       f"this model has {sorted(signatures)}")
    return signatures[name]


def _check_names(given: Sequence[str], spec: SignatureSpec, field: str,
                 known: dict[str, TensorInfo]) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        hint = _close(unknown[0], known)
        raise _invalid(f"unknown {field} name(s) {unknown}{hint}; signature {spec.name!r} has "
                       f"{sorted(known)}")


def predict_inputs(request: predict_pb2.PredictRequest, signatures: dict[str, SignatureSpec],
                   max_batch_size: int, max_bytes: int) -> PredictRequest:
    """A PredictRequest proto as the REST parser's PredictRequest: the same batching queue
    and model call answer both. `max_batch_size` > 0 caps the examples of one request."""
    spec = _signature(request.model_spec.signature_name, signatures)
    _check_names(list(request.inputs), spec, "input", spec.inputs)
    missing = sorted(set(spec.inputs) - set(request.inputs))
    if missing:
        raise _invalid(f"missing input(s) {missing} of signature {spec.name!r}")
    _check_names(list(request.output_filter), spec, "output_filter", spec.outputs)
    for name in spec.inputs.keys() - spec.scalar_inputs:  # before a few values fill a huge shape
        _check_batch(request.inputs[name].tensor_shape, max_batch_size)
    inputs = {name: tensor_to_array(request.inputs[name], spec.inputs[name],
                                    f"inputs[{name!r}]", max_bytes)
              for name in sorted(spec.inputs)}
    sizes = sorted({len(a) for name, a in inputs.items() if not spec.inputs[name].is_scalar})
    if len(sizes) > 1:
        raise _invalid(f"the inputs have different batch sizes {sizes} (the first dim)")
    if sizes and sizes[0] == 0:
        raise _invalid("the inputs have batch size 0; send at least one example")
    return PredictRequest(spec, inputs, examples_in(inputs), row_format=False)


def _check_batch(shape: tensor_shape_pb2.TensorShapeProto, max_batch_size: int) -> None:
    batch = shape.dim[0].size if shape.dim else 0
    if max_batch_size and batch > max_batch_size:
        raise _too_large(f"{batch} examples in one request; this server takes at most "
                         f"{max_batch_size} (t2t-serve --max_batch_size)")


def _spec(name: str, version: int, signature_name: str = "") -> model_pb2.ModelSpec:
    spec = model_pb2.ModelSpec(name=name, signature_name=signature_name)
    spec.version.value = version
    return spec


def predict_response(outputs: dict[str, np.ndarray], output_filter: Sequence[str], name: str,
                     version: int, request: PredictRequest) -> predict_pb2.PredictResponse:
    """The outputs (all, or those in `output_filter`) as TF Serving's PredictResponse."""
    reply = predict_pb2.PredictResponse(model_spec=_spec(name, version, request.signature.name))
    for key in sorted(set(output_filter) or outputs):
        reply.outputs[key].CopyFrom(array_to_tensor(outputs[key]))
    return reply


# ----------------------------------------------------------------- metadata and status
def _tensor_info(info: TensorInfo) -> meta_graph_pb2.TensorInfo:
    proto = meta_graph_pb2.TensorInfo(dtype=CODECS[info.dtype].enum if info.dtype in CODECS
                                      else types_pb2.DataType.Value("DT_" + info.dtype.upper()))
    proto.tensor_shape.unknown_rank = info.unknown_rank
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(
        size=-1 if s is None else s) for s in info.shape)
    return proto


def signature_def(spec: SignatureSpec) -> meta_graph_pb2.SignatureDef:
    """One signature as TF Serving's metadata describes it."""
    proto = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    for name, info in sorted(spec.inputs.items()):
        proto.inputs[name].CopyFrom(_tensor_info(info))
    for name, info in sorted(spec.outputs.items()):
        proto.outputs[name].CopyFrom(_tensor_info(info))
    return proto


def check_metadata_fields(fields: Sequence[str]) -> None:
    if not fields:
        raise _invalid(f"metadata_field is empty; ask for [{METADATA_FIELD!r}]")
    for field in fields:
        if field != METADATA_FIELD:
            raise _invalid(f"metadata_field {field!r} is not supported; t2t-serve answers "
                           f"{METADATA_FIELD!r}")


def metadata_response(name: str, version: int, signatures: dict[str, SignatureSpec]
                      ) -> get_model_metadata_pb2.GetModelMetadataResponse:
    """TF Serving's answer: a SignatureDefMap packed in an Any under "signature_def"."""
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for key, spec in sorted(signatures.items()):
        signature_map.signature_def[key].CopyFrom(signature_def(spec))
    reply = get_model_metadata_pb2.GetModelMetadataResponse(model_spec=_spec(name, version))
    reply.metadata[METADATA_FIELD].Pack(signature_map)
    return reply


def status_response(rows: list[dict[str, Any]]) -> get_model_status_pb2.GetModelStatusResponse:
    """ServedModel.status() rows as TF Serving's GetModelStatusResponse."""
    reply = get_model_status_pb2.GetModelStatusResponse()
    for row in rows:
        status = reply.model_version_status.add(
            version=int(row["version"]),
            state=get_model_status_pb2.ModelVersionStatus.State.Value(row["state"]))
        status.status.error_code = error_codes_pb2.Code.Value(row["status"]["error_code"])
        status.status.error_message = row["status"]["error_message"]
    return reply
