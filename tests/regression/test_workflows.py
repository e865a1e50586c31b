"""The README's research workflows (regression/workflows.py): the step counting in CI,
each workflow end to end with --quick, and an interrupted back-translation resumed (slow:
several trainings each)."""

import json
import os
import signal
import subprocess
import time

import pytest

from regression import tools, workflows


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
    quick = workflows.Settings.quick()
    for run, evaluations in report["evaluations"].items():
        if name == "translation_loop":  # early-stopped: at most its steps
            assert evaluations[-1]["step"] <= quick.translation_steps, run
            assert "bleu" in evaluations[-1]
        else:
            assert evaluations[-1]["step"] == quick.steps, run
    numbers = [v for row in report["values"] for v in row.values() if isinstance(v, float)]
    assert numbers and all(0.0 <= v <= 100.0 for v in numbers)
    assert f"{name} (" in capsys.readouterr().out


@pytest.mark.slow  # a short training and three decodes of 3,000 lines (~3 min on 2 cores)
def test_an_interrupted_back_translation_resumes_without_duplicating_lines(tmp_path):
    """The back-translation step (the reverse model decoding monolingual targets into
    synthetic sources) SIGKILLed after its first progress record, then run again as the
    workflow runs it: it continues, and the synthetic sources equal an uninterrupted
    decode line for line (none missing, none twice)."""
    settings = workflows.Settings(steps=40, eval_every=40, monolingual_lines=3000)
    with open(tmp_path / "log.txt", "w", encoding="utf-8") as log:
        flow = workflows.Workflow("backtranslation", str(tmp_path), settings, log)
        flow.train("reverse_model", f"{workflows.REVERSE}_rev")
        mono = workflows.monolingual_targets(flow)
        target = os.path.join(flow.tmp_dir, "backtranslated.inputs")
        command = [*tools.tool_command("t2t-decoder"),
                   *flow.decode_args("reverse_model", mono, target)]
        record = target + ".partial.json"
        with open(tmp_path / "killed.log", "w") as killed_log:
            proc = subprocess.Popen(command, stdout=killed_log, stderr=subprocess.STDOUT)
            deadline, done = time.monotonic() + 600, 0
            while proc.poll() is None and time.monotonic() < deadline and not done:
                time.sleep(0.05)
                try:
                    done = json.loads(open(record).read())["lines"]
                except (OSError, ValueError, KeyError):
                    pass
            proc.kill()
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
        assert 0 < done < 3000 and not os.path.exists(target), done

        flow.decode("reverse_model", mono, target)  # the workflow's own step, run again
        reference = os.path.join(flow.tmp_dir, "uninterrupted.inputs")
        flow.decode("reverse_model", mono, reference)
    text = (tmp_path / "log.txt").read_text()
    assert f"Resuming the unfinished decode in {target}.partial after line {done}" in text
    got, want = open(target).read().splitlines(), open(reference).read().splitlines()
    assert len(want) == 3000 and got == want
    assert not os.path.exists(target + ".partial") and not os.path.exists(record)
