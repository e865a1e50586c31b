"""Input a model cannot read gets a 400 naming it (t2t.serving.input_check), the same on
REST, V2 and gRPC, from what t2t_export.json records; and t2t-serve starts and serves
without TensorFlow's start-up chatter."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import grpc
import pytest
import tensorflow as tf
from absl import logging
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from t2t.data.encoders.text_encoder import TokenTextEncoder
from t2t.decoding.unreadable_text import TextReader
from t2t.serving import tokenizers
from t2t.serving.input_check import InputCheck
from tests.helpers.serving import ServerThread

VOCAB = ["<pad>", "<EOS>", "0", "1"]
SYMBOLS = {"inputs": "symbol", "targets": "symbol"}
# What t2t-exporter records for algorithmic_reverse_binary40_test (the fields the check reads).
REVERSAL_INFO = {
    "problem": "algorithmic_reverse_binary40_test",
    "problem_hparams": {"modality": SYMBOLS, "vocab_size": {"inputs": 4, "targets": 4}},
    "encoders": {f: {"type": "token", "vocab": VOCAB, "replace_oov": None, "reverse": False}
                 for f in ("inputs", "targets")},
}


def _info(encoder, modality=SYMBOLS, vocab_size=None, feature="inputs"):
    return {"problem_hparams": {"modality": modality, "vocab_size": {feature: vocab_size}},
            "encoders": {feature: encoder}}


# ----------------------------------------------------------------- the check
def test_a_token_vocabulary_refuses_unknown_tokens_and_empty_inputs():
    check = InputCheck.for_export(REVERSAL_INFO)
    assert check.problem(b"1 0 1 1") is None and check.problem("0") is None
    message = check.problem(b"1 2 3")
    assert "tokens '2', '3' are not in the vocabulary" in message
    assert "its 4 tokens: '<pad>', '<EOS>', '0', '1'" in message
    assert "token '1011' is not in the vocabulary" in check.problem("1011")
    assert "is empty" in check.problem(b"") and "is empty" in check.problem(" \t ")
    # As the exported graph splits: at ASCII whitespace only (U+00A0 joins two tokens).
    assert "'1\\xa00'" in check.problem("1\u00a00")
    assert "byte(s) ff at offset 2" in check.problem(b"1 \xff 0")


def test_a_language_model_reads_an_empty_prompt():
    lm = _info(REVERSAL_INFO["encoders"]["targets"], {"targets": "symbol"}, 4, "targets")
    check = InputCheck.for_export(lm)
    assert check.problem(b"") is None and check.problem(b"0 1") is None
    assert "token 'x' is not in the vocabulary" in check.problem(b"0 x")


def test_integer_ids_must_be_integers_inside_the_vocabulary():
    check = InputCheck.for_export(_info({"type": "text", "num_reserved_ids": 2}, vocab_size=12))
    assert check.problem(b"3 9 +1 007") is None
    assert "'10', '-3' outside the vocabulary of 12 ids" in check.problem(b"3 10 -3")
    assert "integers from 0 to 9" in check.problem(b"3 10")
    assert "word 'x' is not an integer" in check.problem(b"3 x")
    raw_ids = InputCheck.for_export(_info(None, vocab_size=5))  # no encoder: raw ids
    assert raw_ids.problem(b"4") is None and "'5'" in raw_ids.problem(b"5")


@pytest.mark.parametrize("encoder", [
    {"type": "character", "chars": ["a", "b"]},
    {"type": "subword", "vocab_file": "inputs.subwords"},
    {"type": "sentencepiece", "model_file": "inputs.sentencepiece.model"},
    {"type": "token", "vocab": VOCAB + ["<unk>"], "replace_oov": "<unk>", "reverse": False},
    {"type": "task_token", "base": {"type": "subword", "vocab_file": "x"}, "task_id": 9,
     "num_tasks": 2},
])
def test_exports_that_map_unknown_text_read_any_text_but_need_utf8(encoder):
    check = InputCheck.for_export(_info(encoder))
    assert check.problem(b"") is None and check.problem("zz \u00e9 7".encode()) is None
    assert "not valid UTF-8" in check.problem(b"a\xc3(")


def test_nothing_is_checked_where_nothing_can_be_told(caplog):
    assert InputCheck.for_export(_info({"type": "byte"})) is None  # reads any bytes
    assert InputCheck.for_export(_info(None, {"inputs": "image", "targets": "symbol"})) is None
    assert InputCheck.for_export({}) is None  # a SavedModel t2t did not export
    with caplog.at_level(logging.WARNING):
        assert InputCheck.for_export(_info({"type": "token"})) is None  # no "vocab"
    assert "not checked against the vocabulary" in caplog.text


def test_a_task_token_export_checks_its_base_vocabulary():
    task = {"type": "task_token", "base": REVERSAL_INFO["encoders"]["inputs"], "task_id": 4,
            "num_tasks": 2}
    check = InputCheck.for_export(_info(task, vocab_size=6))
    assert check.problem(b"1 0") is None and "'2'" in check.problem(b"1 2")


def test_t2t_decoder_warns_with_the_same_reader():
    reader = TextReader(TokenTextEncoder(["0", "1"]))  # as the Decoder builds it
    found = reader.unreadable("0 7 1 7 x")
    assert found.unknown == ("7", "x") and found.message == "tokens '7', 'x' are not in the vocabulary"
    assert reader.unreadable("0 7 1").message == "token '7' is not in the vocabulary"
    assert reader.unreadable("1\u00a00") is None  # Python's split, as the encoder's
    assert TextReader(TokenTextEncoder(["0"], replace_oov="0")).reads_any_text


# ----------------------------------------------------------------- the server
class ToyReversal(tf.Module):
    """Reverses token rows with the export's in-graph tokenizer, which (as a real export's)
    reads a row holding an unknown token as empty. Its graph holds an int64 Transpose."""

    def __init__(self):
        super().__init__()
        self.tokenizer = tokenizers.TokenTokenizer(VOCAB)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def serve(self, inputs):
        ids = self.tokenizer.encode(inputs)
        lengths = ids.row_lengths()
        columns = tf.transpose(tf.cast(ids.to_tensor(0), tf.int64))
        reversed_ = tf.reverse_sequence(columns, lengths, seq_axis=0, batch_axis=1)
        return {"outputs": self.tokenizer.decode(tf.transpose(reversed_)),
                "scores": -tf.cast(lengths, tf.float32)}


@pytest.fixture(scope="module")
def toy_export(tmp_path_factory):
    """A model base path holding version 1 of ToyReversal with REVERSAL_INFO."""
    base = tmp_path_factory.mktemp("input_check") / "reverse"
    toy = ToyReversal()
    tf.saved_model.save(toy, str(base / "1"), signatures={"serving_default": toy.serve})
    os.makedirs(base / "1" / "assets.extra")
    with open(base / "1" / "assets.extra" / "t2t_export.json", "w") as f:
        json.dump(REVERSAL_INFO, f)
    return str(base)


def test_rest_v2_and_grpc_refuse_what_the_model_cannot_read(toy_export):
    with ServerThread({"reverse": toy_export}) as server:
        status, reply = server.call("/v1/models/reverse:predict",
                                    {"instances": ["1 0 1", "1 2 3"]})
        assert status == 400 and reply["error"].startswith("instances[1]: '1 2 3': tokens "
                                                           "'2', '3' are not in the vocabulary")
        status, reply = server.call("/v1/models/reverse:predict", {"inputs": ["", "1011"]})
        assert status == 400 and "inputs[0]: the input '' is empty" in reply["error"]
        assert "(1 more input(s) of this request cannot be read either)" in reply["error"]
        status, reply = server.call("/v2/models/reverse/infer", {"inputs": [
            {"name": "inputs", "shape": [1], "datatype": "BYTES", "data": ["1011"]}]})
        assert status == 400 and "token '1011' is not in the vocabulary" in reply["error"]
        with grpc.insecure_channel(server.grpc_target) as channel:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "reverse"
            request.inputs["inputs"].CopyFrom(tf.make_tensor_proto(["1 2 3"]))
            with pytest.raises(grpc.RpcError) as refused:
                prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                    request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "tokens '2', '3' are not in the vocabulary" in refused.value.details()
        status, reply = server.call("/v1/models/reverse:predict", {"instances": ["1 0 0"]})
        assert status == 200 and reply["predictions"][0]["outputs"] == "0 0 1"


def test_the_check_runs_before_the_model_is_called(toy_export):
    with ServerThread({"reverse": toy_export}) as server:
        version = server.store.model("reverse").resolve(None)
        assert isinstance(version.input_check, InputCheck)
        assert server.call("/v1/models/reverse:predict", {"instances": ["0 1"]})[0] == 200
        assert server.call("/v1/models/reverse:predict", {"instances": ["1 2"]})[0] == 400
        assert version.stats()["serving_default"]["requests"] == 1  # the good one only


# ----------------------------------------------------------------- start-up
CHATTER = re.compile(r"^[IWEF]\d{4} |oneDNN|No GPU visible|cuInit|rebuild TensorFlow")
T2T_LOG = re.compile(r"^I\d{4} .*\.py:\d+\] t2t-serve: ")  # t2t's own absl INFO lines


def _post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_t2t_serve_starts_and_serves_without_tensorflow_chatter(toy_export):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "t2t.bin.t2t_serve", f"--model_base_path={toy_export}",
         "--model_name=reverse", "--rest_api_port=0", "--port=0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Serving on "):
                break
        url = lines[-1].split()[2]
        # The first request runs the graph: TF printed its oneDNN notice here.
        assert _post(url + "/v1/models/reverse:predict", {"instances": ["1 1 0"]}) == (
            200, {"predictions": [{"outputs": "0 1 1", "scores": -3.0}]})
        assert _post(url + "/v1/models/reverse:predict", {"instances": ["1 2"]})[0] == 400
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    output = "".join(lines) + out + err
    assert process.returncode == 0, output[-3000:]
    assert "Model 'reverse': version(s) 1" in output and "Serving on http://" in output
    assert "t2t-serve: model 'reverse' version 1 is available" in output
    chatter = [line for line in output.splitlines()
               if CHATTER.search(line) and not T2T_LOG.match(line)]
    assert not chatter, output[-3000:]
