"""Files named after a training step, found and awaited: a run's checkpoints
(RUN/ckpt-800.index) and t2t-translate-all's translations (TRANSLATIONS/PROBLEM-800).

    for found in follow(lambda: list_checkpoints(run_dir), wait_minutes=30, stop_step=5000):
        ...   # each checkpoint once, oldest step first, then each new one as it appears

Tensor2Tensor's `bleu_hook.stepfiles_iterator` under another name: t2t-translate-all
follows a run's checkpoints with it, and t2t-bleu --translations_dir the translations.
Importing this module imports no TensorFlow (`list_checkpoints` does, when called).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterator

_STEP_NAME = re.compile(r"^(?P<prefix>.+)-(?P<step>\d+)$")
# Seconds between two looks for a new file while waiting.
POLL_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class StepFile:
    """A file (or checkpoint prefix) of one step: its path, step and modification time
    (seconds since the epoch; a checkpoint's is its .index file's)."""

    path: str
    step: int
    mtime: float

    @property
    def prefix(self) -> str:
        """The name before "-STEP": "ckpt" of RUN/ckpt-800, "translate_ende" of ...-800."""
        return os.path.basename(self.path).rsplit("-", 1)[0]


def step_of(path: str) -> int | None:
    """The step a name ends in ("RUN/ckpt-800" -> 800), or None ("ckpt-800.partial")."""
    match = _STEP_NAME.match(os.path.basename(path))
    return int(match["step"]) if match else None


def list_step_files(folder: str, min_step: int = 0) -> list[StepFile]:
    """The plain files NAME-STEP directly in `folder` with STEP >= `min_step`, oldest
    step first; none when the folder does not exist. Names with anything after the step
    (NAME-800.partial, NAME-800.scores.json) are not step files."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    for entry in entries:
        step = step_of(entry.name)
        if step is None or step < min_step:
            continue
        try:
            if entry.is_file():
                found.append(StepFile(entry.path, step, entry.stat().st_mtime))
        except FileNotFoundError:  # removed while listing
            continue
    return sorted(found, key=lambda f: (f.step, f.path))


def list_checkpoints(model_dir: str, min_step: int = 0) -> list[StepFile]:
    """The checkpoints of the run in `model_dir` with step >= `min_step`, oldest step
    first: those its "checkpoint" file lists (all_model_checkpoint_paths) and every
    other PREFIX-STEP.index present, each once, whose .index exists (a checkpoint the
    trainer removed since is left out). For one step listed under two prefixes, the one
    the "checkpoint" file names wins."""
    import tensorflow as tf

    model_dir = os.path.expanduser(model_dir)
    listed = []
    state = tf.train.get_checkpoint_state(model_dir)
    if state is not None:
        for path in state.all_model_checkpoint_paths or [state.model_checkpoint_path]:
            listed.append(path if os.path.isabs(path) or "://" in path
                          else os.path.join(model_dir, path))
    present = [name.removesuffix(".index")
               for name in tf.io.gfile.glob(os.path.join(model_dir, "*-*.index"))]
    by_step: dict[int, StepFile] = {}
    for path in [*listed, *sorted(present)]:
        step = step_of(path)
        if step is None or step < min_step or step in by_step:
            continue
        try:  # gfile's local times are whole seconds
            mtime = (tf.io.gfile.stat(path + ".index").mtime_nsec / 1e9 if "://" in path
                     else os.path.getmtime(path + ".index"))
        except (tf.errors.NotFoundError, FileNotFoundError):
            continue
        by_step[step] = StepFile(path, step, mtime)
    return [by_step[step] for step in sorted(by_step)]


def follow(list_files: Callable[[], list[StepFile]], wait_minutes: float = 0.0,
           stop_step: int | None = None, poll_seconds: float | None = None,
           sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> Iterator[StepFile]:
    """Each file `list_files()` returns, once, oldest step first, then each newer one
    as it appears: after the last one it looks again every `poll_seconds` (default
    POLL_SECONDS) for up to `wait_minutes` (0: it does not wait), and stops once a file
    of step >= `stop_step` was given (the run's last checkpoint). Files of steps at or
    below the last one given are never given again (T2T's stepfiles_iterator)."""
    poll_seconds = POLL_SECONDS if poll_seconds is None else poll_seconds
    last_step = -1
    while True:
        if stop_step is not None and last_step >= stop_step:
            return
        fresh = [f for f in list_files() if f.step > last_step]
        deadline = clock() + wait_minutes * 60.0
        while not fresh and clock() < deadline:
            sleep(max(0.0, min(poll_seconds, deadline - clock())))
            fresh = [f for f in list_files() if f.step > last_step]
        if not fresh:
            return
        yield fresh[0]
        last_step = fresh[0].step
