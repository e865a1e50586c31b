"""Injected faults: t2t-datagen and t2t-trainer SIGKILLed at random points, several
times in a row, then run again to completion.

* datagen: killed twice in the middle of a shard. A reader refuses the split while a
  shard is missing (the partial one is never under a final name); the shards finished
  before each kill are kept byte for byte; the re-run writes only the missing ones and
  the data equals an uninterrupted generation's.
* trainer: killed at two random steps (--deterministic). Each re-run resumes from the
  latest checkpoint; the last one reaches the right step, and every step's loss and the
  final weights equal an uninterrupted run's.

The kill points come from T2T_ROBUSTNESS_SEED (random when unset; printed at the end).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.robustness import support
from tests.robustness.support import HPARAMS, HPARAMS_SET, MODEL, PROBLEM, run_binary

SHARDED = "zz_robustness_sharded"  # 4 train shards of 100 examples (support.USR_INIT)
PER_SHARD, TRAIN_SHARDS = 100, 4
TRAIN_STEPS, SAVE_EVERY = 12, 2
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def seed() -> int:
    value = int(os.environ.get("T2T_ROBUSTNESS_SEED") or random.SystemRandom().randrange(10**6))
    support.TALLY.seed = value
    return value


@pytest.fixture
def kill_rng(seed, request) -> random.Random:
    """The test's own random kill points: the same seed repeats them, whichever tests run."""
    return random.Random(f"{seed}:{request.node.name}")


def _kill_after(proc: subprocess.Popen, seconds: float) -> threading.Timer:
    """A watchdog: a process that hangs is killed, so the test fails instead of waiting."""
    timer = threading.Timer(seconds, lambda: proc.poll() is None and proc.kill())
    timer.daemon = True
    timer.start()
    return timer


# ------------------------------------------------------------------------ datagen
def _train_shard(data_dir, index: int) -> str:
    return os.path.join(data_dir, f"{SHARDED}-train-{index:05d}-of-{TRAIN_SHARDS:05d}")


def _examples(data_dir) -> dict[str, list]:
    """{shard file name: its examples as (inputs, targets) tuples, in order}.

    Shards are compared by content: protobuf map fields (the features of an Example)
    serialize in an order that differs between processes, so bytes do not repeat."""
    import tensorflow as tf

    shards = {}
    for name in sorted(os.listdir(data_dir)):
        if name.startswith(SHARDED + "-"):
            shards[name] = [
                tuple(tuple(tf.train.Example.FromString(record).features.feature[key]
                            .int64_list.value) for key in ("inputs", "targets"))
                for record in tf.data.TFRecordDataset(os.path.join(data_dir, name))
                .as_numpy_iterator()
            ]
    return shards


def _datagen_killed_at(usr_dir, data_dir, stall_at: int, tmp_path) -> None:
    """Runs t2t-datagen as a process until it reaches train example `stall_at` (the
    problem stalls there), then SIGKILLs it."""
    stall_file = tmp_path / f"stalled_at_{stall_at}"
    env = dict(os.environ, T2T_ROBUSTNESS_STALL_AT=str(stall_at),
               T2T_ROBUSTNESS_STALL_FILE=str(stall_file))
    with open(tmp_path / f"datagen_{stall_at}.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "t2t.bin.t2t_datagen", f"--t2t_usr_dir={usr_dir}",
             f"--problem={SHARDED}", f"--data_dir={data_dir}", "--progress=false"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        watchdog = _kill_after(proc, TIMEOUT_S)
        while not stall_file.exists() and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        watchdog.cancel()
    assert stall_file.exists(), open(tmp_path / f"datagen_{stall_at}.log").read()[-3000:]
    assert proc.returncode == -signal.SIGKILL


def test_datagen_sigkill_mid_shard_then_rerun(robustness, usr_dir, tmp_path, kill_rng):
    from t2t import registry
    from t2t import usr_dir as usr_dir_lib
    from t2t.data import problem as problem_lib

    usr_dir_lib.import_usr_dir(usr_dir)
    problem = registry.problem(SHARDED)
    reference = str(tmp_path / "reference")
    problem.generate_data(reference, reference + "/tmp", progress=False)
    expected = _examples(reference)
    assert [len(v) for v in expected.values()] == [40] + [PER_SHARD] * TRAIN_SHARDS

    data = str(tmp_path / "data")
    first = kill_rng.choice([1, 2])
    kills = [first * PER_SHARD + kill_rng.randint(1, PER_SHARD - 1),
             kill_rng.randint(first + 1, TRAIN_SHARDS - 1) * PER_SHARD
             + kill_rng.randint(1, PER_SHARD - 1)]
    finished: dict[str, str] = {}  # shards complete after a kill: must be kept as they are
    for stall_at in kills:
        shard = stall_at // PER_SHARD
        _datagen_killed_at(usr_dir, data, stall_at, tmp_path)
        robustness.fault(f"SIGKILL t2t-datagen at train example {stall_at} "
                         f"(shard {shard}, {stall_at % PER_SHARD} examples in)")
        robustness.data_lost(support.lost_files(data, finished))
        assert not support.lost_files(data, finished)
        # The shards before the killed one are complete and final, the killed one is
        # only a hidden partial file, the later ones do not exist.
        for index in range(TRAIN_SHARDS):
            assert os.path.exists(_train_shard(data, index)) == (index < shard), index
        partial = os.path.join(data, f".{os.path.basename(_train_shard(data, shard))}.incomplete")
        assert os.path.exists(partial)
        finished = {rel: digest for rel, digest in support.snapshot(data).items()
                    if not rel.startswith(".")}
        examples = _examples(data)
        assert all(examples[name] == expected[name] for name in examples), examples.keys()
        # No reader accepts the split: the missing shards are named.
        with pytest.raises(problem_lib.DataMissingError, match="is incomplete: missing "
                           + re.escape(os.path.basename(_train_shard(data, shard)))):
            problem.data_files(data, "train")
        result = run_binary("t2t-datagen", f"--problem={SHARDED}", f"--data_dir={data}",
                            "--inspect")
        assert result.code == 1 and not result.traceback, result.err
        assert f"The train data of {SHARDED!r} in {data!r} is incomplete" in result.err
        assert f"Run: t2t-datagen --problem={SHARDED} --data_dir={data}" in result.err

    result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}", f"--problem={SHARDED}",
                        f"--data_dir={data}", "--progress=false")
    assert result.code == 0 and not result.traceback, result.err
    robustness.run_completed("t2t-datagen re-run after two SIGKILLs")
    killed_shard = kills[-1] // PER_SHARD
    table = {line.split()[0]: line.split()[1:4] for line in result.out.splitlines()
             if line.split()[:1] in (["train"], ["dev"])}
    assert table["train"][1:] == [str(TRAIN_SHARDS - killed_shard), str(killed_shard)], table
    assert table["dev"][1:] == ["1", "0"], table
    support.assert_kept(robustness, data, finished)  # the finished shards were skipped
    assert _examples(data) == expected  # every shard complete, with the same examples
    assert not [name for name in os.listdir(data) if name.endswith(".incomplete")]
    assert len(problem.data_files(data, "train")) == TRAIN_SHARDS


# ------------------------------------------------------------------------ trainer
def _trainer_command(data_dir, output_dir):
    return [sys.executable, "-m", "t2t.bin.t2t_trainer", f"--problem={PROBLEM}",
            f"--model={MODEL}", f"--hparams_set={HPARAMS_SET}", f"--hparams={HPARAMS}",
            f"--data_dir={data_dir}", f"--output_dir={output_dir}",
            f"--train_steps={TRAIN_STEPS}", f"--save_checkpoints_steps={SAVE_EVERY}",
            "--log_every_steps=1", "--schedule=train", "--deterministic", "--random_seed=7"]


_STEP_RE = re.compile(r"^step (\d+)/(\d+) loss ([0-9.naif]+)")
_RESUMED_RE = re.compile(r"^Resumed from ckpt-(\d+) at step (\d+)\.")


def _parse(stdout: str) -> tuple[int | None, dict[int, str]]:
    """(step resumed from or None, {step: printed loss})."""
    resumed, losses = None, {}
    for line in stdout.splitlines():
        if match := _RESUMED_RE.match(line):
            resumed = int(match[2])
        elif match := _STEP_RE.match(line):
            losses[int(match[1])] = match[3]
    return resumed, losses


def _model_weights(checkpoint: str) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


@contextlib.contextmanager
def _background(command: list[str], log_prefix) -> Iterator[subprocess.Popen]:
    """A process running beside the test (stdout, stderr to files); killed if the test
    fails before it ends."""
    with open(f"{log_prefix}.out", "w") as out, open(f"{log_prefix}.err", "w") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _run_until_step(command: list[str], target: int) -> str:
    """Runs `command` and SIGKILLs it once it prints step `target` (or later); its stdout."""
    lines = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    watchdog = _kill_after(proc, TIMEOUT_S)
    for line in proc.stdout:
        lines.append(line)
        match = _STEP_RE.match(line)
        if match and int(match[1]) >= target:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    watchdog.cancel()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    return "".join(lines)


@pytest.mark.slow  # ~65 s on 2 cores; CI keeps the SIGKILLs during a checkpoint save
def test_trainer_sigkill_at_random_steps_then_completes(robustness, data_dir, tmp_path,
                                                        kill_rng):
    reference_dir, killed_dir = str(tmp_path / "reference"), str(tmp_path / "killed")
    command = _trainer_command(data_dir, killed_dir)
    printed: list[tuple[str, int, str]] = []  # (run, step, loss) of every run
    latest = 0  # the checkpoint a re-run must resume from (0: none)
    kept: dict[str, str] = {}  # checkpoint files complete after a kill -> sha256
    kills = 0
    # The uninterrupted run goes on beside the killed ones.
    with _background(_trainer_command(data_dir, reference_dir), tmp_path / "reference") \
            as reference:
        while kills < 2 and latest + 1 <= TRAIN_STEPS - 2:
            # From the step that writes the next checkpoint (the kill may land mid-save).
            target = min(latest + kill_rng.randint(SAVE_EVERY, 2 * SAVE_EVERY),
                         TRAIN_STEPS - 2)
            output = _run_until_step(command, target)
            kills += 1
            resumed, losses = _parse(output)
            robustness.fault(f"SIGKILL t2t-trainer at step {max(losses)} "
                             f"(run {kills}, resumed from step {resumed or 0})")
            # Each re-run resumes from the latest complete checkpoint: no step is lost.
            lost = [] if (resumed or 0) == latest else [f"resumed at {resumed}, not {latest}"]
            robustness.data_lost(lost)
            assert not lost and min(losses) == latest + 1, output[-3000:]
            printed += [(f"killed run {kills}", step, loss) for step, loss in losses.items()]
            latest = support.latest_checkpoint_step(killed_dir) or 0
            assert latest == 0 or latest in support.checkpoint_steps(killed_dir)
            for step in support.checkpoint_steps(killed_dir):  # to be kept as they are
                for name in (f"ckpt-{step}.index", f"ckpt-{step}.data-00000-of-00001"):
                    if step <= latest and name not in kept:
                        kept[name] = support.sha256_of(os.path.join(killed_dir, name))
        assert kills >= 2, kills

        final = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert final.returncode == 0, final.stderr[-3000:]
        resumed, losses = _parse(final.stdout)
        lost = [] if (resumed or 0) == latest else [f"last run resumed at {resumed}, not {latest}"]
        robustness.data_lost(lost)
        assert not lost, final.stdout
        assert sorted(losses) == list(range(latest + 1, TRAIN_STEPS + 1)), final.stdout
        assert support.latest_checkpoint_step(killed_dir) == TRAIN_STEPS
        assert support.checkpoint_steps(killed_dir)[-1] == TRAIN_STEPS
        support.assert_kept(robustness, killed_dir, kept)  # the killed runs' checkpoints
        robustness.run_completed(f"t2t-trainer to step {TRAIN_STEPS} after {kills} SIGKILLs")
        printed += [("last run", step, loss) for step, loss in losses.items()]
        reference.wait(timeout=TIMEOUT_S)

    assert reference.returncode == 0, open(tmp_path / "reference.err").read()[-3000:]
    robustness.run_completed(f"t2t-trainer to step {TRAIN_STEPS}, uninterrupted (reference)")
    _, expected = _parse(open(tmp_path / "reference.out").read())
    assert sorted(expected) == list(range(1, TRAIN_STEPS + 1)), expected
    # --deterministic: every step, the final loss and the final weights are the same.
    differing = [(run, step, loss, expected[step]) for run, step, loss in printed
                 if loss != expected[step]]
    assert not differing, differing
    assert losses[TRAIN_STEPS] == expected[TRAIN_STEPS]
    ours = _model_weights(os.path.join(killed_dir, f"ckpt-{TRAIN_STEPS}"))
    theirs = _model_weights(os.path.join(reference_dir, f"ckpt-{TRAIN_STEPS}"))
    assert ours.keys() == theirs.keys() and ours
    different = [name for name in ours if not np.array_equal(ours[name], theirs[name])]
    assert not different, different
