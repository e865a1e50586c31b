"""t2t-serve as a process on a real t2t export: TF Serving requests answered as the
SavedModel answers them, SIGTERM finishing the requests in flight, and flag errors."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers.binaries import run_binary
from tests.helpers.runs import untrained_run

SERVE = [sys.executable, "-m", "t2t.bin.t2t_serve"]
PROBLEM = "algorithmic_reverse_binary40_test"
INPUTS = ["1 0 1 1", "0 0 1", "1", "1 1 0 0 1 0 1"]


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory):
    from t2t import registry
    from t2t.hparams.basic import create_hparams
    from t2t.serving import export as export_lib

    data_dir, output_dir = untrained_run(PROBLEM, tmp_path_factory.mktemp("serve"))
    version_dir = export_lib.export(registry.problem(PROBLEM), "transformer",
                                    create_hparams("transformer_test", "batch_size=256"),
                                    data_dir, output_dir, None, "beam_size=1,extra_length=3",
                                    parity_check=False)
    return output_dir, version_dir


class Server:
    """t2t-serve started with `flags` on a free port; .url once it serves."""

    def __init__(self, *flags):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        self.process = subprocess.Popen([*SERVE, "--rest_api_port=0", "--port=0", *flags], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.lines = []
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("Serving gRPC on "):
                self.grpc_target = line.split()[3]
            if line.startswith("Serving on "):
                self.url = line.split()[2]
                return
        raise AssertionError("t2t-serve did not start:\n" + "".join(self.lines)
                             + self.process.stderr.read()[-3000:])

    def post(self, path, body):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=60) as reply:
            return json.loads(reply.read())

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=120)
        return self.process.returncode, "".join(self.lines) + out, err


def test_serves_a_t2t_export_like_the_saved_model(exported_run):
    import tensorflow as tf

    output_dir, version_dir = exported_run
    loaded = tf.saved_model.load(version_dir)
    want = loaded.signatures["serving_default"](inputs=tf.constant(INPUTS))
    server = Server(f"--output_dir={output_dir}", "--model_name=reverse")
    try:
        status, reply = server.post("/v1/models/reverse:predict",
                                    {"signature_name": "serving_default", "instances": INPUTS})
        assert status == 200, reply
        assert [p["outputs"] for p in reply["predictions"]] == [
            t.decode() for t in want["outputs"].numpy()]
        for got, score in zip(reply["predictions"], want["scores"].numpy(), strict=True):
            assert abs(got["scores"] - float(score)) < 1e-4
        version = os.path.basename(version_dir)
        meta = server.get(f"/v1/models/reverse/versions/{version}/metadata")
        assert meta["t2t_export"]["problem"] == PROBLEM
        assert sorted(meta["metadata"]["signature_def"]["signature_def"]) == [
            "attention", "serve_tf_example", "serving_default"]
        assert server.get("/v1/models/reverse")["model_version_status"][0]["version"] == version
    finally:
        code, out, err = server.stop()
    assert code == 0, err[-3000:]
    assert "Stopped: requests in flight finished" in out


def test_sigterm_finishes_the_requests_in_flight(exported_run):
    output_dir, _ = exported_run
    # A 60 s batch timeout holds the requests in the queue until SIGTERM arrives.
    server = Server(f"--model_base_path={output_dir}/export", "--model_name=m",
                    "--batch_timeout_micros=60000000", "--max_batch_size=32")
    with ThreadPoolExecutor(3) as pool:
        started = time.time()
        futures = [pool.submit(server.post, "/v1/models/m:predict", {"instances": [text]})
                   for text in INPUTS[:3]]

        def queued():
            stats = server.get("/v1/models/m?stats").get("batching", {})
            return sum(s.get("requests", 0) for v in stats.values() for s in v.values())

        while queued() < 3 and time.time() - started < 60:
            time.sleep(0.05)
        assert queued() == 3
        stopper = threading.Thread(target=lambda: setattr(server, "result", server.stop()))
        stopper.start()
        replies = [f.result(timeout=120) for f in futures]
        stopper.join(120)
    assert [status for status, _ in replies] == [200, 200, 200], replies
    assert time.time() - started < 45  # answered at SIGTERM, not after the 60 s timeout
    code, out, err = server.result
    assert code == 0, err[-3000:]


def _fails(*flags):
    result = subprocess.run([*SERVE, *flags], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors, result.stderr[-3000:]
    return errors[0]


def test_flag_errors_are_one_line(exported_run, tmp_path):
    output_dir, version_dir = exported_run
    assert "nothing to serve" in _fails()
    assert "--model_version_policy='newest'" in _fails(f"--output_dir={output_dir}",
                                                      "--model_version_policy=newest")
    assert "is not NAME=DIR" in _fails("--models=justapath")
    assert "one version of a model; give the folder holding the version folders" in _fails(
        f"--model_base_path={version_dir}")
    assert "does not exist" in _fails(f"--model_base_path={tmp_path}/missing")
    assert "--allowed_batch_sizes=2,4" in _fails(f"--output_dir={output_dir}",
                                                 "--allowed_batch_sizes=2,4")
    os.makedirs(tmp_path / "empty")
    assert "no version folders" in _fails(f"--model_base_path={tmp_path}/empty")


def test_a_taken_port_is_one_line_from_the_process(exported_run):
    output_dir, _ = exported_run
    with __import__("socket").socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*SERVE, f"--output_dir={output_dir}", f"--rest_api_port={port}",
                                 "--port=0"],
                                capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "pick another --rest_api_port" in errors[0], result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def _fails(*flags):
    """The first error line of t2t-serve's main run in this process with `flags` (each
    refused before anything listens, so in-process is safe and skips a TF start)."""
    result = run_binary("t2t-serve", *flags)
    assert result.code == 1, result.out + result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert errors and not result.traceback, result.err[-3000:]
    return errors[0]


def test_grpc_answers_as_rest_and_t2t_decoder(exported_run, tmp_path):
    """TF Serving's stock gRPC client (tensorflow-serving-api's stubs, as Tensor2Tensor's
    t2t-query-server called them) gets REST's and t2t-decoder's answers."""
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import (
        get_model_status_pb2,
        model_service_pb2_grpc,
        predict_pb2,
        prediction_service_pb2_grpc,
    )

    output_dir, version_dir = exported_run
    source = tmp_path / "inputs.txt"
    source.write_text("\n".join(INPUTS) + "\n")
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}",
                         f"--data_dir={os.path.dirname(output_dir)}/data",
                         "--decode_hparams=beam_size=1,extra_length=3",
                         f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'out'}")
    assert decoded.code == 0, decoded.err[-3000:]
    decoder_lines = (tmp_path / "out").read_text(encoding="utf-8").splitlines()
    server = Server(f"--output_dir={output_dir}", "--model_name=reverse")
    try:
        channel = grpc.insecure_channel(server.grpc_target)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "reverse"
        request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([t.encode() for t in INPUTS]))
        reply = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request,
                                                                                   timeout=120)
        status, rest = server.post("/v1/models/reverse:predict", {"instances": INPUTS})
        assert status == 200, rest
        texts = [t.decode() for t in tf.make_ndarray(reply.outputs["outputs"])]
        assert texts == [p["outputs"] for p in rest["predictions"]] == decoder_lines
        scores = tf.make_ndarray(reply.outputs["scores"])
        assert scores.tolist() == np.float32([p["scores"] for p in rest["predictions"]]).tolist()
        assert reply.model_spec.version.value == int(os.path.basename(version_dir))
        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "reverse"
        versions = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
            status_request, timeout=60).model_version_status
        assert [(v.version, v.state) for v in versions] == [
            (int(os.path.basename(version_dir)), get_model_status_pb2.ModelVersionStatus.AVAILABLE)]
        channel.close()
    finally:
        code, out, err = server.stop()
    assert code == 0, err[-3000:]
    assert f"Serving gRPC on {server.grpc_target}" in out


def test_grpc_flag_errors_are_one_line(exported_run):
    output_dir, _ = exported_run
    assert "'grpc.max_connection_age_ms' is not grpc.KEY=VALUE" in _fails(
        f"--output_dir={output_dir}", "--grpc_channel_arguments=grpc.max_connection_age_ms")
    assert "set that flag instead" in _fails(
        f"--output_dir={output_dir}", "--grpc_channel_arguments=grpc.max_receive_message_length=9")
    with __import__("socket").socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        error = _fails(f"--output_dir={output_dir}", f"--port={port}", "--rest_api_port=0")
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in error
    assert "pick another --port (0: any free port)" in error
