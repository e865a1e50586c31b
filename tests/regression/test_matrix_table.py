"""Tests of regression/matrix_table.py: the TensorFlow matrix table, merging runs, and the
README block."""

from __future__ import annotations

import json

import pytest

from regression import matrix, matrix_table, runner
from regression.report import RegressionError
from tests.regression.test_matrix import PYTEST_OUTPUT, write_regression_report


def _report(tmp_path):
    cases = matrix.regression_cases(write_regression_report(tmp_path / "report.json"))
    tests = {**matrix.parse_pytest(PYTEST_OUTPUT)}
    return {"date": "2026-11-26T10:00:00", "commit": "abcdef1234567", "selection": "quick",
            "host": {"cpu": "Xeon", "cores": 2, "python": "3.11.7"}, "total_minutes": 61.0,
            "versions": [
                {"version": "2.19", "install": {"status": "installed", "error": ""},
                 "resolved": {"tensorflow": "2.19.1", "keras": "3.15.1",
                              "tensorflow-text": "2.19.0"}, "tests": tests,
                 "regression": {"cases": cases},
                 "minutes": {"install": 2.0, "tests": 15.2, "regression": 6.3}},
                {"version": "2.16", "install": {"status": matrix_table.NOT_INSTALLABLE,
                                                "error": "ERROR: x\nERROR: No matching "
                                                         "distribution found for tensorflow"},
                 "minutes": {"install": 0.3}}],
            "portability": [{"writer": "2.19", "reader": "2.16", "ok": False, "error": "boom",
                             "loss": None, "writer_loss": None, "log": ""}]}


def test_the_table_has_one_row_per_version_and_a_column_per_case(tmp_path):
    header, rows = matrix_table.matrix_rows(_report(tmp_path))
    assert header == ["TensorFlow", "Keras", "tensorflow-text", "numpy", "install", "tests",
                      "transformer_tiny_reverse_quick",
                      "docstrings_quick", "checkpoints", "minutes", "t2t commit"]
    assert rows[0] == ["2.19.1", "3.15.1", "2.19.0", "-", "installed",
                       "1234 passed, 2 failed, 1 errors, 7 skipped",
                       "0.9512 [0.80, 1.00] PASS", "2.7000 [0.00, 2.50] FAIL", "-", "23.5",
                       "abcdef1"]
    assert rows[1] == ["2.16", "-", "-", "-", "not installable: ERROR: No matching distribution found for "
                       "tensorflow", "-", "-", "-", "0/1 load", "0.3", "abcdef1"]


def test_markdown_block_lists_failures_and_portability(tmp_path):
    text = matrix_table.markdown(_report(tmp_path))
    lines = text.splitlines()
    assert lines[0] == ("Run 2026-11-26 on Xeon (2 cores), Python 3.11.7; quick regression "
                        "subset; 61 min in all.")
    assert lines[2].startswith("| TensorFlow | Keras | tensorflow-text | numpy | install |")
    assert lines[3] == "|" + "---|" * 11
    assert "`tests/models/test_x.py::test_loss_falls[mirrored]`" in text
    assert "Checkpoint portability: tf-2.19 -> tf-2.16 FAILED." in text
    assert "Note:" not in text
    assert "\nNote: pins changed\n" in matrix_table.markdown({**_report(tmp_path), "note": "pins changed"})


def test_the_readme_block_is_replaced_between_its_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t2t\n{matrix_table.MATRIX_BEGIN}\nold\n{matrix_table.MATRIX_END}\ntail\n")
    results = tmp_path / "results"
    results.mkdir()
    for date in ("2026-11-20", "2026-11-26"):
        (results / f"{date}{matrix_table.RESULTS_SUFFIX}").write_text(
            json.dumps({**_report(tmp_path), "date": f"{date}T00:00:00"}))
    (results / "2026-11-27-full.json").write_text("{}")  # a regression report: not read
    assert runner.main(["matrix", "--readme", "--report", str(results),
                        "--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"# t2t\n{matrix_table.MATRIX_BEGIN}\n2 runs from 2026-11-20 to "
                           "2026-11-26 (per phase the latest run) on Xeon")
    assert text.endswith(f"{matrix_table.MATRIX_END}\ntail\n") and "old" not in text
    with pytest.raises(RegressionError, match="has no tf-matrix block"):
        matrix_table.replace_marked("no markers\n", "x")
    readme.write_text("no markers\n")
    assert runner.main(["matrix", "--readme", "--report", str(results),
                        "--write", str(readme)]) == 2
    assert readme.read_text() == "no markers\n"




def test_a_matrix_report_beside_the_regression_reports_changes_no_results_table(tmp_path):
    from regression import report

    matrix_report = _report(tmp_path)  # writes tmp_path/report.json: results go elsewhere
    tmp_path = tmp_path / "results"
    tmp_path.mkdir()
    run = {"machine": {"date": "2026-11-25T00:00:00", "cpu": "X"},
           "cases": [{"name": "a", "status": "PASS", "value": 0.9}]}
    (tmp_path / "2026-11-25-quick.json").write_text(json.dumps(run))
    alone = report.merge_reports([report.read_report(p)
                                  for p in report.report_paths([str(tmp_path)])])
    (tmp_path / f"2026-11-26{matrix_table.RESULTS_SUFFIX}").write_text(json.dumps(
        {**matrix_report, "machine": {"date": "2026-11-26T00:00:00", "cpu": "Y"}}))
    both = report.merge_reports([report.read_report(p)
                                 for p in report.report_paths([str(tmp_path)])])
    assert both == alone


def test_runs_merge_per_version_and_phase_with_each_phases_commit(tmp_path):
    first = _report(tmp_path)
    second = {"date": "2026-11-27T09:00:00", "commit": "fedcba9876", "note": "pins",
              "versions": [{"version": "2.19", "install": {"status": "installed", "error": ""},
                            "tests": {"passed": 1560, "failed": 0, "skipped": 2, "errors": 0},
                            "minutes": {"install": 1.0, "tests": 16.0}}],
              "portability": []}
    merged = matrix_table.merge([first, second])
    assert [v["version"] for v in merged["versions"]] == ["2.19", "2.16"]
    row = merged["versions"][0]
    assert row["tests"]["passed"] == 1560 and row["regression"] == first["versions"][0][
        "regression"]  # the later run skipped the regression: the earlier one's stays
    assert row["commits"] == {"install": "fedcba9876", "tests": "fedcba9876",
                              "regression": "abcdef1234567"}
    assert row["minutes"] == {"install": 1.0, "tests": 16.0, "regression": 6.3}
    assert merged["portability"] == first["portability"] and merged["runs"] == 2
    assert merged["note"] == "2026-11-27: pins."
    header, rows = matrix_table.matrix_rows(merged)
    assert rows[0][4:6] == ["installed", "1560 passed, 0 failed, 2 skipped"]
    assert rows[0][-1] == "tests fedcba9, regression abcdef1"
    assert rows[1][-1] == "abcdef1"


def test_a_run_whose_every_phase_was_rerun_leaves_its_note_out(tmp_path):
    old = {**_report(tmp_path), "note": "stopped early", "portability": []}
    new = {**_report(tmp_path), "date": "2026-11-28T09:00:00", "note": "clean rerun"}
    assert matrix_table.merge([old, new])["note"] == "2026-11-28: clean rerun."
    partial = {"date": "2026-11-28T09:00:00", "commit": "fedcba9876", "portability": [],
               "versions": [{"version": "2.19", "tests": {"passed": 1, "failed": 0,
                                                          "skipped": 0, "errors": 0}}]}
    assert "stopped early" in matrix_table.merge([old, partial])["note"]  # 2.16 still its
