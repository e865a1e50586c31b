"""KServe's Open Inference Protocol (V2) on t2t-serve's HTTP port (t2t.serving.v2_api):
server and model metadata, probes, and /infer answering as TF Serving's :predict does, on
a toy SavedModel and on real t2t exports of a text, an image and a speech run; bad
requests get a clear error and the server keeps serving."""

import base64
import io
import os
import wave

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.bases import speech
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from t2t.models.t2t_model import example_features
from t2t.serving import export as export_lib
from t2t.serving import v2_api, warmup
from t2t.serving.rest_api import RequestError, SignatureSpec, TensorInfo
from tests.helpers.image_models import tiny_image_classifier_run
from tests.helpers.model_checks import push_down_pad_and_eos
from tests.helpers.serving import ServerThread, save_toy


def _b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode("ascii")}


def _bytes_input(values, name="inputs"):
    return {"name": name, "shape": [len(values)], "datatype": "BYTES", "data": values}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("toy") / "export")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    with ServerThread({"toy": base}) as server:
        yield server


def test_server_and_model_metadata_and_probes(toy):
    assert toy.call("/v2") == (200, {"name": "t2t-serve", "version": "0.1.0", "extensions": []})
    assert toy.call("/v2/health/live") == (200, {"live": True})
    assert toy.call("/v2/health/ready") == (200, {"ready": True})
    assert toy.call("/v2/models/toy/ready") == (200, {"name": "toy", "ready": True})
    assert toy.call("/v2/models/toy/versions/1/ready") == (200, {"name": "toy", "ready": True})
    assert toy.call("/v2/models/toy") == (200, {
        "name": "toy", "versions": ["1"], "platform": "tensorflow_savedmodel",
        "inputs": [{"name": "inputs", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": "lengths", "datatype": "INT32", "shape": [-1]},
                    {"name": "outputs", "datatype": "BYTES", "shape": [-1]}]})
    status, meta = toy.call("/v2/models/toy/versions/1?signature_name=scale")
    assert (meta["inputs"], meta["outputs"]) == (
        [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}],
        [{"name": "y", "datatype": "FP32", "shape": [-1, 2]}])


def test_infer_answers_as_predict_does(toy):
    texts = ["abc", "dé", "x y"]
    status, reply = toy.call("/v2/models/toy/infer", {
        "id": "r1", "inputs": [_bytes_input(["abc", _b64("dé".encode()), "x y"])]})
    assert status == 200, reply
    rest = toy.call("/v1/models/toy:predict", {"inputs": texts})[1]["outputs"]
    assert reply == {"model_name": "toy", "model_version": "1", "id": "r1", "outputs": [
        {"name": "lengths", "datatype": "INT32", "shape": [3], "data": rest["lengths"]},
        {"name": "outputs", "datatype": "BYTES", "shape": [3], "data": rest["outputs"]}]}
    assert rest["outputs"] == ["v1:ABC", "v1:Dé", "v1:X Y"]
    # Nested data, another signature, one output asked for, a version given.
    status, reply = toy.call("/v2/models/toy/versions/1/infer", {
        "parameters": {"signature_name": "scale"}, "outputs": [{"name": "y"}],
        "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3.5, 4]]}]})
    assert reply["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [2, 2],
                                 "data": [2.0, 4.0, 7.0, 8.0]}]
    assert toy.call("/v1/models/toy:predict", {"signature_name": "scale", "inputs": {
        "x": [[1, 2], [3.5, 4]]}})[1] == {"outputs": [[2.0, 4.0], [7.0, 8.0]]}
    # Bytes that are not UTF-8 come back as {"b64": ...}, as from :predict.
    status, reply = toy.call("/v2/models/toy/infer", {"outputs": [{"name": "outputs"}],
                                                       "inputs": [_bytes_input([_b64(b"\xff")])]})
    assert reply["outputs"][0]["data"] == [_b64(b"v1:\xff")]


def _x(**overrides):
    return {"parameters": {"signature_name": "scale"},
            "inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 2],
                        **overrides}]}


BAD = [
    ("/v2/models/tyo/infer", _x(), 404, "unknown model 'tyo'; did you mean 'toy'?"),
    ("/v2/models/toy/versions/9/infer", _x(), 404, "no version 9; served versions: [1]"),
    ("/v2/models/toy/versions/x/infer", _x(), 404, "version 'x' is not a number"),
    ("/v2/models/toy/infer", b'{"inputs": [', 400, "not UTF-8 JSON"),
    ("/v2/models/toy/infer", {**_x(), "instances": []}, 400, "unknown request field(s) "
                                                             "['instances']"),
    ("/v2/models/toy/infer", {"inputs": []}, 400, "\"inputs\" must be a non-empty list"),
    ("/v2/models/toy/infer", _x(datatype="FP64"), 400,
     "datatype 'FP64' does not match signature 'scale', which takes FP32; send \"datatype\": "
     "\"FP32\""),
    ("/v2/models/toy/infer", _x(shape=[2, 2]), 400,
     "shape [2, 2] holds 4 element(s), \"data\" has 2"),
    ("/v2/models/toy/infer", _x(shape=[2]), 400,
     "shape [2] does not fit the signature's [-1, 2]"),
    ("/v2/models/toy/infer", _x(data=[1, "2"]), 400, "data[1]: FP32 wants a number, got str"),
    ("/v2/models/toy/infer", _x(name="y"), 400, "unknown input 'y'; signature 'scale' takes ['x']"),
    ("/v2/models/toy/infer", {"inputs": [_bytes_input([{"b64": "%%%"}])]}, 400,
     "input 'inputs' data[0]: invalid base64"),
    ("/v2/models/toy/infer", {"inputs": [_bytes_input([7])]}, 400,
     "wants a string (text, or {\"b64\": \"...\"} for bytes), got int 7"),
    ("/v2/models/toy/infer", {**_x(), "parameters": {"signature_name": "scales"}}, 400,
     "unknown signature_name 'scales' (did you mean 'scale'?)"),
    ("/v2/models/toy/infer", {**_x(), "parameters": {"signature_name": "scale", "top_k": 2}},
     400, "unknown parameter 'top_k'; t2t-serve reads ['signature_name']"),
    ("/v2/models/toy/infer", {**_x(), "outputs": [{"name": "y", "parameters": {
        "binary_data": True}}]}, 400, "does not take binary tensor data"),
    ("/v2/models/toy/infer", {**_x(), "outputs": [{"name": "z"}]}, 400,
     "outputs[0]: unknown output 'z'; signature 'scale' has ['y']"),
    ("/v2/models/toy/infer", {"parameters": {"signature_name": "parse"},
                              "inputs": [_bytes_input(["abc"])]}, 400,
     "the model rejected the input"),
    ("/v2/models/toy/infer", None, 405, "GET is not allowed"),
    ("/v2/models/toy/versions/9/ready", None, 404, "no version 9"),
    ("/v2/models/toy?signature_name=nope", None, 400, "unknown signature_name 'nope'"),
]


@pytest.mark.parametrize("path, body, status, words", BAD)
def test_bad_requests_get_a_clear_error_and_the_server_keeps_serving(toy, path, body, status,
                                                                      words):
    got, reply = toy.call(path, raw=body) if isinstance(body, bytes) else toy.call(path, body)
    assert (got, words in reply.get("error", "")) == (status, True), reply
    assert toy.call("/v2/models/toy/infer", _x())[1]["outputs"][0]["data"] == [2.0, 4.0]


def test_requests_are_counted_in_the_metrics(toy):
    def count(api, status):
        return toy.store.metrics.registry.get_sample_value("t2t_serve_requests_total", {
            "model": "toy", "version": "1", "api": api, "status": status}) or 0

    before = count("v2_infer", "200"), count("v2_infer", "400"), count("v2_metadata", "200")
    toy.call("/v2/models/toy/infer", _x())
    toy.call("/v2/models/toy/infer", _x(datatype="BOOL"))
    toy.call("/v2/models/toy")
    assert (count("v2_infer", "200"), count("v2_infer", "400"), count("v2_metadata", "200")) == (
        before[0] + 1, before[1] + 1, before[2] + 1)


# ------------------------------------------------------------------ real t2t exports
class Tones(speech.SpeechRecognitionProblem):
    """Three short tones and their "transcripts": a speech problem without espeak-ng."""

    num_shards = 1

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for i, text in enumerate(["one", "two", "three"]):
            t = np.arange(1600 * (i + 2)) / 16000
            wave_ = (8000 * np.sin(2 * np.pi * 440 * (i + 1) * t)).astype(np.int16)
            yield {"waveform": wave_, "sample_rate": 16000, "transcript": text}


def _export_untrained(problem, model_name, hparams, root):
    """An untrained model of `problem` saved as a run under `root`, exported (beam 1)."""
    data_dir = str(root / "data")
    problem.generate_data(data_dir, str(root / "tmp"), progress=False)
    keras.utils.set_random_seed(1)
    php = problem.hparams(data_dir)
    model = t2t_model.create_model(model_name, hparams, problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    if php.modality.get("inputs") == "symbol":
        push_down_pad_and_eos(model, eos_logit=-0.4)  # outputs that are not all empty
    run = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 1).save(1)
    export_lib.export(problem, model_name, hparams, data_dir, run, None,
                      "beam_size=1,extra_length=3", parity_check=False, model=model)
    return os.path.join(run, "export")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """t2t-serve serving exports of an untrained text transformer and image classifier
    (each warmed up by t2t's own requests: the exports have no warm-up file)."""
    root = tmp_path_factory.mktemp("v2_exports")
    text = _export_untrained(registry.problem("algorithmic_reverse_binary40_test"),
                             "transformer", create_hparams("transformer_test",
                                                           "num_hidden_layers=1"), root / "text")
    (root / "image").mkdir()
    problem, data_dir, run, hparams, model = tiny_image_classifier_run(root / "image")
    export_lib.export(problem, "basic_fc_relu", hparams, data_dir, run, None, "",
                      parity_check=False, model=model)
    with ServerThread({"text": text, "image": os.path.join(run, "export")}) as server:
        yield server


def _png(seed):
    pixels = np.random.default_rng(seed).integers(0, 255, [8, 8, 3], dtype=np.uint8)
    return tf.io.encode_png(pixels).numpy()


def _wav(hertz):
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(16000)
        t = np.arange(4000) / 16000
        f.writeframes((6000 * np.sin(2 * np.pi * hertz * t)).astype("<i2").tobytes())
    return buffer.getvalue()


def _equal_to_predict(server, model, signature, inputs):
    """The V2 infer answer of `inputs` {name: [values]} equals :predict's, output by output."""
    status, v2 = server.call(f"/v2/models/{model}/infer", {
        "parameters": {"signature_name": signature},
        "inputs": [_bytes_input(values, name) for name, values in inputs.items()]})
    assert status == 200, v2
    status, rest = server.call(f"/v1/models/{model}:predict", {
        "signature_name": signature, "inputs": inputs})
    assert status == 200, rest
    assert [o["name"] for o in v2["outputs"]] == sorted(rest["outputs"])
    for output in v2["outputs"]:
        want = np.array(rest["outputs"][output["name"]], dtype=object)
        assert output["shape"] == list(want.shape)
        assert output["data"] == want.reshape(-1).tolist(), output["name"]
    return {o["name"]: o["data"] for o in v2["outputs"]}


def _each_signature_warmed_by_t2t(server, name):
    servable = server.store.model(name).resolve(None)
    requests, skipped = warmup.t2t_warmup_requests(servable.signatures, servable.info)
    assert sorted(r.signature for r in requests) == sorted(servable.signatures)
    assert skipped == []


def test_text_and_image_exports_answer_as_predict_does(exports):
    assert exports.call("/v2/health/ready") == (200, {"ready": True})
    text = _equal_to_predict(exports, "text", "serving_default", {"inputs": ["1 0 1 1", "0 1"]})
    assert all(text["outputs"]) and len(text["scores"]) == 2
    _equal_to_predict(exports, "text", "attention", {"inputs": ["1 0 1 1", "0 1"],
                                                     "outputs": text["outputs"]})
    image = _equal_to_predict(exports, "image", "serving_default",
                              {"inputs": [_b64(_png(1)), _b64(_png(2))]})
    assert set(image["outputs"]) <= {"red", "green", "blue"}
    status, reply = exports.call("/v2/models/text/infer", {
        "parameters": {"signature_name": "attention"}, "inputs": [_bytes_input(["1 0"])]})
    assert status == 400 and "missing input(s) ['outputs'] of signature 'attention'" in \
        reply["error"]
    status, reply = exports.call("/v2/models/image/infer", {
        "inputs": [_bytes_input([_b64(b"not a PNG")])]})
    assert status == 400 and "the model rejected the input" in reply["error"]
    for name in ("text", "image"):
        _each_signature_warmed_by_t2t(exports, name)


@pytest.mark.slow  # ~8 CPU-s: a speech transformer's export; the image test covers b64 bytes
def test_a_speech_export_answers_wav_bytes_as_predict_does(tmp_path):
    audio = _export_untrained(Tones(), "transformer", create_hparams(
        "transformer_speech_tiny", "hidden_size=16,filter_size=16,num_heads=2,"
        "num_encoder_layers=1,num_decoder_layers=1,audio_num_mel_bins=8,"
        "audio_frontend_channels=4"), tmp_path)
    with ServerThread({"audio": audio}) as server:
        assert server.call("/v2/health/ready") == (200, {"ready": True})
        outputs = _equal_to_predict(server, "audio", "serving_default",
                                    {"inputs": [_b64(_wav(440)), _b64(_wav(880))]})
        assert len(outputs["outputs"]) == 2
        _each_signature_warmed_by_t2t(server, "audio")
        status, reply = server.call("/v2/models/audio/infer", {
            "inputs": [_bytes_input([_b64(b"RIFF not a WAV file")])]})
        assert status == 400 and "the model rejected the input" in reply["error"]
        assert server.call("/v2/models/audio")[1]["inputs"] == [
            {"name": "inputs", "datatype": "BYTES", "shape": [-1]}]


GENERATE = SignatureSpec("generate", {"inputs": TensorInfo("string", (None,)),
                                      "top_p": TensorInfo("float32", ())},
                         {"outputs": TensorInfo("string", (None,))})


def _generate(**top_p):
    return {"parameters": {"signature_name": "generate"}, "inputs": [
        _bytes_input(["a", "b"]), {"name": "top_p", "datatype": "FP32", **top_p}]}


def test_scalar_inputs_take_shape_empty_or_one():
    for shape in ([], [1]):
        parsed = v2_api.parse_infer(_generate(shape=shape, data=[0.5]), {"generate": GENERATE})
        assert parsed.predict.batch_size == 2 and parsed.predict.inputs["top_p"].shape == ()
        assert parsed.predict.inputs["top_p"].item() == 0.5
    for shape, data, words in [([2], [0.5, 0.5], "input 'top_p': shape [2]; the signature "
                                "takes a scalar (one value for the whole request): send "
                                "\"shape\": [] (or [1]) and one value in \"data\""),
                               ([True], [0.5], "shape [true]"),
                               ([], [0.5, 0.6], "shape [] holds 1 element(s), \"data\" has 2")]:
        with pytest.raises(RequestError) as raised:
            v2_api.parse_infer(_generate(shape=shape, data=data), {"generate": GENERATE})
        assert words in str(raised.value) and raised.value.status == 400
