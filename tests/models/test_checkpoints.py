"""Checkpoints written by earlier t2t versions keep loading, decoding and resuming.

tests/fixtures/legacy_checkpoints/ holds three runs written by t2t at commit 4ca3979
(before t2t owned its checkpoint names: format 1, names from Keras' private attributes
such as "q._kernel"), with what that code decoded from them (expected.json, made by
the record.py of the fixtures' README.md): a transformer_tiny and an lstm_seq2seq_attention trained on one
device, and a transformer_tiny trained with parameter servers (chief + ps + worker).
Every later change must keep these tests passing.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import DecodeHParams, RuntimeConfig, TrainerConfig
from t2t.decoding import decoder as decoder_lib
from t2t.hparams.hparams import HParams
from t2t.models import checkpoints, variable_names
from t2t.serving import average
from t2t.trainer import runtime as runtime_lib
from t2t.trainer.task import Task
from t2t.trainer.trainer import Trainer
from tests.helpers.binaries import run_binary

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                        "legacy_checkpoints")
RUNS = ("transformer_tiny", "lstm", "transformer_tiny_ps")
SETTINGS = {"greedy": "beam_size=1", "beam4": "beam_size=4,alpha=0.6,return_beams=true"}


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(FIXTURES, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def _run_files(name):
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    with open(os.path.join(folder, "hparams.json"), encoding="utf-8") as f:
        hparams = HParams(**json.load(f))
    return folder, run, hparams


@pytest.mark.parametrize("name", RUNS)
def test_legacy_checkpoint_decodes_as_it_did(name, expected):
    folder, run, hparams = _run_files(name)
    problem = registry.problem(run["problem"])
    model = decoder_lib.load_model(problem, run["model"], hparams, None, folder)
    want = expected[name]
    saved = checkpoints.saved_model_names(model.checkpoint_path)
    assert any("._kernel" in n for n in saved)  # format 1 indeed
    assert len(saved) == len(model.variables)  # every saved variable found its variable
    for key, settings in SETTINGS.items():
        decoder = decoder_lib.Decoder(problem, model, None, DecodeHParams.parse(settings))
        results = decoder.decode_texts(want["inputs"])
        for result, old in zip(results, want["decodes"][key], strict=True):
            assert result.text == old["text"], (key, result, old)
            assert result.score == pytest.approx(old["score"], abs=1e-4)
            assert [t for t, _ in result.beams] == [t for t, _ in old["beams"]]
            np.testing.assert_allclose([s for _, s in result.beams],
                                       [s for _, s in old["beams"]], atol=1e-4)


@pytest.mark.parametrize("name", RUNS)
def test_legacy_checkpoint_restores_the_optimizer_slots_of_each_variable(name, expected):
    folder, run, hparams = _run_files(name)
    task = Task(registry.problem(run["problem"]), run["model"], hparams, None)
    model = task.build_model()
    optimizer, _ = task.build_optimizer(model, train_steps=1000)
    path = tf.train.latest_checkpoint(folder)
    checkpoints.restore(path, model, optimizer=optimizer)
    assert int(optimizer.iterations.numpy()) == 300
    reader = tf.train.load_checkpoint(path)
    spelled = {id(v): n for n, v in checkpoints.names_in_checkpoint(model, path).items()}
    slots = expected[name]["optimizer_slots"]  # old name -> [momentum, velocity] index
    assert len(slots) == len(model.trainable_variables)
    for variable in model.trainable_variables:
        old_name = spelled[id(variable)]
        # Keras' own bookkeeping (test-only): which slot variables belong to `variable`.
        index = optimizer._get_variable_index(variable)
        for slot, saved_index in zip((optimizer._momentums[index], optimizer._velocities[index]),
                                     slots[old_name], strict=True):
            saved = reader.get_tensor(f"optimizer/_variables/{saved_index}/.ATTRIBUTES/VARIABLE_VALUE")
            np.testing.assert_array_equal(slot.numpy(), saved, err_msg=old_name)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem("algorithmic_reverse_binary40_test").generate_data(
        path, path + "/tmp", progress=False)
    return path


# slow: 300 training steps; reading a legacy run stays in CI
#   (test_the_decoder_binary_reads_a_legacy_run)
@pytest.mark.slow
def test_a_legacy_run_resumes_and_then_writes_stable_names(data_dir, tmp_path):
    folder, run, _ = _run_files("transformer_tiny")
    output_dir = str(tmp_path / "run")
    shutil.copytree(folder, output_dir)
    with open(os.path.join(folder, "hparams.json"), encoding="utf-8") as f:
        recorded = json.load(f)
    from t2t.hparams.basic import create_hparams

    hparams = create_hparams(run["hparams_set"], run["hparams"])
    assert {k: hparams.get(k) for k in recorded} == recorded  # the run's own hparams
    trainer = Trainer(registry.problem(run["problem"]), run["model"], hparams, data_dir,
                      output_dir, TrainerConfig(train_steps=302, save_checkpoints_steps=1000,
                                                decode_summaries=0),
                      runtime_lib.start(RuntimeConfig()),
                      run_info={"hparams_set": run["hparams_set"], "hparams": run["hparams"]})
    assert trainer.step == 300
    trainer.train()
    assert trainer.step == 302
    saved = checkpoints.saved_model_names(os.path.join(output_dir, "ckpt-302"))
    assert set(saved) == set(variable_names.named_variables(trainer.model))
    assert not any("._kernel" in n or ".cell." in n for n in saved)
    # t2t-avg-all over the change of format: ckpt-300 (format 1) with ckpt-302.
    averaged = average.average_checkpoints(output_dir, str(tmp_path / "avg"), n=2)
    reader = tf.train.load_checkpoint(averaged)
    old = tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-300"))
    new = tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-302"))
    key = "model/{}/.ATTRIBUTES/VARIABLE_VALUE"
    q = "encoder.stack_layers.0.self_attention.inner.q."
    np.testing.assert_allclose(
        reader.get_tensor(key.format((q + "kernel").replace(".", ".."))),
        (old.get_tensor(key.format((q + "_kernel").replace(".", "..")))
         + new.get_tensor(key.format((q + "kernel").replace(".", "..")))) / 2, rtol=1e-6)


def test_the_decoder_binary_reads_a_legacy_run(expected, tmp_path):
    folder, _, _ = _run_files("lstm")
    source = tmp_path / "in.txt"
    want = expected["lstm"]
    source.write_text("\n".join(want["inputs"]) + "\n")
    # The binary's main in this process, which has built other models before: the
    # checkpoint's names do not depend on what a process made first.
    result = run_binary("t2t-decoder", f"--output_dir={folder}", f"--data_dir={tmp_path}",
                        f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'out.txt'}",
                        "--decode_hparams=beam_size=1")
    assert result.code == 0, result.err[-3000:]
    lines = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    assert lines == [d["text"] for d in want["decodes"]["greedy"]]


def test_an_unreadable_checkpoint_is_a_clear_error(tmp_path):
    folder, run, hparams = _run_files("transformer_tiny")
    broken = tmp_path / "run"
    shutil.copytree(folder, broken)
    (broken / "ckpt-300.index").write_bytes(b"not a checkpoint index")
    problem = registry.problem(run["problem"])
    with pytest.raises(decoder_lib.DecodeError, match=r"ckpt-300 is damaged: .*ckpt-300\.index cannot be read"):
        decoder_lib.load_model(problem, run["model"], hparams, None, str(broken))
