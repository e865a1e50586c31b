"""Tests of what a run records and the resume-compatibility rules."""

import json

import pytest

from t2t.hparams.hparams import HParams
from t2t.trainer import run_dir


def test_first_run_records_then_checks(tmp_path):
    hp = HParams(hidden_size=8, dropout=0.1)
    assert run_dir.check_and_record(str(tmp_path), {"problem": "p", "model": "m"}, hp,
                                    has_checkpoint=False) == []
    assert json.load(open(tmp_path / "run.json")) == {"model": "m", "problem": "p"}
    changed = HParams(hidden_size=8, dropout=0.3)
    warnings = run_dir.check_and_record(str(tmp_path), {"problem": "p", "model": "m"}, changed,
                                        has_checkpoint=True)
    assert warnings == ["hparam dropout changed from 0.1 to 0.3 on resume"]
    with pytest.raises(run_dir.IncompatibleRunError, match="hidden_size: 8 -> 16"):
        run_dir.check_and_record(str(tmp_path), {"problem": "p", "model": "m"},
                                 HParams(hidden_size=16, dropout=0.3), has_checkpoint=True)
    with pytest.raises(run_dir.IncompatibleRunError, match="problem 'p', not 'q'"):
        run_dir.check_and_record(str(tmp_path), {"problem": "q", "model": "m"}, changed,
                                 has_checkpoint=True)


def test_without_checkpoint_anything_goes(tmp_path):
    run_dir.check_and_record(str(tmp_path), {"problem": "p", "model": "m"}, HParams(hidden_size=8),
                             has_checkpoint=False)
    run_dir.check_and_record(str(tmp_path), {"problem": "q", "model": "n"}, HParams(hidden_size=9),
                             has_checkpoint=False)
    assert json.load(open(tmp_path / "run.json"))["problem"] == "q"


def test_eval_results_round_trip(tmp_path):
    run_dir.append_eval_results(str(tmp_path), 10, {"accuracy": 0.5})
    run_dir.append_eval_results(str(tmp_path), 20, {"accuracy": 0.75})
    assert run_dir.read_eval_results(str(tmp_path)) == [
        {"step": 10, "accuracy": 0.5}, {"step": 20, "accuracy": 0.75}]
    assert run_dir.read_eval_results(str(tmp_path / "none")) == []
