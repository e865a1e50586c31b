"""A training run's checkpoints: what they hold, saving, resuming and warm starts.

Each checkpoint holds the model (under t2t's stable variable names, see
t2t.models.checkpoints), the optimizer (and its step) and, where the strategy allows,
the input position. Non-chief processes of a cluster write theirs (saving may run
collectives) into a scratch folder that is removed at once.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.models import checkpoints
from t2t.trainer import run_dir
from t2t.utils import step_files, write_errors

STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's list of a directory's checkpoints


class DamagedCheckpointError(run_dir.IncompatibleRunError):
    """The checkpoint to resume from is missing files, truncated or fails its checksums;
    the message names the file and the previous good checkpoint (--resume_from)."""


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a file-size limit); the last
    complete checkpoint is kept."""


def _step(path: str) -> int:
    """The step a checkpoint path ends in ("RUN/ckpt-800" -> 800), -1 for none."""
    step = step_files.step_of(path)
    return -1 if step is None else step


class RunCheckpoints:
    """The checkpoint manager of one run directory, for one model and optimizer."""

    def __init__(self, model: Any, optimizer: Any, output_dir: str, *, is_chief: bool,
                 scratch_dir: str | None = None, keep: int = 20, shared: bool = False):
        self.model, self.optimizer, self.output_dir = model, optimizer, output_dir
        self.is_chief = is_chief
        # shared: every process writes its part of the one checkpoint (a DTensor mesh
        # across processes); the chief alone lists and deletes checkpoints.
        self.shared = shared
        self.directory = output_dir if is_chief or shared else scratch_dir
        self.keep = keep if is_chief else 1
        self.iterator: Any = None
        self.after_save: Callable[[], None] | None = None  # called after the chief saves
        self.root = None
        self.manager = None
        # Examples trained on over the run's life (TensorBoard's examples_seen); saved
        # with the checkpoints (older checkpoints lack it: counting restarts at 0).
        self.examples_seen = tf.Variable(0, dtype=tf.int64, trainable=False,
                                         name="examples_seen")

    @property
    def latest(self) -> str | None:
        """The run's newest checkpoint (in output_dir), or None."""
        return tf.train.latest_checkpoint(self.output_dir)

    def listed(self) -> list[str]:
        """The checkpoints the state file lists (oldest first), as paths in output_dir."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        paths = list(state.all_model_checkpoint_paths) if state else []
        return [p if os.path.isabs(p) else os.path.join(self.output_dir, p) for p in paths]

    def previous_good(self, path: str) -> str | None:
        """The newest checkpoint older than `path` that is complete and reads back."""
        # The listed ones and the unlisted ones present too (an edited state file).
        for older in reversed(step_files.list_checkpoints(self.output_dir)):
            if older.step < _step(path) and checkpoints.checkpoint_damage(older.path) is None:
                return older.path
        return None

    def resume_point(self, resume_from: str | None) -> str | None:
        """The checkpoint to resume from: `resume_from` (ckpt-N or a path, of this run's
        output_dir) when given, else the latest. FileNotFoundError when the named one is
        not there."""
        if not resume_from:
            latest = self.latest
            state = tf.train.get_checkpoint_state(self.output_dir)
            named = state.model_checkpoint_path if state else ""
            if latest is None and named:  # TensorFlow ignores one without its index
                raise DamagedCheckpointError(self.damaged_message(
                    named, f"{named}.index is missing"))
            return latest
        path = os.path.expanduser(resume_from)
        path = path if os.path.dirname(path) else os.path.join(self.output_dir, path)
        path = re.sub(r"\.(index|data-\d+-of-\d+)$", "", path)
        listed = ", ".join(os.path.basename(p) for p in self.listed()) or "none"
        if os.path.realpath(os.path.dirname(path)) != os.path.realpath(self.output_dir):
            raise FileNotFoundError(
                f"--resume_from={resume_from!r} is not a checkpoint of {self.output_dir} "
                f"(its checkpoints: {listed}); to load another run's weights use "
                f"--warm_start_from.")
        if not os.path.exists(path + ".index"):
            raise FileNotFoundError(
                f"--resume_from={resume_from!r}: there is no {path}.index (the run's "
                f"checkpoints: {listed}).")
        return path

    def make_latest(self, path: str) -> list[str]:
        """Rewrites the state file so `path` is the latest checkpoint (after a resume
        from it): newer ones are unlisted, their files left on disk. Returns those."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        if not self.is_chief or state is None or self.latest == path:
            return []
        step = _step(path)
        # get_checkpoint_state made the paths absolute: written back relative, as
        # CheckpointManager writes them (the directory can be moved).
        paths = [os.path.relpath(p, self.output_dir) for p in state.all_model_checkpoint_paths]
        stamps = list(state.all_model_checkpoint_timestamps)
        newer = [p for p in paths if _step(p) > step]
        keep = [i for i, p in enumerate(paths) if _step(p) <= step]
        del state.all_model_checkpoint_paths[:], state.all_model_checkpoint_timestamps[:]
        state.all_model_checkpoint_paths.extend(paths[i] for i in keep)
        if len(stamps) == len(paths):  # optional: kept only while they pair up
            state.all_model_checkpoint_timestamps.extend(stamps[i] for i in keep)
        if not any(_step(p) == step for p in state.all_model_checkpoint_paths):
            state.all_model_checkpoint_paths.append(os.path.basename(path))
            del state.all_model_checkpoint_timestamps[:]
        state.model_checkpoint_path = os.path.basename(path)
        from google.protobuf import text_format

        target = os.path.join(self.output_dir, STATE_FILE)
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(text_format.MessageToString(state))
        os.replace(target + ".tmp", target)  # never a torn state file
        return newer

    def track(self, iterator: Any = None) -> None:
        """Starts the manager; `iterator` (its position) is saved too when given."""
        self.iterator = iterator
        items = {"model": checkpoints.model_trackable(self.model), "optimizer": self.optimizer,
                 "examples_seen": self.examples_seen}
        if iterator is not None:
            items["train_iterator"] = iterator
        self.root = tf.train.Checkpoint(**items)
        self.manager = tf.train.CheckpointManager(self.root, self.directory,
                                                  max_to_keep=self.keep)

    def restore(self, path: str, model_name: str) -> None:
        """Model and optimizer from `path` (any t2t checkpoint format);
        DamagedCheckpointError when its files are missing, truncated or fail their
        checksums, IncompatibleRunError when it does not fit."""
        try:
            checkpoints.restore(path, self.model, optimizer=self.optimizer)
            self._restore_examples_seen(path)
        except (checkpoints.CheckpointError, IndexError, tf.errors.OpError) as e:
            # A short read (IndexError) or a checksum (DataLossError) fails inside the
            # restore; which file, and whether it is damage at all, is found here.
            damage = checkpoints.checkpoint_damage(path)
            if damage is not None:
                raise DamagedCheckpointError(self.damaged_message(path, damage)) from e
            if isinstance(e, checkpoints.DamagedCheckpointError):
                raise DamagedCheckpointError(str(e)) from e
            if not isinstance(e, checkpoints.CheckpointError):
                raise
            raise run_dir.IncompatibleRunError(
                f"The checkpoint {path} does not match model {model_name!r} with these "
                f"hparams ({str(e)[:300]}). Use a new --output_dir."
            ) from e

    def damaged_message(self, path: str, damage: str) -> str:
        """What is wrong with `path`, the previous good checkpoint and how to resume."""
        good = self.previous_good(path)
        if good is None:
            fix = ("no earlier checkpoint of the run reads back: restore the files from a "
                   "copy, or start a new --output_dir (--warm_start_from can load weights)")
        else:
            fix = (f"the previous good checkpoint is {good}: re-run the same command with "
                   f"--resume_from={os.path.basename(good)} to resume from it (the damaged "
                   f"files stay on disk, unlisted, until training writes step {_step(path)} "
                   f"again: move them aside first to keep them)")
        return (f"The checkpoint {path} is damaged: {damage}. Nothing was changed or "
                f"deleted; {fix}.")

    def _restore_examples_seen(self, path: str) -> None:
        try:
            status = tf.train.Checkpoint(examples_seen=self.examples_seen).read(path)
            status.expect_partial().assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError):
            logging.info("%s holds no examples_seen count: it restarts at 0.", path)

    def restore_iterator(self, path: str, iterator: Any) -> bool:
        """Reads the input position saved in `path` into `iterator`; False if it has none."""
        try:
            # Only the position is read: the model's and optimizer's values are not
            # wanted here (expect_partial keeps TensorFlow from listing them all).
            status = tf.train.Checkpoint(train_iterator=iterator).read(path)
            status.expect_partial().assert_existing_objects_matched()
            return True
        except (tf.errors.DataLossError, IndexError) as e:  # there, but damaged
            shards = sorted(glob.glob(glob.escape(path) + ".data-*-of-*"))
            where = shards[0] if len(shards) == 1 else f"{path}.data-*"
            damage = (f"{where} fails its checksum in the input position (train_iterator; "
                      f"{' '.join(str(e).split())[:160]})")
            raise DamagedCheckpointError(self.damaged_message(path, damage)) from e
        except (AssertionError, ValueError, tf.errors.OpError):
            logging.warning("%s holds no input position: the data order restarts.", path)
            return False

    def warm_start(self, warm_start_from: str) -> str:
        """Loads the model's weights (not the optimizer or step) from a checkpoint or run
        directory; FileNotFoundError when there is none. Returns the checkpoint read."""
        try:
            path = checkpoints.resolve_checkpoint(warm_start_from)
        except checkpoints.NoCheckpointError:
            raise FileNotFoundError(
                f"--warm_start_from={warm_start_from!r} holds no checkpoint: "
                f"give a run's output_dir or a checkpoint prefix such as DIR/ckpt-1000."
            ) from None
        try:
            names = checkpoints.names_in_checkpoint(self.model, path)
            tf.train.Checkpoint(model=checkpoints.model_trackable(self.model, names)).read(
                path).expect_partial()
        except (checkpoints.CheckpointError, tf.errors.OpError) as e:
            raise run_dir.IncompatibleRunError(
                f"--warm_start_from={warm_start_from!r}: {path} cannot give this model its "
                f"weights ({str(e).strip()[:300]}).") from e
        logging.info("Warm-started the weights from %s (optimizer and step are new).", path)
        return path

    def save(self, step: int) -> str | None:
        """Writes a checkpoint at `step` (unless one exists for it); its path, or None
        in a non-chief process (whose scratch copy is removed at once)."""
        latest = self.manager.latest_checkpoint
        if latest and latest.endswith(f"-{step}"):
            return latest
        try:
            if self.shared and not self.is_chief:
                self.root.write(os.path.join(self.directory, f"ckpt-{step}"))
                return None
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as e:
            raise self._write_error(step, e) from e
        if self.is_chief:
            if self.after_save is not None:
                self.after_save()
            return path
        shutil.rmtree(self.directory, ignore_errors=True)
        try:  # the shared scratch parent, once the last worker's folder is gone
            os.rmdir(os.path.dirname(self.directory))
        except OSError:
            pass
        self.manager = tf.train.CheckpointManager(self.root, self.directory, max_to_keep=1)
        return None

    def _write_error(self, step: int, error: Exception) -> CheckpointWriteError:
        """The error of a failed save; its partial files (PREFIX_temp/) are removed, as
        they hold nothing complete and take the space a re-run needs."""
        prefix = os.path.join(self.directory, f"ckpt-{step}")
        shutil.rmtree(prefix + "_temp", ignore_errors=True)
        why, fix, text = write_errors.describe(error)
        latest = self.manager.latest_checkpoint if self.is_chief else None
        kept = (f"The last complete checkpoint, {latest}, is kept as it was" if latest else
                "No earlier checkpoint was written")
        return CheckpointWriteError(
            f"Could not write the checkpoint of step {step} ({prefix}): {why} "
            f"({type(error).__name__}: {text[:240]}). {kept}. {fix}, then re-run the same "
            f"command to resume{' from it' if latest else ''}.")

    def read_latest(self, path: str) -> None:
        """Re-reads the model (and optimizer) of a newer checkpoint (continuous eval)."""
        checkpoints.restore(path, self.model, optimizer=self.optimizer)
