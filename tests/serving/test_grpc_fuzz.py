"""Property-based fuzzing of t2t-serve's gRPC request handling: random PredictRequests
(random TensorProtos: dtypes, shapes, values in any field, raw tensor_content; wrong names,
versions and signatures; truncated, bit-flipped or random bytes) go through the Predict,
GetModelMetadata and GetModelStatus logic over a real store of a toy SavedModel. Every one
is answered, or refused with a client error (INVALID_ARGUMENT, NOT_FOUND,
RESOURCE_EXHAUSTED): none crashes (INTERNAL), none hangs."""

import asyncio
import collections
import math
import os

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from t2t.serving.batching import BatchingOptions
from t2t.serving.grpc_api import GrpcError
from t2t.serving.grpc_server import CallRecord, Services, failure_status
from t2t.serving.model_store import ModelStore, VersionPolicy
from tests.helpers.serving import save_toy

EXAMPLES = 1100
MAX_BYTES = 4096
CLIENT_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.RESOURCE_EXHAUSTED}
DTYPES = [types_pb2.DT_FLOAT, types_pb2.DT_STRING, types_pb2.DT_INT32, types_pb2.DT_INT64,
          types_pb2.DT_INT8, types_pb2.DT_UINT8, types_pb2.DT_HALF, types_pb2.DT_BOOL,
          types_pb2.DT_DOUBLE, types_pb2.DT_UINT64, types_pb2.DT_COMPLEX64, types_pb2.DT_INVALID,
          types_pb2.DT_BFLOAT16, types_pb2.DT_RESOURCE, 999]
SHAPES = [(), (0,), (1,), (2,), (3,), (1, 2), (3, 2), (2, 3), (0, 2), (1, 1, 1), (-1,),
          (2, -2), (2**31,), (2**62, 2), (2**40, 2**40), (1, 2**31), (2, 2**20)]
# Each typed field, filled from random bytes (one draw per field: fast to generate).
FIELD_DTYPES = {"float_val": "<f4", "double_val": "<f8", "int_val": "<i4", "half_val": "<i4",
                "int64_val": "<i8", "uint32_val": "<u4", "uint64_val": "<u8", "bool_val": "?",
                "string_val": None}
# The toy's signatures: name -> (input name, strings?); "scale" takes floats [B, 2].
SIGNATURES = {"": ("inputs", True), "serving_default": ("inputs", True),
              "parse": ("inputs", True), "scale": ("x", False)}


def _fill(proto, field, data):
    """Puts values made from the bytes `data` in `field` of `proto`."""
    if field == "tensor_content":
        proto.tensor_content = data
    elif field == "string_val":
        proto.string_val.extend(data.split(b"\0") if data else [])
    else:
        dtype = np.dtype(FIELD_DTYPES[field])
        values = np.frombuffer(data[:len(data) // dtype.itemsize * dtype.itemsize], dtype)
        getattr(proto, field).extend(values.tolist())


@st.composite
def random_tensors(draw):
    """Anything a TensorProto can hold: any dtype, dims (negative, huge), fields."""
    proto = tensor_pb2.TensorProto(dtype=draw(st.sampled_from(DTYPES)))
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d)
                                  for d in draw(st.sampled_from(SHAPES)))
    proto.tensor_shape.unknown_rank = draw(st.integers(0, 9)) == 0
    for field in draw(st.sampled_from([(), ("float_val",), ("tensor_content",), ("string_val",),
                                       *((f,) for f in FIELD_DTYPES),
                                       ("int_val", "float_val")])):
        _fill(proto, field, draw(st.binary(max_size=40)))
    return proto


@st.composite
def fitting_tensors(draw, strings):
    """A tensor of the toy's signatures (strings [B], floats [B, 2]), its values as
    many as the shape holds or one (filling the shape), some as raw tensor_content."""
    batch = draw(st.sampled_from([0, 1, 2, 3, 3, 2**30]))  # 2**30: over the byte limit
    shape = [batch] if strings else [batch, 2]
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING if strings else types_pb2.DT_FLOAT)
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape)
    count = math.prod(shape) if draw(st.booleans()) and batch < 2**30 else 1
    if strings:
        proto.string_val.extend(draw(st.binary(max_size=24)).split(b"\0", count - 1)
                                + [b""] * count)
        del proto.string_val[count:]
    else:
        field = draw(st.sampled_from(["float_val", "tensor_content"]))
        _fill(proto, field, draw(st.binary(min_size=4 * count, max_size=4 * count)))
    return proto


def _damage(draw, raw):
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "flip", "random"]))
    if damage == "truncate" and raw:
        return raw[:draw(st.integers(0, len(raw) - 1))]
    if damage == "flip" and raw:
        at = draw(st.integers(0, len(raw) - 1))
        return raw[:at] + bytes([raw[at] ^ draw(st.integers(1, 255))]) + raw[at + 1:]
    return draw(st.binary(max_size=64)) if damage == "random" else raw


@st.composite
def request_bytes(draw):
    """A PredictRequest for the toy (its signature's input, fitting or not) or with
    wrong names, then perhaps truncated, bit-flipped or replaced by random bytes."""
    request = predict_pb2.PredictRequest()
    signature = draw(st.sampled_from([*SIGNATURES, "scael", "\u00e9"]))
    request.model_spec.signature_name = signature
    name, strings = SIGNATURES.get(signature, ("inputs", True))
    if draw(st.integers(0, 3)) == 0:  # a well-formed call, perhaps of a model error
        request.model_spec.name = "shout"
        request.inputs[name].CopyFrom(draw(fitting_tensors(strings)))
        return request.SerializeToString()
    request.model_spec.name = draw(st.sampled_from(["shout"] * 6 + ["nobody", "", "shout\x00"]))
    version = draw(st.sampled_from([None] * 5 + [1, 2, 7, -1, "stable", ""]))
    if isinstance(version, int):
        request.model_spec.version.value = version
    elif version is not None:
        request.model_spec.version_label = version
    names = draw(st.sampled_from([(name,)] * 4 + [(), ("x",), ("inputs",), (name, "y")]))
    fitting = draw(st.integers(0, 2)) > 0
    for key in names:
        request.inputs[key].CopyFrom(draw(fitting_tensors(strings) if fitting
                                          else random_tensors()))
    request.output_filter.extend(draw(st.sampled_from(
        [()] * 4 + [("outputs",), ("lengths", "outputs"), ("y",), ("value",), ("nope",)])))
    return _damage(draw, request.SerializeToString())


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("fuzz") / "shout")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    save_toy(base, 2, "v2:")
    loop = asyncio.new_event_loop()
    store = ModelStore({"shout": base}, VersionPolicy.parse("latest:2"),
                       BatchingOptions(batch_timeout_micros=0), poll_seconds=3600)
    loop.run_until_complete(store.start())
    yield loop, Services(store, MAX_BYTES)
    loop.run_until_complete(store.close())
    loop.close()


def test_random_requests_get_answers_or_client_errors(services):
    loop, handlers = services
    outcomes = collections.Counter()

    async def call(method, raw):
        try:
            await asyncio.wait_for(method(raw, CallRecord()), 30)
            return grpc.StatusCode.OK
        except Exception as e:  # noqa: BLE001 - classified: an unexpected one is INTERNAL
            failure = failure_status(e)
            assert isinstance(failure, GrpcError) and failure.message.strip()
            assert "\n" not in failure.message, failure.message
            return failure.code

    async def calls(raw):  # the other messages' parsers get the same bytes
        return [await call(method, raw) for method in
                (handlers.predict, handlers.metadata, handlers.status)]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(request_bytes())
    def check(raw):
        codes = loop.run_until_complete(calls(raw))
        assert set(codes) <= CLIENT_ERRORS | {grpc.StatusCode.OK}, codes
        outcomes[codes[0]] += 1

    check()
    assert sum(outcomes.values()) >= 1000, outcomes
    # The generator reaches the model, and each kind of refusal.
    assert outcomes[grpc.StatusCode.OK] >= 30, outcomes
    assert all(outcomes[code] >= 10 for code in CLIENT_ERRORS), outcomes
