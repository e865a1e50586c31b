"""SavedModel export: layout, saved_model_cli show/run, outputs equal to infer.infer and
t2t's Decoder in processes without t2t, the parity gate, SentencePiece and images."""

import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.bases import image_problems, text_problems
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import infer as infer_lib
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from t2t.models.t2t_model import example_features
from t2t.serving import export as export_lib
from tests.helpers.image_models import tiny_image_classifier_run
from tests.helpers.model_checks import push_down_pad_and_eos

PROBLEM = "algorithmic_reverse_binary40_test"
# alpha=2 favours long outputs: with the EOS bias below, beams are real token sequences.
SETTINGS = "beam_size=2,alpha=2.0,extra_length=3,return_beams=True"
INPUT_IDS = [[3, 2, 3, 3, 2, 2, 3, 1], [2, 3, 1]]  # "1 0 1 1 0 0 1", "0 1" + EOS


def _untrained_run(root, problem, data_dir, seed=1):
    """A checkpoint of an untrained transformer_test whose decodes are not all empty: the
    final norm's bias pushes the logits of PAD and EOS down (untrained, EOS would win
    every beam at once)."""
    keras.utils.set_random_seed(seed)
    php = problem.hparams(data_dir)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"),
                                   problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    push_down_pad_and_eos(model, eos_logit=-0.4)
    run = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)), run, 2).save(5)
    return run


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    data_dir = str(root / "data")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    run = _untrained_run(root, problem, data_dir)
    hparams = create_hparams("transformer_test")
    model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    version_dir = export_lib.export(problem, "transformer", hparams, data_dir, run, None,
                                    SETTINGS, model=model)
    return {"dir": version_dir, "model": model, "data_dir": data_dir, "run": run,
            "problem": problem, "hparams": hparams}


def _run(args, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env, **kwargs)


def _saved_model_cli():
    return [os.path.join(os.path.dirname(sys.executable), "saved_model_cli")]


def test_layout_assets_and_info(exported):
    version_dir = exported["dir"]
    export_dir = os.path.dirname(version_dir)
    assert export_dir == os.path.join(exported["run"], "export")
    assert os.path.basename(version_dir).isdigit()
    assert os.listdir(export_dir) == [os.path.basename(version_dir)]  # no staging left
    assert not os.path.exists(export_dir + "_ids_only")  # stock ops already: no sibling
    assert sorted(os.listdir(os.path.join(version_dir, "assets"))) == [
        "inputs.token.txt", "targets.token.txt"]
    with open(os.path.join(version_dir, "assets.extra", "t2t_export.json")) as f:
        info = json.load(f)
    assert info["problem"] == PROBLEM and info["model"] == "transformer"
    assert info["checkpoint"].endswith("ckpt-5")
    assert info["serving_settings"]["beam_size"] == 2 and info["serving_settings"]["top_beams"] == 2
    assert info["parity"]["examples"] >= 8 and not info["parity"]["sampling"]
    assert info["needs_tensorflow_text"] is False and "ids_only_export" not in info
    assert info["signatures"]["serving_default"]["inputs"] == {
        "inputs": {"dtype": "string", "shape": [None]}}
    assert info["signatures"]["serve_tf_example"]["outputs"]["beams"]["dtype"] == "int64"
    with open(os.path.join(version_dir, "assets.extra", "hparams.json")) as f:
        assert json.load(f)["hidden_size"] == 16


# slow: one more TensorFlow start (~11 s in CI) for a listing; both signatures are run
#   through saved_model_cli below and their specs checked in t2t_export.json above
@pytest.mark.slow
def test_saved_model_cli_show_lists_both_signatures(exported):
    result = _run([*_saved_model_cli(), "show", "--dir", exported["dir"], "--all"])
    assert result.returncode == 0, result.stderr[-3000:]
    for text in ("signature_def['serving_default']", "signature_def['serve_tf_example']",
                 "inputs['examples']", "inputs['inputs']", "outputs['beam_scores']"):
        assert text in result.stdout


def test_saved_model_cli_run_ids_signature_equals_model_infer(exported, tmp_path):
    examples = json.dumps([{"inputs": ids} for ids in INPUT_IDS])
    result = _run([*_saved_model_cli(), "run", "--dir", exported["dir"], "--tag_set", "serve",
                   "--signature_def", "serve_tf_example", "--input_examples",
                   f"examples={examples}", "--outdir", str(tmp_path)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Could not find variable" not in result.stderr
    inputs = np.zeros([2, 8], np.int32)
    for row, ids in enumerate(INPUT_IDS):
        inputs[row, : len(ids)] = ids
    want = infer_lib.infer(exported["model"], {"inputs": tf.constant(inputs)}, 8 + 3, beam_size=2,
                                   top_beams=2, alpha=2.0)
    got_beams = np.load(tmp_path / "beams.npy")
    np.testing.assert_array_equal(got_beams, want["outputs"].numpy())
    np.testing.assert_array_equal(np.load(tmp_path / "outputs.npy"), want["outputs"].numpy()[:, 0])
    np.testing.assert_allclose(np.load(tmp_path / "beam_scores.npy"), want["scores"].numpy(),
                               atol=1e-4)
    assert (got_beams[:, 0, :4] > 1).all()  # real tokens, not an immediate EOS


def test_saved_model_cli_run_text_signature_equals_decoder(exported, tmp_path):
    lines = ["1 0 1 1 0 0 1", "0 1", "1 x 1"]
    result = _run([*_saved_model_cli(), "run", "--dir", exported["dir"], "--tag_set", "serve",
                   "--signature_def", "serving_default", "--input_exprs",
                   f"inputs={json.dumps(lines)}", "--outdir", str(tmp_path)])
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = [b.decode() for b in np.load(tmp_path / "outputs.npy", allow_pickle=True)]
    beams = np.load(tmp_path / "beams.npy", allow_pickle=True)
    scores = np.load(tmp_path / "scores.npy")
    decoder = decoder_lib.Decoder(exported["problem"], exported["model"], exported["data_dir"],
                                  decoder_lib.DecodeHParams.parse(SETTINGS))
    want = decoder.decode_texts(lines)
    assert outputs == [r.text for r in want]
    assert [[b.decode() for b in row] for row in beams] == [[t for t, _ in r.beams] for r in want]
    np.testing.assert_allclose(scores, [r.score for r in want], atol=1e-4)
    assert outputs[0] and set(outputs[0].split()) <= {"0", "1"}


def test_parity_gate_rejects_an_export_with_other_settings(exported, tmp_path, monkeypatch):
    real = export_lib.build_serving_module

    def broken(model, problem, encoders, settings, **kwargs):
        # The serving graph decodes 2 tokens longer than t2t would.
        longer = dataclasses.replace(settings, extra_length=settings.extra_length + 2)
        return real(model, problem, encoders, longer, **kwargs)

    monkeypatch.setattr(export_lib, "build_serving_module", broken)
    export_dir = tmp_path / "export"
    with pytest.raises(export_lib.ParityError, match="PARITY CHECK FAILED") as error:
        export_lib.export(exported["problem"], "transformer", exported["hparams"],
                          exported["data_dir"], exported["run"], str(export_dir),
                          "beam_size=1,extra_length=3", model=exported["model"],
                          parity_examples=2)  # greedy: traces faster than beam search
    assert "[serving_default] input '" in str(error.value) and "!= t2t" in str(error.value)
    assert os.listdir(export_dir) == []  # deleted, no version directory


class _SpmCopy(text_problems.Text2TextProblem):
    approx_vocab_size = 60
    max_samples_for_vocab = 60
    splits = (problem_lib.SplitSpec("train", 1), problem_lib.SplitSpec("dev", 1))
    WORDS = "the cat sat on a mat and dog ran to big red house über straße".split()

    def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
        words = self.WORDS
        for i in range(40 if split == "train" else 4):
            yield {"inputs": " ".join(words[(i * j + 1) % len(words)] for j in range(1, 3 + i % 5)),
                   "targets": " ".join(words[(i + j) % len(words)] for j in range(2 + i % 3))}


# slow: a second SentencePiece export; one with its raw-text gate runs in CI in
#   tests/serving/test_export_ids_only.py
@pytest.mark.slow
def test_sentencepiece_problem_round_trips_raw_text(tmp_path):
    pytest.importorskip("tensorflow_text")
    problem = _SpmCopy()
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    keras.utils.set_random_seed(2)
    php = problem.hparams(data_dir)
    hparams = create_hparams("transformer_test")
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    run = str(tmp_path / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)), run, 1).save(1)
    settings = "beam_size=1,extra_length=4"
    loaded_model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    version_dir = export_lib.export(problem, "transformer", hparams, data_dir, run, None,
                                    settings, model=loaded_model, parity_examples=3)
    with open(os.path.join(version_dir, "assets.extra", "t2t_export.json")) as f:
        info = json.load(f)
    assert info["needs_tensorflow_text"] and info["encoders"]["inputs"]["type"] == "sentencepiece"
    assert "inputs.sentencepiece.model" in os.listdir(os.path.join(version_dir, "assets"))
    # Raw text in, text out: the gate compared them with t2t's Decoder in a fresh process.
    samples = info["parity"]["samples"]
    assert len(samples) == 4 and samples[-1]["input"] == "''"  # 3 dev lines + an empty one
    words = set(_SpmCopy.WORDS)
    assert all(set(eval(s["input"]).split()) <= words for s in samples), samples  # raw text
    assert any(s["output"].strip() for s in samples), samples


def test_image_classifier_serves_encoded_images_to_class_names(tmp_path):
    problem, data_dir, run, hparams, model = tiny_image_classifier_run(tmp_path)
    version_dir = export_lib.export(problem, "basic_fc_relu", hparams, data_dir, run, None,
                                    "beam_size=3,return_beams=True")  # parity gate passed
    loaded = tf.saved_model.load(version_dir)
    image = np.random.default_rng(5).integers(0, 255, [8, 8, 3], dtype=np.uint8)
    png = image_problems.encode_png(image)
    jpeg = tf.io.encode_jpeg(tf.image.resize(image, [16, 16], "nearest")).numpy()  # resized
    out = loaded.signatures["serving_default"](inputs=tf.constant([png, jpeg]))
    assert out["beams"].shape == (2, 3) and out["outputs"].shape == (2,)
    assert {b.decode() for b in out["beams"].numpy()[0]} == {"red", "green", "blue"}
    logits, _ = model({"inputs": image[None]}, training=False)
    assert out["outputs"].numpy()[0].decode() == problem.class_labels[int(np.argmax(logits[0, 0]))]
