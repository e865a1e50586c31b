"""Multi-process training for real, on 127.0.0.1: MultiWorkerMirrored over 2 worker
processes, parameter servers (1 ps + 1 worker + chief), a checkpoint carried across
strategies, and a killed worker.

Each test starts several TensorFlow processes (~10 s each to start on 2 cores); they
train transformer_test for a few dozen steps: what is checked is the machinery (steps,
checkpoints, who writes what, errors), not convergence (see regression/). The two
longest are marked slow: CI runs the others, `python -m pytest -m slow` these.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from t2t.cluster import tf_config
from tests.helpers.runs import NO_DECODE_SUMMARIES, assert_one_trace

PROBLEM = "algorithmic_reverse_binary40_test"
TRAINER = [sys.executable, "-m", "t2t.bin.t2t_trainer"]
LAUNCH = [sys.executable, "-m", "t2t.bin.t2t_launch"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("data")
    subprocess.run([sys.executable, "-m", "t2t.bin.t2t_datagen", f"--problem={PROBLEM}",
                    f"--data_dir={path}"], check=True, capture_output=True, timeout=300)
    return str(path)


def trainer_args(data_dir, output_dir, steps, *extra):
    return [f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_test",
            f"--train_steps={steps}", "--log_every_steps=10", "--local_eval_frequency=1000",
            "--eval_steps=2", "--save_checkpoints_steps=10", f"--data_dir={data_dir}",
            f"--output_dir={output_dir}", NO_DECODE_SUMMARIES, *extra]


def run(cmd, timeout=420, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def checkpoint_steps(output_dir):
    return sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(output_dir)
                  if f.startswith("ckpt-") and f.endswith(".index"))


def eval_steps(output_dir):
    with open(os.path.join(output_dir, "eval_results.jsonl"), encoding="utf-8") as f:
        return [json.loads(line)["step"] for line in f]


def test_two_workers_train_and_only_the_chief_writes(data_dir, tmp_path):
    out = tmp_path / "run"
    output = run(LAUNCH + ["--num_workers=2", "--"] + ["t2t-trainer"]
                 + trainer_args(data_dir, out, 20, "--profile_steps=5,6"))
    assert "MultiWorkerMirroredStrategy" in output or "CollectiveAllReduceStrategy" in output
    assert "2 replica(s), cluster of 2 worker; this is worker 0 (chief)" in output
    assert "this is worker 1;" in output
    assert checkpoint_steps(out) == [10, 20]
    assert eval_steps(out) == [20]  # one line per evaluation: the chief's alone
    assert not (out / "tmp_workers").exists()  # the other worker's scratch is removed
    assert_one_trace(out, b"train_step")  # the chief's alone


# slow: three processes (chief, worker, ps) for CI's time; ParameterServerStrategy's
#   selection and flags are unit-tested in CI (tests/trainer/test_strategy.py), its training
#   in the regression case transformer_tiny_reverse_ps and the robustness suite's ps faults
@pytest.mark.slow
def test_parameter_server_training(data_dir, tmp_path):
    out = tmp_path / "run"
    output = run(LAUNCH + ["--num_workers=1", "--num_ps=1", "--"] + ["t2t-trainer"]
                 + trainer_args(data_dir, out, 20, "--sync=false", "--profile_steps=5,6"))
    assert "ParameterServerStrategy" in output
    assert_one_trace(out, b"train")  # the coordinator's side, on the chief
    assert checkpoint_steps(out) == [10, 20]
    assert eval_steps(out) == [20]


@pytest.mark.slow  # four trainer starts (~3 min on 2 cores); python -m pytest -m slow
def test_a_checkpoint_moves_between_strategies(data_dir, tmp_path):
    out = tmp_path / "run"
    run(TRAINER + trainer_args(data_dir, out, 10))  # one device
    output = run(TRAINER + trainer_args(data_dir, out, 20, "--cpu_devices=2"))
    assert "MirroredStrategy, 2 replica(s)" in output and "Resumed from ckpt-10 at step 10" in output
    output = run(LAUNCH + ["--num_workers=2", "--", "t2t-trainer"] + trainer_args(data_dir, out, 30))
    assert "Resumed from ckpt-20 at step 20" in output
    output = run(TRAINER + trainer_args(data_dir, out, 40))  # and back to one device
    assert "Resumed from ckpt-30 at step 30" in output
    assert checkpoint_steps(out)[-4:] == [10, 20, 30, 40]
    assert eval_steps(out) == [10, 20, 30, 40]


@pytest.mark.slow  # waits for a peer timeout, then a whole relaunch (~4 min on 2 cores)
def test_a_killed_worker_ends_the_job_and_a_rerun_resumes(data_dir, tmp_path):
    out = tmp_path / "run"
    ports = tf_config.free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    args = trainer_args(data_dir, out, 60, "--collective_timeout=30")
    workers = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        workers.append(subprocess.Popen(TRAINER + args, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    try:
        deadline = time.monotonic() + 300
        while not checkpoint_steps(out) if out.exists() else True:
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            assert workers[0].poll() is None, workers[0].communicate()[0][-3000:]
            time.sleep(0.5)
        workers[1].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        output, _ = workers[0].communicate(timeout=120)
        waited = time.monotonic() - killed_at
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert workers[0].returncode != 0
    assert "another process of the cluster failed or stopped answering" in output, output[-3000:]
    assert "re-run the same launch command to resume" in output
    assert waited < 90  # the collective timeout (30 s) or TF's peer health check, no hang
    kept = checkpoint_steps(out)
    assert kept and kept[-1] < 60
    # The same job started again resumes from the kept checkpoint and finishes.
    output = run(LAUNCH + ["--num_workers=2", "--", "t2t-trainer"] + args)
    assert f"Resumed from ckpt-{kept[-1]} at step {kept[-1]}" in output
    assert checkpoint_steps(out)[-1] == 60
    assert eval_steps(out)[-1] == 60


def _logged_losses(output: str) -> list[float]:
    return [float(m) for m in re.findall(r"step \d+/\d+ loss ([\d.]+)", output)]


# slow: two 4-process clusters and a resume (~3 min on 2 cores); the partitioner flags and
#   shard-by-shard updates are unit-tested in CI (tests/trainer/test_strategy.py)
@pytest.mark.slow
def test_an_embedding_split_over_two_ps_tasks_trains_as_unsplit(data_dir, tmp_path):
    """--ps_min_shard_bytes splits the vocabulary embedding (and every weight of at least
    twice that size) over the 2 ps tasks; the one worker's steps give the losses of the
    same cluster with whole variables, and the split checkpoint's weights warm-start a
    run on one device."""
    cluster = LAUNCH + ["--num_workers=1", "--num_ps=2", "--", "t2t-trainer"]
    flags = ("--sync=false", "--random_seed=1", "--deterministic")
    split = run(cluster + trainer_args(data_dir, tmp_path / "split", 30, *flags,
                                       "--ps_min_shard_bytes=64"))
    held = re.search(r"Parameter servers hold shared_symbol_modality/weights \[(\d+), (\d+)\] "
                     r"split in 2: \[(\d+), \2\] on ps:0, \[(\d+), \2\] on ps:1", split)
    assert held and int(held[3]) + int(held[4]) == int(held[1]), split[-3000:]
    whole = run(cluster + trainer_args(data_dir, tmp_path / "whole", 30, *flags))
    assert "Parameter servers hold" not in whole
    assert len(_logged_losses(split)) == 3
    assert _logged_losses(split) == pytest.approx(_logged_losses(whole), rel=1e-4)
    # Its optimizer slots follow the split: a resume without it is refused with the way
    # out, which warm-starts the whole weights on one device.
    refused = subprocess.run(TRAINER + trainer_args(data_dir, tmp_path / "split", 40),
                             capture_output=True, text=True, timeout=420)
    assert refused.returncode != 0
    assert "split over parameter servers (min_shard_bytes=64,max_shards=2)" in refused.stderr
    warm = run(TRAINER + trainer_args(data_dir, tmp_path / "warm", 10,
                                      f"--warm_start_from={tmp_path / 'split'}"))
    assert "Warm-started the weights from" in warm and checkpoint_steps(tmp_path / "warm")
