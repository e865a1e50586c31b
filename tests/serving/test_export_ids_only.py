"""The ids-only sibling of a SentencePiece export: written with every such export, loaded
and run in a process where tensorflow_text cannot be imported, equal to the text export
and to t2t's Decoder; a failure of either SavedModel leaves neither."""

import base64
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.data import problem as problem_lib
from t2t.data.bases import text_problems
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.features import EOS_ID
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints, t2t_model
from t2t.models.t2t_model import example_features
from t2t.problems.text import text_files
from t2t.serving import export as export_lib
from t2t.serving import parity

pytest.importorskip("tensorflow_text")  # exporting the text signature needs it here

SETTINGS = "beam_size=1,extra_length=4"  # greedy: traces faster than beam search

# Run in a fresh interpreter: tensorflow_text made unimportable before TensorFlow loads.
NO_TF_TEXT_SCRIPT = r"""
import json, sys
sys.modules["tensorflow_text"] = None  # `import tensorflow_text` raises ImportError
import tensorflow as tf
request = json.load(open(sys.argv[1]))
result = {}
try:
    import tensorflow_text  # noqa: F401
    result["tensorflow_text_imported"] = True
except ImportError:
    result["tensorflow_text_imported"] = False
try:
    tf.saved_model.load(request["text_export"])
    result["text_export_error"] = None
except Exception as e:  # the premise: the text export needs tensorflow_text's ops
    result["text_export_error"] = f"{type(e).__name__}: {e}"[:2000]
loaded = tf.saved_model.load(request["ids_only_export"])
examples = tf.constant([
    tf.train.Example(features=tf.train.Features(feature={request["feature"]: tf.train.Feature(
        int64_list=tf.train.Int64List(value=ids))})).SerializeToString()
    for ids in request["ids"]])
for name in ("serve_tf_example", "serving_default"):
    out = loaded.signatures[name](examples=examples)
    result[name] = {k: v.numpy().tolist() for k, v in out.items()}
result["t2t_imported"] = any(m == "t2t" or m.startswith("t2t.") for m in sys.modules)
json.dump(result, open(sys.argv[2], "w"))
"""


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


@pytest.fixture(scope="module")
def spm_run(tmp_path_factory):
    """A transformer_test checkpoint of a SentencePiece problem (seed 2: its greedy
    decodes are not all empty) and the model loaded from it."""
    root = tmp_path_factory.mktemp("spm")
    problem = _SpmCopy()
    data_dir = str(root / "data")
    problem.generate_data(data_dir, str(root / "tmp"), progress=False)
    keras.utils.set_random_seed(2)
    php = problem.hparams(data_dir)
    hparams = create_hparams("transformer_test")
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    run = str(root / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 1).save(1)
    loaded = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    return {"problem": problem, "data_dir": data_dir, "run": run, "hparams": hparams,
            "model": loaded}


@pytest.fixture(scope="module")
def exported(spm_run):
    version_dir = export_lib.export(spm_run["problem"], "transformer", spm_run["hparams"],
                                    spm_run["data_dir"], spm_run["run"], None, SETTINGS,
                                    model=spm_run["model"], parity_examples=3)
    return {**spm_run, "dir": version_dir}


def _serialized(ids, feature):
    return tf.constant([
        tf.train.Example(features=tf.train.Features(feature={feature: tf.train.Feature(
            int64_list=tf.train.Int64List(value=row))})).SerializeToString() for row in ids])


def _info(version_dir):
    with open(os.path.join(version_dir, "assets.extra", export_lib.EXPORT_INFO_FILE)) as f:
        return json.load(f)


def test_sentencepiece_export_writes_linked_ids_only_sibling(exported):
    text_dir = exported["dir"]
    version = os.path.basename(text_dir)
    ids_root = os.path.join(exported["run"], "export_ids_only")
    ids_dir = os.path.join(ids_root, version)
    assert export_lib.ids_only_export_dir(os.path.dirname(text_dir)) == ids_root
    assert os.listdir(ids_root) == [version]  # same version, no staging left
    assert os.listdir(os.path.dirname(text_dir)) == [version]
    text, ids = _info(text_dir), _info(ids_dir)
    for info in (text, ids):
        assert info["text_export"] == text_dir and info["ids_only_export"] == ids_dir
        assert info["parity"]["examples"] >= 3 and not info["parity"]["sampling"]
    assert text["needs_tensorflow_text"] and text["text_signature"]
    assert not ids["needs_tensorflow_text"] and not ids["text_signature"]
    assert ids["parity"]["samples"] == []  # the gate compared the tf.Example signature only
    assert ids["signatures"]["serving_default"]["inputs"] == {
        "examples": {"dtype": "string", "shape": [None]}}
    assert ids["signatures"]["serving_default"]["outputs"]["outputs"]["dtype"] == "int64"
    assert set(ids["signatures"]) == {"serving_default", "serve_tf_example"}
    # The vocabulary ships with the ids-only export, for clients that tokenize.
    assets = os.listdir(os.path.join(ids_dir, "assets"))
    assert "inputs.sentencepiece.model" in assets
    with open(os.path.join(ids_dir, "assets", "inputs.sentencepiece.model"), "rb") as f:
        assert f.read() == exported["problem"].feature_encoders(
            exported["data_dir"])["inputs"].model_proto


def _serve_without_tensorflow_text(tmp_path, text_dir, ids_dir, ids, feature="inputs"):
    """Outputs of the ids-only export's signatures for tf.Examples of `ids` (int64
    `feature`), from a fresh process where tensorflow_text is unimportable."""
    request, result = tmp_path / "request.json", tmp_path / "result.json"
    request.write_text(json.dumps({"text_export": text_dir, "ids_only_export": ids_dir,
                                   "ids": ids, "feature": feature}))
    script = tmp_path / "no_tf_text.py"
    script.write_text(NO_TF_TEXT_SCRIPT)
    process = subprocess.run([sys.executable, str(script), str(request), str(result)],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert process.returncode == 0, process.stderr[-4000:]
    return json.loads(result.read_text())


@pytest.mark.slow  # ~50 s: a server without tensorflow_text; CI keeps the sibling export
def test_ids_only_export_serves_where_tensorflow_text_cannot_be_imported(exported, tmp_path):
    problem, data_dir = exported["problem"], exported["data_dir"]
    text_dir = exported["dir"]
    ids_dir = _info(text_dir)["ids_only_export"]
    dev = parity.dev_examples(problem, data_dir, 4, is_image=False)
    ids = [e["ids"] for e in dev]
    served = _serve_without_tensorflow_text(tmp_path, text_dir, ids_dir, ids)
    assert served["tensorflow_text_imported"] is False and not served["t2t_imported"]
    error = served["text_export_error"]  # the premise: the text export cannot load there
    assert error is not None and "Op type not registered" in error, error
    got = served["serve_tf_example"]
    assert served["serving_default"] == got  # serving_default is the tf.Example signature
    # Equal to the text export's tf.Example signature (loaded here, with tensorflow_text) ...
    import tensorflow_text  # noqa: F401

    text_export = tf.saved_model.load(text_dir)
    want = text_export.signatures["serve_tf_example"](examples=_serialized(ids, "inputs"))
    np.testing.assert_array_equal(got["outputs"], want["outputs"].numpy())
    np.testing.assert_allclose(got["scores"], want["scores"].numpy(), atol=1e-5)
    # ... to its text signature on the same inputs as text, and to t2t's Decoder.
    decoder = decoder_lib.Decoder(problem, exported["model"], data_dir,
                                  decoder_lib.DecodeHParams.parse(SETTINGS))
    encoder = problem.feature_encoders(data_dir)["inputs"]
    texts = [encoder.decode(text_encoder.strip_extraneous(row)) for row in ids]
    text_out = text_export.signatures["serving_default"](inputs=tf.constant(texts))
    results = decoder.decode_features([
        np.asarray([*text_encoder.strip_extraneous(row), EOS_ID], np.int32)
        for row in ids])
    got_texts = [decoder.target_text(np.asarray(row)) for row in got["outputs"]]
    assert got_texts == [r.text for r in results]
    assert got_texts == [b.decode() for b in text_out["outputs"].numpy()]
    np.testing.assert_allclose(got["scores"], [r.score for r in results], atol=1e-3)
    assert any(t.strip() for t in got_texts), got_texts  # not all empty decodes


def test_t2t_serve_serves_the_ids_only_base_path(exported, capsys):
    from tests.helpers.binaries import load_binary
    from tests.helpers.serving import ServerThread

    t2t_exporter = load_binary("t2t.bin.t2t_exporter")  # other binaries' flags may be loaded

    ids_dir = _info(exported["dir"])["ids_only_export"]
    t2t_exporter._print_signatures(exported["dir"])  # t2t-exporter names both exports
    assert f"no tensorflow_text): {ids_dir}" in capsys.readouterr().out
    ids = [e["ids"] for e in parity.dev_examples(exported["problem"], exported["data_dir"], 3,
                                                  is_image=False)]
    want = tf.saved_model.load(ids_dir).signatures["serve_tf_example"](
        examples=_serialized(ids, "inputs"))
    instances = [{"b64": base64.b64encode(x).decode("ascii")}
                 for x in _serialized(ids, "inputs").numpy()]
    with ServerThread({"spm": os.path.dirname(ids_dir)}) as server:  # RUN/export_ids_only
        status, reply = server.call("/v1/models/spm:predict", {"instances": instances})
    assert status == 200, reply
    for row, prediction in enumerate(reply["predictions"]):
        served = [i for i in prediction["outputs"] if i]  # padding may differ: ids only
        assert served == [i for i in want["outputs"].numpy()[row].tolist() if i]
        assert abs(prediction["scores"] - float(want["scores"][row])) < 1e-4


def test_a_failing_parity_gate_of_either_leaves_neither(spm_run, tmp_path, monkeypatch):
    calls = []

    def gate(export_path, *args, info, **kwargs):
        calls.append(info["text_signature"])
        if not info["text_signature"]:  # the text export passed; the ids-only one fails
            raise export_lib.ParityError(f"ids-only parity failed at {export_path}")
        return {"examples": 1, "sampling": False, "samples": []}

    monkeypatch.setattr(export_lib, "check_parity", gate)
    export_dir = tmp_path / "export"
    with pytest.raises(export_lib.ParityError, match="ids-only parity failed"):
        export_lib.export(spm_run["problem"], "transformer", spm_run["hparams"],
                          spm_run["data_dir"], spm_run["run"], str(export_dir), SETTINGS,
                          model=spm_run["model"])
    assert calls == [True, False]
    assert os.listdir(export_dir) == []  # no version, no staging
    assert not os.path.exists(str(export_dir) + "_ids_only")


def test_text_signature_false_writes_one_ids_only_export(spm_run, tmp_path):
    export_dir = str(tmp_path / "export")
    version_dir = export_lib.export(spm_run["problem"], "transformer", spm_run["hparams"],
                                    spm_run["data_dir"], spm_run["run"], export_dir, SETTINGS,
                                    model=spm_run["model"], parity_check=False,
                                    text_signature=False)
    info = _info(version_dir)
    assert not info["needs_tensorflow_text"] and "ids_only_export" not in info
    assert os.path.dirname(version_dir) == export_dir
    assert not os.path.exists(export_dir + "_ids_only")


class _SpmLanguageModel(text_files.LanguagemodelTextFilesSp8k):
    approx_vocab_size = 60
    document_unit = text_files.LINE
    dev_fraction = test_fraction = 0.2


# A SentencePiece language model built and exported twice (~50 s on 2 cores): `python -m
# pytest -m slow`. CI checks the ids-only sibling of the seq2seq export above.
@pytest.mark.slow
def test_language_model_ids_only_sibling_has_no_tokenizer(tmp_path):
    texts = tmp_path / "texts"
    texts.mkdir()
    words = _SpmCopy.WORDS
    for f in range(3):
        (texts / f"doc{f}.txt").write_text("\n".join(
            " ".join(words[(f + i * j) % len(words)] for j in range(3 + i % 4))
            for i in range(12)) + "\n", encoding="utf-8")
    problem = _SpmLanguageModel()
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, str(texts), progress=False)
    keras.utils.set_random_seed(3)
    hparams = create_hparams("transformer_test", "max_length=32")
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN,
                                   problem.hparams(data_dir))
    model.build_weights()
    run = str(tmp_path / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 1).save(1)
    loaded = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    text_dir = export_lib.export(problem, "transformer", hparams, data_dir, run, None,
                                 "beam_size=1,max_new_tokens=4", model=loaded,
                                 parity_examples=2)
    text, ids = _info(text_dir), _info(_info(text_dir)["ids_only_export"])
    assert text["needs_tensorflow_text"] and "generate" in text["signatures"]
    assert not ids["needs_tensorflow_text"] and ids["parity"]["examples"] >= 2
    prompts = [[5, 6, 7], [8, 9]]
    served = _serve_without_tensorflow_text(tmp_path, text_dir, text["ids_only_export"],
                                            prompts, feature="targets")
    assert "Op type not registered" in served["text_export_error"]
    import tensorflow_text  # noqa: F401

    want = tf.saved_model.load(text_dir).signatures["serve_tf_example"](
        examples=_serialized(prompts, "targets"))
    np.testing.assert_array_equal(served["serve_tf_example"]["outputs"], want["outputs"].numpy())
