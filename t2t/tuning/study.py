"""Runs an Optuna study whose trials are t2t-trainer runs in sub-directories.

Each trial is `python -m t2t.bin.t2t_trainer <trainer flags> --output_dir=OUT/trial_N
--hparams=<user overrides + sampled values>` in its own process, so trials run in
parallel, crash alone, and can be decoded, exported or resumed like any run. While a
trial trains, its eval_results.jsonl is read: every new evaluation is reported to Optuna
(pruning stops a bad trial with SIGTERM); the objective is the metric of the last one.

Resuming and many processes: the study lives in `storage` (SQLite in the output dir by
default; any SQLAlchemy URL Optuna accepts, e.g. PostgreSQL, for many hosts). Trials are
created one at a time under a lock (a file lock for SQLite, an advisory lock for
PostgreSQL and MySQL) after counting the finished and running ones, so any number of
tuner processes stop together at exactly `num_trials` finished trials and never run one
twice. A tuner that dies leaves its trials RUNNING; they stop heart-beating, and after
3 heartbeats (30 s by default) any tuner marks them FAIL ("interrupted": not counted)
and enqueues their parameters again as a new trial, which trains from scratch in its own
directory. A trial whose tuner still runs on this host is never taken for dead, however
late its heartbeats (a loaded machine): only a dead tuner's trials are re-run.
COMPLETE, PRUNED and crashed (FAIL with an "error") trials are never re-run. A trainer killed by a signal while its tuner lives (SIGKILL, the OOM killer) is started
again in its trial directory and resumes from its latest checkpoint: the same trial, up
to TRAINER_RESTARTS times; after that the trial fails with the signal named.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from typing import Any

from t2t.config import SAMPLERS, TunerConfig  # noqa: F401  (TunerConfig re-exported)
from t2t.tuning import search_space, trial_process
from t2t.tuning.trial_process import (
    EVAL_RESULTS_FILE,
    LAUNCHER,
    LOG_FILE,
    drop_partial_line,
    read_evals,
    signal_name,
    tail,
    terminate,
)
from t2t.utils import atomic_files, optional_deps

DEFAULT_STUDY_NAME = "t2t_study"
ALL_CRASH_LIMIT = 3  # crashes, with no trial that trained, that stop the tuner
TRAINER_RESTARTS = 2  # a trial's trainer killed by a signal is resumed this often
_WAIT = object()  # _next_trial: trials are running elsewhere; try again later


class TunerError(Exception):
    """A bad setting or a study that cannot go on; the message says what to change.
    `study` is the study when it had started."""

    def __init__(self, message: str, study: Any = None) -> None:
        super().__init__(message)
        self.study = study


def is_interrupted(trial: Any) -> bool:
    """A FAIL left by a killed or stopped tuner (retried; not counted), not by a crash."""
    from optuna.trial import TrialState

    return trial.state == TrialState.FAIL and "error" not in trial.user_attrs


def counts_as_finished(trial: Any) -> bool:
    from optuna.trial import TrialState

    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and not is_interrupted(trial)


def _retry_interrupted(study: Any, trial: Any) -> None:
    """Heartbeat-stale callback: the trial's parameters go back into the queue."""
    study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})


def _optuna() -> Any:
    """The optuna module (setup.py's extra "tuning"), or MissingDependencyError naming it."""
    return optional_deps.require("optuna", "tuning", "t2t-tuner")


def make_storage(config: TunerConfig) -> Any:
    """An RDBStorage with heartbeats (a dead tuner's trials become stale). Tuners that
    start together may race to create the tables: SQLite ones take turns under the file
    lock, others retry."""
    optuna = _optuna()
    import sqlalchemy.exc

    url = config.storage_url()
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        kwargs = {"connect_args": {"timeout": 120}}
        folder = os.path.dirname(url[len("sqlite:///"):])
        if folder:
            os.makedirs(folder, exist_ok=True)
    for attempt in range(5):
        try:
            with warnings.catch_warnings(), _sqlite_lock(url):
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=kwargs, heartbeat_interval=config.heartbeat_seconds,
                    grace_period=3 * config.heartbeat_seconds,
                    heartbeat_stale_trial_callback=_retry_interrupted,
                )
        except sqlalchemy.exc.DBAPIError as e:  # e.g. another tuner creating the tables
            error: Exception = e
            time.sleep(0.5 * (attempt + 1))
        except Exception as e:  # bad URL, missing driver
            error = e
            break
    raise TunerError(
        f"cannot open --storage={url!r}: {type(error).__name__}: {error}. Give a database "
        f"URL SQLAlchemy understands, e.g. sqlite:////abs/path/study.db or "
        f"postgresql://user:password@host/db (with its driver, e.g. psycopg2)."
    ) from None


def make_sampler(config: TunerConfig, rhp: Any, seed: int) -> Any:
    """The sampler for one trial, seeded with `seed` (the trial's expected number)."""
    optuna = _optuna()

    startup = max(1, min(10, config.num_trials // 3))
    tpe = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)
    if config.sampler == "tpe":
        return tpe
    if config.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.CmaEsSampler(
        seed=seed, n_startup_trials=startup, independent_sampler=tpe,
        warn_independent_sampling=False)


def check_sampler(config: TunerConfig, rhp: Any) -> str | None:
    """Raises TunerError for an unusable sampler; returns a note to print, if any."""
    if config.sampler not in SAMPLERS:
        raise TunerError(f"--sampler={config.sampler!r}: use one of {', '.join(SAMPLERS)}.")
    if config.sampler != "cmaes":
        return None
    try:
        optional_deps.require("cmaes", "tuning", "--sampler=cmaes")
    except optional_deps.MissingDependencyError as e:
        raise TunerError(f"{e} (or use --sampler=tpe).") from None
    numeric = [r.name for r in rhp.ranges() if r.kind in ("float", "int")]
    others = [r.name for r in rhp.ranges() if r.kind not in ("float", "int")]
    if not numeric:
        raise TunerError(f"--sampler=cmaes needs float or int ranges; {config.hparams_range} "
                         f"has only discrete/categorical ones ({', '.join(others)}): use "
                         f"--sampler=tpe.")
    if others:
        return (f"CMA-ES samples {', '.join(numeric)}; the discrete/categorical "
                f"{', '.join(others)} are sampled by TPE.")
    return None


def open_study(config: TunerConfig, storage: Any = None) -> Any:
    """Creates the study, or loads it (checking it tunes the same objective)."""
    optuna = _optuna()

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = storage if storage is not None else make_storage(config)
    if config.direction not in ("maximize", "minimize"):
        raise TunerError(f"direction {config.direction!r}: use maximize or minimize.")
    with _sqlite_lock(config.storage_url()):
        study = optuna.create_study(storage=storage, study_name=config.study_name,
                                    direction=config.direction, load_if_exists=True)
    mine = {"objective": config.objective, "hparams_range": config.hparams_range,
            "hparams_set": config.hparams_set}
    recorded = study.user_attrs
    for key, value in mine.items():
        if key not in recorded:
            study.set_user_attr(key, value)
        elif recorded[key] != value:
            raise TunerError(
                f"study {config.study_name!r} in {config.storage_url()} was started with "
                f"{key}={recorded[key]!r}, not {value!r}: give another --study_name (or "
                f"--output_dir) for a new study, or the same {key} to continue it.")
    if study.direction.name.lower() != config.direction:
        raise TunerError(
            f"study {config.study_name!r} {study.direction.name.lower()}s {config.objective};"
            f" drop --{config.direction} or give another --study_name.")
    return study


def _claim_output_dir(config: TunerConfig, write: bool = True) -> None:
    """Trial directories are numbered per study: one study per output dir (study.json
    names it; `write=False` only checks)."""
    os.makedirs(config.output_dir, exist_ok=True)
    path = os.path.join(config.output_dir, "study.json")
    mine = {"study_name": config.study_name, "storage": config.storage_url()}
    try:
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        recorded = None
    if recorded and recorded.get("study_name") != config.study_name:
        raise TunerError(
            f"{config.output_dir} holds the trials of study {recorded.get('study_name')!r} "
            f"(see {path}); give study {config.study_name!r} another --output_dir.")
    if write and recorded != mine:
        atomic_files.write_text(path, json.dumps(mine, indent=2) + "\n")


@contextlib.contextmanager
def _sqlite_lock(url: str) -> Iterator[None]:
    """An exclusive file lock next to a SQLite database (nothing for other URLs)."""
    if not url.startswith("sqlite:///"):
        yield
        return
    import fcntl

    with open(url[len("sqlite:///"):] + ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _creation_lock(url: str, storage: Any, key: str) -> Iterator[None]:
    """Serializes counting and creating trials across processes sharing `url`."""
    if url.startswith("sqlite:///"):
        with _sqlite_lock(url):
            yield
        return
    dialect = url.split(":", 1)[0].split("+", 1)[0]
    if dialect not in ("postgresql", "mysql"):
        yield  # other databases: two tuners may overshoot num_trials by a trial
        return
    from sqlalchemy import text

    number = zlib.crc32(key.encode()) - 2**31
    with storage.engine.connect() as conn:
        if dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": number})
        else:
            conn.execute(text("SELECT GET_LOCK(:k, 600)"), {"k": f"t2t_{number}"})
        try:
            yield
        finally:
            if dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": number})
            else:
                conn.execute(text("SELECT RELEASE_LOCK(:k)"), {"k": f"t2t_{number}"})


class Tuner:
    """Drives `parallel_trials` worker threads, each running one trial at a time."""

    def __init__(self, config: TunerConfig, rhp: Any, storage: Any) -> None:
        optuna = _optuna()

        self.config, self.rhp, self.storage = config, rhp, storage
        self.url = config.storage_url()
        self.stop = threading.Event()
        self.abort_message: str | None = None
        self._lock = threading.Lock()
        self._waiting_note = False
        if config.pruning:
            self.pruner = optuna.pruners.MedianPruner(
                n_startup_trials=config.pruning_startup_trials, n_warmup_steps=0)
        else:
            self.pruner = optuna.pruners.NopPruner()

    # -------------------------------------------------------------- workers
    def run(self) -> bool:
        """Runs trials until the study holds num_trials finished ones; False if stopped
        by Ctrl-C or SIGTERM (running trials are then interrupted and requeued)."""
        done = [threading.Event() for _ in range(self.config.parallel_trials)]
        threads = [threading.Thread(target=self._worker, args=(d,), name=f"tuner-{i}",
                                    daemon=True) for i, d in enumerate(done)]
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        interrupted = False
        try:
            for thread in threads:
                thread.start()
            # Not Thread.join: a KeyboardInterrupt inside join can make is_alive() lie.
            while not all(d.is_set() for d in done):
                try:
                    time.sleep(0.2)
                except KeyboardInterrupt:
                    interrupted = True
                    print("Interrupted: stopping the running trials (they will be re-run).",
                          flush=True)
                    self.stop.set()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return not (interrupted or (self.stop.is_set() and self.abort_message is None))

    def _worker(self, done: threading.Event) -> None:
        optuna = _optuna()

        try:
            study = optuna.load_study(study_name=self.config.study_name,
                                      storage=self.storage, pruner=self.pruner)
            while not self.stop.is_set():
                started = self._next_trial(study)
                if started is None:
                    return
                if started is _WAIT:
                    self.stop.wait(self.config.poll_seconds)
                    continue
                self._run_trial(study, *started)
        except Exception as e:  # a storage error: stop this process, the study is kept
            self.abort_message = f"{type(e).__name__}: {e}"
            self.stop.set()
            raise
        finally:
            done.set()

    def _next_trial(self, study: Any) -> Any:
        """(trial, hparam values) for a new trial; _WAIT while others' trials may still
        fall short of num_trials; None when the study is done."""
        optuna = _optuna()
        from optuna.trial import TrialState

        with self._lock, _creation_lock(self.url, self.storage, self.config.study_name):
            for running in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                if trial_process.owner_alive(running.user_attrs, running.datetime_start):
                    self.storage.record_heartbeat(running._trial_id)  # late, not dead
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            finished = sum(counts_as_finished(t) for t in trials)
            running = [t.number for t in trials if t.state == TrialState.RUNNING]
            if finished >= self.config.num_trials:
                return None
            if finished + len(running) >= self.config.num_trials:
                if not self._waiting_note:
                    self._waiting_note = True
                    print(f"Waiting for running trials {running} (in this or another tuner; "
                          f"a dead tuner's trials are re-run after "
                          f"{3 * self.config.heartbeat_seconds}s).", flush=True)
                return _WAIT
            self._waiting_note = False
            study.sampler = make_sampler(self.config, self.rhp, self.config.seed + len(trials))
            with warnings.catch_warnings():  # heartbeats are recorded here, not by optimize
                warnings.filterwarnings("ignore", message="Heartbeat of storage")
                trial = study.ask()
            self.storage.record_heartbeat(trial._trial_id)
            values = search_space.suggest(trial, self.rhp)
            override = search_space.merge_overrides(self.config.hparams, values)
            trial_dir = os.path.join(self.config.output_dir, f"trial_{trial.number}")
            for key, value in (("hparams", values), ("hparams_override", override),
                               ("output_dir", os.path.abspath(trial_dir)),
                               ("host", socket.gethostname()), ("pid", os.getpid())):
                trial.set_user_attr(key, value)
            return trial, values, override, trial_dir

    # ---------------------------------------------------------------- trial
    def _command(self, trial_dir: str, override: str) -> list[str]:
        trainer = self.config.trainer_command or [sys.executable, "-m", "t2t.bin.t2t_trainer"]
        return [sys.executable, "-c", LAUNCHER, str(os.getpid()), *trainer,
                *self.config.trainer_args, f"--output_dir={trial_dir}", f"--hparams={override}"]

    def _run_trial(self, study: Any, trial: Any, values: dict[str, Any], override: str,
                   trial_dir: str) -> None:
        optuna = _optuna()
        from optuna.trial import TrialState

        number = trial.number
        retry = trial.user_attrs.get("retry_of")
        note = f" (re-run of interrupted trial {retry})" if retry is not None else ""
        print(f"trial {number}: started{note}: {search_space.override_string(values)}",
              flush=True)
        if os.path.isdir(trial_dir) and os.listdir(trial_dir):  # left by a lost study
            aside = f"{trial_dir}.old-{time.strftime('%Y%m%d-%H%M%S')}"
            os.replace(trial_dir, aside)
            print(f"trial {number}: {trial_dir} held an older run; moved it to {aside}.")
        os.makedirs(trial_dir, exist_ok=True)
        log_path = os.path.join(trial_dir, LOG_FILE)
        try:
            state, value, error, step = self._train(trial, override, trial_dir)
        except optuna.exceptions.UpdateFinishedTrialError:
            print(f"trial {number}: marked failed by another tuner (no heartbeat for "
                  f"{3 * self.config.heartbeat_seconds}s); it is re-run as a new trial.",
                  flush=True)
            return
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            if state == "interrupted":
                trial.set_user_attr("interrupted", True)
                study.tell(trial, state=TrialState.FAIL)
                study.enqueue_trial(trial.params, user_attrs={"retry_of": number})
                print(f"trial {number}: interrupted; queued to run again.", flush=True)
            elif state == "pruned":
                study.tell(trial, state=TrialState.PRUNED)
                print(f"trial {number}: pruned at step {step}.", flush=True)
            elif error is not None:
                trial.set_user_attr("error", error)
                study.tell(trial, state=TrialState.FAIL)
                first = error.strip().splitlines()[0] if error.strip() else "?"
                print(f"trial {number}: FAILED ({first}); log: {log_path}", flush=True)
                self._stop_if_all_crash(study, first)
            else:
                study.tell(trial, value)
                print(f"trial {number}: {self.config.objective} = {value:.6g}", flush=True)

    def _train(self, trial: Any, override: str, trial_dir: str) -> tuple[str, Any, Any, int]:
        """Runs the trial's trainer to its end: (state, value, error, last step). A trainer
        killed by a signal is started again in `trial_dir` (it resumes from its latest
        checkpoint), up to TRAINER_RESTARTS times: the trial is neither lost nor re-run."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        last_step = -1
        for restart in range(TRAINER_RESTARTS + 1):
            if restart:
                drop_partial_line(trial_dir)
            with open(os.path.join(trial_dir, LOG_FILE), "ab") as log:
                proc = subprocess.Popen(self._command(trial_dir, override), stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, env=env)
            try:
                state, value, error, last_step = self._watch(trial, proc, trial_dir, last_step)
            except BaseException:
                terminate(proc)
                raise
            if state != "killed":
                return state, value, error, last_step
            if restart < TRAINER_RESTARTS:
                print(f"trial {trial.number}: its trainer was killed "
                      f"({signal_name(proc.returncode)}) after step {last_step}; resuming it "
                      f"from its latest checkpoint in {trial_dir} (restart {restart + 1} of "
                      f"{TRAINER_RESTARTS}).", flush=True)
        return "failed", None, (f"{error}\n(the trainer was killed {TRAINER_RESTARTS + 1} "
                                f"times: look for the OOM killer in dmesg, or a job "
                                f"scheduler's preemption)"), last_step

    def _stop_if_all_crash(self, study: Any, error: str) -> None:
        """A setup error (a model that does not fit the hparams set, a bad flag) fails
        every trial: stop after ALL_CRASH_LIMIT crashes and no trial that trained."""
        from optuna.trial import TrialState

        trials = study.get_trials(deepcopy=False)
        crashed = sum(t.state == TrialState.FAIL and "error" in t.user_attrs for t in trials)
        trained = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
        if crashed >= ALL_CRASH_LIMIT and not trained and self.abort_message is None:
            self.abort_message = (
                f"the first {crashed} trials all crashed, the last with: {error}. This looks "
                f"like a problem with the flags or hparams, not with the sampled values: see "
                f"the trial.log files, fix it and re-run (the study continues).")
            self.stop.set()

    def _watch(self, trial: Any, proc: subprocess.Popen, trial_dir: str, last_step: int = -1):
        """Follows the trainer to its end: (state, objective value, error, last step);
        state "killed": it died of a signal (evaluations up to `last_step` were reported)."""
        config = self.config
        seen, last_beat = 0, time.monotonic()
        while True:
            rc = proc.poll()
            evals = read_evals(trial_dir)
            for result in evals[seen:]:
                seen += 1
                if config.objective not in result:
                    terminate(proc)
                    names = sorted(k for k in result if k != "step")
                    message = (f"--objective={config.objective!r} is not a metric this run "
                               f"reports; it reports: {', '.join(names)}.")
                    self.abort_message = message
                    self.stop.set()
                    return "failed", None, message, last_step
                step, value = int(result.get("step", seen)), float(result[config.objective])
                if step > last_step and math.isfinite(value):
                    trial.report(value, step)
                    last_step = step
                    if config.pruning and trial.should_prune():
                        terminate(proc)
                        return "pruned", None, None, last_step
            if rc is not None:
                break
            if self.stop.is_set():
                terminate(proc)
                return "interrupted", None, None, last_step
            if time.monotonic() - last_beat >= config.heartbeat_seconds:
                self.storage.record_heartbeat(trial._trial_id)
                last_beat = time.monotonic()
            self.stop.wait(config.poll_seconds)
        log_path = os.path.join(trial_dir, LOG_FILE)
        if rc != 0:
            if self.stop.is_set() and self.abort_message is None:
                return "interrupted", None, None, last_step
            end = tail(log_path)
            lines = [line.strip() for line in end.splitlines() if line.strip()]
            last = lines[-1] if lines else "no output"
            how = f"was killed by {signal_name(rc)}" if rc < 0 else f"exited with status {rc}"
            return ("killed" if rc < 0 else "failed"), None, (
                f"trainer {how}: {last}\n--- the end of {log_path}:\n{end}"), last_step
        if not evals:
            return "failed", None, (f"the trainer wrote no {EVAL_RESULTS_FILE} in {trial_dir}; "
                                    f"trials need --schedule=train_and_evaluate."), last_step
        value = float(evals[-1][config.objective])
        if not math.isfinite(value):
            return ("failed", None,
                    f"{config.objective} was {value} at step {evals[-1]['step']}.", last_step)
        return "complete", value, None, last_step


def describe(study: Any) -> str:
    """'N trials: a COMPLETE, b PRUNED, ...' for the start-up line."""
    trials = study.get_trials(deepcopy=False)
    states: dict[str, int] = {}
    for t in trials:
        name = "FAIL (interrupted)" if is_interrupted(t) else t.state.name
        states[name] = states.get(name, 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    return f"{len(trials)} trial(s) already" + (f": {parts}" if parts else "")


def run_study(config: TunerConfig, rhp: Any = None) -> tuple[Any, bool]:
    """Runs (or resumes) the study to num_trials finished trials; returns (study,
    completed) where completed is False after Ctrl-C/SIGTERM. Raises TunerError."""
    if config.num_trials < 1 or config.parallel_trials < 1:
        raise TunerError(f"--num_trials ({config.num_trials}) and --parallel_trials "
                         f"({config.parallel_trials}) must be at least 1.")
    if not config.study_name:  # t2t-tuner names it PROBLEM-MODEL-...; the API may not
        config = dataclasses.replace(config, study_name=DEFAULT_STUDY_NAME)
    rhp = rhp if rhp is not None else search_space.load_ranges(config.hparams_range)
    note = check_sampler(config, rhp)
    if note:
        print(note)
    _claim_output_dir(config, write=False)
    storage = make_storage(config)
    study = open_study(config, storage)
    _claim_output_dir(config)
    print(f"Study {config.study_name!r} in {config.storage_url()}: {describe(study)}; "
          f"running up to {config.num_trials} finished trial(s), {config.parallel_trials} at "
          f"a time ({config.direction} {config.objective}, sampler {config.sampler}).",
          flush=True)
    tuner = Tuner(config, rhp, storage)
    completed = tuner.run()
    if tuner.abort_message:
        raise TunerError(tuner.abort_message, study)
    return study, completed
