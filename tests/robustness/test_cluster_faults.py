"""Injected faults in multi-process training on 127.0.0.1 (real processes, real signals).

* a stalled worker: one of two MultiWorkerMirroredStrategy workers SIGSTOPped mid-run;
  the other stops within the collective timeout with a cluster error (no hang), the
  stalled one fails by itself once continued, and a relaunch resumes from the last
  checkpoint;
* a preemption notice: SIGTERM to the chief, or to the other worker, of a
  MultiWorkerMirroredStrategy job; both processes stop after the same step, the chief
  saves it, both exit 0, and a relaunch resumes there;
* parameter-server training: a worker SIGKILLed while the chief goes on (the coordinator
  reschedules its steps on the other worker) and restarted (it rejoins); a SIGKILLed ps
  ends the job with a message naming it, and a relaunch resumes from the last checkpoint.

Each of those starts 2-4 TensorFlow processes (~10 s each to start on 2 cores) training
the suite's tiny transformer: they are slow (`python -m pytest -m robustness`). A quick test
checks the message's pieces in this process: the cause of a cluster error without
TensorFlow's noise, and the lost task by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from t2t.cluster import tf_config
from tests.robustness import support
from tests.robustness.support import HPARAMS, HPARAMS_SET, MODEL, PROBLEM

TRAINER = [sys.executable, "-m", "t2t.bin.t2t_trainer"]
LAUNCH = [sys.executable, "-m", "t2t.bin.t2t_launch"]
COLLECTIVE_TIMEOUT_S = 30
START_TIMEOUT_S = 300  # first checkpoint of a cluster on a loaded 2-core machine
RUN_TIMEOUT_S = 420


def _args(data_dir: str, output_dir: str, steps: int, save_every: int, *extra: str) -> list[str]:
    return [f"--problem={PROBLEM}", f"--model={MODEL}", f"--hparams_set={HPARAMS_SET}",
            f"--hparams={HPARAMS}", f"--train_steps={steps}", "--log_every_steps=10",
            f"--save_checkpoints_steps={save_every}", "--local_eval_frequency=100000",
            "--eval_steps=1", f"--data_dir={data_dir}", f"--output_dir={output_dir}", *extra]


class Cluster:
    """The tasks of one local cluster, each a t2t-trainer process logging to a file."""

    def __init__(self, layout: tf_config.Layout, args: list[str], log_dir):
        self.spec = tf_config.local_cluster(layout)  # free ports the OS picks
        self.args, self.log_dir = args, log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, task_type: str, index: int) -> subprocess.Popen:
        name = tf_config.task_name(task_type, index)
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config.tf_config(self.spec, task_type,
                                                                        index)))
        with open(self.log(name), "a", encoding="utf-8") as log:
            self.procs[name] = subprocess.Popen(TRAINER + self.args, env=env, stdout=log,
                                                stderr=subprocess.STDOUT)
        return self.procs[name]

    def start_all(self) -> None:
        for task_type, index in tf_config.tasks(self.spec):
            self.start(task_type, index)

    def log(self, name: str) -> str:
        return os.path.join(self.log_dir, f"{name.replace(':', '')}.log")

    def output(self, name: str) -> str:
        with open(self.log(name), encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait(self, name: str, timeout: float) -> tuple[int, float]:
        """(exit status, seconds waited); fails the test (naming the task) on a hang."""
        started = time.monotonic()
        try:
            code = self.procs[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} still running after {timeout:.0f} s:\n"
                        f"{self.output(name)[-3000:]}")
        return code, time.monotonic() - started

    def stop(self) -> None:
        """Kills what is left (a stopped process is continued first, so it dies now)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
                    proc.kill()
                proc.wait(timeout=60)


@contextlib.contextmanager
def _cluster(layout: tf_config.Layout, args: list[str], log_dir) -> Iterator[Cluster]:
    cluster = Cluster(layout, args, log_dir)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()


def _checkpoint_steps(output_dir: str) -> list[int]:
    """Steps of the complete checkpoints (index and data) of a run directory; with
    parameter servers the data comes in one shard per ps plus the chief's."""
    names = os.listdir(output_dir)
    steps = []
    for name in names:
        match = re.fullmatch(r"ckpt-(\d+)\.index", name)
        shards = [n for n in names if match and n.startswith(f"ckpt-{match[1]}.data-")]
        total = re.search(r"-of-(\d+)$", shards[0]) if shards else None
        if total and len(shards) == int(total[1]):
            steps.append(int(match[1]))
    return sorted(steps)


def _wait_for_checkpoint(cluster: Cluster, output_dir: str, chief: str, after: int = 0) -> int:
    """The step of the first complete checkpoint past step `after`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        steps = [s for s in _checkpoint_steps(output_dir) if s > after] \
            if os.path.isdir(output_dir) else []
        if steps:
            return steps[0]
        assert cluster.procs[chief].poll() is None, cluster.output(chief)[-3000:]
        assert time.monotonic() < deadline, f"no checkpoint past step {after} in time"
        time.sleep(0.3)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds_once_serving(cluster: Cluster, name: str) -> float:
    """The CPU time of a ps-training worker once it serves (TensorFlow imported, server
    up): what it uses from then on is the work the chief sends."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while "for parameter-server training." not in cluster.output(name):
        assert cluster.procs[name].poll() is None, cluster.output(name)[-3000:]
        assert time.monotonic() < deadline, f"{name} not serving in time"
        time.sleep(0.2)
    return _cpu_seconds(cluster.procs[name].pid)


def _relaunch(*launch_flags: str, args: list[str]) -> str:
    """The job started again the usual way (t2t-launch); its output, which must succeed."""
    result = subprocess.run([*LAUNCH, *launch_flags, "--", "t2t-trainer", *args],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def _checkpoint_files(output_dir: str) -> dict[str, str]:
    return support.snapshot(output_dir, exclude=("checkpoint",)) if output_dir else {}


def _kept_checkpoints(output_dir: str) -> dict[str, str]:
    """{file: sha256} of the complete checkpoints now in `output_dir` (must survive)."""
    return {rel: digest for rel, digest in _checkpoint_files(output_dir).items()
            if rel.startswith("ckpt-")}


# ------------------------------------------------------------------ messages
def test_a_cluster_error_says_its_cause_and_names_the_lost_task():
    import tensorflow as tf

    from t2t.trainer import strategy_cluster

    noisy = ("Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most "
             "recent call last):\n  File \"loop.py\", line 1, in train\n\nCollective ops is "
             "aborted by: The following tasks are unhealthy (stopped sending heartbeats):\n"
             "/job:worker/replica:0/task:1\n\t [[{{node CollectiveReduceV2}}]] [Op:__inference_1]")
    summary = strategy_cluster.peer_error_summary(tf.errors.UnavailableError(None, None, noisy))
    assert summary == ("UnavailableError: Collective ops is aborted by: The following tasks are "
                       "unhealthy (stopped sending heartbeats): /job:worker/replica:0/task:1")
    config = {"cluster": {"chief": ["127.0.0.1:2222"], "worker": ["127.0.0.1:22240"],
                          "ps": ["127.0.0.1:2224"]}, "task": {"type": "chief", "index": 0}}
    lost = tf.errors.UnavailableError(None, None, "failed to connect to all addresses; last "
                                      "error: UNKNOWN: ipv4:127.0.0.1:2224: Connection refused "
                                      "(from 127.0.0.1:2222, /job:worker/replica:0/task:0)")
    summary = strategy_cluster.peer_error_summary(lost, config)  # the unreachable one: not the
    assert summary.startswith("ps:0 at 127.0.0.1:2224, UnavailableError: failed to connect")
    # chief itself (its own address), nor the worker that ran the function (its device)
    config = {"cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]},
              "task": {"type": "worker", "index": 0}}
    summary = strategy_cluster.peer_error_summary(tf.errors.UnavailableError(None, None, noisy), config)
    assert summary.startswith("worker:1 at 127.0.0.1:2223, UnavailableError: Collective ops")
    long = strategy_cluster.peer_error_summary(tf.errors.DeadlineExceededError(None, None, "x" * 999))
    assert len(long) == 300 and long.endswith("...")


# ------------------------------------------------------------------ stalled worker
@pytest.mark.slow  # 2 workers, a stall, a relaunch: ~2 min on 2 cores
def test_a_stalled_worker_ends_the_job_in_time_and_a_relaunch_resumes(data_dir, tmp_path,
                                                                        robustness):
    out, steps = str(tmp_path / "run"), 300
    args = _args(data_dir, out, steps, 50, f"--collective_timeout={COLLECTIVE_TIMEOUT_S}")
    with _cluster(tf_config.Layout(2), args, tmp_path) as cluster:
        _wait_for_checkpoint(cluster, out, "worker:0")
        cluster.procs["worker:1"].send_signal(signal.SIGSTOP)
        robustness.fault("SIGSTOP one of two MultiWorkerMirrored workers mid-training")
        code, waited = cluster.wait("worker:0", COLLECTIVE_TIMEOUT_S + 60)
        chief = cluster.output("worker:0")
        kept = support.latest_checkpoint_step(out)
        before = _kept_checkpoints(out)
        # Continued, the stalled worker finds its peer gone and fails by itself.
        cluster.procs["worker:1"].send_signal(signal.SIGCONT)
        stalled_code, _ = cluster.wait("worker:1", COLLECTIVE_TIMEOUT_S + 60)
        stalled = cluster.output("worker:1")
    assert code == 1 and waited < COLLECTIVE_TIMEOUT_S + 30, (code, waited, chief[-3000:])
    for text in (chief, stalled):
        assert "another process of the cluster failed or stopped answering" in text, text[-3000:]
        assert "re-run the same launch command to resume" in text
        assert "Traceback" not in text, text[-3000:]
    error = next(line for line in chief.splitlines() if "stopped answering" in line)
    assert "Graph execution error" not in error, error  # the cause, not TensorFlow's header
    assert stalled_code == 1
    assert kept is not None and kept < steps
    output = _relaunch("--num_workers=2", args=args)
    assert f"Resumed from ckpt-{kept} at step {kept}." in output, output[-3000:]
    assert _checkpoint_steps(out)[-1] == steps
    support.assert_kept(robustness, out, before)
    robustness.run_completed(f"2 MultiWorkerMirrored workers relaunched after a stall: "
                             f"ckpt-{kept} -> step {steps}")


# ------------------------------------------------------------------ preemption notice
@pytest.mark.slow  # 2 workers, then a relaunch: ~1.5 min on 2 cores
@pytest.mark.parametrize("victim", ["worker:0", "worker:1"], ids=["chief", "worker"])
def test_sigterm_to_one_process_stops_all_at_the_same_step(data_dir, tmp_path, robustness,
                                                            victim):
    out, steps = str(tmp_path / "run"), 400
    args = _args(data_dir, out, steps, 50, f"--collective_timeout={COLLECTIVE_TIMEOUT_S}")
    with _cluster(tf_config.Layout(2), args, tmp_path) as cluster:
        _wait_for_checkpoint(cluster, out, "worker:0")
        cluster.procs[victim].send_signal(signal.SIGTERM)
        role = "chief" if victim == "worker:0" else "non-chief worker"
        robustness.fault(f"SIGTERM (preemption notice) to the {role} of 2 MultiWorkerMirrored "
                         f"workers")
        results = {name: cluster.wait(name, 120) for name in ("worker:0", "worker:1")}
        outputs = {name: cluster.output(name) for name in results}
    stopped = {}
    for name, (code, _) in results.items():
        assert code == 0, (name, outputs[name][-3000:])
        match = re.search(r"^Stopped by a signal at step (\d+): "
                          r"(saved .*|the chief saved the checkpoint)\.$", outputs[name], re.M)
        assert match, (name, outputs[name][-3000:])
        stopped[name] = int(match[1])
    step = stopped["worker:0"]
    assert stopped["worker:1"] == step < steps, stopped  # the same step, everywhere
    assert support.latest_checkpoint_step(out) == step  # the chief saved it
    before = _kept_checkpoints(out)
    output = _relaunch("--num_workers=2", args=args)
    assert f"Resumed from ckpt-{step} at step {step}." in output, output[-3000:]
    assert _checkpoint_steps(out)[-1] == steps
    support.assert_kept(robustness, out, before)
    robustness.run_completed(f"2 workers relaunched after SIGTERM to the {role}: "
                             f"ckpt-{step} -> step {steps}")


# ------------------------------------------------------------------ parameter servers
@pytest.mark.slow  # chief, 2 workers and a ps: ~2 min on 2 cores
def test_a_killed_ps_worker_is_replaced_while_the_chief_goes_on(data_dir, tmp_path,
                                                                 robustness):
    out, steps = str(tmp_path / "run"), 1000  # long enough for a restarted worker to rejoin
    args = _args(data_dir, out, steps, 20, "--sync=false")
    with _cluster(tf_config.Layout(2, num_ps=1), args, tmp_path) as cluster:
        first = _wait_for_checkpoint(cluster, out, "chief:0")
        cluster.procs["worker:1"].kill()
        cluster.procs["worker:1"].wait(timeout=30)
        robustness.fault("SIGKILL a ParameterServerStrategy worker mid-run")
        # The chief goes on with the other worker alone: it saves again.
        alone = _wait_for_checkpoint(cluster, out, "chief:0", after=first)
        restarted = cluster.start("worker", 1)
        robustness.fault("restart the killed ParameterServerStrategy worker")
        idle = _cpu_seconds_once_serving(cluster, "worker:1")
        code, _ = cluster.wait("chief:0", RUN_TIMEOUT_S)
        chief = cluster.output("chief:0")
        # An idle server uses no CPU: the restarted worker ran the chief's steps.
        worked = _cpu_seconds(restarted.pid) - idle
    assert code == 0, chief[-3000:]
    assert alone < steps, alone
    assert "Worker /job:worker/replica:0/task:1 failed with UnavailableError" in chief
    assert worked > 2.0, (worked, chief[-3000:])
    assert f"step {steps}/{steps}" in chief and f"eval step {steps}:" in chief
    assert _checkpoint_steps(out)[-1] == steps
    robustness.run_completed(f"parameter-server chief reached step {steps} through a worker "
                             f"kill and its restart")


@pytest.mark.slow  # chief, worker and ps, then a relaunch: ~2 min on 2 cores
def test_a_killed_ps_ends_the_job_and_a_relaunch_resumes(data_dir, tmp_path, robustness):
    out, steps = str(tmp_path / "run"), 120
    args = _args(data_dir, out, steps, 20, "--sync=false")
    with _cluster(tf_config.Layout(1, num_ps=1), args, tmp_path) as cluster:
        _wait_for_checkpoint(cluster, out, "chief:0")
        ps_address = cluster.spec["ps"][0]
        cluster.procs["ps:0"].kill()
        robustness.fault("SIGKILL the parameter server mid-run")
        code, waited = cluster.wait("chief:0", 120)
        chief = cluster.output("chief:0")
        kept = support.latest_checkpoint_step(out)
        before = _kept_checkpoints(out)
    assert code == 1, chief[-3000:]
    assert "another process of the cluster failed or stopped answering" in chief, chief[-3000:]
    assert f"failed or stopped answering (ps:0 at {ps_address}, " in chief  # by name
    assert "re-run the same launch command to resume" in chief
    assert "Traceback" not in chief, chief[-3000:]
    assert kept is not None and kept < steps
    output = _relaunch("--num_workers=1", "--num_ps=1", args=args)
    assert f"Resumed from ckpt-{kept} at step {kept}." in output, output[-3000:]
    assert _checkpoint_steps(out)[-1] == steps
    support.assert_kept(robustness, out, before)
    robustness.run_completed(f"parameter-server job relaunched after a ps loss: ckpt-{kept} "
                             f"-> step {steps}")
