"""The tuner's study loop with a fake trainer (no TensorFlow): pruning, crashes, a missing
objective, interrupted trials re-run after a dead tuner, SIGKILL and resume, the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from t2t.hparams.ranged import RangedHParams
from t2t.tuning import report, search_space
from t2t.tuning import study as study_lib

FAKE = os.path.join(os.path.dirname(__file__), "fake_trainer.py")


def fake_ranges() -> RangedHParams:
    rhp = RangedHParams()
    rhp.set_float("x", 0.0, 1.0)
    rhp.set_int("layers", 1, 3)
    rhp.set_float("beta", 0.9, 0.999, scale=rhp.REVERSE_LOG_SCALE)
    rhp.set_categorical("mode", ["ok", "crash"])
    return rhp


def fake_config(tmp_path, **overrides) -> study_lib.TunerConfig:
    values = dict(output_dir=str(tmp_path / "tune"), hparams_range="fake_range",
                  objective="score", hparams_set="fake_set", trainer_args=["--train_steps=3"],
                  hparams="extra=1,x=5", num_trials=3, parallel_trials=1, sampler="random",
                  study_name="fake", heartbeat_seconds=1, poll_seconds=0.1,
                  trainer_command=[sys.executable, FAKE])
    values.update(overrides)
    return study_lib.TunerConfig(**values)


def enqueue(config, rhp, *configurations):
    study = study_lib.open_study(config)
    for values in configurations:
        study.enqueue_trial(search_space.to_params(rhp, values))
    return study


OK = {"layers": 1, "beta": 0.99, "mode": "ok"}


def test_trials_pruning_crash_and_report(tmp_path, capsys):
    rhp = fake_ranges()
    config = fake_config(tmp_path, num_trials=4, pruning_startup_trials=2)
    study_lib._claim_output_dir(config)
    enqueue(config, rhp, {**OK, "x": 0.3}, {**OK, "x": 0.35}, {**OK, "x": 0.95},
            {**OK, "x": 0.3, "mode": "crash"})
    study, completed = study_lib.run_study(config, rhp)
    assert completed
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE,
                                        TrialState.PRUNED, TrialState.FAIL]
    assert trials[0].value == pytest.approx(1.01)
    assert trials[2].last_step == 1  # stopped at its first evaluation
    error = trials[3].user_attrs["error"]
    assert "exited with status 3" in error and "boom: mode=crash" in error
    trial_dir = tmp_path / "tune" / "trial_3"
    assert "boom" in (trial_dir / "trial.log").read_text()
    # The user's overrides reach the trainer; the trial's own x wins over theirs.
    received = json.loads((tmp_path / "tune" / "trial_0" / "received.json").read_text())
    assert received["hparams"]["extra"] == "1" and received["hparams"]["x"] == "0.3"
    assert received["hparams"]["beta"] == "0.99"
    assert "--train_steps=3" in received["argv"]

    text = report.write_report(study, rhp, config.output_dir, config.hparams)
    out = tmp_path / "tune"
    tsv = (out / "trials.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["trial", "state", "score", "seconds", "x", "layers", "beta",
                                  "mode", "note"]
    assert tsv[3].split("\t")[1] == "PRUNED" and "pruned at step 1" in tsv[3]
    assert tsv[4].split("\t")[1] == "FAIL" and "boom" in tsv[4]
    assert (out / "best_hparams.txt").read_text().strip() == (
        "extra=1,x=0.3,layers=1,beta=0.99,mode=ok")
    best = json.loads((out / "best_hparams.json").read_text())
    assert best["trial"] == 0 and best["hparams"]["x"] == 0.3 and best["objective"] == "score"
    assert (out / "objective.png").stat().st_size > 1000
    assert "importance.png skipped: 1 parameter(s) vary" in text
    assert "Best: trial 0, score = 1.01" in text


def test_importance_plot_and_table_format(tmp_path):
    rhp = fake_ranges()
    config = fake_config(tmp_path, num_trials=5, pruning=False, seed=3)
    study_lib._claim_output_dir(config)
    enqueue(config, rhp, *({**OK, "x": x, "layers": n} for x, n in
                           ((0.1, 1), (0.3, 3), (0.6, 2), (0.9, 1), (0.5, 3))))
    study, _ = study_lib.run_study(config, rhp)
    text = report.write_report(study, rhp, config.output_dir)
    assert (tmp_path / "tune" / "importance.png").stat().st_size > 1000, text
    header, rows = report.trial_rows(study, rhp)
    assert len(rows) == 5 and all(r[1] == "COMPLETE" for r in rows)
    assert report.format_table(header, rows).splitlines()[0].split() == header


def test_missing_objective_stops_with_the_reported_metrics(tmp_path):
    config = fake_config(tmp_path, objective="bleu", num_trials=2)
    with pytest.raises(study_lib.TunerError, match="'bleu' is not a metric this run reports; "
                       "it reports: loss, score"):
        study_lib.run_study(config, fake_ranges())


def test_dead_tuners_trial_is_failed_and_rerun_once(tmp_path):
    """A RUNNING trial whose tuner died (no heartbeat) is marked FAIL (interrupted), not
    counted, and its parameters run again as a new trial."""
    rhp = fake_ranges()
    config = fake_config(tmp_path, num_trials=2)
    study_lib._claim_output_dir(config)
    storage = study_lib.make_storage(config)
    study = study_lib.open_study(config, storage)
    study.enqueue_trial(search_space.to_params(rhp, {**OK, "x": 0.7}))
    orphan = study.ask()
    storage.record_heartbeat(orphan._trial_id)
    search_space.suggest(orphan, rhp)
    study, completed = study_lib.run_study(config, rhp)
    trials = study.get_trials()
    assert completed and len(trials) == 3
    assert trials[0].state == TrialState.FAIL and study_lib.is_interrupted(trials[0])
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE, TrialState.COMPLETE]
    retry = trials[2]  # trial 1 started while trial 0 still looked alive
    assert retry.user_attrs["retry_of"] == 0 and retry.params == trials[0].params
    header, rows = report.trial_rows(study, rhp)
    assert rows[0][1] == "FAIL(interrupted)" and "re-run as 2" in rows[0][-1]
    assert "re-run of 0" in rows[2][-1]


def test_config_errors(tmp_path):
    rhp = fake_ranges()
    with pytest.raises(study_lib.TunerError, match="--sampler='grid'"):
        study_lib.run_study(fake_config(tmp_path, sampler="grid"), rhp)
    with pytest.raises(study_lib.TunerError, match="--num_trials"):
        study_lib.run_study(fake_config(tmp_path, num_trials=0), rhp)
    study_lib.open_study(fake_config(tmp_path))
    with pytest.raises(study_lib.TunerError, match="started with objective='score', not 'loss'"):
        study_lib.open_study(fake_config(tmp_path, objective="loss"))
    with pytest.raises(study_lib.TunerError, match="drop --minimize"):
        study_lib.open_study(fake_config(tmp_path, direction="minimize"))
    study_lib._claim_output_dir(fake_config(tmp_path))
    with pytest.raises(study_lib.TunerError, match="holds the trials of study 'fake'"):
        study_lib._claim_output_dir(fake_config(tmp_path, study_name="other"))
    with pytest.raises(study_lib.TunerError, match="cannot open --storage='nosuchdb://x'"):
        study_lib.make_storage(fake_config(tmp_path, storage="nosuchdb://x"))
    categorical = RangedHParams()
    categorical.set_categorical("mode", ["a", "b"])
    with pytest.raises(study_lib.TunerError, match="cmaes"):
        study_lib.check_sampler(fake_config(tmp_path, sampler="cmaes"), categorical)


_DRIVER = """
import sys
sys.path.insert(0, {tests!r})
from test_study import fake_config, fake_ranges
from pathlib import Path
from t2t.tuning import study as study_lib
config = fake_config(Path({tmp!r}), num_trials=4, parallel_trials=2, pruning=False)
study_lib.run_study(config, fake_ranges())
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead too
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and prctl")
def test_sigkilled_tuner_resumes_without_repeating_trials(tmp_path):
    """SIGKILL the tuner mid-trial: its trainers die with it; re-running finishes the
    study at exactly num_trials, re-running only the interrupted trials."""
    driver = _DRIVER.format(tests=os.path.dirname(__file__), tmp=str(tmp_path))
    env = dict(os.environ, FAKE_DELAY="0.5")
    rhp = fake_ranges()
    config = fake_config(tmp_path, num_trials=4)
    study_lib._claim_output_dir(config)
    enqueue(config, rhp, *({**OK, "x": x} for x in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)))
    proc = subprocess.Popen([sys.executable, "-c", driver], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:  # kill once a trial finished and two others are running
        if line.startswith("trial 2: started"):
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    study = optuna.load_study(study_name="fake", storage=config.storage_url())
    before = {t.number: t for t in study.get_trials() if t.state == TrialState.COMPLETE}
    running = [t.number for t in study.get_trials() if t.state == TrialState.RUNNING]
    assert len(before) >= 1 and len(running) == 2
    pids = []
    for number in running:
        received = tmp_path / "tune" / f"trial_{number}" / "received.json"
        if received.exists():
            pids.append(json.loads(received.read_text())["pid"])
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids and not any(_alive(p) for p in pids), "trainers outlived the killed tuner"

    result = subprocess.run([sys.executable, "-c", driver], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    trials = study.get_trials()
    finished = [t for t in trials if study_lib.counts_as_finished(t)]
    interrupted = [t for t in trials if study_lib.is_interrupted(t)]
    assert len(finished) == 4 and sorted(t.number for t in interrupted) == running
    for t in before.values():  # finished trials are kept as they were
        assert trials[t.number].datetime_complete == t.datetime_complete
    retried = sorted(t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs)
    assert retried == sorted(t.number for t in interrupted)
    xs = [t.params["x"] for t in finished]
    assert len(set(xs)) == 4  # no configuration ran twice to completion


def test_two_processes_from_scratch_stop_at_exactly_num_trials(tmp_path):
    """Two tuners creating the same study at once, 2 trials at a time each: 5 trials."""
    driver = _DRIVER.format(tests=os.path.dirname(__file__), tmp=str(tmp_path)).replace(
        "num_trials=4", "num_trials=5")
    env = dict(os.environ, FAKE_DELAY="0.2")
    procs = [subprocess.Popen([sys.executable, "-c", driver], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    study = optuna.load_study(study_name="fake",
                              storage=fake_config(tmp_path).storage_url())
    trials = study.get_trials()
    assert [t.number for t in trials] == [0, 1, 2, 3, 4]
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)
    assert not any(study_lib.is_interrupted(t) for t in trials)
    assert len({t.user_attrs["pid"] for t in trials}) == 2
    assert sorted(p.name for p in (tmp_path / "tune").iterdir() if p.is_dir()) == [
        f"trial_{n}" for n in range(5)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_interrupts_and_requeues_running_trials(tmp_path, signum):
    driver = _DRIVER.format(tests=os.path.dirname(__file__), tmp=str(tmp_path)).replace(
        "study_lib.run_study(config, fake_ranges())",
        "print('completed', study_lib.run_study(config, fake_ranges())[1], flush=True)")
    rhp = fake_ranges()
    config = fake_config(tmp_path)
    study_lib._claim_output_dir(config)
    enqueue(config, rhp, {**OK, "x": 0.1}, {**OK, "x": 0.2})
    # A shell starts background jobs with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the tuner Ctrl-C as a terminal would.
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env=dict(os.environ, FAKE_DELAY="10"))  # trials outlast the signal on a slow machine
    for line in proc.stdout:
        if line.startswith("trial 1: started"):
            break
    time.sleep(0.5)
    proc.send_signal(signum)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0 and "completed False" in rest, rest
    trials = optuna.load_study(study_name="fake", storage=config.storage_url()).get_trials()
    assert [t.state for t in trials[:2]] == [TrialState.FAIL, TrialState.FAIL]
    assert all(t.user_attrs["interrupted"] for t in trials[:2])
    assert sorted(t.user_attrs["retry_of"] for t in trials[2:]) == [0, 1], (rest, trials)
    assert all(t.state == TrialState.WAITING for t in trials[2:])


def test_tuner_stops_when_every_trial_crashes(tmp_path):
    """A setup error crashes every trial: the tuner stops after 3 instead of running all."""
    rhp = fake_ranges()
    config = fake_config(tmp_path, num_trials=6)
    study_lib._claim_output_dir(config)
    enqueue(config, rhp, *({**OK, "x": x, "mode": "crash"} for x in (0.1, 0.2, 0.3, 0.4)))
    with pytest.raises(study_lib.TunerError,
                       match="first 3 trials all crashed, the last with: trainer exited with "
                       "status 3: ValueError: boom: mode=crash") as error:
        study_lib.run_study(config, rhp)
    trials = error.value.study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] * 3 + [TrialState.WAITING]


def test_cmaes_sampler_samples_numeric_ranges(tmp_path):
    import optuna

    rhp = RangedHParams()
    rhp.set_float("learning_rate", 0.01, 1.0, scale=rhp.LOG_SCALE)
    rhp.set_int("num_hidden_layers", 1, 4)
    config = fake_config(tmp_path, sampler="cmaes")
    assert study_lib.check_sampler(config, rhp) is None
    sampler = study_lib.make_sampler(config, rhp, seed=0)
    assert isinstance(sampler, optuna.samplers.CmaEsSampler)
    study = optuna.create_study(sampler=sampler, direction="maximize")
    for _ in range(4):  # past CMA-ES's start-up trials, values stay in their ranges
        trial = study.ask()
        lr = trial.suggest_float("learning_rate", 0.01, 1.0, log=True)
        layers = trial.suggest_int("num_hidden_layers", 1, 4)
        assert 0.01 <= lr <= 1.0 and 1 <= layers <= 4
        study.tell(trial, -abs(lr - 0.1))
