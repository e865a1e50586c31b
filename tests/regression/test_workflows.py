"""The README's research workflows (regression/workflows.py): the step counting in CI,
and each workflow end to end with --quick (slow: several trainings each)."""

import json

import pytest

from regression import workflows


def test_steps_to_is_the_first_evaluation_at_the_threshold():
    results = [{"step": 50, "accuracy": 0.5}, {"step": 100, "accuracy": 0.91},
               {"step": 150, "accuracy": 0.89}, {"step": 200}]
    assert workflows.steps_to(results, "accuracy", 0.9) == 100
    assert workflows.steps_to(results, "accuracy", 0.95) is None
    assert workflows.steps_to(results, "a/accuracy", 0.1) is None


def test_an_unknown_workflow_is_refused(capsys):
    with pytest.raises(SystemExit):
        workflows.main(["distilation"])
    assert "invalid choice: 'distilation'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("name", workflows.WORKFLOWS)
def test_each_workflow_runs_end_to_end(name, tmp_path, capsys):
    assert workflows.main([name, "--quick", "--output", str(tmp_path)]) == 0
    report = json.load(open(tmp_path / name / "report.json"))
    assert report["rows"] and all(len(row) == len(report["header"]) for row in report["rows"])
    for run, evaluations in report["evaluations"].items():
        assert evaluations[-1]["step"] == workflows.Settings.quick().steps, run
    numbers = [v for row in report["values"] for v in row.values() if isinstance(v, float)]
    assert numbers and all(0.0 <= v <= 100.0 for v in numbers)
    assert f"{name} (" in capsys.readouterr().out
