"""Tests of what a run records and the resume-compatibility rules."""

import json

import pytest

from t2t import registry
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


def test_a_structural_hparam_newer_than_the_run_only_warns(tmp_path):
    # A run from before t2t added self_attention_type resumes with its default.
    run = {"problem": "p", "model": "m"}
    run_dir.check_and_record(str(tmp_path), run, HParams(hidden_size=8), has_checkpoint=False)
    newer = HParams(hidden_size=8, self_attention_type="dot_product")
    assert run_dir.check_and_record(str(tmp_path), run, newer, has_checkpoint=True) == [
        "hparam self_attention_type is new since the run started (not in its hparams.json): "
        "'dot_product'"]
    relative = HParams(hidden_size=8, self_attention_type="dot_product_relative")
    transformer = registry.model("transformer").STRUCTURAL_HPARAMS
    with pytest.raises(run_dir.IncompatibleRunError, match="self_attention_type"):
        run_dir.check_and_record(str(tmp_path), run, relative, has_checkpoint=True,
                                 model_structural=transformer)


def test_a_models_own_structural_hparams_refuse_a_resume_of_that_model_only(tmp_path):
    # revnet's num_channels shapes revnet's variables; a model that never reads it resumes.
    run = {"problem": "p", "model": "revnet"}
    run_dir.check_and_record(str(tmp_path), run, HParams(num_channels=[8, 16]),
                             has_checkpoint=False)
    wider = HParams(num_channels=[16, 32])
    with pytest.raises(run_dir.IncompatibleRunError, match=r"num_channels: \[8, 16\] -> \[16, 32\]"):
        run_dir.check_and_record(str(tmp_path), run, wider, has_checkpoint=True,
                                 model_structural=registry.model("revnet").STRUCTURAL_HPARAMS)
    assert run_dir.check_and_record(str(tmp_path), run, wider, has_checkpoint=True) == [
        "hparam num_channels changed from [8, 16] to [16, 32] on resume"]


def test_each_models_structural_hparams_are_hparams_it_reads():
    from t2t.hparams import views

    for name in registry.list_models():
        model = registry.model(name)
        unread = model.STRUCTURAL_HPARAMS - set(views.fields(model.HPARAMS_VIEW))
        assert not unread, (name, sorted(unread))


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


def test_a_resume_keeps_the_start_record_and_updates_where_data_and_code_are(tmp_path):
    out = str(tmp_path)
    first = {"problem": "p", "model": "m", "hparams_set": "h", "data_dir": "/a/data",
             "t2t_usr_dir": "/a/code"}
    run_dir.record_run(out, first, HParams(x=1), has_checkpoint=False)
    moved = {**first, "hparams_set": "other", "data_dir": "/b/data", "t2t_usr_dir": None}
    run_dir.record_run(out, moved, HParams(x=1), has_checkpoint=True)
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert recorded == {**first, "data_dir": "/b/data"}  # a code dir not given is kept
    evaluated = {**first, "data_dir": "/c/data"}
    run_dir.record_run(out, evaluated, HParams(x=1), has_checkpoint=True, update_locations=False)
    assert json.loads((tmp_path / "run.json").read_text())["data_dir"] == "/b/data"


def test_absolute_path_keeps_urls():
    assert run_dir.absolute_path("gs://bucket/data") == "gs://bucket/data"
    assert run_dir.absolute_path("rel").startswith("/") and run_dir.absolute_path("rel").endswith("/rel")
