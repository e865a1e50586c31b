"""Tests of t2t.cluster.launch (in process) and the t2t-launch binary (as a process).

The tasks are tiny Python scripts (`sys.executable -c ...`) that read their TF_CONFIG."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from t2t.cluster import launch as launch_lib
from t2t.cluster import tf_config as tfc
from t2t.cluster.launch import Launcher, LaunchError

pytestmark = pytest.mark.timeout(120)

LAUNCH = [sys.executable, "-m", "t2t.bin.t2t_launch"]

# Every task script starts with this: TYPE, INDEX and NAME of the task from TF_CONFIG.
HEAD = ("import json, os, signal, sys, time\n"
        "config = json.loads(os.environ['TF_CONFIG'])\n"
        "TYPE, INDEX = config['task']['type'], config['task']['index']\n"
        "NAME = f'{TYPE}-{INDEX}'\n")

PRINT_TASK = HEAD + (
    "print('task', json.dumps(config['task'], sort_keys=True))\n"
    "print('cluster', json.dumps(config['cluster'], sort_keys=True))\n"
    "print('to stderr', file=sys.stderr)\n"
    "print('argv', json.dumps(sys.argv[1:]))\n")

# worker 1 fails with code 3; the others sleep (SIGTERM's default action ends them).
ONE_FAILS = HEAD + (
    "if NAME == 'worker-1':\n"
    "    time.sleep(0.2)\n"
    "    print('worker 1 gives up')\n"
    "    sys.exit(3)\n"
    "time.sleep(60)\n")


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _run(command, cluster, **kwargs):
    """(status, stdout text, stderr text, seconds) of an in-process Launcher run."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    status = Launcher(command, cluster, out=out, err=err, **kwargs).run()
    return status, out.getvalue(), err.getvalue(), time.monotonic() - start


def _lines_of(out: str, task: str) -> list[str]:
    prefix = f"[{task}] "
    return [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]


def test_all_tasks_succeed_with_prefixed_logs(tmp_path):
    cluster = tfc.local_cluster(tfc.Layout(2, chief=True))
    status, out, err, _ = _run(_python(PRINT_TASK), cluster, log_dir=str(tmp_path / "logs"))
    assert status == 0, err
    assert all(re.match(r"\[(chief|worker):\d\] ", line) for line in out.splitlines()), out
    for task_type, index in [("chief", 0), ("worker", 0), ("worker", 1)]:
        lines = _lines_of(out, f"{task_type}:{index}")
        assert f'task {{"index": {index}, "type": "{task_type}"}}' in lines
        assert f"cluster {json.dumps(cluster, sort_keys=True)}" in lines
        assert "to stderr" in lines  # stderr is streamed too
        with open(tmp_path / "logs" / f"{task_type}-{index}.log") as f:
            assert f.read().splitlines() == lines  # the log file holds the lines unprefixed
    assert "done: all 3 tasks finished with exit code 0" in err
    assert "started chief:0 at 127.0.0.1:" in err


def test_last_line_without_newline_and_bad_utf8():
    code = "import sys; sys.stdout.buffer.write(b'caf\\xe9\\nno newline'); sys.stdout.flush()"
    status, out, err, _ = _run(_python(code), {"worker": ["127.0.0.1:1"]})
    assert status == 0, err
    assert out == "[worker:0] caf\ufffd\n[worker:0] no newline\n"


def test_a_failing_task_stops_the_others():
    cluster = tfc.local_cluster(tfc.Layout(3))
    status, out, err, seconds = _run(_python(ONE_FAILS), cluster)
    assert status == 3
    assert seconds < 20  # the sleeping tasks were stopped, not waited for
    assert "[worker:1] worker 1 gives up" in out
    assert "worker:1 exited with code 3; stopping the other tasks" in err
    assert "worker:0 stopped (SIGTERM)" in err
    assert "worker:2 stopped (SIGTERM)" in err
    assert "FAILED: task worker:1 exited with code 3" in err.splitlines()[-1]
    assert "worker:0=SIGTERM, worker:1=3, worker:2=SIGTERM" in err


def test_tasks_ignoring_sigterm_get_sigkill_after_the_grace_period(tmp_path):
    # worker 0 fails once the two others ignore SIGTERM (they say so with a file).
    code = HEAD + (
        f"folder = {str(tmp_path)!r}\n"
        "if NAME == 'worker-0':\n"
        "    while len(os.listdir(folder)) < 2:\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open(os.path.join(folder, NAME), 'w').close()\n"
        "time.sleep(60)\n")
    cluster = tfc.local_cluster(tfc.Layout(2, chief=True))
    status, _, err, seconds = _run(_python(code), cluster, grace_period_secs=0.5)
    assert status == 5
    assert seconds < 20
    assert "SIGKILL to chief:0, worker:1" in err
    assert "chief:0 stopped (SIGKILL)" in err


def test_a_task_killed_by_a_signal_is_a_failure():
    code = HEAD + "os.kill(os.getpid(), signal.SIGKILL) if INDEX == 1 else time.sleep(60)\n"
    status, _, err, _ = _run(_python(code), tfc.local_cluster(tfc.Layout(2)))
    assert status == 128 + signal.SIGKILL
    assert "FAILED: task worker:1 was killed by SIGKILL (exit code 137)" in err


def test_parameter_servers_stop_when_the_chief_is_done():
    # ps and worker tasks serve forever; the chief (coordinator) finishes.
    code = HEAD + "time.sleep(0.2) if TYPE == 'chief' else time.sleep(60)\n"
    cluster = tfc.local_cluster(tfc.Layout(2, num_ps=1))
    status, _, err, seconds = _run(_python(code), cluster)
    assert status == 0, err
    assert seconds < 20
    assert "the chief is done: stopping the ps and worker servers" in err
    assert "done: the chief finished" in err


def test_command_not_found():
    with pytest.raises(LaunchError, match=r"cannot start 'no-such-program-t2t' for worker:0"):
        _run(["no-such-program-t2t", "--flag"], {"worker": ["127.0.0.1:1"]})


@pytest.mark.parametrize("command, cluster, kwargs, message", [
    ([], {"worker": ["h:1"]}, {}, "no command to run: give it after `--`"),
    (["x"], {}, {}, "the cluster has no tasks"),
    (["x"], {"worker": ["h:1"]}, {"grace_period_secs": -1},
     "--grace_period_secs must be >= 0, got -1"),
])
def test_launcher_argument_errors(command, cluster, kwargs, message):
    with pytest.raises(LaunchError, match=re.escape(message)):
        Launcher(command, cluster, **kwargs)


def test_log_dir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LaunchError, match=r"--log_dir=.*file/logs"):
        _run(_python("pass"), {"worker": ["h:1"]}, log_dir=str(blocker / "logs"))


@pytest.mark.parametrize("argv, expected", [
    (["t2t-launch"], (["t2t-launch"], [])),
    (["t2t-launch", "--num_workers=2", "--", "t2t-trainer", "--x", "--", "y"],
     (["t2t-launch", "--num_workers=2"], ["t2t-trainer", "--x", "--", "y"])),
    (["t2t-launch", "--"], (["t2t-launch"], [])),
])
def test_split_command(argv, expected):
    assert launch_lib.split_command(argv) == expected


# --- the binary -------------------------------------------------------------------------

def _launch(*flags: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*LAUNCH, *flags], capture_output=True, text=True, timeout=timeout)


def test_binary_runs_the_command_after_the_separator(tmp_path):
    # Everything after the first `--` reaches the tasks untouched, later `--` included.
    result = _launch("--num_workers=2", f"--log_dir={tmp_path}", "--",
                     *_python(PRINT_TASK), "--", "--num_workers=7")
    assert result.returncode == 0, result.stderr
    assert 'MultiWorkerMirroredStrategy cluster: {"worker": ["127.0.0.1:' in result.stderr
    for task in ("worker:0", "worker:1"):
        assert f"[{task}] task " in result.stdout
        assert f'[{task}] argv ["--", "--num_workers=7"]' in result.stdout
    assert sorted(os.listdir(tmp_path)) == ["worker-0.log", "worker-1.log"]


def test_binary_parameter_server_layout(tmp_path):
    # The chief waits for the others' marker files, so every task prints before it ends.
    code = PRINT_TASK + (
        f"folder = {str(tmp_path)!r}\n"
        "open(os.path.join(folder, NAME), 'w').close()\n"
        "while TYPE == 'chief' and len(os.listdir(folder)) < 4:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(0 if TYPE == 'chief' else 60)\n")
    result = _launch("--num_workers=2", "--num_ps=1", "--", *_python(code))
    assert result.returncode == 0, result.stderr
    assert "ParameterServerStrategy cluster: " in result.stderr
    for task_type, index in (("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)):
        assert f'[{task_type}:{index}] task {{"index": {index}, "type": "{task_type}"}}' \
            in result.stdout
    assert "the chief is done: stopping the ps and worker servers" in result.stderr


def test_binary_exits_with_the_failing_code():
    result = _launch("--num_workers=3", "--", *_python(ONE_FAILS))
    assert result.returncode == 3
    assert "[worker:1] worker 1 gives up" in result.stdout
    assert "FAILED: task worker:1 exited with code 3" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_binary_forwards_sigterm_to_the_tasks(tmp_path, sig):
    # Each task says it is ready, then waits; its SIGTERM handler writes a marker file.
    code = HEAD + (
        f"folder = {str(tmp_path)!r}\n"
        "def on_term(signum, frame):\n"
        "    open(os.path.join(folder, NAME + '.term'), 'w').close()\n"
        "    print('saving a checkpoint', flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "open(os.path.join(folder, NAME + '.ready'), 'w').close()\n"
        "time.sleep(60)\n")
    process = subprocess.Popen([*LAUNCH, "--num_workers=2", "--chief", "--", *_python(code)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    names = ["chief-0", "worker-0", "worker-1"]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"{n}.ready").exists() for n in names):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the tasks did not start"
            time.sleep(0.05)
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + sig, err
    assert sorted(p.name for p in tmp_path.glob("*.term")) == [f"{n}.term" for n in names]
    assert f"got {signal.Signals(sig).name}: forwarding SIGTERM to chief:0, worker:0, worker:1" \
        in err
    assert out.count("saving a checkpoint") == 3


def test_with_parameter_servers_sigterm_reaches_the_chief_before_the_servers(tmp_path):
    # The chief takes a while to "save" on SIGTERM and checks that the ps still runs.
    code = HEAD + (
        f"folder = {str(tmp_path)!r}\n"
        "def on_term(signum, frame):\n"
        "    if TYPE == 'chief':\n"
        "        time.sleep(1.0)\n"
        "        alive = not os.path.exists(os.path.join(folder, 'ps-0.term'))\n"
        "        print('saved with the ps', 'alive' if alive else 'gone', flush=True)\n"
        "    open(os.path.join(folder, NAME + '.term'), 'w').close()\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "open(os.path.join(folder, NAME + '.ready'), 'w').close()\n"
        "time.sleep(60)\n")
    process = subprocess.Popen([*LAUNCH, "--num_workers=1", "--num_ps=1", "--", *_python(code)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    names = ["chief-0", "ps-0", "worker-0"]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"{n}.ready").exists() for n in names):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the tasks did not start"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "got SIGTERM: forwarding SIGTERM to chief:0 (SIGKILL after" in err
    assert "[chief:0] saved with the ps alive" in out
    assert "the chief has stopped: stopping the ps and worker servers" in err
    assert sorted(p.name for p in tmp_path.glob("*.term")) == [f"{n}.term" for n in names]


def test_binary_second_signal_kills_at_once(tmp_path):
    code = HEAD + (
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open(os.path.join({str(tmp_path)!r}, NAME), 'w').close()\n"
        "time.sleep(60)\n")
    process = subprocess.Popen([*LAUNCH, "--num_workers=2", "--grace_period_secs=300", "--",
                                *_python(code)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGINT, err
    assert "SIGKILL to worker:0, worker:1" in err


@pytest.mark.parametrize("flags, message", [
    ([], "error: no command: give it after `--`"),
    (["--num_workers=2", "--"], "error: no command"),
    (["--num_workers=2", "t2t-trainer", "--", "x"],
     "error: unexpected arguments ['t2t-trainer'] before `--`"),
    (["--num_workers=0", "--", "x"], "error: --num_workers must be at least 1, got 0"),
    (["--num_ps=-1", "--", "x"], "error: --num_ps must be 0 or more, got -1"),
    (["--port_base=65535", "--num_workers=2", "--", "x"],
     "error: --port_base=65535: the 2 ports from it must lie in 1..65535"),
    (["--grace_period_secs=-1", "--", "x"], "error: --grace_period_secs must be >= 0"),
    (["--", "no-such-program-t2t"], "error: cannot start 'no-such-program-t2t' for worker:0"),
])
def test_binary_errors(flags, message):
    result = _launch(*flags)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_binary_port_base_in_use():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = _launch(f"--port_base={port}", "--", sys.executable, "-c", "pass")
    assert result.returncode == 1
    assert f"port(s) in use: worker:0 at 127.0.0.1:{port}" in result.stderr
