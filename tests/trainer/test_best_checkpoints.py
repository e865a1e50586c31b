"""A run that plateaus stops early; its best checkpoints are kept apart, recorded in
run.json, kept on resume, and read by --checkpoint_path=best."""

import json
import os

import pytest

from t2t import registry
from t2t.config import RuntimeConfig, TrainerConfig
from t2t.hparams.basic import create_hparams
from t2t.models import checkpoints
from t2t.trainer import best_checkpoints
from t2t.trainer.trainer import Trainer
from tests.helpers.binaries import run_binary
from tests.helpers.runs import NO_DECODE_SUMMARIES

PROBLEM = "algorithmic_reverse_binary40_test"


def _train(data_dir, output_dir, **config):
    problem = registry.problem(PROBLEM)
    hparams = create_hparams("transformer_test", "batch_size=256")
    config = TrainerConfig(local_eval_frequency=10, save_checkpoints_steps=10, eval_steps=2,
                           log_every_steps=10, decode_summaries=0, keep_checkpoint_max=2,
                           **config)
    trainer = Trainer(problem, "transformer", hparams, data_dir, output_dir, config,
                      RuntimeConfig(random_seed=1, deterministic=True),
                      run_info={"hparams_set": "transformer_test"})
    return trainer, trainer.train_and_evaluate()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


def test_a_plateau_stops_the_run_and_best_is_kept_apart(data_dir, tmp_path):
    """t2t-trainer with T2T's early-stopping flags, then t2t-decoder --checkpoint=best."""
    out = str(tmp_path / "run")
    # delta 100: nothing counts as an improvement, so the rule fires at the first
    # evaluation 20 steps after another (step 30), long before train_steps.
    result = run_binary(
        "t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
        "--hparams_set=transformer_test", "--hparams=batch_size=256", f"--data_dir={data_dir}",
        f"--output_dir={out}", "--train_steps=200", "--local_eval_frequency=10",
        "--save_checkpoints_steps=10", "--eval_steps=2", "--keep_checkpoint_max=2",
        "--eval_early_stopping_steps=20", "--eval_early_stopping_metric_delta=100",
        "--keep_best=2", "--best_metric=accuracy", "--deterministic", "--random_seed=1",
        NO_DECODE_SUMMARIES)
    assert result.code == 0, result.err
    assert "Early stopping at step 30: loss has not decreased by 100" in result.out
    record = json.load(open(os.path.join(out, "run.json")))["best_checkpoints"]
    assert record["metric"] == "accuracy" and record["minimize"] is False
    kept = record["checkpoints"]
    assert len(kept) == 2 and kept[0]["value"] >= kept[1]["value"]
    evaluations = [json.loads(line) for line in open(os.path.join(out, "eval_results.jsonl"))]
    assert evaluations[-1]["step"] == 30
    best = max(evaluations, key=lambda r: (r["accuracy"], -r["step"]))
    assert kept[0]["step"] == best["step"]
    # The rolling manager keeps 2 (steps 20 and 30); best/ holds its own files.
    path = checkpoints.resolve_checkpoint(checkpoints.checkpoint_location("best", out))
    assert path == os.path.join(out, "best", f"ckpt-{best['step']}")
    source = tmp_path / "in.txt"
    source.write_text("1 0 1 1\n")
    decoded = run_binary("t2t-decoder", f"--output_dir={out}", "--checkpoint=best",
                         f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'o'}",
                         "--decode_hparams=beam_size=1")
    assert decoded.code == 0, decoded.err
    assert f"best/ckpt-{best['step']}" in decoded.err
    assert len((tmp_path / "o").read_text().splitlines()) == 1


@pytest.mark.slow  # ~40 s: two more runs; CI keeps the plateau stop and best/ kept apart
def test_resume_keeps_the_record_and_a_new_metric_moves_it_aside(data_dir, tmp_path, capsys):
    out = str(tmp_path / "run")
    _train(data_dir, out, train_steps=20, keep_best=1)
    first = best_checkpoints.read_record(out)
    assert first["metric"] == "loss" and len(first["checkpoints"]) == 1
    trainer, _ = _train(data_dir, out, train_steps=30, keep_best=1)
    again = best_checkpoints.read_record(out)
    losses = [json.loads(line)["loss"] for line in open(os.path.join(out, "eval_results.jsonl"))]
    assert again["checkpoints"][0]["value"] == pytest.approx(min(losses))
    capsys.readouterr()
    _train(data_dir, out, train_steps=30, keep_best=1, best_metric="accuracy")
    assert "moved to" in capsys.readouterr().out
    assert os.path.isdir(os.path.join(out, "best_loss"))
    assert best_checkpoints.read_record(out)["metric"] == "accuracy"


def test_unknown_metrics_fail_before_the_first_step(data_dir, tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(ValueError, match="does not report 'acuracy'.*Did you mean: accuracy"):
        _train(data_dir, out, train_steps=10, best_metric="acuracy")
    assert not any(name.startswith("ckpt-") for name in os.listdir(out))


def test_no_best_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(checkpoints.NoCheckpointError, match="no best checkpoint in .*--keep_best"):
        checkpoints.resolve_checkpoint(checkpoints.checkpoint_location("best", str(tmp_path)))


def test_evaluating_another_split_leaves_best_as_training_chose_it(tmp_path):
    """`--schedule=evaluate --eval_split=test` after training on dev: best/ and its record
    stay (checkpoints are never picked by the test split)."""
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "best" / "ckpt-20.index").write_bytes(b"kept")
    record = {"metric": "loss", "minimize": True, "split": "dev",
              "checkpoints": [{"step": 20, "value": 0.5, "path": "best/ckpt-20"}]}
    (out / "run.json").write_text(json.dumps({best_checkpoints.RECORD_KEY: record}))
    on_test = best_checkpoints.BestCheckpoints(str(out), "loss", True, 1, split="test")
    assert on_test.notes == ["best/ keeps the best by loss on dev; evaluations of test do "
                             "not change it."]
    assert not on_test.offer(30, 0.1, str(out / "ckpt-30"))
    assert best_checkpoints.read_record(str(out)) == record
    assert sorted(os.listdir(out)) == ["best", "run.json"]


def test_best_of_a_run_with_a_relative_output_dir_is_readable(tmp_path, monkeypatch):
    """best/checkpoint names its files relative to best/, whatever the working directory."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("runs/reverse")
    for suffix in (".index", ".data-00000-of-00001"):
        (tmp_path / "runs" / "reverse" / f"ckpt-40{suffix}").write_bytes(b"x")
    best = best_checkpoints.BestCheckpoints("runs/reverse", "loss", True, 1)
    assert best.offer(40, 0.3, "runs/reverse/ckpt-40")
    state = (tmp_path / "runs" / "reverse" / "best" / "checkpoint").read_text()
    assert 'model_checkpoint_path: "ckpt-40"' in state and ".." not in state
    assert checkpoints.resolve_checkpoint(
        checkpoints.checkpoint_location("best", "runs/reverse")).endswith("best/ckpt-40")
