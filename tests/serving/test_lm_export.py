"""Exporting a language model: serving_default / generate / score / serve_tf_example,
checked against t2t's Decoder and Scorer by the parity gate (a fresh process); and
t2t-serve streaming it (generate_start / generate_step: REST server-sent events, gRPC
GenerateStream, the try-it page), token by token equal to the non-streamed answers."""

import contextlib
import http.client
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import keras
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import predict_pb2

from t2t import registry
from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.decoding import decoder as decoder_lib
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from t2t.serving import export as export_lib
from t2t.serving import grpc_streaming, lm_parity, parity, warmup
from tests.helpers import browser as browser_helpers
from tests.helpers import docs_text
from tests.helpers.serving import ServerThread
from tests.serving import test_page

HPARAMS = "max_length=64"


def _real_text_corpus(folder: pathlib.Path) -> None:
    """Paragraphs of this project's documentation (real English) as a few text files."""
    paragraphs = docs_text.prose_paragraphs()
    folder.mkdir(parents=True)
    for i in range(12):
        (folder / f"doc{i:02d}.txt").write_text("\n".join(paragraphs[i::12][:3]), encoding="utf-8")


def _train(model, problem, data_dir, steps=60):
    dataset = problem.dataset(problem_lib.TRAIN, data_dir, deterministic=True).repeat()
    dataset = dataset.padded_batch(8).take(steps)
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function(reduce_retracing=True)
    def step(targets):
        with tf.GradientTape() as tape:
            _, losses = model({"targets": tf.cast(targets, tf.int32)}, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for batch in dataset:
        loss = step(batch["targets"])
    return float(loss)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_export")
    _real_text_corpus(root / "texts")
    data_dir = str(root / "data")
    problem = registry.problem("languagemodel_text_files")
    problem.generate_data(data_dir, str(root / "texts"), progress=False)
    keras.utils.set_random_seed(2)
    hparams = create_hparams("transformer_test", HPARAMS)
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN,
                                   problem.hparams(data_dir))
    model.build_weights()
    _train(model, problem, data_dir)
    run = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 2).save(60)
    loaded = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    return problem, loaded, hparams, data_dir, run


GREEDY = "beam_size=1,max_new_tokens=12,return_prompt=true"


def _export_with_parity(lm_run, settings):
    problem, model, hparams, data_dir, run = lm_run
    return export_lib.export(problem, "transformer", hparams, data_dir, run,
                             decode_hparams=settings, model=model, parity_examples=3)


@pytest.fixture(scope="module")
def greedy_export(lm_run):
    """The greedy export (its parity gate passed), also read by the plain script below."""
    return _export_with_parity(lm_run, GREEDY)


@pytest.mark.parametrize("settings", [
    GREEDY, "temperature=0.9,top_p=0.9,num_samples=2,seed=7,max_new_tokens=10"])
def test_lm_export_passes_the_parity_gate(lm_run, greedy_export, settings):
    problem, _, _, data_dir, _ = lm_run
    path = greedy_export if settings == GREEDY else _export_with_parity(lm_run, settings)
    with open(os.path.join(path, "assets.extra", parity.EXPORT_INFO_FILE)) as f:
        info = json.load(f)
    assert set(info["signatures"]) == {"serving_default", "generate", "score", "serve_tf_example",
                                       "generate_start", "generate_step"}
    report = info["parity"]
    dev = len(lm_parity.dev_token_ids(problem, data_dir, 3))  # prompts: these + ""
    # serving_default and 2 generate calls per prompt; a score and an example per dev text
    assert dev >= 1 and not report["sampling"]
    assert report["examples"] == 3 * (dev + 1) + 2 * dev


def test_a_plain_tensorflow_script_generates_and_scores(greedy_export, tmp_path):
    path = greedy_export
    script = tmp_path / "client.py"
    script.write_text(
        "import sys, json, tensorflow as tf\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "g = m.signatures['generate'](inputs=tf.constant(['The model', '']),\n"
        "    temperature=tf.constant(0.7), top_k=tf.constant(0), top_p=tf.constant(1.0),\n"
        "    max_new_tokens=tf.constant(8), seed=tf.constant(3, tf.int64))\n"
        "g2 = m.signatures['generate'](inputs=tf.constant(['The model', '']),\n"
        "    temperature=tf.constant(0.7), top_k=tf.constant(0), top_p=tf.constant(1.0),\n"
        "    max_new_tokens=tf.constant(8), seed=tf.constant(3, tf.int64))\n"
        "s = m.signatures['score'](inputs=tf.constant(['The model is a layer.']))\n"
        "print(json.dumps({'same': bool(tf.reduce_all(g['outputs'] == g2['outputs'])),\n"
        "  'n': int(g['outputs'].shape[0]), 'lp': float(s['log_probs'][0]),\n"
        "  'tokens': int(s['tokens'][0]), 't2t': [m for m in sys.modules if m.startswith('t2t')]}))\n")
    out = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["same"] and result["n"] == 2 and result["t2t"] == []
    assert result["lp"] < 0 and result["tokens"] == len("The model is a layer.") + 1
    settings = DecodeHParams.parse("beam_size=1")
    assert settings.beam_size == 1


# ------------------------------------------------------------------ streaming
PROMPTS = ["The model", "", "A language model continues a prompt"]
STREAM_SETTINGS = [  # greedy, and seeded sampling with each filter
    {"temperature": 0.0, "max_new_tokens": 9},
    {"temperature": 0.9, "top_p": 0.9, "max_new_tokens": 10, "seed": 7},
    {"temperature": 1.0, "top_k": 20, "max_new_tokens": 14, "seed": 1234}]
DTYPES = {"temperature": tf.float32, "top_k": tf.int32, "top_p": tf.float32,
          "max_new_tokens": tf.int32, "seed": tf.int64}


@pytest.fixture(scope="module")
def lm_server(greedy_export):
    """t2t-serve (REST and gRPC, with GenerateStream) serving the greedy export (the
    sampling export of the parity test may be a newer version beside it)."""
    running = ServerThread({"lm": os.path.dirname(greedy_export)},
                           policy=f"specific:{os.path.basename(greedy_export)}")
    running.extra_handlers = (grpc_streaming.handler(running.store),)
    with running:
        yield running


def _events(text: str) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a text/event-stream body."""
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def _stream_rest(server, body) -> list[tuple[str, dict]]:
    request = urllib.request.Request(server.url + "/v1/models/lm:generateStream",
                                     data=json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=120) as reply:
        assert reply.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        return _events(reply.read().decode())


def _grpc_request(prompt, settings) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "lm"
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([prompt]))
    for name, value in settings.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, DTYPES[name]))
    return request


def _grpc_stream(server):
    return grpc.insecure_channel(server.grpc_target).unary_stream(
        grpc_streaming.FULL_METHOD, request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString)


def _generate(servable, prompt, settings):
    """What :predict's generate signature answers (outputs, score): the same function."""
    values = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 0, "seed": -1,
              **settings}
    out = servable.functions["generate"](inputs=tf.constant([prompt]), **{
        name: tf.constant(value, DTYPES[name]) for name, value in values.items()})
    return out["outputs"].numpy()[0].decode(), float(out["scores"].numpy()[0])


def _check_pieces(tokens: list[dict], prompt: str, final: str) -> None:
    """Each token event's text is the one before with its piece; the last one is final."""
    text = prompt  # return_prompt=true: the text starts as the prompt
    for index, token in enumerate(tokens):
        text = text[:len(text) - token["replaced"]] + token["piece"]
        assert token["index"] == index and token["outputs"] == text
    assert text == final


# ------------------------------------------------------- generate over REST, gRPC, V2
GENERATE_SETTINGS = [  # greedy, and seeded sampling with each filter
    {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 9, "seed": 1},
    {"temperature": 0.9, "top_k": 0, "top_p": 0.9, "max_new_tokens": 10, "seed": 7},
    {"temperature": 1.0, "top_k": 20, "top_p": 1.0, "max_new_tokens": 14, "seed": 1234}]
V2_TYPES = {"temperature": "FP32", "top_k": "INT32", "top_p": "FP32", "max_new_tokens": "INT32",
            "seed": "INT64"}


def _generate_direct(servable, prompts, settings):
    """The SavedModel's generate signature called directly: (outputs, scores) lists."""
    out = servable.functions["generate"](inputs=tf.constant(prompts), **{
        name: tf.constant(value, DTYPES[name]) for name, value in settings.items()})
    return [t.decode() for t in out["outputs"].numpy()], out["scores"].numpy().tolist()


def _generate_grpc(server, prompts, settings) -> predict_pb2.PredictRequest:
    request = _grpc_request(prompts[0], settings)
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto(prompts))
    request.model_spec.signature_name = "generate"
    return request


def _generate_v2(prompts, settings, **scalar_shape) -> dict:
    inputs = [{"name": "inputs", "shape": [len(prompts)], "datatype": "BYTES", "data": prompts}]
    inputs += [{"name": name, "shape": scalar_shape.get(name, []), "datatype": V2_TYPES[name],
                "data": [value]} for name, value in settings.items()]
    return {"parameters": {"signature_name": "generate"}, "inputs": inputs}


def test_the_first_stream_after_ready_runs_warm(lm_server):
    """The warm-up chains generate_step to generate_start's state (counted), so the first
    stream's first step is about as fast as its next ones (unwarmed it took ~0.6 s here,
    a warm step ~5 ms). This module's first stream: it runs before the others."""
    servable = lm_server.store.model("lm").resolve(None)
    step, durations = servable.functions["generate_step"], []

    def timed(**state):
        started = time.perf_counter()
        result = step(**state)
        durations.append(time.perf_counter() - started)
        return result

    servable.functions["generate_step"] = timed
    try:
        events = _stream_rest(lm_server, {"instances": [{"inputs": "The model",
                                                         "max_new_tokens": 8}]})
    finally:
        servable.functions["generate_step"] = step
    assert events[-1][0] == "result" and len(durations) >= 5
    rest = sorted(durations[1:])
    assert durations[0] <= 0.15 + 5 * rest[len(rest) // 2], durations
    calls = []
    report = warmup.run_warmup(servable.path, servable.signatures, servable.info,
                               lambda name, inputs: calls.append((name, inputs))
                               or servable._run(name, inputs))
    assert report.skipped == () and report.requests == len(servable.signatures)
    names = [name for name, _ in calls]
    assert names[-1] == "generate_step" and names.count("generate_step") == 1
    started = servable._run("generate_start", calls[names.index("generate_start")][1])
    assert all((calls[-1][1][key] == started[key]).all() for key in calls[-1][1])


def test_generate_over_rest_grpc_and_v2_equals_the_signature(lm_server):
    servable = lm_server.store.model("lm").resolve(None)
    predict = grpc.insecure_channel(lm_server.grpc_target).unary_unary(
        "/tensorflow.serving.PredictionService/Predict",
        request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString)
    prompts = [PROMPTS[0], PROMPTS[2]]
    for settings in GENERATE_SETTINGS:
        outputs, scores = _generate_direct(servable, prompts, settings)
        body = {"signature_name": "generate", "inputs": {"inputs": prompts, **settings}}
        assert lm_server.call("/v1/models/lm:predict", body) == (
            200, {"outputs": {"outputs": outputs, "scores": scores}})
        reply = predict(_generate_grpc(lm_server, prompts, settings), timeout=60)
        got = {k: tf.make_ndarray(v).tolist() for k, v in reply.outputs.items()}
        assert got == {"outputs": [t.encode() for t in outputs], "scores": scores}
        shape = {"seed": [1]}  # tritonclient's [1] for a scalar, and []
        status, reply = lm_server.call("/v2/models/lm/infer", _generate_v2(prompts, settings,
                                                                          **shape))
        assert status == 200 and reply["outputs"] == [
            {"name": "outputs", "datatype": "BYTES", "shape": [2], "data": outputs},
            {"name": "scores", "datatype": "FP32", "shape": [2], "data": scores}]
    # The stream's result is the REST generate answer for the same settings.
    settings = GENERATE_SETTINGS[1]
    events = _stream_rest(lm_server, {"instances": [{"inputs": prompts[0], **settings}]})
    rest = lm_server.call("/v1/models/lm:predict", {"signature_name": "generate", "inputs": {
        "inputs": prompts[:1], **settings}})[1]["outputs"]
    assert events[-1][1]["predictions"] == [{"outputs": rest["outputs"][0],
                                             "scores": rest["scores"][0]}]


def test_concurrent_generate_requests_with_different_settings_do_not_mix(lm_server):
    """Requests with different settings never share a batch (their scalars differ): each
    model call gets one request's settings, and each answer equals its own direct call."""
    servable = lm_server.store.model("lm").resolve(None)
    generate, seen = servable.functions["generate"], []

    def slow(**inputs):  # requests pile up in the queue while one runs
        seen.append((int(inputs["seed"]), len(inputs["inputs"])))
        time.sleep(0.05)
        return generate(**inputs)

    cases = [{**GENERATE_SETTINGS[i % 3], "seed": 11 + i, "max_new_tokens": 6} for i in range(6)]
    servable.functions["generate"] = slow
    try:
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda s: lm_server.call("/v1/models/lm:predict", {
                "signature_name": "generate", "inputs": {"inputs": ["The model"], **s}}), cases))
    finally:
        servable.functions["generate"] = generate
    assert sorted(seen) == [(s["seed"], 1) for s in cases]  # one request per model call
    for settings, (status, answer) in zip(cases, answers, strict=True):
        outputs, scores = _generate_direct(servable, ["The model"], settings)
        assert (status, answer) == (200, {"outputs": {"outputs": outputs, "scores": scores}})


def test_bad_generate_scalars_are_refused_on_every_api(lm_server):
    good = {"temperature": 0.5, "top_k": 0, "top_p": 1.0, "max_new_tokens": 4, "seed": 3}

    def rest(**change):
        return lm_server.call("/v1/models/lm:predict", {"signature_name": "generate",
                                                        "inputs": {"inputs": ["The"], **good,
                                                                   **change}})

    assert rest(temperature=[0.5]) == (400, {"error": "inputs['temperature']: a scalar input "
                                             "(shape []) takes one bare float32 value, got "
                                             "shape [1]; send e.g. 0.5, not a list"})
    assert rest(top_k=2.5) == (400, {"error": "inputs['top_k']: wants int32, got float 2.5"})
    assert rest(max_new_tokens=100000)[1]["error"].startswith(
        "max_new_tokens=100000: give 1 to 4096")
    assert rest(top_p=7)[1] == {"error": "top_p=7.0: give a probability in (0, 1] (1: every "
                                         "token)"}
    status, reply = lm_server.call("/v1/models/lm:predict", {
        "signature_name": "generate", "instances": [{"inputs": "The", **good}]})
    assert status == 400 and reply["error"].startswith(
        "signature 'generate' has scalar input(s) ['max_new_tokens', 'seed', 'temperature', "
        "'top_k', 'top_p'] (shape [], one value per request), which the row format")
    predict = grpc.insecure_channel(lm_server.grpc_target).unary_unary(
        "/tensorflow.serving.PredictionService/Predict",
        request_serializer=predict_pb2.PredictRequest.SerializeToString,
        response_deserializer=predict_pb2.PredictResponse.FromString)
    for change, words in [({"temperature": [0.5]}, "inputs['temperature']: shape [1]; the "
                           "signature wants a scalar (shape [], one value for the whole request)"),
                          ({"top_p": 0.0}, "top_p=0.0: give a probability in (0, 1]")]:
        request = _generate_grpc(lm_server, ["The"], {**good, **change})
        with pytest.raises(grpc.RpcError) as raised:
            predict(request, timeout=60)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert words in raised.value.details()
    request = _generate_grpc(lm_server, ["The"], good)
    request.inputs["seed"].CopyFrom(tf.make_tensor_proto(3))  # int32, not int64
    with pytest.raises(grpc.RpcError) as raised:
        predict(request, timeout=60)
    assert "inputs['seed']: has DT_INT32; the signature wants DT_INT64" in raised.value.details()
    status, reply = lm_server.call("/v2/models/lm/infer", _generate_v2(["The"], good,
                                                                        top_k=[2]))
    assert status == 400 and reply["error"].startswith(
        "input 'top_k': shape [2]; the signature takes a scalar")
    status, reply = lm_server.call("/v2/models/lm/infer", _generate_v2(["The"], {**good,
                                                                                 "seed": -5}))
    assert (status, reply) == (400, {"error": "seed=-5: give 0 to 2**63-1 (the same seed, the "
                                              "same text), or -1 to draw one"})
    assert rest()[0] == 200  # serving on


def test_streams_equal_the_non_streamed_answers(lm_server):
    servable = lm_server.store.model("lm").resolve(None)
    stream = _grpc_stream(lm_server)
    for prompt in PROMPTS:
        # No settings: the export's own (greedy, 12 tokens), as :predict's serving_default.
        status, predicted = lm_server.call("/v1/models/lm:predict", {"instances": [prompt]})
        events = _stream_rest(lm_server, {"instances": [prompt]})
        assert status == 200 and events[-1] == ("result", {**predicted, "tokens": len(events) - 1})
        for settings in STREAM_SETTINGS:
            events = _stream_rest(lm_server, {"instances": [{"inputs": prompt, **settings}]})
            kinds = [kind for kind, _ in events]
            assert kinds == ["token"] * (len(events) - 1) + ["result"]
            tokens, (_, result) = [data for _, data in events[:-1]], events[-1]
            outputs, score = _generate(servable, prompt, settings)
            assert result == {"predictions": [{"outputs": outputs, "scores": score}],
                              "tokens": len(tokens)}
            assert 1 <= len(tokens) <= settings["max_new_tokens"]
            _check_pieces(tokens, prompt, outputs)
            replies = [{k: tf.make_ndarray(v) for k, v in r.outputs.items()}
                       for r in stream(_grpc_request(prompt, settings), timeout=120)]
            assert [r["token_id"][0] for r in replies[:-1]] == [t["token_id"] for t in tokens]
            assert [r["outputs"][0].decode() for r in replies[:-1]] == [t["outputs"] for t in tokens]
            last = replies[-1]
            assert (last["outputs"][0].decode(), float(last["scores"][0]), int(last["tokens"][0])) == (
                outputs, score, len(tokens))
    # Bad settings: one-line errors, and the server streams on.
    bad = {"instances": [{"inputs": "The", "top_p": 7}]}
    assert lm_server.call("/v1/models/lm:generateStream", bad) == (
        400, {"error": "top_p=7.0: give a probability in (0, 1] (1: every token)"})
    with pytest.raises(grpc.RpcError) as raised:
        list(stream(_grpc_request("The", {"max_new_tokens": 5000}), timeout=60))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_new_tokens=5000: give 1 to 4096" in raised.value.details()
    assert _stream_rest(lm_server, {"inputs": "The"})[-1][0] == "result"


@contextlib.contextmanager
def _slow_steps(servable, seconds):
    """Each generate_step call of `servable` takes `seconds` more; yields the list of the
    calls' start times (what the server ran)."""
    step, calls = servable.functions["generate_step"], []

    def slow(**state):
        calls.append(time.perf_counter())
        time.sleep(seconds)
        return step(**state)

    servable.functions["generate_step"] = slow
    try:
        yield calls
    finally:
        servable.functions["generate_step"] = step


def _settled(calls: list, quiet: float = 0.5, limit: float = 20.0) -> int:
    """The number of calls once none came for `quiet` seconds."""
    deadline, seen = time.perf_counter() + limit, -1
    while len(calls) != seen and time.perf_counter() < deadline:
        seen = len(calls)
        time.sleep(quiet)
    return len(calls)


def _requests_counted(server) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(server.url + "/monitoring/prometheus/metrics") as reply:
        families = text_string_to_metric_families(reply.read().decode())
    return {(s.labels["api"], s.labels["status"]): s.value for f in families
            if f.name == "t2t_serve_requests" for s in f.samples if s.name.endswith("_total")}


def test_a_client_that_leaves_stops_the_generation(lm_server):
    """Tokens arrive as they are made (a step apart); a client that disconnects (REST) or
    cancels (gRPC) after 3 of 4000 stops the loop within a step."""
    servable = lm_server.store.model("lm").resolve(None)
    long = {"temperature": 1.0, "seed": 5, "max_new_tokens": 4000}
    host, port = urllib.parse.urlsplit(lm_server.url).netloc.split(":")
    with _slow_steps(servable, 0.02) as calls:
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        connection.request("POST", "/v1/models/lm:generateStream",
                           json.dumps({"instances": [{"inputs": "The model", **long}]}))
        reply, arrivals = connection.getresponse(), []
        while len(arrivals) < 3:
            line = reply.readline()
            assert line, "the stream ended before 3 tokens"
            if line.startswith(b"event: token"):
                arrivals.append(time.perf_counter())
        connection.close()
        left = len(calls)
        assert arrivals[2] - arrivals[0] >= 0.03  # two steps apart: not sent at the end
        assert _settled(calls) - left <= 2
        stream = _grpc_stream(lm_server)(_grpc_request("The model", long), timeout=60)
        for _ in range(3):
            next(stream)
        stream.cancel()
        cancelled_at = len(calls)
        assert _settled(calls) - cancelled_at <= 2 and len(calls) < 100
    counted = _requests_counted(lm_server)
    assert counted[("rest_stream", "499")] == 1 and counted[("grpc_stream", "CANCELLED")] == 1


def test_a_model_failure_mid_stream_ends_it_with_an_error(lm_server):
    servable = lm_server.store.model("lm").resolve(None)
    step, calls = servable.functions["generate_step"], []

    def failing(**state):
        calls.append(1)
        if len(calls) % 4 == 0:
            raise tf.errors.InternalError(None, None, "the accelerator went away")
        return step(**state)

    servable.functions["generate_step"] = failing
    try:
        events = _stream_rest(lm_server, {"instances": [{"inputs": "The model",
                                                         "max_new_tokens": 20}]})
        assert [kind for kind, _ in events] == ["token"] * 3 + ["error"]
        assert events[-1][1] == {"error": "the model failed (InternalError): the accelerator "
                                          "went away"}
        with pytest.raises(grpc.RpcError) as raised:
            list(_grpc_stream(lm_server)(_grpc_request("The model", {}), timeout=60))
        assert raised.value.code() == grpc.StatusCode.INTERNAL
        assert "the accelerator went away" in raised.value.details()
    finally:
        servable.functions["generate_step"] = step
    assert _stream_rest(lm_server, {"inputs": "The model"})[-1][0] == "result"


needs_chromium = pytest.mark.skipif(
    not (test_page.CHROMIUM and test_page.CHROMEDRIVER),
    reason="needs Chromium and chromedriver: apt-get install chromium chromium-driver")
browser = test_page.browser  # the page test's headless Chromium, for this module's LM


@needs_chromium
def test_the_page_streams_with_sampling_controls(browser, lm_server):
    from selenium.webdriver.common.by import By

    servable = lm_server.store.model("lm").resolve(None)
    browser.get(lm_server.url + "/")
    browser_helpers.wait_text(browser, "details", lambda t: "version" in t)
    assert "streamed token by token" in browser.find_element(By.ID, "details").text
    assert browser.find_element(By.ID, "max_new_tokens").get_attribute("value") == "12"
    settings = {"temperature": 0.9, "top_k": 0, "top_p": 0.9, "max_new_tokens": 10, "seed": 7}
    for name, value in settings.items():
        field = browser.find_element(By.ID, name)
        field.clear()
        field.send_keys(str(value))
    browser.find_element(By.ID, "input").send_keys("The model")
    # Record what #output shows, and when, as the tokens arrive.
    browser.execute_script(
        "window.shown = []; new MutationObserver(() => window.shown.push("
        "[performance.now(), document.getElementById('output').textContent]))"
        ".observe(document.getElementById('output'), {childList: true, characterData: true,"
        " subtree: true});")
    with _slow_steps(servable, 0.05):
        browser.find_element(By.ID, "run").click()
        status = browser_helpers.wait_text(browser, "stream-status", lambda t: "score" in t)
    outputs, score = _generate(servable, "The model", settings)
    events = _stream_rest(lm_server, {"instances": [{"inputs": "The model", **settings}]})
    tokens = [data["outputs"] for kind, data in events if kind == "token"]
    assert browser.execute_script("return document.getElementById('output').textContent") == outputs
    assert status == f"{len(tokens)} new tokens, score {score:.4f}"
    shown = [(t, text) for t, text in browser.execute_script("return window.shown") if text != "…"]
    texts = [text for _, text in shown]
    assert texts[-1] == outputs and set(texts[:-1]) <= set(tokens)  # token by token, the answer
    assert len(set(texts)) >= 5
    assert shown[-1][0] - shown[0][0] > 0.2 * 1000  # the first token came well before the end
    # A bad setting: the server's one-line error, on the page.
    browser.find_element(By.ID, "top_p").clear()
    browser.find_element(By.ID, "top_p").send_keys("1.5")
    browser.find_element(By.ID, "run").click()
    assert "top_p=1.5: give a probability" in browser_helpers.wait_text(browser, "error", bool)
