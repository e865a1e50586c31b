"""Keras-native export: model.keras reloads with the checkpoint's logits and fine-tunes with
the model's own loss; saved_model/ loads through TFSMLayer in a process without t2t;
t2t-exporter --format=keras; a model that does not round-trip is refused."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from t2t import registry
from t2t.decoding import decoder as decoder_lib
from t2t.hparams.basic import create_hparams
from t2t.serving import keras_export
from tests.helpers.runs import untrained_run

PROBLEM = "algorithmic_reverse_binary40_test"
HPARAMS = "batch_size=256"  # as untrained_run's run records them


def _batches(problem, data_dir, mode, batch_size, count):
    """`count` padded batches of the problem's real examples (inputs, targets)."""
    dataset = problem.dataset(mode, data_dir, deterministic=True, seed=1, shuffle_files=False)
    dataset = dataset.map(lambda ex: {"inputs": ex["inputs"], "targets": ex["targets"]})
    return dataset.padded_batch(batch_size).take(count)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("keras_export")
    data_dir, run = untrained_run(PROBLEM, root)
    problem = registry.problem(PROBLEM)
    hparams = create_hparams("transformer_test", HPARAMS)
    model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    version_dir = keras_export.export_keras(problem, "transformer", hparams, data_dir, run)
    batch = next(iter(_batches(problem, data_dir, "eval", 6, 1)))
    return {"dir": version_dir, "model": model, "problem": problem, "data_dir": data_dir,
            "run": run, "hparams": hparams, "batch": batch,
            "logits": model(batch, training=False)[0].numpy()}


def test_layout_info_and_report(exported):
    version_dir = exported["dir"]
    export_dir = os.path.dirname(version_dir)
    assert export_dir == os.path.join(exported["run"], "export_keras")
    assert os.listdir(export_dir) == [os.path.basename(version_dir)]  # no staging left
    assert os.path.basename(version_dir).isdigit()
    assert sorted(os.listdir(version_dir)) == ["assets.extra", "model.keras", "saved_model"]
    with open(os.path.join(version_dir, "assets.extra", "t2t_export.json")) as f:
        info = json.load(f)
    assert info["problem"] == PROBLEM and info["model"] == "transformer"
    assert info["checkpoint"].endswith("ckpt-0") and info["format"] == "keras"
    assert info["features"] == {"inputs": {"dtype": "int32", "shape": [None, None]},
                                "targets": {"dtype": "int32", "shape": [None, None]}}
    assert info["logits"] == {"dtype": "float32", "shape": [None, None, 4]}
    assert info["reload_check"] == {"examples": 4, "batch": "dev"}
    assert info["hparams"]["hidden_size"] == 16 and info["versions"]["keras"] == keras.__version__
    lines = keras_export.report_lines(version_dir)
    text = "\n".join(lines)
    assert os.path.join(version_dir, "model.keras") in text and "KiB" in text
    assert "TFSMLayer" in text and "call_endpoint='serve'" in text
    assert "inputs: int32[None, None]" in lines[1]


def test_reloaded_model_gives_the_checkpoints_logits(exported):
    keras.backend.clear_session()
    reloaded = keras.saving.load_model(os.path.join(exported["dir"], "model.keras"))
    assert isinstance(reloaded, keras_export.T2TKerasModel)
    assert reloaded.t2t_model is not exported["model"]
    assert reloaded.t2t_config["problem_name"] == PROBLEM
    assert len(reloaded.weights) == len(exported["model"].weights)
    got = reloaded(exported["batch"]).numpy()
    assert got.dtype == np.float32 and got.shape == exported["logits"].shape
    np.testing.assert_allclose(got, exported["logits"], atol=1e-5)


def test_reloaded_model_fine_tunes_with_the_models_own_loss(exported, tmp_path):
    keras.backend.clear_session()
    keras.utils.set_random_seed(3)
    reloaded = keras.saving.load_model(os.path.join(exported["dir"], "model.keras"))
    batch = exported["batch"]
    # compile() without a loss: the t2t model's own loss (padding-masked cross-entropy).
    numerator, denominator = exported["model"](batch, training=False)[1]["training"]
    own = reloaded.compute_loss(x=batch, y_pred=reloaded(batch), training=False)
    np.testing.assert_allclose(float(own), float(numerator / denominator), rtol=1e-5)
    reloaded.compile(optimizer=keras.optimizers.Adam(0.01))
    before = reloaded.evaluate(batch, verbose=0)
    train = _batches(exported["problem"], exported["data_dir"], "train", 16, 30).repeat()
    history = reloaded.fit(train, steps_per_epoch=15, epochs=2, shuffle=False, verbose=0)
    after = reloaded.evaluate(batch, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and losses[1] < losses[0], losses
    assert after < 0.8 * before, (before, after)
    # The fine-tuned model saves and loads again (with its compile settings).
    path = str(tmp_path / "finetuned.keras")
    reloaded.save(path)
    again = keras.saving.load_model(path)
    np.testing.assert_allclose(again(batch).numpy(), reloaded(batch).numpy(), atol=1e-5)
    assert again.optimizer is not None and int(again.optimizer.iterations) == 30
    # The checkpoint's model is untouched: the .keras model owns its weights.
    np.testing.assert_allclose(exported["model"](batch, training=False)[0].numpy(),
                               exported["logits"])


def test_auxiliary_losses_join_the_loss_and_other_models_round_trip(exported, tmp_path):
    # transformer_moe adds a load-balancing loss in training; the .keras file keeps it too.
    from t2t.models import t2t_model

    keras.utils.set_random_seed(5)
    php = exported["problem"].hparams(exported["data_dir"])
    moe = t2t_model.create_model("transformer_moe", create_hparams("transformer_moe_tiny"),
                                 t2t_model.PREDICT, php)
    wrapper = keras_export.T2TKerasModel.wrap(moe, PROBLEM, "transformer_moe")
    batch = exported["batch"]
    logits = wrapper(batch, training=True)
    assert len(wrapper.losses) == 1 and float(wrapper.losses[0]) > 0
    numerator, denominator = moe.loss(logits, batch, True)
    np.testing.assert_allclose(
        float(wrapper.compute_loss(x=batch, y_pred=logits)),
        float(numerator / denominator + wrapper.losses[0]), rtol=1e-5)
    path = str(tmp_path / "moe.keras")
    wrapper.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.t2t_config["model_name"] == "transformer_moe"
    np.testing.assert_allclose(reloaded(batch).numpy(), wrapper(batch).numpy(), atol=1e-5)


def test_image_classifier_files_load_with_uint8_images(tmp_path):
    # An image problem: uint8 [B, H, W, C] images in, class-label logits out, both files.
    from t2t.models import t2t_model
    from tests.helpers import image_models

    keras.utils.set_random_seed(2)
    php = image_models.image_problem([8, 8, 1])
    specs = keras_export.feature_specs(php)
    assert {k: (s.dtype.name, s.shape.as_list()) for k, s in specs.items()} == {
        "inputs": ("uint8", [None, 8, 8, 1]), "targets": ("int32", [None, 1])}
    model = t2t_model.create_model("basic_fc_relu", create_hparams("basic_fc_small"),
                                   t2t_model.PREDICT, php)
    wrapper = keras_export.T2TKerasModel.wrap(model, "image_toy", "basic_fc_relu")
    batch = image_models.random_batch(3, [8, 8, 1])
    want = wrapper(batch).numpy()
    keras_export._write_files(wrapper, specs, str(tmp_path), "basic_fc_relu")
    reloaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    np.testing.assert_allclose(reloaded(batch).numpy(), want, atol=1e-5)
    layer = keras.layers.TFSMLayer(str(tmp_path / "saved_model"), call_endpoint="serve")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(batch)), want, atol=1e-5)


_NO_T2T = """\
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name == "t2t" or name.startswith("t2t."):
            raise ImportError("t2t is not installed here")

sys.meta_path.insert(0, Blocked())
import json
import numpy as np
import keras


batch = {{k: np.array(v, np.int32) for k, v in json.load(open({batch!r})).items()}}
layer = keras.layers.TFSMLayer({path!r}, call_endpoint="serve")
logits = layer(batch)
assert "t2t" not in sys.modules
np.save({out!r}, keras.ops.convert_to_numpy(logits))
"""


def test_saved_model_loads_through_tfsmlayer_without_t2t(exported, tmp_path):
    batch_file, out = tmp_path / "batch.json", tmp_path / "logits.npy"
    batch_file.write_text(json.dumps({k: v.numpy().tolist() for k, v in exported["batch"].items()}))
    script = _NO_T2T.format(batch=str(batch_file), out=str(out),
                            path=os.path.join(exported["dir"], "saved_model"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(out), exported["logits"], atol=1e-5)


def test_a_model_that_does_not_reload_is_refused(exported, tmp_path, monkeypatch):
    # A config that cannot rebuild the model: the .keras file saves but does not load.
    monkeypatch.setattr(keras_export.T2TKerasModel, "get_config",
                        lambda self: {"name": self.name, "trainable": True})
    export_dir = tmp_path / "refused"
    with pytest.raises(keras_export.ExportError, match="'transformer'.*does not load back"):
        keras_export.export_keras(exported["problem"], "transformer", exported["hparams"],
                                  exported["data_dir"], exported["run"], str(export_dir),
                                  model=exported["model"])
    assert os.listdir(export_dir) == []  # the staging folder is gone


def test_t2t_exporter_format_keras(exported, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "t2t.bin.t2t_exporter", f"--output_dir={exported['run']}",
         f"--data_dir={exported['data_dir']}", "--format=keras",
         f"--export_dir={tmp_path / 'keras'}"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    exported_lines = [line for line in result.stdout.splitlines() if line.startswith("Exported: ")]
    assert len(exported_lines) == 1, result.stdout
    version_dir = exported_lines[0].removeprefix("Exported: ")
    assert os.path.dirname(version_dir) == str(tmp_path / "keras")
    assert "TFSMLayer" in result.stdout and "model.keras" in result.stdout
    keras.backend.clear_session()
    reloaded = keras.saving.load_model(os.path.join(version_dir, "model.keras"))
    np.testing.assert_allclose(reloaded(exported["batch"]).numpy(), exported["logits"], atol=1e-5)
