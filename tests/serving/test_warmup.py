"""Warm-up before a version serves (t2t.serving.warmup): TF Serving's
assets.extra/tf_serving_warmup_requests run once each before the version is AVAILABLE,
the readiness probes flip only after it (ports opened before loading, and a version added
while serving), a failed warm-up is a failed load while the older version keeps serving,
and t2t's own warm-up requests when the export has no file."""

import asyncio
import os
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_log_pb2

from t2t.serving import warmup
from t2t.serving.batching import BatchingOptions
from t2t.serving.model_store import ModelStore, VersionPolicy
from t2t.serving.rest_api import SignatureSpec, TensorInfo
from tests.helpers.serving import ServerThread

SLEEP_MICROS = 2_000_000  # a warm-up long enough to watch the probes during it


class Counting(tf.Module):
    """step: counts its calls; count: reads the count; sleep: waits `micros` (no CPU);
    check: refuses negative numbers."""

    def __init__(self):
        super().__init__()
        self.calls = tf.Variable(0, dtype=tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="x")])
    def step(self, x):
        return {"calls": tf.fill(tf.shape(x), self.calls.assign_add(1))}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="x")])
    def count(self, x):
        return {"calls": tf.fill(tf.shape(x), self.calls.read_value())}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="micros")])
    def sleep(self, micros):
        data = tf.data.Dataset.from_tensors(micros)
        asleep = tf.raw_ops.SleepDataset(  # tf.data's sleep: waits before each element
            input_dataset=tf.data.experimental.to_variant(data), sleep_microseconds=micros[0],
            output_types=[tf.int64], output_shapes=[[None]])
        return {"slept": tf.data.experimental.from_variant(
            asleep, data.element_spec).get_single_element()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="x")])
    def check(self, x):
        with tf.control_dependencies([tf.debugging.assert_non_negative(x, "x must be >= 0")]):
            return {"y": tf.identity(x)}


def _request(signature, **inputs):
    return warmup.WarmupRequest(signature, {k: np.array(v, np.int64) for k, v in inputs.items()},
                                "test")


def save_counting(base, version, requests):
    """Version `version` of Counting, with `requests` as its warm-up file; written in a
    staging folder, then renamed (as t2t-exporter does)."""
    module = Counting()
    staging = os.path.join(base, f"temp-{version}")
    tf.saved_model.save(module, staging, signatures={
        "serving_default": module.count, "step": module.step, "sleep": module.sleep,
        "check": module.check})
    warmup.write_warmup_file(os.path.join(staging, warmup.WARMUP_FILE), requests, "counting")
    os.replace(staging, os.path.join(base, str(version)))


def _count(server, version=""):
    path = f"/v2/models/w{'/versions/' + str(version) if version else ''}/infer"
    status, reply = server.call(path, {"inputs": [
        {"name": "x", "shape": [1], "datatype": "INT64", "data": [0]}]})
    assert status == 200, reply
    return reply["model_version"], reply["outputs"][0]["data"][0]


def _wait(predicate, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _states(server):
    return {row["version"]: row["state"] for row in server.call("/v1/models/w")[1][
        "model_version_status"]}


def test_ready_only_after_the_warmup_file_ran_with_ports_open_first(tmp_path):
    base = str(tmp_path / "w")
    os.makedirs(base)
    save_counting(base, 1, [_request("step", x=[0])] * 3 + [_request("sleep", micros=[SLEEP_MICROS])])
    with ServerThread({"w": base}, wait_for_models=False) as server:
        listening = time.monotonic()
        assert server.call("/v2/health/live") == (200, {"live": True})
        status, reply = server.call("/v2/health/ready")
        assert status == 503 and "model 'w' is still loading" in reply["error"], reply
        assert server.call("/v2/models/w/ready")[0] == 503
        status, reply = server.call("/v2/models/w/infer", {"inputs": []})
        assert status == 503 and "still loading" in reply["error"], reply
        assert _states(server) == {"1": "LOADING"}
        _wait(lambda: server.call("/v2/health/ready")[0] == 200)
        assert time.monotonic() - listening >= SLEEP_MICROS / 1e6  # not before the sleep
        assert server.call("/v2/models/w/ready") == (200, {"name": "w", "ready": True})
        # Each record ran exactly once before the version answered.
        assert _count(server) == ("1", 3)


def test_a_new_version_serves_after_its_warmup_and_a_failed_one_is_reported(tmp_path):
    base = str(tmp_path / "w")
    os.makedirs(base)
    save_counting(base, 1, [_request("step", x=[0])])
    with ServerThread({"w": base}) as server:
        assert _count(server) == ("1", 1)
        save_counting(base, 2, [_request("sleep", micros=[SLEEP_MICROS]), _request("step", x=[5, 6])])
        _wait(lambda: _states(server).get("2") == "LOADING")
        # Version 1 answers and the server stays ready while version 2 warms up.
        assert server.call("/v2/health/ready") == (200, {"ready": True})
        assert server.call("/v2/models/w/ready")[0] == 200
        status, reply = server.call("/v2/models/w/versions/2/ready")
        assert status == 503 and "version 2 of model 'w' is still loading" in reply["error"]
        assert _count(server)[0] == "1"
        _wait(lambda: _states(server).get("2") == "AVAILABLE")
        assert _count(server) == ("2", 1)
        # A warm-up the model refuses: a failed load, named; version 2 keeps serving.
        save_counting(base, 3, [_request("check", x=[-1])])
        _wait(lambda: _states(server).get("3") == "END")
        error = server.call("/v1/models/w/versions/3")[1]["model_version_status"][0]["status"]
        assert "warm-up failed: assets.extra/tf_serving_warmup_requests record 0 (signature " \
               "'check'): the model rejected the input" in error["error_message"], error
        assert "x must be >= 0" in error["error_message"]
        assert server.call("/v2/health/ready") == (200, {"ready": True})
        status, reply = server.call("/v2/models/w/versions/3/ready")
        assert status == 503 and "version 3 of model 'w' failed to load" in reply["error"]
        assert _count(server) == ("2", 1)


def test_warmup_can_be_turned_off(tmp_path):
    base = str(tmp_path / "w")
    os.makedirs(base)
    save_counting(base, 1, [_request("step", x=[0])])

    async def count():
        store = ModelStore({"w": base}, VersionPolicy.parse("latest"), BatchingOptions())
        store.enable_model_warmup = False  # TF Serving's --enable_model_warmup=false
        await store.start()
        try:
            return store.model("w").resolve(None).functions["serving_default"](
                x=tf.constant([0], tf.int64))["calls"].numpy()[0]
        finally:
            await store.close()

    assert asyncio.run(count()) == 0


# ------------------------------------------------------------------ the file, no server
SPECS = {"serving_default": SignatureSpec("serving_default", {
    "inputs": TensorInfo("string", (None,))}, {}),
         "scale": SignatureSpec("scale", {"x": TensorInfo("float32", (None, 2))}, {})}


def _write_records(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def test_the_file_is_read_as_tf_serving_reads_it(tmp_path):
    path = tmp_path / "tf_serving_warmup_requests"
    requests = [warmup.WarmupRequest("scale", {"x": np.ones([3, 2], np.float32)}, "a"),
                warmup.WarmupRequest("serving_default", {"inputs": np.array([b"hi"], object)}, "b")]
    warmup.write_warmup_file(str(path), requests)
    read = warmup.read_warmup_file(str(path), SPECS)
    assert [(r.signature, r.origin) for r in read] == [
        ("scale", "assets.extra/tf_serving_warmup_requests record 0"),
        ("serving_default", "assets.extra/tf_serving_warmup_requests record 1")]
    np.testing.assert_array_equal(read[0].inputs["x"], np.ones([3, 2], np.float32))
    assert read[1].inputs["inputs"].tolist() == [b"hi"]
    _write_records(path, [])
    assert warmup.read_warmup_file(str(path), SPECS) == []


@pytest.mark.parametrize("records, words", [
    ("1001", "more than 1000 records, TF Serving's limit"),
    ([b"\x08\x96\x01garbage"], "record 0 is not a tensorflow.serving.PredictionLog"),
    ("classify", "record 0 is a classify_log; t2t-serve's models have predict signatures"),
    ([("scales", {"x": np.ones([1, 2], np.float32)})], "names signature 'scales'; the model has"),
    ([("scale", {"x": np.ones([1, 2], np.float64)})], "input 'x' is float64; signature 'scale' "
                                                      "takes float32"),
    ([("scale", {"x": np.ones([1, 3], np.float32)})], "has shape [1, 3]; signature 'scale' "
                                                      "takes [?, 2]"),
    ([("scale", {"y": np.ones([1, 2], np.float32)})], "the request has unknown ['y'] and lacks "
                                                      "['x']"),
])
def test_a_bad_file_is_refused_naming_the_record(tmp_path, records, words):
    path = tmp_path / "tf_serving_warmup_requests"
    if records == "1001":
        warmup.write_warmup_file(str(path), [warmup.WarmupRequest(
            "scale", {"x": np.ones([1, 2], np.float32)}, "")] * 1001)
    elif records == "classify":
        log = prediction_log_pb2.PredictionLog(classify_log=prediction_log_pb2.ClassifyLog(
            request=classification_pb2.ClassificationRequest()))
        _write_records(path, [log.SerializeToString()])
    elif isinstance(records[0], tuple):
        warmup.write_warmup_file(str(path), [warmup.WarmupRequest(s, i, "") for s, i in records])
    else:
        _write_records(path, records)
    with pytest.raises(warmup.WarmupError) as error:
        warmup.read_warmup_file(str(path), SPECS)
    assert words in str(error.value)
    assert str(tmp_path) not in str(error.value)


def test_a_file_that_is_not_a_tfrecord_is_refused(tmp_path):
    path = tmp_path / "tf_serving_warmup_requests"
    path.write_bytes(b"not a TFRecord file at all, just some bytes")
    with pytest.raises(warmup.WarmupError, match="is not a readable TFRecord file"):
        warmup.read_warmup_file(str(path), SPECS)


def test_t2t_requests_come_from_the_export_info():
    # A SavedModel t2t did not export: no request is made up (TF Serving makes none).
    assert warmup.t2t_warmup_requests(SPECS, {}) == (
        [], ["scale (not a t2t export)", "serving_default (not a t2t export)"])
    text = {"problem_hparams": {"modality": {"inputs": "symbol", "targets": "symbol"}},
            "parity": {"samples": [{"input": "''", "output": ""},  # the gate's repr(text)
                                   {"input": "'1 0 1'", "output": "1 0 1"}]}}
    requests, skipped = warmup.t2t_warmup_requests(SPECS, text)
    assert [(r.signature, r.inputs["inputs"].tolist()) for r in requests] == [
        ("serving_default", [b"1 0 1"])]
    assert skipped == ["scale (nothing describes its input(s) ['x'])"]
    generate = {"generate": SignatureSpec("generate", {
        "inputs": TensorInfo("string", (None,)), "top_k": TensorInfo("int32", ()),
        "temperature": TensorInfo("float32", ())}, {})}
    lm = {"problem_hparams": {"modality": {"targets": "symbol"}},
          "encoders": {"targets": {"type": "character", "chars": list("abcdef")}}}
    (request,), _ = warmup.t2t_warmup_requests(generate, lm)
    assert {k: v.tolist() for k, v in request.inputs.items()} == {
        "inputs": [b"abcd"], "top_k": 0, "temperature": 0.0}
    tokens = {"problem_hparams": {"modality": {"inputs": "symbol"}},
              "encoders": {"inputs": {"type": "token", "vocab": ["<pad>", "<EOS>", "0", "1"]}}}
    assert warmup.t2t_warmup_requests(SPECS, tokens)[0][0].inputs["inputs"].tolist() == [b"0 1"]
    image = {"problem_hparams": {"modality": {"inputs": "image"}, "image_shape": [4, 5, 3]}}
    png = warmup.t2t_warmup_requests(SPECS, image)[0][0].inputs["inputs"][0]
    assert tf.io.decode_png(png).shape == (4, 5, 3)
    audio = {"problem_hparams": {"modality": {"inputs": "audio"}, "audio_sample_rate": 8000}}
    wav = warmup.t2t_warmup_requests(SPECS, audio)[0][0].inputs["inputs"][0]
    assert wav[:4] == b"RIFF" and len(wav) == 44 + 2 * 2000


def test_a_signature_fed_by_another_is_warmed_with_its_outputs(tmp_path):
    """The LM streaming step's chain: "step" takes what "start" returns (its state), so it
    is warmed with start's outputs once start ran; an input no output has stays skipped."""
    specs = {"start": SignatureSpec("start", {"inputs": TensorInfo("string", (None,)),
                                              "top_k": TensorInfo("int32", ())}, {}),
             "step": SignatureSpec("step", {"ids": TensorInfo("int32", (None, 3)),
                                            "index": TensorInfo("int32", ())}, {}),
             "other": SignatureSpec("other", {"ids": TensorInfo("int64", (None, 3))}, {})}
    lm = {"problem_hparams": {"modality": {"targets": "symbol"}},
          "encoders": {"targets": {"type": "character", "chars": list("abcdef")}}}
    calls = []

    def run(name, inputs):
        calls.append((name, {k: v.tolist() for k, v in inputs.items()}))
        return {"ids": np.full([1, 3], 4, np.int32), "index": np.array(2, np.int32),
                "outputs": np.array([b"x"], object)}

    report = warmup.run_warmup(str(tmp_path), specs, lm, run)
    assert calls == [("start", {"inputs": [b"abcd"], "top_k": 0}),
                     ("step", {"ids": [[4, 4, 4]], "index": 2})]
    assert report.requests == 2 and report.skipped == (
        "other (nothing describes its input(s) ['ids'])",)  # int64: no output fits
