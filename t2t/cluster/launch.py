"""A local cluster: one process per task, each with its own TF_CONFIG.

    status = Launcher(["t2t-trainer", "--problem=..."], cluster).run()

Every task runs the same command; the process reads its role from TF_CONFIG. The tasks'
stdout and stderr are streamed line by line to `out` with a `[type:index] ` prefix (and,
with `log_dir`, to `<log_dir>/<type>-<index>.log`). The launcher's own messages go to
`err`, prefixed `[t2t-launch] `.

- All tasks exit 0: status 0.
- A task fails (non-zero exit): the others get SIGTERM, then SIGKILL after
  `grace_period_secs`; the status is the failing task's exit code (128 + N when signal N
  killed it), and a message names the task and its code.
- SIGINT (Ctrl-C) or SIGTERM to the launcher: SIGTERM goes to every task (the chief can
  save a checkpoint), SIGKILL after the grace period or at a second signal; the status
  is 128 + the signal's number. With parameter servers it goes to the chief alone, and
  the ps and worker servers get theirs once the chief has stopped: the ps tasks hold
  the variables the chief's last checkpoint reads.
- With "ps" tasks (ParameterServerStrategy), the ps and worker servers never exit by
  themselves: once the chief (the coordinator) exits 0 they are stopped, and the status
  is 0.

Each task runs in its own session (process group): a terminal's Ctrl-C reaches only the
launcher, which forwards SIGTERM, and signals reach the task's own child processes too.
PYTHONUNBUFFERED=1 is set (unless already set) so Python tasks' lines stream at once.
POSIX only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from t2t.cluster import tf_config as tf_config_lib

PREFIX = "[t2t-launch] "


class LaunchError(RuntimeError):
    """The command cannot be started (no such program, not executable, bad log dir)."""


@dataclasses.dataclass
class _Task:
    """One running task: its process, its log pump and how it ended."""

    type: str
    index: int
    process: subprocess.Popen
    log: IO[str] | None = None
    pump: threading.Thread | None = None
    returncode: int | None = None
    signalled: bool = False  # the launcher sent it a signal: its exit code is no failure

    @property
    def name(self) -> str:
        return tf_config_lib.task_name(self.type, self.index)


def exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: its code, or 128 + N when signal N
    killed it (Popen's returncode is then -N)."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode: int) -> str:
    """`exited with code 3`, or `was killed by SIGKILL (exit code 137)`."""
    if returncode < 0:
        return f"was killed by {_short_exit(returncode)} (exit code {exit_status(returncode)})"
    return f"exited with code {returncode}"


def _short_exit(returncode: int | None) -> str:
    """`3`, or `SIGTERM` for a task a signal ended."""
    if returncode is None or returncode >= 0:
        return str(returncode)
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class Launcher:
    """Runs `command` once per task of `cluster` (see the module doc); `run()` returns the
    launcher's exit status."""

    def __init__(self, command: Sequence[str], cluster: tf_config_lib.Cluster, *,
                 log_dir: str | None = None, grace_period_secs: float = 30.0,
                 stop_servers_with_chief: bool | None = None,
                 env: Mapping[str, str] | None = None, out: IO[str] | None = None,
                 err: IO[str] | None = None, poll_secs: float = 0.05) -> None:
        if not command:
            raise LaunchError("no command to run: give it after `--`, e.g. "
                              "t2t-launch --num_workers=2 -- t2t-trainer --problem=...")
        if not cluster or not tf_config_lib.tasks(cluster):
            raise LaunchError("the cluster has no tasks.")
        if grace_period_secs < 0:
            raise LaunchError(f"--grace_period_secs must be >= 0, got {grace_period_secs}.")
        self.command = list(command)
        self.cluster = cluster
        self.log_dir = log_dir
        self.grace_period_secs = grace_period_secs
        if stop_servers_with_chief is None:
            stop_servers_with_chief = tf_config_lib.PS in cluster
        self.stop_servers_with_chief = stop_servers_with_chief
        self.env = dict(os.environ if env is None else env)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.poll_secs = poll_secs
        self._tasks: list[_Task] = []
        self._lock = threading.Lock()
        self._out_broken = False
        self._signals: list[int] = []

    # --- output -------------------------------------------------------------------------

    def _write(self, stream: IO[str], text: str) -> None:
        with self._lock:
            if self._out_broken and stream is self.out:
                return
            try:
                stream.write(text)
                stream.flush()
            except (OSError, ValueError):  # closed pipe (`t2t-launch ... | head`)
                if stream is self.out:
                    self._out_broken = True

    def say(self, message: str) -> None:
        """One launcher message on `err`."""
        self._write(self.err, f"{PREFIX}{message}\n")

    def _pump(self, task: _Task) -> None:
        """Copies the task's output, line by line, to `out` (prefixed) and its log file."""
        prefix = f"[{task.name}] "
        for raw in iter(task.process.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            self._write(self.out, f"{prefix}{line}\n")
            if task.log is not None:
                try:
                    task.log.write(line + "\n")
                    task.log.flush()
                except (OSError, ValueError):
                    pass
        task.process.stdout.close()

    # --- processes ----------------------------------------------------------------------

    def _start(self, task_type: str, index: int) -> _Task:
        config = tf_config_lib.tf_config(self.cluster, task_type, index)
        env = dict(self.env, TF_CONFIG=json.dumps(config))
        env.setdefault("PYTHONUNBUFFERED", "1")
        log = None
        if self.log_dir:
            path = os.path.join(self.log_dir, f"{task_type}-{index}.log")
            try:
                log = open(path, "w", encoding="utf-8")
            except OSError as e:
                raise LaunchError(f"--log_dir: cannot write {path}: {e.strerror}.") from e
        try:
            process = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        except OSError as e:
            if log is not None:
                log.close()
            raise LaunchError(f"cannot start {self.command[0]!r} for "
                              f"{tf_config_lib.task_name(task_type, index)}: "
                              f"{e.strerror or e}.") from e
        task = _Task(task_type, index, process, log)
        task.pump = threading.Thread(target=self._pump, args=(task,), daemon=True,
                                     name=f"t2t-launch-{task.name}")
        task.pump.start()
        return task

    def _signal(self, task: _Task, sig: int) -> None:
        """Sends `sig` to the task's process group (it and its children), if it runs."""
        if task.returncode is not None:
            return  # reaped: its pid may belong to someone else now
        task.signalled = True
        try:
            os.killpg(task.process.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            try:
                task.process.send_signal(sig)
            except ProcessLookupError:
                pass

    def _running(self) -> list[_Task]:
        return [t for t in self._tasks if t.returncode is None]

    def _stop(self, sig: int = signal.SIGTERM) -> None:
        for task in self._running():
            self._signal(task, sig)

    def _on_signal(self, signum: int, frame) -> None:
        self._signals.append(signum)

    def _install_handlers(self) -> dict[int, object]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    # --- the loop -----------------------------------------------------------------------

    def run(self) -> int:
        """Starts every task, streams their logs, waits; returns the exit status."""
        if self.log_dir:
            try:
                os.makedirs(self.log_dir, exist_ok=True)
            except OSError as e:
                raise LaunchError(f"--log_dir={self.log_dir}: {e.strerror}.") from e
        previous = self._install_handlers()
        try:
            for task_type, index in tf_config_lib.tasks(self.cluster):
                self._tasks.append(self._start(task_type, index))
                address = self.cluster[task_type][index]
                self.say(f"started {self._tasks[-1].name} at {address} "
                         f"(pid {self._tasks[-1].process.pid})")
            return self._wait()
        finally:
            # An exception (a failed start, a bug): leave no task behind.
            if self._running():
                self._stop(signal.SIGKILL)
                for task in self._running():
                    task.returncode = task.process.wait()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for task in self._tasks:
                if task.pump is not None:
                    task.pump.join(timeout=5)
                if task.log is not None:
                    task.log.close()

    def _wait(self) -> int:
        failure: _Task | None = None
        interrupted: int | None = None
        servers_done = False
        kill_at: float | None = None  # when the SIGTERMed tasks get SIGKILL
        killed = False
        while True:
            for task in self._running():
                code = task.process.poll()
                if code is None:
                    continue
                task.returncode = code
                if task.pump is not None:  # its last lines before the launcher's word on it
                    task.pump.join(timeout=1.0)
                if task.signalled or failure or interrupted:
                    self.say(f"{task.name} stopped ({_short_exit(code)})")
                    if (interrupted and self.stop_servers_with_chief
                            and task.type == tf_config_lib.CHIEF and self._running()):
                        self.say("the chief has stopped: stopping the ps and worker servers")
                        self._stop(signal.SIGTERM)
                elif code != 0:
                    failure = task
                    self.say(f"{task.name} {describe_exit(code)}; stopping the other tasks")
                    kill_at = self._terminate_others()
                else:
                    self.say(f"{task.name} finished")
                    if (self.stop_servers_with_chief and task.type == tf_config_lib.CHIEF
                            and self._running()):
                        servers_done = True
                        self.say("the chief is done: stopping the ps and worker servers")
                        kill_at = self._terminate_others()
            if not self._running():
                break
            if self._signals:
                signum = self._signals.pop(0)
                if interrupted is None and kill_at is None:
                    interrupted = signum
                    targets = self._running()
                    chief = [t for t in targets if t.type == tf_config_lib.CHIEF]
                    if self.stop_servers_with_chief and chief:
                        # The ps tasks hold the variables: they must outlive the chief's
                        # last checkpoint. They (and the worker servers) stop after it.
                        targets = chief
                    self.say(f"got {signal.Signals(signum).name}: forwarding SIGTERM to "
                             f"{', '.join(t.name for t in targets)} (SIGKILL after "
                             f"{self.grace_period_secs:g}s, or at another signal)")
                    for task in targets:
                        self._signal(task, signal.SIGTERM)
                    kill_at = time.monotonic() + self.grace_period_secs
                else:
                    interrupted = interrupted or signum
                    kill_at = time.monotonic()
            if kill_at is not None and not killed and time.monotonic() >= kill_at:
                running = self._running()
                if running:
                    self.say(f"SIGKILL to {', '.join(t.name for t in running)}")
                self._stop(signal.SIGKILL)
                killed = True
            time.sleep(self.poll_secs)
        return self._finish(failure, interrupted, servers_done)

    def _terminate_others(self) -> float:
        """SIGTERM to every running task; returns when SIGKILL is due."""
        self._stop(signal.SIGTERM)
        return time.monotonic() + self.grace_period_secs

    def _finish(self, failure: _Task | None, interrupted: int | None,
                servers_done: bool) -> int:
        codes = ", ".join(f"{t.name}={_short_exit(t.returncode)}" for t in self._tasks)
        if failure is not None:
            self.say(f"FAILED: task {failure.name} {describe_exit(failure.returncode)} "
                     f"(all tasks: {codes})")
            return exit_status(failure.returncode)
        if interrupted is not None:
            self.say(f"interrupted by {signal.Signals(interrupted).name} (all tasks: {codes})")
            return 128 + interrupted
        if servers_done:
            self.say(f"done: the chief finished (all tasks: {codes})")
        else:
            self.say(f"done: all {len(self._tasks)} tasks finished with exit code 0")
        return 0


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(program and its flags, command): a binary's argv cut at the first `--`, the
    command passed on untouched (absl's app.run would merge positional arguments given
    before `--` into it)."""
    if "--" not in argv:
        return list(argv), []
    cut = list(argv).index("--")
    return list(argv[:cut]), list(argv[cut + 1:])


def launch(command: Sequence[str], cluster: tf_config_lib.Cluster, **kwargs) -> int:
    """Runs `command` on every task of `cluster`; the exit status (see `Launcher`)."""
    return Launcher(command, cluster, **kwargs).run()
