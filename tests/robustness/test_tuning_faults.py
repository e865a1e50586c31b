"""Injected faults in tuning: a trial's trainer SIGKILLed while the tuner runs, and the
tuner itself SIGKILLed and started again.

* A trainer killed on its own (the OOM killer, a stray kill) is started again in its
  trial directory, resuming from its latest checkpoint: the same trial completes, with
  every evaluation step reported; none is lost, none run twice. Killed every time, the
  trial fails naming the signal, and is not re-run (fast, with tests/tuning's fake
  trainer).
* With real trainings (slow): trial 0's trainer is killed mid-run and resumed, then the
  tuner is killed while trial 1 trains (its trainer dies with it); the re-run tuner
  re-runs trial 1's parameters once, as trial 2, and the study's best is the best of the
  completed trials' own eval_results.jsonl.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from t2t.hparams.ranged import RangedHParams
from t2t.tuning import study as study_lib
from tests.robustness import support
from tests.robustness.support import PROBLEM

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(TESTS, "tuning", "fake_trainer.py")
TUNER = os.path.join(os.path.dirname(sys.executable), "t2t-tuner")
TIMEOUT_S = 600


def _wait_for(predicate, seconds: float = 120) -> bool:
    return support.wait_for(predicate, seconds)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended
    except OSError:
        return False


def _evals(trial_dir: str) -> list[dict]:
    path = os.path.join(trial_dir, "eval_results.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f.read().split("\n")[:-1] if line]


# ---------------------------------------------------------- fast: a fake trainer
def _fake_config(tmp_path, **overrides) -> study_lib.TunerConfig:
    values = dict(output_dir=str(tmp_path / "tune"), hparams_range="fake_range",
                  objective="score", hparams_set="fake_set", trainer_args=["--train_steps=6"],
                  num_trials=2, parallel_trials=1, sampler="random", study_name="fake",
                  heartbeat_seconds=5, poll_seconds=0.05, pruning=False,
                  trainer_command=[sys.executable, FAKE])
    values.update(overrides)
    return study_lib.TunerConfig(**values)


def _fake_ranges() -> RangedHParams:
    rhp = RangedHParams()
    rhp.set_float("x", 0.0, 1.0)
    return rhp


def _kill_fake_trainer(trial_dir: str, after_lines: int, killed: set[int]) -> int:
    """SIGKILLs the fake trainer running in `trial_dir` once it wrote `after_lines`
    evaluations; returns its pid. `killed`: pids of earlier kills (a new one is awaited)."""
    received = os.path.join(trial_dir, "received.json")

    def running() -> int | None:
        try:
            with open(received) as f:
                pid = json.load(f)["pid"]
        except (OSError, ValueError):
            return None
        return pid if pid not in killed else None

    assert _wait_for(lambda: running() is not None)
    pid = running()
    # The fake trainer starts from step 1 each time: wait for its own new lines.
    base = len(_evals(trial_dir))
    assert _wait_for(lambda: len(_evals(trial_dir)) >= base + after_lines or not _alive(pid))
    os.kill(pid, signal.SIGKILL)
    killed.add(pid)
    return pid


def _run_in_thread(config, rhp):
    result: dict = {}

    def target():
        try:
            result["study"], result["completed"] = study_lib.run_study(config, rhp)
        except Exception as e:  # noqa: BLE001 - handed to the test
            result["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def test_killed_trial_trainer_resumes_the_same_trial(robustness, tmp_path, capfd,
                                                     monkeypatch):
    monkeypatch.setenv("FAKE_DELAY", "0.15")
    config = _fake_config(tmp_path)
    thread, result = _run_in_thread(config, _fake_ranges())
    trial_dir = os.path.join(config.output_dir, "trial_0")
    robustness.fault("SIGKILL a trial's trainer (t2t-tuner running)")
    _kill_fake_trainer(trial_dir, 2, set())
    thread.join(TIMEOUT_S)
    assert not thread.is_alive() and "error" not in result, result
    out = capfd.readouterr().out
    resumed = re.search(r"trial 0: its trainer was killed \(SIGKILL\) after step (\d+); "
                        r"resuming it", out)
    assert resumed and int(resumed[1]) >= 2, out  # killed after 2 evaluations
    study = result["study"]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2, trials  # none lost or added
    assert sorted(trials[0].intermediate_values) == [1, 2, 3, 4, 5, 6]  # every step, once
    values = [_evals(os.path.join(config.output_dir, f"trial_{t.number}"))[-1]["score"]
              for t in trials]
    assert [t.value for t in trials] == values
    assert study.best_value == max(values)
    assert trials[0].params != trials[1].params
    robustness.data_lost(6 - len(trials[0].intermediate_values), "evaluation steps")
    robustness.run_completed("t2t-tuner: trial 0 completed after its trainer was killed")


def test_trainer_killed_every_time_fails_the_trial_once(robustness, tmp_path, capfd,
                                                        monkeypatch):
    monkeypatch.setenv("FAKE_DELAY", "0.15")
    config = _fake_config(tmp_path, num_trials=1)
    thread, result = _run_in_thread(config, _fake_ranges())
    trial_dir = os.path.join(config.output_dir, "trial_0")
    robustness.fault("SIGKILL a trial's trainer at every restart (as an OOM killer would)")
    killed: set[int] = set()
    for _ in range(study_lib.TRAINER_RESTARTS + 1):
        _kill_fake_trainer(trial_dir, 1, killed)
    thread.join(TIMEOUT_S)
    assert not thread.is_alive() and "error" not in result, result
    trials = result["study"].get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL]  # counted, not re-run
    error = trials[0].user_attrs["error"]
    assert error.startswith("trainer was killed by SIGKILL") and "3 times" in error, error
    out = capfd.readouterr().out
    assert out.count("resuming it from its latest checkpoint") == study_lib.TRAINER_RESTARTS
    assert "trial 0: FAILED (trainer was killed by SIGKILL" in out, out
    robustness.run_completed("t2t-tuner: a trial killed 3 times failed with the signal named")


_DRIVER = """
import sys
from t2t.hparams.ranged import RangedHParams
from t2t.tuning import study as study_lib
config = study_lib.TunerConfig(**{config!r})
rhp = RangedHParams()
rhp.set_float("x", 0.0, 1.0)
study_lib.run_study(config, rhp)
"""


def _driver(config: study_lib.TunerConfig) -> list[str]:
    import dataclasses

    return [sys.executable, "-c", _DRIVER.format(config=dataclasses.asdict(config))]


def test_stalled_tuner_keeps_its_trial(robustness, tmp_path):
    """A tuner stopped (SIGSTOP) past its heartbeats' grace while a second tuner works on
    the study: its trial is late, not dead, so it is neither failed nor run again (the
    race that gave 6 trials for 5 on a loaded machine)."""
    config = _fake_config(tmp_path, num_trials=3, heartbeat_seconds=1, poll_seconds=0.1)
    env = dict(os.environ, FAKE_DELAY="1.5", PYTHONUNBUFFERED="1")
    first = subprocess.Popen(_driver(config), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    second = None
    try:
        assert _wait_for(lambda: os.path.exists(os.path.join(config.output_dir, "trial_0",
                                                             "received.json")))
        robustness.fault("SIGSTOP a tuner for longer than its heartbeat grace (3 s)")
        first.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        second = subprocess.Popen(_driver(config), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in second.stdout:  # its second trial starts after the grace has passed
            lines.append(line)
            if line.startswith("trial 2: started"):
                break
        assert time.monotonic() - stopped > 3 * config.heartbeat_seconds + 1, lines
        first.send_signal(signal.SIGCONT)
        outputs = [first.communicate(timeout=TIMEOUT_S)[0],
                   "".join(lines) + second.communicate(timeout=TIMEOUT_S)[0]]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    assert [first.returncode, second.returncode] == [0, 0], outputs
    trials = optuna.load_study(study_name="fake", storage=config.storage_url()).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3, (trials, outputs)
    assert not any("retry_of" in t.user_attrs for t in trials), outputs
    assert len({t.params["x"] for t in trials}) == 3
    robustness.run_completed("t2t-tuner: 3 trials, none re-run, past a tuner stalled 4 s+")


# ------------------------------------------------------- slow: real trainings
RANGES = '''
from t2t import registry


@registry.register_ranged_hparams
def robustness_tuning_range(rhp):
    rhp.set_float("learning_rate_constant", 0.05, 5.0, scale=rhp.LOG_SCALE)
'''
STEPS, EVERY = 8, 2


def _tuner_args(tmp_path, data_dir) -> list[str]:
    return [TUNER, f"--t2t_usr_dir={tmp_path / 'ranges.py'}", f"--problem={PROBLEM}",
            "--model=transformer", "--hparams_set=transformer_test",
            "--hparams=batch_size=128,num_hidden_layers=1",
            "--hparams_range=robustness_tuning_range", "--objective=accuracy",
            f"--train_steps={STEPS}", f"--local_eval_frequency={EVERY}",
            f"--save_checkpoints_steps={EVERY}", "--eval_steps=1", "--num_trials=2",
            "--parallel_trials=1", "--heartbeat_seconds=3", "--sampler=random", "--nopruning",
            f"--data_dir={data_dir}", f"--output_dir={tmp_path / 'tune'}"]


def _trainer_pids(tuner_pid: int) -> list[int]:
    """The trainers a tuner runs: its children (started by its worker threads)."""
    pids = []
    for task in os.listdir(f"/proc/{tuner_pid}/task"):
        try:
            with open(f"/proc/{tuner_pid}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return [p for p in pids if _alive(p)]


def _output(path) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.slow
def test_trainer_and_tuner_killed_with_real_trainings(robustness, tmp_path, data_dir):
    (tmp_path / "ranges.py").write_text(RANGES)
    tune = tmp_path / "tune"
    args = _tuner_args(tmp_path, data_dir)
    log_path = tmp_path / "tuner_1.log"
    with open(log_path, "w") as log:
        tuner = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        # 1. trial 0's trainer, after its first evaluation (and checkpoint)
        assert _wait_for(lambda: _evals(str(tune / "trial_0")) or tuner.poll() is not None,
                         TIMEOUT_S), _output(log_path)
        (trainer,) = _trainer_pids(tuner.pid)
        robustness.fault("SIGKILL a real trial's t2t-trainer mid-run (t2t-tuner running)")
        os.kill(trainer, signal.SIGKILL)
        # 2. the tuner, while trial 1 trains
        assert _wait_for(lambda: _evals(str(tune / "trial_1")) or tuner.poll() is not None,
                         TIMEOUT_S), _output(log_path)
        trainers = _trainer_pids(tuner.pid)
        robustness.fault("SIGKILL t2t-tuner while a trial trains, then re-run it")
        tuner.send_signal(signal.SIGKILL)
        tuner.wait()
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.wait()
    first = _output(log_path)
    assert "trial 0: its trainer was killed (SIGKILL)" in first, first
    assert "Resumed from ckpt-" in _output(tune / "trial_0" / "trial.log")
    assert trainers and _wait_for(lambda: not any(_alive(p) for p in trainers), 30), \
        "trial 1's trainer outlived the killed tuner"

    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    name = f"{PROBLEM}-transformer-transformer_test-robustness_tuning_range-accuracy"
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{tune}/study.db")
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL,
                                         TrialState.COMPLETE], (trials, result.stdout)
    assert study_lib.is_interrupted(trials[1])
    assert trials[2].user_attrs["retry_of"] == 1 and trials[2].params == trials[1].params
    assert trials[0].params != trials[2].params  # no parameters completed twice
    steps = list(range(EVERY, STEPS + 1, EVERY))
    for t in (trials[0], trials[2]):
        evals = _evals(str(tune / f"trial_{t.number}"))
        assert sorted(t.intermediate_values) == steps, t.intermediate_values
        assert t.value == evals[-1]["accuracy"] and evals[-1]["step"] == STEPS
        robustness.data_lost(len(set(steps) - {e["step"] for e in evals}), "evaluation steps")
    assert study.best_value == max(trials[0].value, trials[2].value)
    best = json.loads((tune / "best_hparams.json").read_text())
    assert best["trial"] == study.best_trial.number, best
    robustness.run_completed("t2t-tuner: 2 trials completed past a killed trainer and a "
                             "killed tuner")
