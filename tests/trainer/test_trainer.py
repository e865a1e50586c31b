"""Tests of the training loop: checkpoints, resume, refusals, interrupts, warm start."""

import glob
import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import TrainerConfig
from t2t.decoding import infer as infer_lib
from t2t.hparams.basic import create_hparams
from t2t.trainer import run_dir
from t2t.trainer.trainer import Trainer

PROBLEM = "algorithmic_reverse_binary40_test"
SMALL = "batch_size=256,learning_rate_warmup_steps=10"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


def _trainer(data_dir, output_dir, steps, model="transformer", hparams=SMALL, **config):
    defaults = dict(train_steps=steps, save_checkpoints_steps=10, local_eval_frequency=10,
                    eval_steps=2, log_every_steps=5, decode_summaries=1)
    defaults.update(config)
    return Trainer(registry.problem(PROBLEM), model, create_hparams("transformer_test", hparams),
                   data_dir, str(output_dir), TrainerConfig(**defaults))


def _text_summaries(events_dir, tag):
    """[(step, text)] of a text summary tag, in step order."""
    texts = []
    for path in sorted(glob.glob(f"{events_dir}/events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    texts.append((event.step, tf.make_ndarray(value.tensor).item().decode()))
    return sorted(texts)


def _checkpoint_steps(output_dir):
    return sorted(int(p.split("-")[-1].split(".")[0]) for p in glob.glob(f"{output_dir}/ckpt-*.index"))


def test_train_and_evaluate_writes_everything_then_resumes(data_dir, tmp_path):
    out = tmp_path / "run"
    trainer = _trainer(data_dir, out, 20, decode_summaries=3)
    metrics = trainer.train_and_evaluate()
    assert trainer.step == 20
    assert _checkpoint_steps(out) == [10, 20]
    results = run_dir.read_eval_results(str(out))
    assert [r["step"] for r in results] == [10, 20]
    assert {"loss", "accuracy", "accuracy_per_sequence", "neg_log_perplexity"} <= set(metrics)
    assert json.load(open(out / "hparams.json"))["hidden_size"] == 16
    assert json.load(open(out / "run.json"))["problem"] == PROBLEM
    assert glob.glob(str(out / "train" / "events.*")) and glob.glob(str(out / "eval" / "events.*"))
    losses = [loss for _, loss in trainer.loss_history]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    # Each eval decodes 3 dev examples as one padded batch: the same as one by one.
    texts = _text_summaries(out / "eval", "decoded_examples")
    assert [step for step, _ in texts] == [10, 20]
    dev = registry.problem(PROBLEM).dataset("eval", data_dir, deterministic=True).take(3)
    encoder = registry.problem(PROBLEM).feature_encoders(data_dir)["targets"]
    expected = []
    for example in dev:
        length = int(tf.shape(example["targets"])[0]) + 10
        ids = infer_lib.infer(trainer.model, {"inputs": example["inputs"][None]}, decode_length=length)
        expected.append(encoder.decode(ids["outputs"][0].numpy().tolist(), strip_extraneous=True))
    outputs = [line.split("outputs: ", 1)[1] for line in texts[-1][1].split("\n") if "outputs: " in line]
    assert outputs == expected and texts[-1][1].count("inputs: ") == 3

    resumed = _trainer(data_dir, out, 30)
    assert resumed.step == 20  # restored, not restarted
    resumed.train()
    assert resumed.step == 30 and resumed.loss_history[0][0] == 21
    assert _checkpoint_steps(out) == [10, 20, 30]
    # Asking for fewer steps than done trains nothing.
    again = _trainer(data_dir, out, 30)
    assert again.train() == {} and again.step == 30


def test_changed_structure_or_another_models_checkpoint_is_refused(data_dir, tmp_path):
    out = tmp_path / "run"
    _trainer(data_dir, out, 10).train()
    with pytest.raises(run_dir.IncompatibleRunError, match="hidden_size: 16 -> 32"):
        _trainer(data_dir, out, 20, hparams=SMALL + ",hidden_size=32")
    with pytest.raises(run_dir.IncompatibleRunError, match="model 'transformer', not 'basic_fc_relu'"):
        _trainer(data_dir, out, 20, model="basic_fc_relu")
    # A non-structural change is accepted (with a warning) and the run resumes.
    resumed = _trainer(data_dir, out, 12, hparams=SMALL + ",attention_dropout=0.0")
    assert resumed.step == 10
    # Without run.json and hparams.json the checkpoint itself must be checked.
    os.remove(out / "run.json")
    os.remove(out / "hparams.json")
    with pytest.raises(run_dir.IncompatibleRunError, match="does not match"):
        _trainer(data_dir, out, 20, model="lstm_seq2seq", hparams="batch_size=256")


# A NaN loss (training stops, the last good checkpoint is kept and finite): through the
# binary, with its message, in tests/robustness/test_bad_checkpoints.py.


def test_ctrl_c_and_sigterm_save_a_checkpoint(data_dir, tmp_path):
    """Ctrl-C saves and re-raises; a later SIGTERM saves and stops (one trainer: its train
    step is traced once)."""
    out = tmp_path / "run"
    trainer = _trainer(data_dir, out, 50, save_checkpoints_steps=100)
    real_step, calls = trainer.loop.train_step, []

    def interrupted(iterator, stop):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        if len(calls) == 6:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(iterator, stop)

    trainer.loop.train_step = interrupted
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert _checkpoint_steps(out) == [3]
    trainer.train()  # resumes in the same process; the signal comes on its second step
    assert trainer.step == 5 and _checkpoint_steps(out) == [3, 5]
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.default_int_handler, None) \
        or not callable(getattr(signal.getsignal(signal.SIGTERM), "__self__", None))


@pytest.mark.slow  # ~47 s; tests/pretrained/test_finetune.py warm-starts a run in CI
def test_warm_start_loads_weights_only(data_dir, tmp_path):
    first = _trainer(data_dir, tmp_path / "a", 10)
    first.train()
    second = _trainer(data_dir, tmp_path / "b", 10, warm_start_from=str(tmp_path / "a"))
    assert second.step == 0
    for a, b in zip(first.model.trainable_variables, second.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        _trainer(data_dir, tmp_path / "c", 10, warm_start_from=str(tmp_path / "empty"))


def test_a_strategy_is_accepted_where_the_runtime_goes(data_dir, tmp_path):
    trainer = Trainer(registry.problem(PROBLEM), "transformer",
                      create_hparams("transformer_test", SMALL), data_dir, str(tmp_path / "run"),
                      TrainerConfig(train_steps=1), tf.distribute.get_strategy())
    assert trainer.runtime.strategy is tf.distribute.get_strategy() and trainer.num_replicas == 1


def test_an_unknown_eval_metric_fails_before_the_first_step(data_dir, tmp_path):
    """A misspelt metric name stops the run at its start, not at the first evaluation."""
    from t2t.problems.algorithmic_tasks import algorithmic

    class MisspeltMetric(algorithmic.AlgorithmicReverseBinary40Test):
        registered_name = PROBLEM  # reads the module's data

        def eval_metrics(self):
            return ["accuracy", "approx_bleu"]

    with pytest.raises(ValueError, match="Unknown metric 'approx_bleu'.*approx_bleu_score"):
        Trainer(MisspeltMetric(), "transformer", create_hparams("transformer_test", SMALL),
                data_dir, str(tmp_path), TrainerConfig(train_steps=50, local_eval_frequency=50))
    assert not glob.glob(str(tmp_path / "ckpt-*"))  # no step was taken
