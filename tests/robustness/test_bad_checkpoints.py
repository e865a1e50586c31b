"""Checkpoints that are missing, of another model, or never written because the loss
became NaN: each stops with a clear message, and the checkpoints and records already in
the run directory are kept."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from t2t import registry
from t2t.models import transformer
from tests.robustness import support
from tests.robustness.support import FAST_DECODE, HPARAMS, HPARAMS_SET, MODEL, PROBLEM, run_binary


def _assert_clear(result, *fragments):
    assert result.code == 1, (result.out, result.err)
    assert not result.traceback, result.err
    assert "error: " in result.err, result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def _trainer(data_dir, output_dir, *extra, model=MODEL, hparams_set=HPARAMS_SET,
             hparams=HPARAMS):
    return run_binary("t2t-trainer", f"--problem={PROBLEM}", f"--model={model}",
                      f"--hparams_set={hparams_set}", f"--hparams={hparams}",
                      f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--schedule=train",
                      "--log_every_steps=1", *extra)


@pytest.fixture
def run_copy(trained_run, tmp_path):
    path = str(tmp_path / "run")
    shutil.copytree(trained_run, path)
    return path


# ------------------------------------------------------------------ no checkpoint
def test_export_and_decode_without_a_checkpoint(robustness, trained_run, data_dir, tmp_path):
    """A run directory with its records but no checkpoint (a run that never saved one)."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "hparams.json", "flags.txt"):
        shutil.copy(os.path.join(trained_run, name), run / name)
    before = support.snapshot(str(run))
    for binary in ("t2t-exporter", "t2t-decoder"):
        robustness.bad_input(f"{binary} --output_dir=<run without a checkpoint>")
        result = run_binary(binary, f"--output_dir={run}", f"--data_dir={data_dir}",
                            f"--decode_hparams={FAST_DECODE}")
        _assert_clear(result, f"error: no checkpoint in {run}: train first with t2t-trainer "
                      f"--output_dir={run}", "or pass --checkpoint_path (a run directory or "
                      "a prefix such as DIR/ckpt-1000)")
    missing = os.path.join(trained_run, "ckpt-999")
    robustness.bad_input("t2t-exporter --checkpoint_path=<a prefix that does not exist>")
    result = run_binary("t2t-exporter", f"--output_dir={run}", f"--data_dir={data_dir}",
                        f"--checkpoint_path={missing}")
    _assert_clear(result, f"no checkpoint in {missing} (no such directory or checkpoint prefix)",
                  "or pass --checkpoint_path")
    support.assert_kept(robustness, str(run), before)
    assert support.snapshot(str(run)) == before  # no export/ folder, no decodes


def test_checkpoint_state_naming_a_deleted_checkpoint(robustness, run_copy, data_dir):
    """`checkpoint` names ckpt-0 but its files are gone (deleted by hand)."""
    for name in os.listdir(run_copy):
        if name.startswith("ckpt-0."):
            os.remove(os.path.join(run_copy, name))
    robustness.bad_input("t2t-exporter: the checkpoint state names deleted files")
    before = support.snapshot(run_copy)
    result = run_binary("t2t-exporter", f"--output_dir={run_copy}", f"--data_dir={data_dir}")
    _assert_clear(result, f"no checkpoint in {run_copy}: train first")
    support.assert_kept(robustness, run_copy, before)


# --------------------------------------------------------- another model's checkpoint
@pytest.mark.parametrize("change, fragments", [
    ({"model": "lstm_seq2seq", "hparams_set": "lstm_seq2seq", "hparams": "batch_size=256"},
     ["holds a run of model 'transformer', not 'lstm_seq2seq'",
      "use another --output_dir, or the same --model"]),
    ({"hparams": HPARAMS + ",hidden_size=32,num_heads=4"},
     ["Cannot resume the run in", "hidden_size: 16 -> 32", "num_heads: 2 -> 4",
      "Use the original --hparams_set/--hparams to continue it, or a new --output_dir",
      "--warm_start_from can load its weights"]),
])
def test_trainer_refuses_another_models_run(robustness, run_copy, data_dir, change, fragments):
    robustness.bad_input("t2t-trainer resuming a transformer_test run with "
                         + " ".join(f"--{k}={v}" for k, v in change.items()))
    before = support.snapshot(run_copy)
    result = _trainer(data_dir, run_copy, "--train_steps=2", **change)
    support.assert_kept(robustness, run_copy, before)
    assert support.checkpoint_steps(run_copy) == [0]
    _assert_clear(result, repr(run_copy), *fragments)


def test_refused_run_keeps_flags_txt(robustness, run_copy, data_dir):
    robustness.bad_input("t2t-trainer --model=lstm_seq2seq on a transformer run (flags.txt)")
    before = support.snapshot(run_copy)
    result = _trainer(data_dir, run_copy, "--train_steps=2", model="lstm_seq2seq",
                      hparams_set="lstm_seq2seq", hparams="batch_size=256")
    assert result.code == 1 and "not 'lstm_seq2seq'" in result.err, result.err
    lost = support.lost_files(run_copy, before)
    assert not lost, lost


def test_trainer_checks_the_checkpoint_itself(robustness, run_copy, data_dir):
    """Without run.json / hparams.json the checkpoint's variables are compared."""
    os.remove(os.path.join(run_copy, "run.json"))
    os.remove(os.path.join(run_copy, "hparams.json"))
    robustness.bad_input("t2t-trainer --model=lstm_seq2seq on a bare transformer checkpoint")
    before = support.snapshot(run_copy)
    result = _trainer(data_dir, run_copy, "--train_steps=2", model="lstm_seq2seq",
                      hparams_set="lstm_seq2seq", hparams="batch_size=256")
    support.assert_kept(robustness, run_copy, before)
    _assert_clear(result, f"The checkpoint {run_copy}/ckpt-0 does not match model "
                  "'lstm_seq2seq' with these hparams", "Use a new --output_dir.")


def test_refused_bare_checkpoint_gets_no_records_of_another_model(robustness, run_copy,
                                                                   data_dir):
    os.remove(os.path.join(run_copy, "run.json"))
    os.remove(os.path.join(run_copy, "hparams.json"))
    robustness.bad_input("t2t-trainer --model=lstm_seq2seq on a bare checkpoint (records)")
    result = _trainer(data_dir, run_copy, "--train_steps=2", model="lstm_seq2seq",
                      hparams_set="lstm_seq2seq", hparams="batch_size=256")
    assert result.code == 1 and "does not match model" in result.err, result.err
    run_json = os.path.join(run_copy, "run.json")
    recorded = json.load(open(run_json)) if os.path.exists(run_json) else {}
    assert recorded.get("model") in (None, MODEL), recorded


@pytest.mark.parametrize("binary", ["t2t-decoder", "t2t-exporter"])
@pytest.mark.parametrize("flags", [
    ["--model=lstm_seq2seq", "--hparams_set=lstm_seq2seq", "--hparams=batch_size=256"],
    ["--hparams=hidden_size=32"],
])
def test_decoder_and_exporter_refuse_another_models_checkpoint(robustness, trained_run,
                                                               data_dir, tmp_path, binary,
                                                               flags):
    robustness.bad_input(f"{binary} {' '.join(flags)} on a transformer_test checkpoint")
    source = tmp_path / "source.txt"
    source.write_text("1 0 1\n")
    before = support.snapshot(trained_run)
    extra = ([f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'decodes'}"]
             if binary == "t2t-decoder" else [f"--export_dir={tmp_path / 'export'}"])
    result = run_binary(binary, f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        f"--decode_hparams={FAST_DECODE}", *flags, *extra)
    support.assert_kept(robustness, trained_run, before)
    assert sorted(os.listdir(tmp_path)) == ["source.txt"]  # no decodes, no export
    model = "lstm_seq2seq" if "--model=lstm_seq2seq" in flags else MODEL
    _assert_clear(result, f"The checkpoint {trained_run}/ckpt-0 does not match model "
                  f"{model!r} with these hparams",
                  "(use the --hparams_set/--hparams it was trained with)")


def test_damaged_latest_checkpoint(robustness, run_copy, data_dir):
    """The latest checkpoint, ckpt-1, lost its data file; ckpt-0 is complete."""
    shutil.copy(os.path.join(run_copy, "ckpt-0.index"), os.path.join(run_copy, "ckpt-1.index"))
    with open(os.path.join(run_copy, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-0"\n'
                'all_model_checkpoint_paths: "ckpt-1"\n')
    robustness.bad_input("t2t-trainer resuming from a checkpoint whose data file is gone")
    before = support.snapshot(run_copy)
    result = _trainer(data_dir, run_copy, "--train_steps=3")
    support.assert_kept(robustness, run_copy, before)
    _assert_clear(result, "ckpt-1.data-00000-of-00001")
    assert "does not match model" not in result.err and "new --output_dir" not in result.err


# ------------------------------------------------------------------------ NaN loss
@registry.register_model("zz_robustness_nan_after_3")
class _NanAfterThree(transformer.Transformer):
    """A transformer whose training loss is NaN from its 4th training step on."""

    def call(self, features, training=None):
        import tensorflow as tf

        if not hasattr(self, "calls"):
            self.calls = tf.Variable(0, trainable=False)
        logits, losses = super().call(features, training)
        if training:
            self.calls.assign_add(1)
            num, den = losses["training"]
            losses["training"] = (tf.where(self.calls > 3, tf.constant(np.nan, num.dtype), num),
                                  den)
        return logits, losses


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(robustness, data_dir, tmp_path):
    import tensorflow as tf

    run = str(tmp_path / "run")
    robustness.bad_input("t2t-trainer: the loss becomes NaN at step 4")
    result = _trainer(data_dir, run, "--train_steps=20", "--save_checkpoints_steps=2",
                      model="zz_robustness_nan_after_3")
    _assert_clear(result, "The training loss became nan at step 4.",
                  f"The last good checkpoint ({run}/ckpt-2) is kept.",
                  "Try a lower learning rate (--hparams=learning_rate_constant=...), gradient "
                  "clipping (clip_grad_norm) or float32.")
    assert "step 3/20 loss" in result.out and "step 4/20" not in result.out
    assert support.checkpoint_steps(run) == [2] and support.latest_checkpoint_step(run) == 2
    reader = tf.train.load_checkpoint(os.path.join(run, "ckpt-2"))
    floats = [n for n, d in reader.get_variable_to_dtype_map().items() if d.is_floating]
    bad = [n for n in floats if not np.all(np.isfinite(reader.get_tensor(n)))]
    robustness.data_lost(bad)
    assert floats and not bad, bad
