"""A language model's tokens as they are made, over gRPC: t2t-serve's server-streaming
method `/t2t.serving.StreamingPredictionService/GenerateStream`.

It takes TF Serving's own messages (tensorflow-serving-api), so a client needs no
generated code:

    import grpc
    from tensorflow_serving.apis import predict_pb2
    import tensorflow as tf
    stream = grpc.insecure_channel("localhost:8500").unary_stream(
        "/t2t.serving.StreamingPredictionService/GenerateStream",
        request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "docstrings"
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto(["Return the"]))
    request.inputs["temperature"].CopyFrom(tf.make_tensor_proto(0.8, tf.float32))
    request.inputs["seed"].CopyFrom(tf.make_tensor_proto(7, tf.int64))
    for reply in stream(request):
        if "scores" in reply.outputs:       # the last reply: generate's answer
            print(tf.make_ndarray(reply.outputs["outputs"])[0].decode())
        else:                               # one per new token
            print(tf.make_ndarray(reply.outputs["piece"])[0].decode(), end="", flush=True)

The request is the generate signature's (t2t.serving.lm_serving): "inputs" one prompt
(string, shape [1] or a scalar), any of "temperature" float32, "top_k" int32, "top_p"
float32, "max_new_tokens" int32, "seed" int64 (scalars; unset: the export's own);
model_spec names the model (and version or version_label); signature_name is empty or
"generate". Each token's PredictResponse has "index", "token_id", "outputs" (the text so
far), "piece" and "replaced" (t2t.serving.lm_streaming.TokenEvent), each shape [1]; the
last has "outputs" and "scores" equal to Predict's generate answer, and "tokens". Errors
are statuses with one-line messages: INVALID_ARGUMENT (bad settings), NOT_FOUND,
FAILED_PRECONDITION (an export without the streaming signatures: re-export it). A client
that cancels stops the generation before its next step. Calls are counted in the
metrics under api "grpc_stream".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import numpy as np
from absl import logging
from tensorflow.core.framework import tensor_pb2
from tensorflow_serving.apis import model_pb2, predict_pb2

from t2t.serving import grpc_api, lm_streaming
from t2t.serving.grpc_api import GrpcError
from t2t.serving.lm_serving import GENERATE_SIGNATURE
from t2t.serving.model_store import ModelStore, redact_paths
from t2t.serving.rest_api import RequestError, TensorInfo

SERVICE = "t2t.serving.StreamingPredictionService"
METHOD = "GenerateStream"
FULL_METHOD = f"/{SERVICE}/{METHOD}"
API = "grpc_stream"
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024
# The generate signature's input dtypes.
DTYPES = {lm_streaming.PROMPT: "string", "temperature": "float32", "top_k": "int32",
          "top_p": "float32", "max_new_tokens": "int32", "seed": "int64"}


def _one_value(proto: tensor_pb2.TensorProto, name: str, max_bytes: int) -> Any:
    """The value of a scalar or shape-[1] TensorProto of the generate signature's dtype."""
    one = tensor_pb2.TensorProto()
    one.CopyFrom(proto)
    if not one.tensor_shape.dim:  # a scalar: as [1]
        one.tensor_shape.dim.add(size=1)
    array = grpc_api.tensor_to_array(one, TensorInfo(DTYPES[name], (1,)), f"inputs[{name!r}]",
                                     max_bytes)
    return array[0]


def stream_request(request: predict_pb2.PredictRequest, defaults: dict[str, Any],
                   max_bytes: int) -> lm_streaming.StreamRequest:
    """A GenerateStream PredictRequest -> StreamRequest (bad fields: RequestError 400)."""
    signature = request.model_spec.signature_name
    if signature not in ("", GENERATE_SIGNATURE):
        raise RequestError(f"model_spec.signature_name {signature!r}: GenerateStream decodes "
                           f"as the {GENERATE_SIGNATURE!r} signature; leave it empty")
    if request.output_filter:
        raise RequestError("output_filter is not taken by GenerateStream: each reply has the "
                           "token's outputs, the last one the answer; leave it empty")
    names = set(request.inputs)
    if lm_streaming.PROMPT not in names:
        raise RequestError(f"missing input {lm_streaming.PROMPT!r} (the prompt, a string of "
                           f"shape [1]); inputs given: {sorted(names)}")
    prompt = _one_value(request.inputs[lm_streaming.PROMPT], lm_streaming.PROMPT, max_bytes)
    settings = {name: (_one_value(request.inputs[name], name, max_bytes) if name in DTYPES
                       else None) for name in names - {lm_streaming.PROMPT}}
    return lm_streaming.check_request(prompt, settings, defaults)


def _reply(event: lm_streaming.TokenEvent | lm_streaming.StreamResult, name: str,
           version: int) -> predict_pb2.PredictResponse:
    spec = model_pb2.ModelSpec(name=name, signature_name=GENERATE_SIGNATURE)
    spec.version.value = version
    reply = predict_pb2.PredictResponse(model_spec=spec)
    if isinstance(event, lm_streaming.TokenEvent):
        outputs = {"index": np.array([event.index], np.int32),
                   "token_id": np.array([event.token_id], np.int32),
                   "outputs": np.array([event.outputs], object),
                   "piece": np.array([event.piece.encode("utf-8")], object),
                   "replaced": np.array([event.replaced], np.int32)}
    else:
        outputs = {**event.arrays(), "tokens": np.array([event.tokens], np.int32)}
    for key, value in outputs.items():
        reply.outputs[key].CopyFrom(grpc_api.array_to_tensor(value))
    return reply


def _status(error: Exception) -> GrpcError:
    """The status a failed call ends with; unexpected errors are logged."""
    if isinstance(error, GrpcError):
        return error
    if isinstance(error, lm_streaming.NoStreamSignatures):
        return GrpcError(grpc.StatusCode.FAILED_PRECONDITION, str(error))
    if isinstance(error, RequestError):
        return grpc_api.from_request_error(error)
    logging.error("t2t-serve: internal error in a GenerateStream call", exc_info=error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return GrpcError(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: "
                     f"{redact_paths(first)} (the server's log has the details)")


def handler(store: ModelStore, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
            ) -> grpc.GenericRpcHandler:
    """The GenerateStream method over `store`, for a grpc.aio server
    (grpc_server.build_server's extra_handlers)."""

    async def generate_stream(raw: bytes, context: grpc.aio.ServicerContext
                              ) -> AsyncIterator[bytes]:
        started, labels = time.perf_counter(), {"model": "", "version": None}
        code = grpc.StatusCode.OK
        try:
            request = grpc_api.decode(raw, predict_pb2.PredictRequest, max_request_bytes)
            name, version, label = grpc_api.model_spec_choice(request.model_spec)
            model = store.model(name)
            labels["model"] = model.name
            servable = (model.resolve(None, label=label) if label is not None
                        else model.resolve(version))
            labels["version"] = servable.version
            lm_streaming.stream_functions(servable)
            parsed = stream_request(request, lm_streaming.export_defaults(servable.info),
                                    max_request_bytes)
            with servable.in_use():
                async for event in lm_streaming.generate(servable, parsed, store.executor):
                    yield _reply(event, model.name, servable.version).SerializeToString()
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        except Exception as e:  # noqa: BLE001 - one bad call must not stop the server
            failure = _status(e)
            code = failure.code
            await context.abort(failure.code, failure.message)
        finally:
            store.metrics.observe_request(labels["model"], labels["version"], API, code.name,
                                          time.perf_counter() - started)

    return grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_stream_rpc_method_handler(generate_stream)})
