"""Tests of regression/checkpoint_portability.py with a fake command runner: which
commands run under which version's Python, and how their results become verdicts."""

from __future__ import annotations

import json
import os

from regression import checkpoint_portability as cp


class FakeRunner:
    """Plays t2t-datagen/-trainer/-decoder: records (python, tool, output_dir) and writes
    eval_results.jsonl with the loss `losses[python]`; `fail` names "python tool" pairs
    that exit 1 after logging an error."""

    def __init__(self, losses, fail=()):
        self.losses, self.fail, self.calls = losses, set(fail), []

    def __call__(self, command, log_path, cwd, env):
        python, tool = command[0], command[2].rsplit(".", 1)[-1]
        flags = dict(a[2:].split("=", 1) for a in command[3:] if "=" in a)
        self.calls.append((python, tool, os.path.basename(flags.get("output_dir", ""))))
        with open(log_path, "a") as log:
            if f"{python} {tool}" in self.fail:
                log.write("Traceback (most recent call last):\nValueError: bad checkpoint\n")
                return 1
        if tool == "t2t_datagen":
            os.makedirs(flags["data_dir"])
        elif tool == "t2t_trainer":
            os.makedirs(flags["output_dir"], exist_ok=True)
            with open(os.path.join(flags["output_dir"], "eval_results.jsonl"), "a") as f:
                f.write(json.dumps({"step": 20, "loss": self.losses[python]}) + "\n")
        return 0


PYTHONS = {"2.19": "py19", "2.20": "py20"}


def _run(tmp_path, runner, writers=("2.19", "2.20")):
    said = []
    loads = cp.portability(PYTHONS, list(writers), str(tmp_path), str(tmp_path),
                           {v: {} for v in PYTHONS}, runner, say=said.append)
    return loads, said


def test_each_version_loads_the_others_checkpoint(tmp_path):
    runner = FakeRunner({"py19": 1.5, "py20": 1.5})
    loads, said = _run(tmp_path, runner)
    assert [(x.writer, x.reader, x.ok, x.loss) for x in loads] == [
        ("2.19", "2.20", True, 1.5), ("2.20", "2.19", True, 1.5)]
    # Data once; each writer trains, each reader evaluates and decodes a copy of the run.
    assert runner.calls == [
        ("py19", "t2t_datagen", ""), ("py19", "t2t_trainer", "written-by-tf-2.19"),
        ("py20", "t2t_trainer", "tf-2.19-read-by-tf-2.20"),
        ("py20", "t2t_decoder", "tf-2.19-read-by-tf-2.20"),
        ("py20", "t2t_trainer", "written-by-tf-2.20"),
        ("py19", "t2t_trainer", "tf-2.20-read-by-tf-2.19"),
        ("py19", "t2t_decoder", "tf-2.20-read-by-tf-2.19")]
    assert "[portability] tf-2.19 -> tf-2.20: ok" in said
    assert cp.table_text(loads) == "tf-2.19 -> tf-2.20 ok; tf-2.20 -> tf-2.19 ok"
    # The writer's own run is untouched: the reader evaluated a copy.
    lines = (tmp_path / "written-by-tf-2.19" / "eval_results.jsonl").read_text().splitlines()
    assert len(lines) == 1


def test_a_different_eval_loss_or_a_failing_decoder_is_a_failed_load(tmp_path):
    loads, _ = _run(tmp_path, FakeRunner({"py19": 1.5, "py20": 1.7}, fail={"py19 t2t_decoder"}))
    first, second = loads
    assert not first.ok and "eval loss 1.700000 under tf-2.20 differs from 1.500000" in first.error
    assert not second.ok and second.error.startswith("t2t-decoder exited with 1: ")
    assert "ValueError: bad checkpoint" in second.error


def test_a_writer_that_cannot_train_fails_every_load_of_it(tmp_path):
    loads, said = _run(tmp_path, FakeRunner({"py19": 1.5, "py20": 1.5},
                                            fail={"py19 t2t_trainer"}), writers=["2.19"])
    assert [(x.writer, x.reader, x.ok) for x in loads] == [("2.19", "2.20", False)]
    assert loads[0].error.startswith("writer failed: t2t-trainer exited with 1")
    assert "could not write a checkpoint" in said[0]
    assert cp.as_dicts(loads)[0]["reader"] == "2.20"


def test_log_tail_prefers_error_lines(tmp_path):
    log = tmp_path / "log"
    log.write_text("a\nb\nKeyError: x\nc\n")
    assert cp.log_tail(str(log)) == "KeyError: x"
    log.write_text("a\nb\nc\nd\n")
    assert cp.log_tail(str(log)) == "b\nc\nd"
    assert cp.log_tail(str(tmp_path / "none")) == ""
