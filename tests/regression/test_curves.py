"""Tests of regression/curves.py: the eval-curve plots of a run and of the results page."""

import dataclasses
import os

import pytest

from regression import curves, runner
from regression.report import CaseResult, RegressionError, write_report

pytest.importorskip("matplotlib")


def _case(name: str, curve, metric="accuracy", curve_metric=None, value=0.95) -> dict:
    result = CaseResult(name=name, problem="p", model="m", hparams_set="h", hparams="",
                        train_steps=300, strategy="default", hardware="cpu-2core",
                        metric=metric, band=(0.9, 1.0), measured_on="test",
                        expected_minutes=1.0, bands={metric: (0.9, 1.0)}, status="PASS",
                        value=value, curve=curve, curve_metric=curve_metric, minutes=1.0)
    return dataclasses.asdict(result)


def test_the_page_curves_are_deterministic_and_only_the_current_cases(tmp_path):
    folder = tmp_path / "curves"
    folder.mkdir()
    (folder / "left_the_table.svg").write_text("<svg/>")
    (folder / "notes.txt").write_text("kept")
    cases = [_case("a", [(100, 0.5), (200, 0.93)]),
             _case("b", [(100, 3.1), (200, 2.4)], metric="test_bits_per_byte",
                   curve_metric="bits_per_byte", value=2.3),
             _case("skipped", [])]
    assert curves.write_curve_svgs(cases, str(folder)) == ["a", "b"]
    assert sorted(os.listdir(folder)) == ["a.svg", "b.svg", "notes.txt"]
    first = {name: (folder / name).read_bytes() for name in ("a.svg", "b.svg")}
    curves.write_curve_svgs(cases, str(folder))
    assert {name: (folder / name).read_bytes() for name in first} == first
    a, b = first["a.svg"].decode(), first["b.svg"].decode()
    # Text stays text; the band is shaded only where the curve's metric is checked.
    assert "dev accuracy" in a and "band [0.9, 1]" in a and "a: PASS, accuracy 0.9500" in a
    assert "dev bits_per_byte" in b and "band [" not in b and "test_bits_per_byte 2.3000" in b
    assert "<dc:date>" not in a


def test_the_curves_section_links_relative_to_the_page(tmp_path):
    page = tmp_path / "docs" / "results" / "regression.md"
    section = curves.curves_section(["a", "b"], str(tmp_path / "docs" / "results" / "curves"),
                                    str(page))
    assert section.splitlines()[-2:] == [
        '![a](curves/a.svg){ width="340" }', '![b](curves/b.svg){ width="340" }']
    assert curves.curves_section([], str(tmp_path), str(page)) == ""


def test_without_matplotlib_the_error_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(curves, "plots_available", lambda: False)
    with pytest.raises(RegressionError, match=r"pip install -e '\.\[regression\]'"):
        curves.write_curve_svgs([_case("a", [(1, 0.5)])], str(tmp_path))


def test_readme_with_curves_writes_them_after_the_table(tmp_path, capsys):
    report = tmp_path / "report.json"
    write_report(str(report), [CaseResult.from_report(_case("a", [(100, 0.5), (200, 0.93)]))],
                 {"cpu": "X", "cores": 2, "t2t_commit": "abc", "date": "2026-11-30T06:00:00"})
    page = tmp_path / "regression.md"
    page.write_text("# Results\n\n<!-- results:begin -->\n<!-- results:end -->\n")
    status = runner.main(["readme", "--report", str(report), "--write", str(page),
                          "--curves", str(tmp_path / "curves")], cases=[])
    assert status == 0
    text = page.read_text()
    assert text.index("| a | p |") < text.index("![a](curves/a.svg)") < text.index(
        "<!-- results:end -->")
    assert (tmp_path / "curves" / "a.svg").exists()
