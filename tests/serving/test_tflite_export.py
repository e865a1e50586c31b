"""LiteRT export: a trained transformer's greedy decoding and an image classifier as
.tflite files run by the ai-edge-litert interpreter, equal to t2t's Decoder; the parity
gate deletes an export that differs; clear errors for what LiteRT export does not do;
t2t-exporter --format=tflite end to end."""

import json
import os
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.problem import ProblemHParams
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import infer as infer_lib
from t2t.decoding import settings as settings_lib
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model
from t2t.serving import export as export_lib
from t2t.serving import tflite_export
from tests.helpers.image_models import tiny_image_classifier_run
from tests.helpers.runs import trained_transformer_run

litert = pytest.importorskip("ai_edge_litert.interpreter")

PROBLEM = "algorithmic_reverse_binary40_test"
HPARAMS = "batch_size=256,learning_rate_warmup_steps=100,learning_rate=0.4"
GREEDY = "beam_size=1,extra_length=3"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """transformer_test trained 600 steps on binary reversal (it has learned to end its
    outputs with EOS, at various lengths), exported as LiteRT."""
    run_info = trained_transformer_run(PROBLEM, tmp_path_factory.mktemp("tflite"), 600, HPARAMS)
    problem, model, hparams = run_info["problem"], run_info["model"], run_info["hparams"]
    data_dir, run = run_info["data_dir"], run_info["run"]
    version_dir = tflite_export.export_tflite(
        problem, "transformer", hparams, data_dir, run, os.path.join(run, "export_tflite"),
        DecodeHParams.parse(GREEDY), parity_check=True, parity_examples=6, model=model)
    return {"dir": version_dir, "model": model, "problem": problem, "data_dir": data_dir,
            "run": run, "hparams": hparams}


def _info(version_dir):
    with open(os.path.join(version_dir, tflite_export.INFO_FILE)) as f:
        return json.load(f)


def test_layout_info_and_report(trained):
    version_dir = trained["dir"]
    export_dir = os.path.dirname(version_dir)
    assert os.path.basename(version_dir).isdigit()
    assert os.listdir(export_dir) == [os.path.basename(version_dir)]  # no staging left
    assert sorted(os.listdir(version_dir)) == ["assets", "model.tflite", "t2t_tflite.json"]
    info = _info(version_dir)
    assert {"WHILE", "DYNAMIC_UPDATE_SLICE", "ARG_MAX"} <= set(info["ops"])
    assert info["plan"]["input_shape"] == [1, 257]  # transformer_test max_length 256 + EOS
    assert info["signature"] == {
        "inputs": {"inputs": {"dtype": "int32", "shape": [1, 257]}},
        "outputs": {"outputs": {"dtype": "int32", "shape": [1, 260]},
                    "scores": {"dtype": "float32", "shape": [1]}}}
    parity = info["parity"]
    assert parity["examples"] == 7 and parity["runtime"] == "ai-edge-litert"  # 6 + empty
    assert 0 < parity["latency_ms"]["median"] <= parity["latency_ms"]["max"]
    assert info["size_bytes"] == os.path.getsize(os.path.join(version_dir, "model.tflite"))
    lines = tflite_export.report_lines(version_dir)
    assert lines[0].startswith(f"LiteRT model: {version_dir}/model.tflite (")
    assert "  serving_default: (inputs: int32[1, 257]) -> (outputs: int32[1, 260], " \
           "scores: float32[1])" in lines
    assert any(line.startswith(f"Ops: {len(info['ops'])} TFLite builtins, no select TF ops (")
               for line in lines)
    assert any(line.startswith("Parity check passed on 7 decodes (ai-edge-litert")
               for line in lines)
    assert any(line.startswith("Latency per example: ") for line in lines)


def test_interpreter_ids_equal_t2t_greedy_decoding(trained):
    """Independently of the gate: the .tflite in ai-edge-litert's interpreter gives
    infer.infer's greedy ids (and score) for dev examples and new inputs."""
    model, problem = trained["model"], trained["problem"]
    plan = tflite_export.Plan(**{k: tuple(v) if isinstance(v, list) else v
                                 for k, v in _info(trained["dir"])["plan"].items()})
    runner = litert.Interpreter(
        model_path=os.path.join(trained["dir"], "model.tflite")).get_signature_runner()
    decoder = decoder_lib.Decoder(problem, model, trained["data_dir"],
                                  DecodeHParams.parse(GREEDY + ",batch_size=1"))
    texts = ["1 0 1 1 0 0 1", "0 1", "1 1 1 0 0 0 1 0 1 1", ""]
    inputs = [decoder.encode_text(t) for t in texts]
    ended = 0
    for ids, want in zip(inputs, decoder.decode_features(inputs), strict=True):
        out = runner(inputs=tflite_export.prepare_ids(ids, plan))
        expected = infer_lib.infer(model, {"inputs": tf.constant(ids[None])}, len(ids) + 3)
        length = len(ids) + 3
        np.testing.assert_array_equal(out["outputs"][0, :length], expected["outputs"][0])
        assert not out["outputs"][0, length:].any()  # stopped where t2t stops
        np.testing.assert_allclose(out["scores"], expected["scores"], atol=1e-4)
        assert decoder.target_text(out["outputs"][0]) == want.text
        ended += int(1 in out["outputs"][0, :length].tolist())
    assert ended >= 2  # the trained model ends outputs with EOS before the length limit


def test_too_long_input_gets_a_clear_error():
    plan = tflite_export.Plan("seq2seq", (1, 5), "int32", 8, 3)
    np.testing.assert_array_equal(tflite_export.prepare_ids([3, 2, 1], plan), [[3, 2, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"6 ids \(EOS included\) do not fit the LiteRT "
                                         r"model's input of 5: cut the input to 4 tokens \+ "
                                         r"EOS, or export again with --decode_hparams="
                                         r"max_input_length=N \(N >= 5\)"):
        tflite_export.prepare_ids([3, 2, 3, 2, 3, 1], plan)


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")
def test_without_ai_edge_litert_tf_lite_runs_the_model_with_a_warning(trained, monkeypatch,
                                                                      caplog):
    path = os.path.join(trained["dir"], "model.tflite")
    ids = np.zeros([1, 257], np.int32)
    ids[0, :4] = [3, 3, 2, 1]
    want = tflite_export.Runner(path)(ids)[0]
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)  # import fails
    runner = tflite_export.Runner(path)
    assert runner.runtime == "tf.lite"
    assert "pip install 't2t[tflite]'" in caplog.text
    out, seconds = runner(ids)
    np.testing.assert_array_equal(out["outputs"], want["outputs"])
    assert out["outputs"][0, 0] != 0 and seconds > 0


def test_parity_failure_deletes_the_export(trained, tmp_path, monkeypatch):
    real = tflite_export._greedy

    def off_by_a_bit(model, inputs, plan):
        out = real(model, inputs, plan)
        return {"outputs": out["outputs"], "scores": out["scores"] - 0.5}

    monkeypatch.setattr(tflite_export, "_greedy", off_by_a_bit)
    export_dir = tmp_path / "export_tflite"
    with pytest.raises(export_lib.ParityError, match="PARITY CHECK FAILED: the LiteRT model "
                                                     "decodes 3 of 3 examples") as error:
        tflite_export.export_tflite(
            trained["problem"], "transformer", trained["hparams"], trained["data_dir"],
            trained["run"], str(export_dir), DecodeHParams.parse(GREEDY),
            parity_examples=2, model=trained["model"])
    assert "!= t2t" in str(error.value) and "score" in str(error.value)
    assert os.listdir(export_dir) == []  # deleted: no version, no staging


@pytest.mark.parametrize("settings, message", [
    ("beam_size=4", "--decode_hparams beam_size=4: the LiteRT export decodes greedily; pass "
                    "--decode_hparams=beam_size=1"),
    ("beam_size=1,temperature=0.7", "temperature=0.7, num_samples=1: the LiteRT export "
                                    "decodes greedily; pass temperature=0,num_samples=1"),
    ("beam_size=2,return_beams=True", "return_beams=True: the LiteRT export returns one "
                                      "output; drop return_beams"),
])
def test_beam_search_and_sampling_are_rejected(trained, settings, message):
    resolved = settings_lib.resolve(DecodeHParams.parse(settings), trained["model"])
    with pytest.raises(tflite_export.TFLiteExportError, match=message.replace("(", r"\(")):
        tflite_export.plan_for(trained["model"], PROBLEM, resolved)


def test_language_models_are_rejected():
    php = ProblemHParams(modality={"targets": "symbol"}, vocab_size={"targets": 10})
    lm = types.SimpleNamespace(problem_hparams=php, hparams=None)
    settings = settings_lib.resolve(DecodeHParams.parse("beam_size=1"), lm)
    with pytest.raises(tflite_export.TFLiteExportError, match="is a language model .*"
                                                              "use --format=saved_model"):
        tflite_export.plan_for(lm, "lm_problem", settings)


def test_a_model_that_needs_select_tf_ops_is_refused_naming_them(trained, tmp_path):
    """LiteRT 2.x cannot run select TF ops: the LSTM's TensorList ops are named, with
    the fix, and nothing is written."""
    problem, data_dir = trained["problem"], trained["data_dir"]
    keras.utils.set_random_seed(0)
    php = problem.hparams(data_dir)
    hparams = create_hparams("lstm_seq2seq", "hidden_size=8,num_hidden_layers=1")
    model = t2t_model.create_model("lstm_seq2seq", hparams, problem_lib.PREDICT, php)
    model.build_weights()
    export_dir = tmp_path / "export_tflite"
    with pytest.raises(tflite_export.TFLiteExportError,
                       match=r"does not convert to TFLite builtin ops \(it needs the TF ops "
                             r".*TensorList.*\); LiteRT 2.x \(ai-edge-litert\) has no Flex "
                             r"delegate .* Use --format=saved_model for this model"):
        tflite_export.export_tflite(problem, "lstm_seq2seq", hparams, data_dir, "unused",
                                    str(export_dir), DecodeHParams.parse(GREEDY + ","
                                                                         "max_input_length=8"),
                                    model=model)
    assert os.listdir(export_dir) == []


def test_image_classifier_gives_the_class_id(tmp_path):
    problem, data_dir, run, hparams, model = tiny_image_classifier_run(tmp_path)
    # beam_size (the default 4) does not change a classifier's argmax: accepted.
    version_dir = tflite_export.export_tflite(problem, "basic_fc_relu", hparams, data_dir, run,
                                              str(tmp_path / "out"), DecodeHParams(),
                                              parity_examples=4)  # the gate passed
    info = _info(version_dir)
    assert info["parity"]["examples"] == 4 and "FULLY_CONNECTED" in info["ops"]
    assert info["signature"]["outputs"]["log_probs"] == {"dtype": "float32", "shape": [1, 3]}
    assert "targets.class_label.txt" in os.listdir(os.path.join(version_dir, "assets"))
    image = np.random.default_rng(5).integers(0, 255, [1, 8, 8, 3], dtype=np.uint8)
    out = litert.Interpreter(model_path=os.path.join(version_dir, "model.tflite")
                             ).get_signature_runner()(inputs=image)
    logits, _ = model({"inputs": image}, training=False)
    assert out["outputs"].tolist() == [[int(np.argmax(np.reshape(logits, [-1])))]]
    np.testing.assert_allclose(np.exp(out["log_probs"]).sum(), 1.0, rtol=1e-5)


def test_t2t_exporter_format_tflite(trained):
    # The exporter's main in this process (tests/helpers/binaries.py): the conversion is
    # the same, without a TensorFlow start per run.
    from tests.helpers.binaries import run_binary

    run, data_dir = trained["run"], trained["data_dir"]
    result = run_binary("t2t-exporter", f"--output_dir={run}", f"--data_dir={data_dir}",
                        "--format=tflite", f"--decode_hparams={GREEDY}")
    assert result.code == 0, result.err[-3000:]
    lines = result.out.splitlines()
    exported = [line.removeprefix("Exported: ") for line in lines if line.startswith("Exported: ")]
    assert len(exported) == 1 and os.path.dirname(exported[0]) == os.path.join(run, "export_tflite")
    assert os.path.exists(os.path.join(exported[0], "model.tflite"))
    assert any(line.startswith("Ops: ") and "no select TF ops" in line for line in lines)
    assert any(line.startswith("Parity check passed on 7 decodes") for line in lines)
    assert any(line.startswith("Latency per example: ") for line in lines)
    # The default decode settings are beam search: a clear error, nothing written.
    before = sorted(os.listdir(os.path.join(run, "export_tflite")))
    result = run_binary("t2t-exporter", f"--output_dir={run}", f"--data_dir={data_dir}",
                        "--format=tflite")
    assert result.code == 1
    assert "beam_size=4: the LiteRT export decodes greedily" in result.err
    assert not result.traceback
    assert sorted(os.listdir(os.path.join(run, "export_tflite"))) == before
