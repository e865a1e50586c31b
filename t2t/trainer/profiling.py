"""`--profile_steps=START,END`: a TensorFlow profiler trace of those training steps.

The trace goes to OUTPUT_DIR/train/plugins/profile/<time>/*.xplane.pb, where
TensorBoard's profile plugin (pip install 't2t[profile]') shows it under the "train" run;
each step is a "train" step event with its number, so the plugin's step-time view reads
them. Steps count as the optimizer does: step N is the N-th update (1-based).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.utils import optional_deps


class ProfileStepsError(ValueError):
    """A bad --profile_steps value."""


def parse_profile_steps(text: str | None) -> tuple[int, int] | None:
    """(START, END) of "START,END" (or "N" for one step); None for ""; both >= 1,
    START <= END. ProfileStepsError naming the value otherwise."""
    if not text or not str(text).strip():
        return None
    parts = [p.strip() for p in str(text).split(",")]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) == 1:
        numbers *= 2
    if len(numbers) != 2 or numbers[0] < 1 or numbers[0] > numbers[1]:
        raise ProfileStepsError(
            f"--profile_steps={text!r}: give START,END, two step numbers with "
            f"1 <= START <= END (e.g. --profile_steps=10,15), or one step N.")
    return numbers[0], numbers[1]


class StepProfiler:
    """Starts the profiler before step START runs and stops it after step END (or when
    training ends first); does nothing when `steps` is None or not `enabled`."""

    def __init__(self, steps: tuple[int, int] | None, logdir: str, enabled: bool = True):
        self.steps = steps if enabled else None
        self.logdir = logdir
        self.active = False
        self.done = False

    def before(self, completed_step: int, last_step: int | None = None) -> None:
        """Called before running the steps after `completed_step`, up to `last_step`
        (default: one step; with parameter servers a batch of steps is scheduled)."""
        if self.steps is None or self.active or self.done:
            return
        start, end = self.steps
        if completed_step >= end:
            logging.warning("--profile_steps=%d,%d: the run is already at step %d; nothing "
                            "is profiled.", start, end, completed_step)
            self.done = True
        elif (completed_step + 1 if last_step is None else last_step) >= start:
            self._start()

    def _start(self) -> None:
        os.makedirs(self.logdir, exist_ok=True)
        try:
            tf.profiler.experimental.start(self.logdir)
        except tf.errors.AlreadyExistsError:
            logging.warning("Another profiler session is running: --profile_steps skipped.")
            self.done = True
            return
        self.active = True

    def step_context(self, step: int) -> Any:
        """A context that marks step `step` (the one about to run) in the trace."""
        if not self.active:
            return contextlib.nullcontext()
        return tf.profiler.experimental.Trace("train", step_num=step, _r=1)

    def after(self, completed_step: int) -> None:
        """Called after the steps up to `completed_step` ran."""
        if self.active and completed_step >= self.steps[1]:
            self.stop()

    def stop(self) -> None:
        """Stops and writes the trace (if one is being captured)."""
        if not self.active:
            return
        self.active, self.done = False, True
        tf.profiler.experimental.stop()
        viewer = ("" if importlib.util.find_spec("tensorboard_plugin_profile") else
                  f" (to view it: {optional_deps.install_hint('profile')})")
        start, end = self.steps
        print(f"Profiled steps {start}-{end}: trace in "
              f"{os.path.join(self.logdir, 'plugins', 'profile')}; open TensorBoard's "
              f"Profile tab{viewer}.", flush=True)
