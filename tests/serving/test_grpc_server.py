"""t2t-serve's gRPC API called with TF Serving's stock stubs (tensorflow-serving-api) on a
real channel: answers equal to REST's, metadata, status, errors with the codes TF Serving
uses, metrics, and a call in flight finishing at shutdown."""

import os
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from t2t.serving import grpc_api
from t2t.serving.rest_api import SignatureSpec, TensorInfo
from tests.helpers.serving import ServerThread, save_toy

MAX_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("grpc") / "shout")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    save_toy(base, 2, "v2:")
    with ServerThread({"shout": base}, max_request_bytes=MAX_BYTES) as server:
        channel = grpc.insecure_channel(server.grpc_target)
        server.predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        server.models = model_service_pb2_grpc.ModelServiceStub(channel)
        server.raw_predict = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict")  # bytes in, bytes out
        yield server
        channel.close()


def _request(inputs, name="shout", version=None, signature="", output_filter=(), label=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(value if isinstance(value, tensor_pb2.TensorProto)
                                     else tf.make_tensor_proto(value))
    request.output_filter.extend(output_filter)
    return request


def _outputs(reply):
    return {key: tf.make_ndarray(proto) for key, proto in reply.outputs.items()}


def _error(call, request):
    with pytest.raises(grpc.RpcError) as raised:
        call(request, timeout=30)
    return raised.value.code(), raised.value.details()


def test_predict_equals_rest(served):
    texts = ["ab", "héllo wörld", ""]
    reply = served.predictions.Predict(_request({"inputs": [t.encode() for t in texts]}),
                                       timeout=30)
    got = _outputs(reply)
    status, rest = served.call("/v1/models/shout:predict", {"inputs": texts})
    assert status == 200, rest
    assert [t.decode() for t in got["outputs"]] == rest["outputs"]["outputs"]
    assert got["lengths"].tolist() == rest["outputs"]["lengths"] == [2, 11, 0]
    assert (reply.model_spec.name, reply.model_spec.version.value,
            reply.model_spec.signature_name) == ("shout", 2, "serving_default")

    older = served.predictions.Predict(_request({"inputs": [b"ab"]}, version=1), timeout=30)
    assert _outputs(older)["outputs"].tolist() == [b"v1:AB"]

    x = np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)  # tensor_content, as tf writes it
    scaled = served.predictions.Predict(_request({"x": x}, signature="scale"), timeout=30)
    status, rest = served.call("/v1/models/shout:predict",
                               {"signature_name": "scale", "inputs": x.tolist()})
    assert _outputs(scaled)["y"].tolist() == rest["outputs"] == (x * 2).tolist()

    typed = tensor_pb2.TensorProto(dtype=tf.float32.as_datatype_enum)
    typed.tensor_shape.dim.add(size=3)
    typed.tensor_shape.dim.add(size=2)
    typed.float_val.append(0.5)  # one value fills the shape, as TensorFlow reads it
    filled = served.predictions.Predict(_request({"x": typed}, signature="scale"), timeout=30)
    assert _outputs(filled)["y"].tolist() == [[1.0, 1.0]] * 3

    only = served.predictions.Predict(_request({"inputs": [b"q"]}, output_filter=["lengths"]),
                                      timeout=30)
    assert list(only.outputs) == ["lengths"]


def test_metadata_as_tf_serving_sends_it(served):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "shout"
    reply = served.predictions.GetModelMetadata(request, timeout=30)
    assert (reply.model_spec.name, reply.model_spec.version.value) == ("shout", 2)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert reply.metadata["signature_def"].Unpack(signatures)
    defs = signatures.signature_def
    assert sorted(defs) == ["parse", "scale", "serving_default"]
    assert defs["scale"].method_name == "tensorflow/serving/predict"
    assert defs["scale"].inputs["x"].dtype == tf.float32.as_datatype_enum
    assert [d.size for d in defs["scale"].inputs["x"].tensor_shape.dim] == [-1, 2]
    assert sorted(defs["serving_default"].outputs) == ["lengths", "outputs"]
    _, rest = served.call("/v1/models/shout/metadata")
    rest_defs = rest["metadata"]["signature_def"]["signature_def"]
    for name, spec in defs.items():  # the same signatures as REST's metadata
        for key, info in [*spec.inputs.items(), *spec.outputs.items()]:
            want = {**rest_defs[name]["inputs"], **rest_defs[name]["outputs"]}[key]
            assert types_pb2.DataType.Name(info.dtype) == want["dtype"]
            assert [str(d.size) for d in info.tensor_shape.dim] == [
                d["size"] for d in want["tensor_shape"]["dim"]]

    request.metadata_field[:] = ["tags"]
    code, details = _error(served.predictions.GetModelMetadata, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "'signature_def'" in details


def test_model_status(served):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "shout"
    reply = served.models.GetModelStatus(request, timeout=30)
    available = get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert [(s.version, s.state, s.status.error_code) for s in reply.model_version_status] == [
        (2, available, 0), (1, available, 0)]
    request.model_spec.version.value = 1
    assert [s.version for s in served.models.GetModelStatus(request).model_version_status] == [1]
    request.model_spec.version.value = 7
    code, details = _error(served.models.GetModelStatus, request)
    assert code == grpc.StatusCode.NOT_FOUND and "no version 7" in details


def _bad_requests():
    """(request or raw bytes, code, words the message has)."""
    invalid, missing = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    ints = tf.make_tensor_proto([1, 2])
    filled = tf.make_tensor_proto("a", tf.string, [2, 2**31])  # one value for 2**32 strings
    return [
        (_request({"inputs": [b"a"]}, name="shuot"), missing, ["unknown model 'shuot'",
                                                               "did you mean 'shout'"]),
        (_request({"inputs": [b"a"]}, version=9), missing, ["no version 9", "[1, 2]"]),
        (_request({"inputs": ints}), invalid, ["inputs['inputs']", "DT_INT32", "DT_STRING"]),
        (_request({"x": np.zeros([2, 3], np.float32)}, signature="scale"), invalid,
         ["shape [2, 3]", "[?, 2]"]),
        (_request({"input": [b"a"]}), invalid, ["unknown input name(s) ['input']",
                                                "did you mean 'inputs'"]),
        (_request({"inputs": [b"a"]}, signature="scael"), invalid, ["'scael'", "'scale'"]),
        (_request({"inputs": [b"a"]}, output_filter=["output"]), invalid, ["output_filter",
                                                                           "'outputs'"]),
        (_request({"inputs": [b"a"]}, name=""), invalid, ["model_spec.name is empty"]),
        (_request({"inputs": [b"a"]}, label="stable"), missing, ["no version label 'stable'"]),
        (_request({"inputs": [b"a" * 40_000] * 2}), grpc.StatusCode.RESOURCE_EXHAUSTED,
         [f"limit is {MAX_BYTES} bytes", "--max_request_bytes"]),
        (_request({"inputs": filled}), grpc.StatusCode.RESOURCE_EXHAUSTED,
         ["shape [2, 2147483648] holds 4294967296 values", "--max_request_bytes"]),
        (_request({"inputs": tf.make_tensor_proto("a", tf.string, [33])}),
         grpc.StatusCode.RESOURCE_EXHAUSTED, ["33 examples", "at most 32", "--max_batch_size"]),
        (_request({"inputs": [b"a"]}).SerializeToString()[:-3], invalid,
         ["malformed tensorflow.serving.PredictRequest"]),
    ]


def test_bad_calls_get_clear_codes_and_the_server_keeps_serving(served):
    for request, want_code, words in _bad_requests():
        if isinstance(request, bytes):
            code, details = _error(served.raw_predict, request)
        else:
            code, details = _error(served.predictions.Predict, request)
        assert code == want_code, (code, details)
        assert "\n" not in details and all(w in details for w in words), details
        reply = served.predictions.Predict(_request({"inputs": [b"ok"]}), timeout=30)
        assert _outputs(reply)["outputs"].tolist() == [b"v2:OK"]
    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name = "shout"
    code, details = _error(served.predictions.Classify, classify)
    assert code == grpc.StatusCode.UNIMPLEMENTED and "predict signatures" in details


def test_every_call_is_counted(served):
    def count(api, status, version="2"):
        return served.store.metrics.registry.get_sample_value(
            "t2t_serve_requests_total",
            {"model": "shout", "version": version, "api": api, "status": status}) or 0

    before = (count("grpc_predict", "OK"), count("grpc_predict", "INVALID_ARGUMENT"))
    served.predictions.Predict(_request({"inputs": [b"a"]}), timeout=30)
    _error(served.predictions.Predict, _request({"inputs": [b"a"]}, signature="nope"))
    assert (count("grpc_predict", "OK"), count("grpc_predict", "INVALID_ARGUMENT")) == (
        before[0] + 1, before[1] + 1)
    unknown = served.store.metrics.registry.get_sample_value(
        "t2t_serve_requests_total", {"model": "", "version": "", "api": "grpc_predict",
                                     "status": "NOT_FOUND"}) or 0
    _error(served.predictions.Predict, _request({"inputs": [b"a"]}, name="nobody"))
    assert served.store.metrics.registry.get_sample_value(
        "t2t_serve_requests_total", {"model": "", "version": "", "api": "grpc_predict",
                                     "status": "NOT_FOUND"}) == unknown + 1


def test_a_call_in_flight_finishes_at_shutdown(tmp_path):
    base = str(tmp_path / "m")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    # A 60 s batch timeout holds the call in the queue until the server stops.
    server = ServerThread({"m": base}, batch_timeout_micros=60_000_000).__enter__()
    channel = grpc.insecure_channel(server.grpc_target)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    future = stub.Predict.future(_request({"inputs": [b"late"]}, name="m"), timeout=60)
    started = time.time()
    while not any(s.get("requests") for s in server.store.model("m").versions[1].stats().values()):
        assert time.time() - started < 30
        time.sleep(0.02)
    stopper = threading.Thread(target=server.__exit__)
    stopper.start()
    assert _outputs(future.result(timeout=60))["outputs"].tolist() == [b"v1:LATE"]
    stopper.join(60)
    assert time.time() - started < 30  # answered at shutdown, not after the 60 s timeout
    with pytest.raises(grpc.RpcError) as raised:
        stub.Predict(_request({"inputs": [b"a"]}, name="m"), timeout=5)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()


def test_version_labels_and_reload_config(tmp_path):
    """HandleReloadConfigRequest (TF Serving's ModelServerConfig) sets labels that
    Predict and GetModelStatus resolve; a config that cannot apply changes nothing."""
    from google.protobuf import text_format
    from tensorflow_serving.apis import model_management_pb2
    from tensorflow_serving.config import model_server_config_pb2

    base = str(tmp_path / "m")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    save_toy(base, 2, "v2:")

    def reload(text):
        config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
        return model_management_pb2.ReloadConfigRequest(config=config)

    labelled = (f'model_config_list {{ config {{ name: "m" base_path: "{base}" '
                'model_platform: "tensorflow" model_version_policy { all {} } '
                'version_labels { key: "stable" value: 1 } '
                'version_labels { key: "canary" value: 2 } } }')
    with ServerThread({"m": base}) as server:
        channel = grpc.insecure_channel(server.grpc_target)
        predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        models = model_service_pb2_grpc.ModelServiceStub(channel)
        reply = models.HandleReloadConfigRequest(reload(labelled), timeout=60)
        assert reply.status.error_code == 0
        for label, want in (("stable", b"v1:A"), ("canary", b"v2:A")):
            got = predictions.Predict(_request({"inputs": [b"a"]}, name="m", label=label))
            assert _outputs(got)["outputs"].tolist() == [want]
            status = get_model_status_pb2.GetModelStatusRequest()
            status.model_spec.name, status.model_spec.version_label = "m", label
            assert [s.version for s in models.GetModelStatus(status).model_version_status] == [
                int(want[1:2])]
        code, details = _error(predictions.Predict,
                               _request({"inputs": [b"a"]}, name="m", label="stabel"))
        assert code == grpc.StatusCode.NOT_FOUND and "did you mean 'stable'" in details
        code, details = _error(models.HandleReloadConfigRequest,
                               reload(labelled.replace("value: 2", "value: 9")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "9" in details, details
        got = predictions.Predict(_request({"inputs": [b"b"]}, name="m", label="canary"))
        assert _outputs(got)["outputs"].tolist() == [b"v2:B"]  # the failed reload changed nothing
        channel.close()


def test_the_readme_grpc_client_asks_the_server(served, capsys):
    """The docs' port of Tensor2Tensor's t2t-query-server (docs/how-to/serve.md), run as
    written (the address and the model name pointed at this test's server)."""
    from tests.helpers import docs_text

    blocks = docs_text.python_blocks("how-to/serve.md", "PredictionServiceStub(")
    assert len(blocks) == 1, "docs/how-to/serve.md needs one python block with PredictionServiceStub("
    code = blocks[0].replace('"localhost:8500"', repr(served.grpc_target))
    code = code.replace('query("reverse", ["1 0 1 1 0"])', 'query("shout", ["1 0 1 1 0"])')
    assert 'query("shout"' in code
    exec(compile(code, "docs/how-to/serve.md", "exec"), {})  # noqa: S102 - the documented snippet
    printed = capsys.readouterr().out
    assert "'outputs': array([b'v2:1 0 1 1 0'], dtype=object)" in printed, printed


def test_scalar_inputs_take_a_tensor_of_shape_empty_only():
    spec = SignatureSpec("generate", {"inputs": TensorInfo("string", (None,)),
                                      "seed": TensorInfo("int64", ())}, {})
    request = _request({"inputs": np.array([b"a", b"b"], object),
                        "seed": tf.make_tensor_proto(7, tf.int64)}, signature="generate")
    parsed = grpc_api.predict_inputs(request, {"generate": spec}, 8, 1 << 20)
    assert parsed.batch_size == 2 and parsed.inputs["seed"].shape == ()
    assert parsed.inputs["seed"].item() == 7
    for seed, words in [(tf.make_tensor_proto([7], tf.int64), "inputs['seed']: shape [1]; the "
                         "signature wants a scalar (shape [], one value for the whole request): "
                         "send a TensorProto with no dims, e.g. tf.make_tensor_proto(value, "
                         "dtype)"),
                        (tf.make_tensor_proto(7), "inputs['seed']: has DT_INT32; the signature "
                         "wants DT_INT64")]:
        request.inputs["seed"].CopyFrom(seed)
        with pytest.raises(grpc_api.GrpcError) as raised:
            grpc_api.predict_inputs(request, {"generate": spec}, 8, 1 << 20)
        assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.message == words
