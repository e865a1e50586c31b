"""End-to-end tests of the t2t-exporter binary (run as a process)."""

import json
import os
import subprocess
import sys

import pytest

from t2t.models import checkpoints

PROBLEM = "algorithmic_reverse_binary40_test"
EXPORTER = [sys.executable, "-m", "t2t.bin.t2t_exporter"]


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A training run's directory as t2t-trainer leaves it (run.json, hparams.json, a
    checkpoint), untrained, and its data."""
    import keras
    import tensorflow as tf

    from t2t import registry
    from t2t.hparams.basic import create_hparams
    from t2t.models import t2t_model
    from t2t.models.t2t_model import example_features
    from t2t.problems import problem as problem_lib

    root = tmp_path_factory.mktemp("exporter_bin")
    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    keras.utils.set_random_seed(1)
    hparams = create_hparams("transformer_test", "batch_size=256")
    php = problem.hparams(data_dir)
    model = t2t_model.create_model("transformer", hparams, problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)), output_dir, 1).save(3)
    with open(os.path.join(output_dir, "run.json"), "w") as f:
        json.dump({"problem": PROBLEM, "model": "transformer",
                   "hparams_set": "transformer_test", "hparams": "batch_size=256"}, f)
    with open(os.path.join(output_dir, "hparams.json"), "w") as f:
        json.dump(hparams.values(), f)
    return data_dir, output_dir


def test_export_from_a_run_directory(run_dir):
    data_dir, output_dir = run_dir
    # The problem, model and hparams come from the run's run.json / hparams.json.
    result = _run([*EXPORTER, f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                   "--decode_hparams=beam_size=1,extra_length=2"])
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    exported = [line for line in lines if line.startswith("Exported: ")]
    assert len(exported) == 1, result.stdout
    version_dir = exported[0].removeprefix("Exported: ")
    assert os.path.dirname(version_dir) == os.path.join(output_dir, "export")
    assert os.path.basename(version_dir).isdigit()
    assert os.path.exists(os.path.join(version_dir, "saved_model.pb"))
    assert "  serve_tf_example: (examples: string[None]) -> (outputs: int64[None, None], " \
           "scores: float32[None])" in lines
    assert "  serving_default: (inputs: string[None]) -> (outputs: string[None], " \
           "scores: float32[None])" in lines
    assert any(line.startswith("Parity check passed on ") for line in lines)
    assert "Traceback" not in result.stderr


def test_clear_errors(run_dir, tmp_path):
    # The exporter's main in this process (tests/helpers/binaries.py): no TensorFlow
    # start per error.
    from tests.helpers.binaries import run_binary

    data_dir, _ = run_dir
    result = run_binary("t2t-exporter", f"--output_dir={tmp_path}", f"--data_dir={data_dir}",
                        f"--problem={PROBLEM}", "--model=transformer",
                        "--hparams_set=transformer_test")
    assert result.code == 1
    assert f"error: no checkpoint in {tmp_path}: train first" in result.err
    assert not result.traceback
    result = run_binary("t2t-exporter", f"--output_dir={tmp_path}",
                        "--decode_hparams=beam_sise=2")
    assert result.code == 1
    assert "--problem, --model, --hparams_set required" in result.err
