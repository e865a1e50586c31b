"""Tests of t2t.utils.step_files: files named after a step, listed and followed (with a
fake clock: no real waiting)."""

from __future__ import annotations

import os

from t2t.utils import step_files
from t2t.utils.step_files import StepFile


def _touch(path, mtime=None):
    with open(path, "w", encoding="utf-8") as f:
        f.write("x\n")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_step_of_and_prefix():
    assert step_files.step_of("/run/ckpt-800") == 800
    assert step_files.step_of("translate_ende_wmt32k-12") == 12
    assert step_files.step_of("model.ckpt-3") == 3
    for name in ("ckpt-800.partial", "ckpt-800.index", "ckpt", "-5", "ckpt-", "ckpt-1a"):
        assert step_files.step_of(name) is None, name
    assert StepFile("/t/translate_ende-800", 800, 0.0).prefix == "translate_ende"


def test_list_step_files_skips_partials_folders_and_early_steps(tmp_path):
    for name, mtime in (("p-20", 1000.0), ("p-3", 2000.0), ("p-100", 3000.0)):
        _touch(tmp_path / name, mtime)
    for name in ("p-7.partial", "p-7.partial.json", "p-flags.txt", "notes"):
        _touch(tmp_path / name)
    os.mkdir(tmp_path / "events-5")  # a folder is no step file
    found = step_files.list_step_files(str(tmp_path))
    assert [(os.path.basename(f.path), f.step, f.mtime) for f in found] == [
        ("p-3", 3, 2000.0), ("p-20", 20, 1000.0), ("p-100", 100, 3000.0)]
    assert [f.step for f in step_files.list_step_files(str(tmp_path), min_step=20)] == [20, 100]
    assert step_files.list_step_files(str(tmp_path / "missing")) == []


def test_list_checkpoints_unites_the_state_file_and_the_files_present(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for step, mtime in ((200, 1200.0), (400, 1400.0), (600, 1600.0)):
        _touch(run / f"ckpt-{step}.index", mtime)
        _touch(run / f"ckpt-{step}.data-00000-of-00001")
    # The state lists 200 (its file present), 300 (removed since) and an absolute 600;
    # 400 is on disk only; best/ holds another folder's checkpoints.
    (run / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-600"\n'
        'all_model_checkpoint_paths: "ckpt-200"\n'
        'all_model_checkpoint_paths: "ckpt-300"\n'
        f'all_model_checkpoint_paths: "{run}/ckpt-600"\n')
    (run / "best").mkdir()
    _touch(run / "best" / "ckpt-500.index")
    found = step_files.list_checkpoints(str(run))
    assert [(f.path, f.step, f.mtime) for f in found] == [
        (str(run / "ckpt-200"), 200, 1200.0), (str(run / "ckpt-400"), 400, 1400.0),
        (str(run / "ckpt-600"), 600, 1600.0)]
    assert [f.step for f in step_files.list_checkpoints(str(run), min_step=300)] == [400, 600]
    # Without a state file the files present are the checkpoints.
    os.remove(run / "checkpoint")
    assert [f.step for f in step_files.list_checkpoints(str(run))] == [200, 400, 600]
    assert step_files.list_checkpoints(str(tmp_path / "empty")) == []


class _FakeTime:
    """A clock that advances only when slept, running `events` {time: action} then."""

    def __init__(self, events=None):
        self.now, self.sleeps, self.events = 0.0, [], dict(events or {})

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        for when in sorted(self.events):
            if when <= self.now:
                self.events.pop(when)()

    def clock(self):
        return self.now


def test_follow_gives_each_step_once_then_waits_for_new_ones():
    files = [StepFile("a-1", 1, 0.0), StepFile("a-2", 2, 0.0)]
    fake = _FakeTime({25.0: lambda: files.append(StepFile("a-3", 3, 0.0)),
                      40.0: lambda: files.insert(0, StepFile("a-0", 0, 0.0))})
    given = []
    for found in step_files.follow(lambda: list(files), wait_minutes=1.0, poll_seconds=10.0,
                                   sleep=fake.sleep, clock=fake.clock):
        given.append(found.step)
    # a-3 came at 25 s (seen at 30 s); a-0 is older than what was given: never given;
    # then a whole minute without a new file ends it.
    assert given == [1, 2, 3]
    assert fake.now == 90.0 and fake.sleeps == [10.0] * 9


def test_follow_stops_at_the_last_step_and_does_not_wait_by_default():
    files = [StepFile("a-5", 5, 0.0), StepFile("a-10", 10, 0.0), StepFile("a-15", 15, 0.0)]
    fake = _FakeTime()
    steps = [f.step for f in step_files.follow(lambda: files, 5.0, stop_step=10,
                                               sleep=fake.sleep, clock=fake.clock)]
    assert steps == [5, 10] and fake.sleeps == []
    steps = [f.step for f in step_files.follow(lambda: files, sleep=fake.sleep,
                                               clock=fake.clock)]
    assert steps == [5, 10, 15] and fake.sleeps == []
    # Waiting with poll_seconds longer than what is left sleeps only what is left.
    fake = _FakeTime()
    assert list(step_files.follow(lambda: [], 0.5, poll_seconds=100.0, sleep=fake.sleep,
                                  clock=fake.clock)) == []
    assert fake.sleeps == [30.0]
