"""Streaming requests (t2t.serving.lm_streaming, t2t.serving.grpc_streaming): their
parsing and every bad setting's error, and exports that cannot stream (an LM exported
before the streaming signatures, a model that is not an LM) refused over REST and gRPC
with the fix named, the server serving on. Streams of a real exported language model,
equal to its non-streamed answers, and client disconnects: tests/serving/test_lm_export.py
(it has the trained LM)."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request

import grpc
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2

from t2t.serving import grpc_streaming, lm_streaming
from t2t.serving.grpc_api import GrpcError
from t2t.serving.rest_api import RequestError
from tests.helpers.serving import ServerThread, save_toy

DEFAULTS = {"temperature": 0.5, "top_k": 0, "top_p": 1.0, "max_new_tokens": 0, "seed": 3}


def _parse(body) -> lm_streaming.StreamRequest:
    return lm_streaming.parse_rest(json.dumps(body).encode(), DEFAULTS)


def test_the_request_forms_and_the_exports_defaults():
    full = _parse({"instances": [{"inputs": "Return the", "temperature": 0.8, "top_k": 40,
                                  "top_p": 0.95, "max_new_tokens": 40, "seed": 7}]})
    assert full == lm_streaming.StreamRequest(b"Return the", 0.8, 40, 0.95, 40, 7)
    bare = lm_streaming.StreamRequest(b"Return the", 0.5, 0, 1.0, 0, 3)  # DEFAULTS
    assert _parse({"instances": ["Return the"]}) == bare
    assert _parse({"inputs": "Return the"}) == bare
    assert _parse({"inputs": {"inputs": ["Return the"]}, "signature_name": "generate"}) == bare
    b64 = base64.b64encode("Grüße".encode()).decode()
    assert _parse({"instances": [{"inputs": {"b64": b64}, "top_k": 5.0}]}).prompt == "Grüße".encode()
    assert _parse({"instances": [{"inputs": "", "temperature": 0}]}).temperature == 0.0
    assert lm_streaming.export_defaults({"serving_settings": {
        "temperature": 0.9, "top_k": 4, "top_p": 0.9, "seed": 11, "max_new_tokens": 30}}) == {
        "temperature": 0.9, "top_k": 4, "top_p": 0.9, "max_new_tokens": 0, "seed": 11}


@pytest.mark.parametrize("body, message", [
    ({"instances": [{"inputs": "a", "temperature": -0.5}]}, "temperature=-0.5: give 0 (greedy)"),
    ({"instances": [{"inputs": "a", "temperature": True}]}, "temperature=true: wants a number"),
    ({"instances": [{"inputs": "a", "top_k": 2.5}]}, "top_k=2.5: wants an integer"),
    ({"instances": [{"inputs": "a", "top_k": -1}]}, "top_k=-1: give 0 (every token)"),
    ({"instances": [{"inputs": "a", "top_p": 0}]}, "top_p=0.0: give a probability in (0, 1]"),
    ({"instances": [{"inputs": "a", "top_p": 1.5}]}, "top_p=1.5"),
    ({"instances": [{"inputs": "a", "max_new_tokens": -2}]}, "max_new_tokens=-2: give 1 to 4096"),
    ({"instances": [{"inputs": "a", "max_new_tokens": 10**6}]}, "max_new_tokens=1000000"),
    ({"instances": [{"inputs": "a", "seed": -7}]}, "seed=-7: give 0 to 2**63-1"),
    ({"instances": [{"inputs": "a", "seed": 2**64}]}, "seed=18446744073709551616"),
    ({"instances": [{"inputs": "a", "temprature": 1.0}]}, "did you mean 'temperature'"),
    ({"instances": [{"prompt": "a"}]}, "the instance has no 'inputs'"),
    ({"instances": ["a", "b"]}, "a list of one prompt (got 2)"),
    ({"instances": []}, "a list of one prompt (got 0)"),
    ({"instances": [7]}, "inputs: wants a string"),
    ({"inputs": "a", "instances": ["a"]}, "exactly one of"),
    ({"inputs": "a", "signature_name": "serving_default"}, "decodes as the 'generate'"),
    ({"inputs": "a", "stream": True}, "unknown request field(s) ['stream']"),
])
def test_bad_stream_requests_get_one_line_errors(body, message):
    with pytest.raises(RequestError, match=None) as raised:
        _parse(body)
    assert message in str(raised.value) and raised.value.status == 400
    assert "\n" not in str(raised.value)


def _proto_request(**inputs) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "lm"
    for name, (value, dtype) in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype))
    return request


def test_grpc_requests_take_scalars_or_one_value_of_generates_dtypes():
    request = _proto_request(inputs=(["Return the"], tf.string), temperature=(0.25, tf.float32),
                             top_k=([40], tf.int32), seed=(7, tf.int64))
    parsed = grpc_streaming.stream_request(request, DEFAULTS, 1 << 20)
    assert parsed == lm_streaming.StreamRequest(b"Return the", 0.25, 40, 1.0, 0, 7)
    scalar_prompt = _proto_request(inputs=("Return the", tf.string))
    assert grpc_streaming.stream_request(scalar_prompt, DEFAULTS, 1 << 20).prompt == b"Return the"


@pytest.mark.parametrize("inputs, extra, message", [
    ({"temperature": (0.5, tf.float64)}, {}, "has DT_DOUBLE; the signature wants DT_FLOAT"),
    ({"top_k": ([1, 2], tf.int32)}, {}, "shape [2]"),
    ({"top_p": (2.0, tf.float32)}, {}, "top_p=2.0"),
    ({"topk": (3, tf.int32)}, {}, "did you mean 'top_k'"),
    ({}, {"signature_name": "serving_default"}, "decodes as the 'generate'"),
    ({}, {"output_filter": ["outputs"]}, "output_filter is not taken"),
])
def test_bad_grpc_stream_requests_name_the_field(inputs, extra, message):
    request = _proto_request(inputs=(["a"], tf.string), **inputs)
    if "signature_name" in extra:
        request.model_spec.signature_name = extra["signature_name"]
    request.output_filter.extend(extra.get("output_filter", []))
    with pytest.raises((RequestError, GrpcError)) as raised:
        grpc_streaming.stream_request(request, DEFAULTS, 1 << 20)
    assert message in str(raised.value)
    no_prompt = _proto_request(temperature=(0.5, tf.float32))
    with pytest.raises(RequestError, match="missing input 'inputs'"):
        grpc_streaming.stream_request(no_prompt, DEFAULTS, 1 << 20)


# ------------------------------------------------------------ exports that cannot stream
class OldLanguageModel(tf.Module):
    """A language-model export as t2t-exporter wrote it before streaming: a generate
    signature, no generate_start / generate_step."""

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="inputs"),
        tf.TensorSpec([], tf.float32, name="temperature"), tf.TensorSpec([], tf.int32, name="top_k"),
        tf.TensorSpec([], tf.float32, name="top_p"),
        tf.TensorSpec([], tf.int32, name="max_new_tokens"), tf.TensorSpec([], tf.int64, name="seed")])
    def generate(self, inputs, temperature, top_k, top_p, max_new_tokens, seed):
        return {"outputs": tf.strings.join([inputs, "!"]), "scores": tf.zeros_like(inputs, tf.float32)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("streaming")
    old, toy = str(root / "old_lm"), str(root / "toy")
    module = OldLanguageModel()
    tf.saved_model.save(module, os.path.join(old, "1"),
                        signatures={"serving_default": module.generate.get_concrete_function(),
                                    "generate": module.generate.get_concrete_function()})
    save_toy(toy, 1, "v1:")
    running = ServerThread({"old_lm": old, "toy": toy})
    running.extra_handlers = (grpc_streaming.handler(running.store),)
    with running:
        yield running


def _post_stream(server, model, body):
    request = urllib.request.Request(f"{server.url}/v1/models/{model}:generateStream",
                                     data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]


def _grpc_stream(server, model):
    stream = grpc.insecure_channel(server.grpc_target).unary_stream(
        grpc_streaming.FULL_METHOD, request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString)
    request = _proto_request(inputs=(["a"], tf.string))
    request.model_spec.name = model
    with pytest.raises(grpc.RpcError) as raised:
        list(stream(request, timeout=60))
    return raised.value.code(), raised.value.details()


def test_an_export_from_before_streaming_is_refused_naming_the_fix(server):
    status, error = _post_stream(server, "old_lm", {"instances": ["a"]})
    assert status == 400 and "exported before streaming" in error
    assert "export it again with t2t-exporter" in error
    code, details = _grpc_stream(server, "old_lm")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and details == error
    status, error = _post_stream(server, "toy", {"instances": ["a"]})
    assert status == 400 and "streaming is for language-model exports" in error
    code, _ = _grpc_stream(server, "toy")
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    status, error = _post_stream(server, "tyo", {"instances": ["a"]})
    assert status == 404 and "did you mean 'toy'" in error
    # the server still answers, and counted each stream call
    assert server.call("/v1/models/toy:predict", {"instances": ["ok"]}) == (
        200, {"predictions": [{"outputs": "v1:OK", "lengths": 2}]})
    with urllib.request.urlopen(server.url + "/monitoring/prometheus/metrics") as reply:
        families = text_string_to_metric_families(reply.read().decode())
    counts = {(s.labels["model"], s.labels["api"], s.labels["status"]): s.value
              for f in families if f.name == "t2t_serve_requests" for s in f.samples
              if s.name.endswith("_total")}
    assert counts[("old_lm", "rest_stream", "400")] == 1
    assert counts[("toy", "rest_stream", "400")] == 1
    assert counts[("old_lm", "grpc_stream", "FAILED_PRECONDITION")] == 1
    assert counts[("toy", "grpc_stream", "FAILED_PRECONDITION")] == 1
