"""The t2t programs a regression run calls: where each one is found, and how one runs
with its output streamed to the terminal and to the case's log."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import TextIO

# Console script -> the module `python -m` runs where the script is not installed.
TOOL_MODULES = {"t2t-datagen": "t2t.bin.t2t_datagen", "t2t-trainer": "t2t.bin.t2t_trainer",
                "t2t-launch": "t2t.bin.t2t_launch", "t2t-decoder": "t2t.bin.t2t_decoder",
                "t2t-exporter": "t2t.bin.t2t_exporter"}

# execute(command, log, prefix) -> exit status; the default streams a subprocess.
Execute = Callable[[list[str], TextIO, str], int]


def tool_command(name: str) -> list[str]:
    """The console script next to this Python, on PATH, or `python -m` its module."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return [beside]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", TOOL_MODULES[name]]


def stream_command(command: list[str], log: TextIO, prefix: str) -> int:
    """Runs `command`, copying its output to stdout (each line prefixed) and to `log`."""
    header = f"$ {shlex.join(command)}\n"
    sys.stdout.write(prefix + header)
    log.write(header)
    log.flush()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", env=env)
    finished = False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
            log.write(line)
            log.flush()
        finished = True
    finally:
        if finished:
            proc.wait()
        else:
            # Interrupted: stop the child (t2t-trainer saves a checkpoint on SIGTERM) and
            # give it time to finish before killing it.
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            else:  # keep what it said on the way out ("Stopped by a signal at step N ...")
                rest = proc.stdout.read() if proc.stdout else ""
                sys.stdout.write("".join(prefix + line for line in rest.splitlines(True)))
                log.write(rest)
                log.flush()
    return proc.returncode
