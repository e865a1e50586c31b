"""t2t-serve's Prometheus metrics (GET /monitoring/prometheus/metrics), read back with
prometheus_client's own parser from a real server on toy SavedModels: requests counted per
model/version/API/status exactly as sent, latency and batch-size histograms, queue depth
back to 0 at rest, model load/failed-load/unload events, and TF Serving's
--monitoring_config_file."""

import asyncio
import collections
import dataclasses
import os
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from t2t.serving.batching import Batcher, BatchingOptions
from t2t.serving.metrics import PROMETHEUS_PATH, prometheus_path_from_config
from tests.helpers.binaries import run_binary
from tests.helpers.serving import ServerThread, save_toy
from tests.robustness.support import wait_for


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """{"toy": versions 1 and 2, "other": version 1}."""
    root = tmp_path_factory.mktemp("metrics")
    folders = {name: str(root / name) for name in ("toy", "other")}
    for folder in folders.values():
        os.makedirs(folder)
    save_toy(folders["toy"], 1, "t1:")
    save_toy(folders["toy"], 2, "t2:")
    save_toy(folders["other"], 1, "o1:")
    return folders


def scrape(server, path=PROMETHEUS_PATH, accept=None):
    """(content type, {metric family name: family}) of the metrics page."""
    request = urllib.request.Request(server.url + path,
                                     headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as reply:
        text = reply.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        return reply.headers["Content-Type"], families


def samples(families, family, suffix=""):
    """{tuple(sorted label items): value} of the samples named family + suffix."""
    return {tuple(sorted(s.labels.items())): s.value for s in families[family].samples
            if s.name == family + suffix}


def request_counts(families):
    return {(dict(k)["model"], dict(k)["version"], dict(k)["api"], dict(k)["status"]): v
            for k, v in samples(families, "t2t_serve_requests", "_total").items()}


def _grpc_predict(target, model):
    """The status code of a PredictionService/Predict of "abc" to `model` (stock stub)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([b"abc"]))
    with grpc.insecure_channel(target) as channel:
        try:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
        except grpc.RpcError as e:
            return e.code()
    return grpc.StatusCode.OK


def test_requests_batches_and_queue_are_counted_as_sent(bases):
    predict = {"instances": ["abc"]}
    # (path, body or None for GET, expected status, expected (model, version, api))
    mix = [("/v1/models/toy:predict", predict, 200, ("toy", "2", "rest_predict"))] * 3 + [
        ("/v1/models/toy/versions/1:predict", predict, 200, ("toy", "1", "rest_predict"))] * 2 + [
        ("/v1/models/other:predict", predict, 200, ("other", "1", "rest_predict")),
        ("/v1/models/tyo:predict", predict, 404, ("", "", "rest_predict")),
        ("/v1/models/tyo:predict", predict, 404, ("", "", "rest_predict")),
        ("/v1/models/toy:predict", {"instances": [7]}, 400, ("toy", "2", "rest_predict")),
        ("/v1/models/toy:predict", {"signature_name": "parse", "instances": ["abc"]}, 400,
         ("toy", "2", "rest_predict")),
        ("/v1/models/toy/versions/9:predict", predict, 404, ("toy", "", "rest_predict")),
        ("/v1/models/toy", None, 200, ("toy", "", "rest_status")),
        ("/v1/models/toy/versions/1", None, 200, ("toy", "1", "rest_status")),
        ("/v1/models/toy/versions/1/metadata", None, 200, ("toy", "1", "rest_metadata")),
        ("/v1/models/nope/metadata", None, 404, ("", "", "rest_metadata")),
    ]
    concurrent = [f"w{i}" for i in range(16)]
    with ServerThread(bases, max_batch_size=16, batch_timeout_micros=30_000,
                      num_batch_threads=1) as server:
        for path, body, status, _ in mix:
            assert server.call(path, body)[0] == status, path
        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(lambda w: server.call(
                "/v1/models/other:predict", {"instances": [w]}), concurrent))
        assert [r[1]["predictions"][0]["outputs"] for r in replies] == [
            "o1:" + w.upper() for w in concurrent]
        assert server.call("/healthz")[0] == 200  # not a model request: not counted
        grpc_codes = [_grpc_predict(server.grpc_target, name) for name in ("toy", "nobody")]
        assert grpc_codes == [grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND]
        _, stats = server.call("/v1/models/other?stats")
        content_type, families = scrape(server)
        _, again = scrape(server)  # scraping is not counted either

    assert content_type.startswith("text/plain; version=")
    want = collections.Counter((*labels, str(status)) for _, _, status, labels in mix)
    want[("other", "1", "rest_predict", "200")] += len(concurrent)
    want[("other", "", "rest_status", "200")] += 1  # the ?stats request
    want[("toy", "2", "grpc_predict", "OK")] += 1  # gRPC: its own api label, gRPC codes
    want[("", "", "grpc_predict", "NOT_FOUND")] += 1
    assert request_counts(families) == want
    assert request_counts(again) == want
    # one latency observation per request, per (model, api)
    latency = {(dict(k)["model"], dict(k)["api"]): v for k, v in samples(
        families, "t2t_serve_request_latency_seconds", "_count").items()}
    by_model_api = collections.Counter()
    for (model, _, api, _), count in want.items():
        by_model_api[(model, api)] += count
    assert latency == by_model_api
    assert all(v > 0 for v in samples(families, "t2t_serve_request_latency_seconds",
                                      "_sum").values())
    # batches: as many as the batcher ran, holding every example; the 16 concurrent batched
    batches = stats["batching"]["1"]["serving_default"]
    sizes = ("model", "other"), ("signature", "serving_default"), ("version", "1")
    assert samples(families, "t2t_serve_batch_size", "_count")[sizes] == batches["batches"]
    assert samples(families, "t2t_serve_batch_size", "_sum")[sizes] == batches["examples"] == 17
    assert batches["batches"] < 17
    toy_v2 = {dict(k)["signature"]: v for k, v in samples(
        families, "t2t_serve_batch_size", "_count").items() if dict(k)["model"] == "toy"
        and dict(k)["version"] == "2"}
    # the 3 good REST requests and the gRPC one (same queue), and the one the model
    # refused ([7] was refused before batching)
    assert toy_v2 == {"serving_default": 4, "parse": 1}
    # at rest nothing waits
    depth = samples(families, "t2t_serve_queue_depth")
    assert depth and set(depth.values()) == {0.0}
    assert samples(families, "t2t_serve_model_events", "_total") == {
        (("event", "load"), ("model", m), ("version", v)): 1.0
        for m, v in [("toy", "1"), ("toy", "2"), ("other", "1")]}
    assert "process_resident_memory_bytes" in families


def test_openmetrics_on_request_and_the_config_file_moves_or_hides_the_page(bases, tmp_path):
    with ServerThread({"toy": bases["toy"]}) as server:
        content_type, families = scrape(server, accept="application/openmetrics-text")
        assert content_type.startswith("application/openmetrics-text")
        assert "t2t_serve_requests" in families
    for prometheus_path, served, absent in [("/metrics", "/metrics", PROMETHEUS_PATH),
                                            (None, None, PROMETHEUS_PATH)]:
        server = ServerThread({"toy": bases["toy"]})
        server.options = dataclasses.replace(server.options, prometheus_path=prometheus_path)
        with server:
            if served:
                assert "t2t_serve_requests" in scrape(server, served)[1]
            status, reply = server.call(absent)
            assert status == 404 and "no such path" in reply["error"]


def test_monitoring_config_file(tmp_path):
    def config(text):
        path = tmp_path / f"c{len(os.listdir(tmp_path))}.txt"
        path.write_text(text)
        return str(path)

    assert prometheus_path_from_config(None) == PROMETHEUS_PATH
    assert prometheus_path_from_config(config(
        'prometheus_config { enable: true, path: "/metrics" }')) == "/metrics"
    assert prometheus_path_from_config(config("prometheus_config { enable: true }")) == (
        PROMETHEUS_PATH)
    assert prometheus_path_from_config(config("prometheus_config { enable: false }")) is None
    assert prometheus_path_from_config(config("")) is None  # TF Serving: off unless enabled
    bad = [(config("prometheus_config { enabled: true }"), "Did you mean 'enable'?"),
           (config("prometheus_config {"), "not a text MonitoringConfig"),
           (config('prometheus_config { enable: true, path: "metrics" }'), "starting with '/'"),
           (config('prometheus_config { enable: true, path: "/v1/models/m" }'), "own routes"),
           (str(tmp_path / "missing.txt"), "cannot read it")]
    for path, words in bad:
        with pytest.raises(ValueError, match="--monitoring_config_file=") as error:
            prometheus_path_from_config(path)
        assert words in str(error.value) and "\n" not in str(error.value)


def test_t2t_serve_refuses_a_bad_monitoring_config_file(bases, tmp_path):
    bad = tmp_path / "monitoring.txt"
    bad.write_text("prometheus_config { enabled: true }")
    result = run_binary("t2t-serve", f"--model_base_path={bases['toy']}",
                        f"--monitoring_config_file={bad}", "--rest_api_port=0")
    assert result.code == 1 and not result.traceback
    assert f"--monitoring_config_file={bad}" in result.err
    assert "Did you mean 'enable'?" in result.err


def test_versions_loaded_failed_and_unloaded_while_serving_are_events(tmp_path):
    folder = str(tmp_path / "export")
    os.makedirs(folder)
    save_toy(folder, 1, "v1:")

    def events(server):
        return {(dict(k)["version"], dict(k)["event"]): v for k, v in samples(
            scrape(server)[1], "t2t_serve_model_events", "_total").items()}

    with ServerThread({"toy": folder}, policy="latest:1") as server:
        assert server.call("/v1/models/toy:predict", {"instances": ["a"]})[0] == 200
        os.makedirs(os.path.join(folder, "2", "variables"))
        with open(os.path.join(folder, "2", "saved_model.pb"), "wb") as f:
            f.write(b"not a SavedModel")
        assert wait_for(lambda: ("2", "load_failed") in events(server), 60)
        save_toy(folder, 3, "v3:")
        assert wait_for(lambda: ("1", "unload") in events(server), 60)
        assert events(server) == {("1", "load"): 1, ("2", "load_failed"): 1, ("3", "load"): 1,
                                  ("1", "unload"): 1}
        # the unloaded version's queue depth series is gone; its request counts stay
        families = scrape(server)[1]
        assert [dict(k)["version"] for k in samples(families, "t2t_serve_queue_depth")] == []
        assert request_counts(families) == {("toy", "1", "rest_predict", "200"): 1}


class DepthRecorder:
    """A BatchObserver that keeps every queue depth and batch size it is told."""

    def __init__(self):
        self.depths, self.batches = [], []

    def batch_run(self, size):
        self.batches.append(size)

    def queue_changed(self, examples):
        self.depths.append(examples)


@pytest.mark.parametrize("enable_batching", [True, False])
def test_queue_depth_counts_waiting_examples_and_returns_to_zero(enable_batching):
    gate = threading.Event()

    def run(inputs):
        gate.wait(10)
        return {"y": inputs["x"] * 2}

    recorder = DepthRecorder()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            options = BatchingOptions(enable_batching, max_batch_size=2, batch_timeout_micros=0,
                                      num_batch_threads=1)
            batcher = Batcher(run, options, pool, recorder)
            calls = [asyncio.ensure_future(batcher.predict({"x": np.ones((n, 1))}, n))
                     for n in (2, 2, 2)]
            await asyncio.sleep(0.2)  # the first runs (blocked); 4 examples wait
            waiting = recorder.depths[-1]
            gate.set()
            await asyncio.gather(*calls)
            await batcher.close()
            return waiting

    assert asyncio.run(main()) == 4
    assert recorder.depths[-1] == 0
    assert recorder.batches == [2, 2, 2]
