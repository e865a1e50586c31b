"""A trial's trainer process and files: launching it tied to the tuner, stopping it, and
reading what it wrote (eval_results.jsonl, the end of trial.log).

The tuner (t2t.tuning.study) starts each trainer through LAUNCHER, so that a tuner that
dies takes its trainers with it; a trainer killed on its own (SIGKILL, the OOM killer) is
started again in the same directory, resuming from its latest checkpoint; before that,
`drop_partial_line` removes an evaluation line the kill cut short.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
from typing import Any

EVAL_RESULTS_FILE = "eval_results.jsonl"
LOG_FILE = "trial.log"
TAIL_CHARS = 4000

# Started instead of the trainer: asks Linux to SIGKILL the trainer when the tuner dies
# (no orphan keeps training), then execs the trainer command.
LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform.startswith('linux'):\n"
    "    try:\n"
    "        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))\n"
    "    except Exception:\n"
    "        pass\n"
    "    if os.getppid() != int(sys.argv[1]):\n"
    "        sys.exit(75)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def read_evals(trial_dir: str) -> list[dict[str, Any]]:
    """The complete lines of the trial's eval_results.jsonl."""
    try:
        with open(os.path.join(trial_dir, EVAL_RESULTS_FILE), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    lines = text.split("\n")[:-1]  # the part after the last newline may be half written
    results = []
    for line in lines:
        with contextlib.suppress(ValueError):
            results.append(json.loads(line))
    return results


def drop_partial_line(trial_dir: str) -> None:
    """Cuts eval_results.jsonl after its last newline: a trainer killed while writing a
    line leaves part of it, and the resumed trainer's next line would be glued to it."""
    path = os.path.join(trial_dir, EVAL_RESULTS_FILE)
    try:
        with open(path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
    except OSError:
        pass


def tail(path: str, chars: int = TAIL_CHARS) -> str:
    """The last `chars` characters of a log file ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def signal_name(returncode: int) -> str:
    """'SIGKILL' for a process's return code -9."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def terminate(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM (the trainer saves a checkpoint and exits), SIGKILL after `grace_s`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _process_start(pid: int) -> tuple[str, float] | None:
    """(state letter, start time in seconds since the epoch) of a live process, from
    /proc (Linux); None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def owner_alive(user_attrs: dict[str, Any], started: datetime.datetime | None) -> bool:
    """Whether the tuner process recorded in a trial's `user_attrs` (host, pid) still runs
    on this host: then its trial is only late with its heartbeat, not orphaned. A pid
    reused by a process that started after the trial (`started`) does not count."""
    pid, host = user_attrs.get("pid"), user_attrs.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        pass
    info = _process_start(pid)
    if info is None:
        return True
    state, start = info
    return state not in "ZX" and (started is None or start <= started.timestamp() + 1.0)
