"""Tests of t2t.bin.common_flags: where a binary finds a run's data and code."""

from __future__ import annotations

import json

import pytest

from t2t.bin import common_flags


def _run_dir(tmp_path, **recorded):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"problem": "p", **recorded}))
    return str(run)


def test_data_dir_flag_then_the_runs_record_then_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("T2T_DATA_DIR", str(tmp_path / "default"))
    data = tmp_path / "data"
    data.mkdir()
    run = _run_dir(tmp_path, data_dir=str(data))
    assert common_flags.resolve_data_dir("~/given", run).endswith("/given")
    assert common_flags.resolve_data_dir(None, run) == str(data)
    assert common_flags.resolve_data_dir(None, str(tmp_path / "no_run")) == str(tmp_path / "default")
    assert common_flags.resolve_data_dir(None, None) == str(tmp_path / "default")


def test_an_empty_t2t_data_dir_is_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("T2T_DATA_DIR", "")
    assert common_flags.resolve_data_dir(None, None) == str(tmp_path / "t2t_data")


def test_a_recorded_path_that_no_longer_exists_is_named(tmp_path, capsys):
    run = _run_dir(tmp_path, data_dir=str(tmp_path / "gone"))
    with pytest.raises(SystemExit) as exit_info:
        common_flags.resolve_data_dir(None, run)
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (
        f"error: {run}/run.json records data_dir={str(tmp_path / 'gone')!r}, which no longer "
        f"exists: give --data_dir=DIR (where it is now).\n")


def test_a_damaged_run_json_records_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{not json")
    assert common_flags.recorded_run(str(run)) == {}
    assert common_flags.recorded_path(str(run), "data_dir") is None


def test_a_run_on_the_default_data_dir_follows_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("T2T_DATA_DIR", str(tmp_path / "now"))
    run = _run_dir(tmp_path, data_dir=str(tmp_path / "then"), data_dir_given=False)
    assert common_flags.resolve_data_dir(None, run) == str(tmp_path / "now")


def test_a_gone_data_dir_is_accepted_when_it_will_be_generated(tmp_path):
    run = _run_dir(tmp_path, data_dir=str(tmp_path / "gone"))
    assert common_flags.resolve_data_dir(None, run, must_exist=False) == str(tmp_path / "gone")
