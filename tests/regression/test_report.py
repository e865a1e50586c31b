"""Tests of regression/report.py: case results, reports, the README block."""

import dataclasses
import json

import pytest

from regression import report
from regression.case_spec import Case


def test_replace_block_errors():
    with pytest.raises(report.RegressionError, match="no results block"):
        report.replace_block(f"{report.END_MARKER}\n{report.BEGIN_MARKER}\n", "x")
    with pytest.raises(report.RegressionError, match="more than one"):
        report.replace_block(f"{report.BEGIN_MARKER}\n{report.END_MARKER}\n" * 2, "x")


def test_reports_of_several_runs_merge_into_one_table():
    first = {"machine": {"t2t_commit": "aaa", "cpu": "X", "date": "2026-11-22T05:00:00"},
             "cases": [{"name": "a", "value": 0.5}, {"name": "b", "value": 0.1}]}
    second = {"machine": {"t2t_commit": "bbb", "date": "2026-11-25T07:00:00"},
              "cases": [{"name": "b", "value": 0.9}]}
    merged = report.merge_reports([first, second])
    assert merged["machine"]["cpu"] == "X" and merged["runs"] == 2
    third = {"machine": {"cpu": "Y", "date": "2026-11-26T07:00:00"}, "cases": [{"name": "c"}]}
    assert report.merge_reports([first, second, third])["machine"]["cpu"] == "X or Y"
    assert merged["cases"] == [
        {"commit": "aaa", "date": "2026-11-22T05:00:00", "name": "a", "value": 0.5},
        {"commit": "bbb", "date": "2026-11-25T07:00:00", "name": "b", "value": 0.9}]


def test_a_run_that_later_runs_replaced_entirely_is_not_counted():
    old = {"machine": {"cpu": "X", "date": "2026-11-22T05:00:00", "note": "rebuilt"},
           "cases": [{"name": "a", "value": 0.5}]}
    full = {"machine": {"cpu": "Y", "date": "2026-11-25T07:00:00"},
            "cases": [{"name": "a", "value": 0.9}, {"name": "b", "value": 0.8}]}
    merged = report.merge_reports([old, full])
    assert (merged["runs"], merged["notes"], merged["machine"]["cpu"]) == (1, [], "Y")
    assert [c["value"] for c in merged["cases"]] == [0.9, 0.8]
    ordered = report.merge_reports([old, full], order=["b", "a"])["cases"]
    assert [c["name"] for c in ordered] == ["b", "a"]
    # Runs with no case at all still name the machine of an (empty) table.
    assert report.merge_reports([{"machine": {"cpu": "Z"}, "cases": []}])["machine"]["cpu"] == "Z"


def test_a_cases_own_commit_and_date_win_over_its_reports():
    run = {"machine": {"t2t_commit": "aaa", "date": "2026-11-22T05:00:00"},
           "cases": [{"name": "a", "commit": "ccc", "date": "2026-11-23T01:00:00"},
                     {"name": "b", "commit": None, "date": None}]}
    merged = report.merge_reports([run])["cases"]
    assert [(c["commit"], c["date"]) for c in merged] == [
        ("ccc", "2026-11-23T01:00:00"), ("aaa", "2026-11-22T05:00:00")]


def _result(name="a", **fields):
    case = Case(name=name, problem="p", model="m", hparams_set="h", train_steps=10,
                metric="accuracy", band=(0.5, 1.0), also={"bleu": (75.0, 100.0)})
    result = report.CaseResult.for_case(case)
    for key, value in fields.items():
        setattr(result, key, value)
    return result


def test_a_result_survives_its_report(tmp_path):
    result = _result(status=report.PASS, value=0.9, curve=[(5, 0.4), (10, 0.9)],
                     commands=["t2t-trainer --x=1"], commit="abc", date="2026-11-25T01:00:00")
    path = str(tmp_path / "report.json")
    report.write_report(path, [result], {"t2t_commit": "zzz"})
    data = json.loads(open(path).read())
    data["cases"][0]["field_of_a_later_version"] = 1
    assert report.CaseResult.from_report(data["cases"][0]) == result
    # Results that do not name their run take the report's commit and date.
    del data["cases"][0]["commit"], data["cases"][0]["date"]
    data["machine"]["date"] = "2026-11-20T00:00:00"
    open(path, "w").write(json.dumps(data))
    _, results = report.earlier_results(path)
    assert (results["a"].commit, results["a"].date) == ("zzz", "2026-11-20T00:00:00")
    assert report.earlier_results(str(tmp_path / "none.json")) == ({}, {})


def test_the_table_of_a_resumed_run_says_so():
    machine = {"cpu": "X", "cores": 2, "date": "2026-11-25T16:00:00", "t2t_commit": "aaa"}
    one = {"machine": machine, "cases": [
        dataclasses.asdict(_result("a", status=report.PASS, value=0.9, minutes=3.0,
                                          commit="aaa", date="2026-11-25T16:00:00"))]}
    assert report.markdown_table(one).startswith("Run 2026-11-25T16:00:00 on X (2 cores")
    resumed = dict(one, cases=[*one["cases"], dataclasses.asdict(_result(
        "b", status=report.PASS, value=0.9, minutes=12.0, commit="bbb",
        date="2026-11-26T09:00:00", continued=True, earlier_minutes=4.0))])
    table = report.markdown_table(resumed)
    assert table.startswith("One run, resumed (`run --resume`), from 2026-11-25 to 2026-11-26")
    assert "| PASS | 12.0 (resumed) | 2026-11-26 | bbb |" in table
    assert "| PASS | 3.0 | 2026-11-25 | aaa |" in table
    assert table.endswith("2 PASS, 0 FAIL, 0 SKIP; the 2 cases that ran took 15.0 min "
                          "(0.2 h) in all.")
    same_day = dict(resumed, cases=[one["cases"][0], {**resumed["cases"][1],
                                                      "date": "2026-11-25T19:00:00"}])
    assert report.markdown_table(same_day).startswith(
        "One run of 2026-11-25, resumed (`run --resume`), on X (2 cores")


def test_the_summary_counts_skips_but_not_their_minutes():
    cases = [{"status": report.PASS, "minutes": 2.0}, {"status": report.FAIL, "minutes": 1.5},
             {"status": report.SKIP, "minutes": 99.0}, {"status": report.PASS, "minutes": None}]
    assert report.summary_line(cases) == (
        "2 PASS, 1 FAIL, 1 SKIP; the 3 cases that ran took 3.5 min (0.1 h) in all.")
