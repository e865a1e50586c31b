"""Injected checkpoint faults: t2t-trainer SIGKILLed at exact points of a checkpoint
save, a damaged newest checkpoint on disk, and a full disk during a save.

* SIGKILL: t2t-trainer runs as a real process through a wrapper (written here, enabled
  by T2T_TEST_CKPT_FAULT=POINT:STEP) that patches TensorFlow's checkpoint writing
  (io_ops.save_v2, gen_io_ops.merge_v2_checkpoints, the CheckpointManager's state
  update) to leave the files as a kill at POINT of the save of ckpt-STEP leaves them,
  then SIGKILLs itself. The re-run resumes from the last complete checkpoint, says which
  in one line, and completes; the complete checkpoints are kept byte for byte.
* Damaged on disk: the newest checkpoint's data shard truncated, or one bit flipped
  (TensorFlow checks each tensor's crc32c when it reads it). t2t-trainer names the file
  and the previous good checkpoint and deletes nothing; --resume_from=ckpt-N resumes
  from that one.
* Disk full: the run directory on a small tmpfs (or, where mounting is not allowed, a
  file-size limit in the child process): the save fails with a clear error, the last
  good checkpoint stays intact, and a re-run after space is freed completes.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.robustness import support
from tests.robustness.support import (
    FAST_DECODE,
    HPARAMS,
    HPARAMS_SET,
    MODEL,
    PROBLEM,
    run_binary,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "data-00000-of-00001"
TIMEOUT_S = 300

# Runs t2t-trainer with a fault at a point of one checkpoint save (T2T_TEST_CKPT_FAULT).
INJECT = r'''
import os, runpy, signal, sys

POINT, STEP = os.environ["T2T_TEST_CKPT_FAULT"].split(":")
PREFIX = "ckpt-" + STEP

from t2t.utils import tf_startup

tf_startup.import_tensorflow()
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management
from tensorflow.python.ops import gen_io_ops, io_ops


def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def half(path):
    os.truncate(path, os.path.getsize(path) // 2)


save_v2 = io_ops.save_v2
def save_v2_torn(prefix, *args, **kwargs):  # writes DIR/ckpt-N_temp/part-*
    result = save_v2(prefix, *args, **kwargs)
    path = prefix.numpy().decode()
    if POINT == "mid_data" and os.path.basename(os.path.dirname(path)) == PREFIX + "_temp":
        half(path + ".data-00000-of-00001")  # killed while writing the data
        die()
    return result


merge = gen_io_ops.merge_v2_checkpoints
def merge_torn(checkpoint_prefixes, destination_prefix, **kwargs):
    # TensorFlow's merge renames the data shards into place, then writes the index.
    dest = destination_prefix.numpy().decode()
    if os.path.basename(dest) == PREFIX and POINT == "data_not_index":
        sources = tf.reshape(tf.convert_to_tensor(checkpoint_prefixes), [-1]).numpy()
        for i, source in enumerate(sources):
            os.rename(source.decode() + ".data-00000-of-00001",
                      f"{dest}.data-{i:05d}-of-{len(sources):05d}")
        die()
    result = merge(checkpoint_prefixes, destination_prefix, **kwargs)
    if os.path.basename(dest) == PREFIX and POINT == "mid_index":
        half(dest + ".index")  # killed while writing the index
        die()
    return result


update_state = checkpoint_management.update_checkpoint_state_internal
def update_state_killed(save_dir, model_checkpoint_path, *args, **kwargs):
    if os.path.basename(model_checkpoint_path) == PREFIX and POINT == "index_not_state":
        die()  # the checkpoint is complete; the state file does not list it yet
    return update_state(save_dir, model_checkpoint_path, *args, **kwargs)


io_ops.save_v2 = save_v2_torn
gen_io_ops.merge_v2_checkpoints = merge_torn
checkpoint_management.update_checkpoint_state_internal = update_state_killed
sys.argv = ["t2t-trainer", *sys.argv[1:]]
runpy.run_module("t2t.bin.t2t_trainer", run_name="__main__", alter_sys=True)
'''


def _flags(data_dir, output_dir, steps: int, *extra: str) -> list[str]:
    return [f"--problem={PROBLEM}", f"--model={MODEL}", f"--hparams_set={HPARAMS_SET}",
            f"--hparams={HPARAMS}", f"--data_dir={data_dir}", f"--output_dir={output_dir}",
            f"--train_steps={steps}", "--save_checkpoints_steps=2", "--log_every_steps=1",
            "--schedule=train", *extra]


def _assert_clear(result, *fragments):
    assert result.code == 1, (result.out, result.err)
    assert not result.traceback, result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def _checkpoint_files(run: str, steps) -> dict[str, str]:
    """{file name: sha256} of the index and data file of each of `steps`."""
    return {name: support.sha256_of(os.path.join(run, name))
            for step in steps for name in (f"ckpt-{step}.index", f"ckpt-{step}.{DATA}")}


def _loads(checkpoint: str) -> bool:
    """Every tensor of `checkpoint` reads back (crc32c checked), the weights finite."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint)
    values = [reader.get_tensor(n) for n, dtype in reader.get_variable_to_dtype_map().items()
              if dtype != tf.variant]  # the input position has no numpy value
    return all(np.all(np.isfinite(v)) for v in values if np.issubdtype(
        np.asarray(v).dtype, np.floating))


@pytest.fixture
def run_copy(trained_run, tmp_path):
    """A copy of the suite's run (its ckpt-0)."""
    path = str(tmp_path / "run")
    shutil.copytree(trained_run, path)
    return path


# ------------------------------------------------------------ SIGKILL mid-save
KILL_POINTS = {
    "mid_data": "while writing the data file",
    "data_not_index": "data file in place, index not written",
    "mid_index": "while writing the index",
    "index_not_state": "index written, the checkpoint state file not",
}

TORN = {  # the files of ckpt-4 each kill leaves (the index torn at mid_index)
    "mid_data": {"ckpt-4_temp"},
    "data_not_index": {"ckpt-4_temp", f"ckpt-4.{DATA}"},
    "mid_index": {"ckpt-4.index", f"ckpt-4.{DATA}"},
    "index_not_state": {"ckpt-4.index", f"ckpt-4.{DATA}"},
}


@pytest.mark.parametrize("point", [
    # One of the four in CI's quick run (a torn file left in PREFIX_temp); the other
    # three are slow (python -m pytest -m robustness runs them).
    point if point == "mid_data" else
    pytest.param(point, marks=pytest.mark.slow) for point in KILL_POINTS])
def test_sigkill_during_checkpoint_save_then_resume(robustness, run_copy, data_dir,
                                                    tmp_path, point):
    inject = tmp_path / "inject.py"
    inject.write_text(INJECT)
    env = dict(os.environ, T2T_TEST_CKPT_FAULT=f"{point}:4",  # the script is not in the repo
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    killed = subprocess.run([sys.executable, str(inject), *_flags(data_dir, run_copy, 6)],
                            capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert "step 4/6 loss" in killed.stdout and "step 5/6" not in killed.stdout
    robustness.fault(f"SIGKILL t2t-trainer during the save of ckpt-4 ({KILL_POINTS[point]})")
    # What the kill left of ckpt-4; ckpt-2, the last complete one, is what the state
    # file names.
    files = {name for name in os.listdir(run_copy) if name.startswith("ckpt-4")}
    assert files == TORN[point], files
    assert support.latest_checkpoint_step(run_copy) == 2
    kept = _checkpoint_files(run_copy, [0, 2])

    result = run_binary("t2t-trainer", *_flags(data_dir, run_copy, 6))
    assert result.code == 0 and not result.traceback, result.err
    resumed = [line for line in result.out.splitlines() if line.startswith("Resumed from")]
    assert resumed == ["Resumed from ckpt-2 at step 2."], result.out
    assert "step 3/6 loss" in result.out and "step 6/6 loss" in result.out
    support.assert_kept(robustness, run_copy, kept)
    assert support.checkpoint_steps(run_copy) == [0, 2, 4, 6]
    assert support.latest_checkpoint_step(run_copy) == 6
    assert not [n for n in os.listdir(run_copy) if n.endswith("_temp")]  # merged, removed
    assert _loads(os.path.join(run_copy, "ckpt-4")) and _loads(os.path.join(run_copy, "ckpt-6"))
    robustness.run_completed(f"t2t-trainer to step 6 after a SIGKILL {KILL_POINTS[point]}")


# ------------------------------------------------------- damaged on disk
@pytest.fixture(scope="module")
def two_checkpoints(trained_run, data_dir, tmp_path_factory) -> str:
    """A run with ckpt-0 and ckpt-2 (read only: tests damage a copy)."""
    path = str(tmp_path_factory.mktemp("two_checkpoints") / "run")
    shutil.copytree(trained_run, path)
    result = run_binary("t2t-trainer", *_flags(data_dir, path, 2))
    assert result.code == 0, result.err
    assert support.checkpoint_steps(path) == [0, 2]
    return path


def _truncate(path: str) -> None:
    os.truncate(path, os.path.getsize(path) * 2 // 3)


def _flip_bit(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x10]))


def _offset_of(data: str, prefix: str) -> int:
    """Where the bytes of the checkpoint's largest tensor named `prefix`... lie in the
    data shard `data` (its tensors are stored as raw bytes, in the order of their names)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(data.rsplit(".data-", 1)[0])
    name = max((n for n, d in reader.get_variable_to_dtype_map().items()
                if n.startswith(prefix) and d != tf.variant),
               key=lambda n: reader.get_tensor(n).size)
    value = reader.get_tensor(name).tobytes()
    with open(data, "rb") as f:
        offset = f.read().find(value)
    assert offset >= 0, name
    return offset + len(value) // 2


def _flip_bit_in_weights(path: str) -> None:
    _flip_bit(path, _offset_of(path, "model/"))


def _flip_bit_in_input_position(path: str) -> None:
    # The input position (a variant tensor: the shuffle buffer) is most of the bytes.
    _flip_bit(path, os.path.getsize(path) // 2)
    assert _offset_of(path, "model/")  # the weights still read back


DAMAGE = {
    "truncated": (_truncate, "is truncated (shorter than"),
    "bit_flip_in_weights": (_flip_bit_in_weights,
                            "fails its checksum (flipped or overwritten bytes)"),
    "bit_flip_in_input_position": (_flip_bit_in_input_position,
                                   "fails its checksum in the input position"),
}


@pytest.mark.parametrize("kind", [  # CI's quick run: the bit flip; the others are slow
    kind if kind == "bit_flip_in_weights" else pytest.param(kind, marks=pytest.mark.slow)
    for kind in DAMAGE])
def test_damaged_newest_checkpoint_names_it_then_resume_from_previous(
        robustness, two_checkpoints, data_dir, tmp_path, kind):
    damage, why = DAMAGE[kind]
    run = str(tmp_path / "run")
    shutil.copytree(two_checkpoints, run)
    data = os.path.join(run, f"ckpt-2.{DATA}")
    damage(data)
    robustness.fault(f"the newest checkpoint's data shard {kind.replace('_', ' ')}")
    before = support.snapshot(run)

    result = run_binary("t2t-trainer", *_flags(data_dir, run, 4))
    _assert_clear(result, f"The checkpoint {run}/ckpt-2 is damaged: {data} {why}",
                  "Nothing was changed or deleted",
                  f"the previous good checkpoint is {run}/ckpt-0: re-run the same command "
                  f"with --resume_from=ckpt-0")
    assert "does not match model" not in result.err and "new --output_dir" not in result.err
    support.assert_kept(robustness, run, before)
    assert support.snapshot(run) == before  # nothing written either

    result = run_binary("t2t-trainer", *_flags(data_dir, run, 4), "--resume_from=ckpt-0")
    assert result.code == 0 and not result.traceback, result.err
    assert "Resumed from ckpt-0 at step 0." in result.out, result.out
    assert "ckpt-0 is now the latest checkpoint; the newer ckpt-2 stay on disk, unlisted" in result.out
    assert "step 1/4 loss" in result.out and "step 4/4 loss" in result.out
    assert support.latest_checkpoint_step(run) == 4
    assert _loads(os.path.join(run, "ckpt-2")) and _loads(os.path.join(run, "ckpt-4"))
    support.assert_kept(robustness, run, {"ckpt-0.index": before["ckpt-0.index"],
                                          f"ckpt-0.{DATA}": before[f"ckpt-0.{DATA}"]})
    robustness.run_completed(f"t2t-trainer --resume_from=ckpt-0 to step 4 past ckpt-2 "
                             f"{kind.replace('_', ' ')}")


def test_no_good_checkpoint_left(robustness, two_checkpoints, data_dir, tmp_path):
    """Both checkpoints damaged: the error says none reads back and how to go on."""
    run = str(tmp_path / "run")
    shutil.copytree(two_checkpoints, run)
    _flip_bit_in_weights(os.path.join(run, f"ckpt-2.{DATA}"))
    _truncate(os.path.join(run, f"ckpt-0.{DATA}"))
    robustness.fault("every checkpoint of the run damaged (bit flip, truncation)")
    before = support.snapshot(run)
    result = run_binary("t2t-trainer", *_flags(data_dir, run, 4))
    _assert_clear(result, f"The checkpoint {run}/ckpt-2 is damaged: {run}/ckpt-2.{DATA} fails "
                  "its checksum", "no earlier checkpoint of the run reads back: restore the "
                  "files from a copy, or start a new --output_dir")
    assert "--resume_from" not in result.err, result.err
    support.assert_kept(robustness, run, before)


def test_newest_checkpoint_without_its_index(robustness, two_checkpoints, data_dir, tmp_path):
    """TensorFlow's latest_checkpoint ignores a checkpoint without its index (it returns
    None): t2t-trainer must not start over from step 0 beside the run's checkpoints."""
    run = str(tmp_path / "run")
    shutil.copytree(two_checkpoints, run)
    os.remove(os.path.join(run, "ckpt-2.index"))
    robustness.fault("the newest checkpoint's index file deleted")
    before = support.snapshot(run)
    result = run_binary("t2t-trainer", *_flags(data_dir, run, 4))
    _assert_clear(result, f"The checkpoint {run}/ckpt-2 is damaged: {run}/ckpt-2.index is "
                  f"missing", f"the previous good checkpoint is {run}/ckpt-0: re-run the same "
                  f"command with --resume_from=ckpt-0")
    assert "step 1/4" not in result.out, result.out
    support.assert_kept(robustness, run, before)
    assert support.snapshot(run) == before


def _truncate_in_weights(path: str) -> None:
    os.truncate(path, _offset_of(path, "model/"))


@pytest.mark.parametrize("kind", [pytest.param("truncated_in_weights", marks=pytest.mark.slow),
                                  "bit_flip_in_weights"])
def test_decoder_and_exporter_name_a_damaged_checkpoint(robustness, two_checkpoints,
                                                        data_dir, tmp_path, kind):
    # Only damage to the weights matters to them: they read no optimizer slots or input
    # position.
    damage, why = {"truncated_in_weights": (_truncate_in_weights, DAMAGE["truncated"][1]),
                   "bit_flip_in_weights": DAMAGE["bit_flip_in_weights"]}[kind]
    run = str(tmp_path / "run")
    shutil.copytree(two_checkpoints, run)
    data = os.path.join(run, f"ckpt-2.{DATA}")
    damage(data)
    before = support.snapshot(run)
    for binary, extra in (("t2t-decoder", ["--eval_steps=1"]),
                          ("t2t-exporter", ["--skip_parity_check"])):
        robustness.fault(f"{binary} on a newest checkpoint {kind.replace('_', ' ')}")
        result = run_binary(binary, f"--output_dir={run}", f"--data_dir={data_dir}",
                            f"--decode_hparams={FAST_DECODE}", *extra)
        _assert_clear(result, f"The checkpoint {run}/ckpt-2 is damaged: {data} {why}",
                      f"Nothing was changed; an earlier checkpoint that reads back is "
                      f"{run}/ckpt-0 (--checkpoint_path={run}/ckpt-0).")
        support.assert_kept(robustness, run, before)
        assert not os.path.exists(os.path.join(run, "export"))
    result = run_binary("t2t-decoder", f"--output_dir={run}", f"--data_dir={data_dir}",
                        f"--decode_hparams={FAST_DECODE}", "--eval_steps=1",
                        f"--checkpoint_path={run}/ckpt-0")
    assert result.code == 0 and not result.traceback, result.err[-3000:]
    robustness.run_completed(f"t2t-decoder --checkpoint_path=ckpt-0 past ckpt-2 "
                             f"{kind.replace('_', ' ')}")


def test_resume_from_names_a_missing_checkpoint(robustness, two_checkpoints, data_dir):
    robustness.bad_input("t2t-trainer --resume_from=ckpt-7 (no such checkpoint)")
    before = support.snapshot(two_checkpoints)
    result = run_binary("t2t-trainer", *_flags(data_dir, two_checkpoints, 4),
                        "--resume_from=ckpt-7")
    _assert_clear(result, f"--resume_from='ckpt-7': there is no {two_checkpoints}/ckpt-7.index "
                  "(the run's checkpoints: ckpt-0, ckpt-2)")
    support.assert_kept(robustness, two_checkpoints, before)


# ------------------------------------------------------------------- disk full
class _SmallDisk:
    """A directory whose disk fills up. "tmpfs": a tmpfs of `size` bytes (mounting needs
    root and a container that allows it; the test is skipped otherwise). "fsize": a
    file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored so a write fails with EFBIG) that
    t2t-trainer, run as a child process, gets."""

    def __init__(self, root, size: int, mode: str):
        self.path, self.size, self.mounted = str(root / "disk"), size, False
        os.makedirs(self.path)
        if mode == "tmpfs":
            mount = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", self.path],
                capture_output=True, text=True) if shutil.which("mount") else None
            if mount is None or mount.returncode != 0:
                pytest.skip("cannot mount a tmpfs here (not root, or the container forbids "
                            f"it: {mount.stderr.strip() if mount else 'no mount command'}); "
                            f"the file-size-limit case stands in for a full disk")
            self.mounted = True
        self.filler = os.path.join(self.path, "filler")
        self.limit: int | None = None

    @property
    def kind(self) -> str:
        return "a full tmpfs" if self.mounted else "a file-size limit (RLIMIT_FSIZE)"

    def fill(self, free_bytes: int) -> None:
        """Leaves `free_bytes` for new files."""
        if not self.mounted:
            self.limit = free_bytes
            return
        stat = os.statvfs(self.path)
        with open(self.filler, "wb") as f:
            f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - free_bytes))

    def free(self) -> None:
        if os.path.exists(self.filler):
            os.remove(self.filler)
        self.limit = None

    def trainer(self, *flags: str) -> support.Result:
        """t2t-trainer: in this process on the tmpfs, else a child under the limit."""
        if self.limit is None:
            return run_binary("t2t-trainer", *flags)
        limit = self.limit

        def limited():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        proc = subprocess.run([sys.executable, "-m", "t2t.bin.t2t_trainer", *flags],
                              capture_output=True, text=True, timeout=TIMEOUT_S,
                              preexec_fn=limited)
        return support.Result(proc.returncode, proc.stdout, proc.stderr)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], capture_output=True)


@pytest.mark.parametrize("mode", ["tmpfs", pytest.param("fsize", marks=pytest.mark.slow)])
def test_disk_full_during_checkpoint_save_then_rerun(robustness, two_checkpoints, data_dir,
                                                     tmp_path, mode):
    disk = _SmallDisk(tmp_path, 16 << 20, mode)
    try:
        run = os.path.join(disk.path, "run")
        shutil.copytree(two_checkpoints, run)
        kept = _checkpoint_files(run, [0, 2])
        size = os.path.getsize(os.path.join(run, f"ckpt-2.{DATA}"))
        disk.fill(size // 2)  # room for the logs, not for a checkpoint's data
        robustness.fault(f"disk full during the save of ckpt-4 ({disk.kind})")
        result = disk.trainer(*_flags(data_dir, run, 4))
        why = "the disk is full" if disk.mounted else "a file grew past the size limit"
        _assert_clear(result, f"Could not write the checkpoint of step 4 ({run}/ckpt-4): {why}",
                      f"The last complete checkpoint, {run}/ckpt-2, is kept as it was.",
                      "then re-run the same command to resume from it.")
        assert "step 4/4 loss" in result.out, result.out
        support.assert_kept(robustness, run, kept)
        assert support.latest_checkpoint_step(run) == 2 and _loads(os.path.join(run, "ckpt-2"))
        assert not os.path.exists(os.path.join(run, "ckpt-4_temp"))  # its partial files

        disk.free()
        result = disk.trainer(*_flags(data_dir, run, 4))
        assert result.code == 0 and not result.traceback, result.err
        assert "Resumed from ckpt-2 at step 2." in result.out, result.out
        assert "step 3/4 loss" in result.out and "step 4/4 loss" in result.out
        support.assert_kept(robustness, run, kept)
        assert support.latest_checkpoint_step(run) == 4 and _loads(os.path.join(run, "ckpt-4"))
        robustness.run_completed("t2t-trainer to step 4 after the disk was full, space freed")
    finally:
        disk.close()
