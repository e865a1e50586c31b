"""A training run's checkpoints: what they hold, saving, resuming and warm starts.

Each checkpoint holds the model (under t2t's stable variable names, see
t2t.models.checkpoints), the optimizer (and its step) and, where the strategy allows,
the input position. Non-chief processes of a cluster write theirs (saving may run
collectives) into a scratch folder that is removed at once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.models import checkpoints
from t2t.trainer import run_dir


class RunCheckpoints:
    """The checkpoint manager of one run directory, for one model and optimizer."""

    def __init__(self, model: Any, optimizer: Any, output_dir: str, *, is_chief: bool,
                 scratch_dir: str | None = None, keep: int = 20):
        self.model, self.optimizer, self.output_dir = model, optimizer, output_dir
        self.is_chief = is_chief
        self.directory = output_dir if is_chief else scratch_dir
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
        IncompatibleRunError when it does not fit."""
        try:
            checkpoints.restore(path, self.model, optimizer=self.optimizer)
            self._restore_examples_seen(path)
        except checkpoints.DamagedCheckpointError as e:
            raise run_dir.IncompatibleRunError(str(e)) from e
        except checkpoints.CheckpointError as e:
            raise run_dir.IncompatibleRunError(
                f"The checkpoint {path} does not match model {model_name!r} with these "
                f"hparams ({str(e)[:300]}). Use a new --output_dir."
            ) from e

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
        path = self.manager.save(checkpoint_number=step)
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

    def read_latest(self, path: str) -> None:
        """Re-reads the model (and optimizer) of a newer checkpoint (continuous eval)."""
        checkpoints.restore(path, self.model, optimizer=self.optimizer)
