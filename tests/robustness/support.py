"""Shared pieces of the robustness suite: the tally, in-process binaries, file snapshots.

The tally counts what the suite tried (bad inputs, injected faults), the runs that
completed, and any data lost; `conftest.py` prints it at the end of the session.

`run_binary("t2t-trainer", "--problem=...")` (tests/helpers/binaries.py) runs a
binary's `main(argv)` in this process, TensorFlow imported once for the whole suite.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re

# In-process binaries, shared with the binaries' own tests.
from tests.helpers.binaries import BINARIES, Result, load_binary, run_binary  # noqa: F401

PROBLEM = "algorithmic_reverse_binary40_test"
MODEL, HPARAMS_SET = "transformer", "transformer_test"
HPARAMS = "batch_size=256,learning_rate_warmup_steps=10,num_hidden_layers=1"  # fast to trace
# Greedy decoding of a few tokens: the decoder and exporter tests stay fast.
FAST_DECODE = "beam_size=1,batch_size=4,extra_length=3"
USR_PACKAGE = "zz_robustness_usr"


# ------------------------------------------------------------------ the tally
@dataclasses.dataclass
class Tally:
    """What the robustness suite tried and what came of it, over one pytest session."""

    bad_inputs: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    faults: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    runs: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    lost: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    known_bugs: list[str] = dataclasses.field(default_factory=list)  # tests that xfailed
    tests_run: int = 0
    seed: int | None = None

    @staticmethod
    def _count(table: dict[str, list[str]]) -> int:
        return sum(len(v) for v in table.values())

    def summary_lines(self) -> list[str]:
        # Faults that differ only in a number (a step, a byte count) are one kind.
        kinds = {re.sub(r"\d+", "N", name) for names in self.faults.values() for name in names}
        lines = [
            f"robustness: {self._count(self.bad_inputs)} bad inputs tried, "
            f"{self._count(self.faults)} faults injected ({len(kinds)} kinds), "
            f"{self._count(self.runs)} runs completed, data lost = {self._count(self.lost)}"
        ]
        for title, table in (("bad inputs", self.bad_inputs), ("faults", self.faults),
                             ("runs completed", self.runs), ("DATA LOST", self.lost)):
            for category, names in sorted(table.items()):
                lines.append(f"  {title} [{category}] ({len(names)}): {'; '.join(names)}")
        if self.known_bugs:
            lines.append(f"  known library bugs, tests xfailed ({len(self.known_bugs)}; "
                         f"reasons with -rx): {'; '.join(self.known_bugs)}")
        if self.seed is not None:
            lines.append(f"  random kill points from seed {self.seed} "
                         f"(T2T_ROBUSTNESS_SEED={self.seed} repeats them)")
        return lines


TALLY = Tally()


class Recorder:
    """The tally as one test sees it: everything is filed under the test's category."""

    def __init__(self, tally: Tally, category: str):
        self.tally, self.category = tally, category

    def _add(self, table: dict[str, list[str]], name: str) -> None:
        table.setdefault(self.category, []).append(name)

    def bad_input(self, name: str) -> None:
        self._add(self.tally.bad_inputs, name)

    def fault(self, name: str) -> None:
        self._add(self.tally.faults, name)

    def run_completed(self, name: str) -> None:
        self._add(self.tally.runs, name)

    def data_lost(self, lost: list[str] | int, what: str = "") -> None:
        """Files (or a count of items) that an earlier step wrote and that are gone or
        changed; nothing is recorded for an empty list or 0."""
        items = [f"{what}: {lost} item(s)"] * bool(lost) if isinstance(lost, int) else lost
        for item in items:
            self._add(self.tally.lost, item)


# -------------------------------------------------------------- file snapshots
def sha256_of(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def snapshot(root: str, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """{relative path: sha256} of every file under `root` (names in `exclude` skipped)."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if name not in exclude and rel not in exclude:
                files[rel] = sha256_of(path)
    return files


def lost_files(root: str, before: dict[str, str], exclude: tuple[str, ...] = ()) -> list[str]:
    """Files of the `before` snapshot of `root` that are now missing or changed."""
    after = snapshot(root, exclude)
    return [f"{os.path.join(root, rel)} {'changed' if rel in after else 'deleted'}"
            for rel, digest in sorted(before.items()) if after.get(rel) != digest]


def assert_kept(robustness: Recorder, root: str, before: dict[str, str],
                exclude: tuple[str, ...] = ()) -> None:
    """Records and fails on any file of `before` that is gone or changed under `root`."""
    lost = lost_files(root, before, exclude)
    robustness.data_lost(lost)
    assert not lost, lost


def checkpoint_steps(output_dir: str) -> list[int]:
    """Steps of the complete checkpoints (index and data) in a run directory."""
    steps = []
    for name in os.listdir(output_dir):
        match = re.fullmatch(r"ckpt-(\d+)\.index", name)
        data = os.path.join(output_dir, f"ckpt-{match[1]}.data-00000-of-00001") if match else ""
        if match and os.path.exists(data):
            steps.append(int(match[1]))
    return sorted(steps)


def latest_checkpoint_step(output_dir: str) -> int | None:
    """The step of the checkpoint that the `checkpoint` state file names, if any."""
    try:
        with open(os.path.join(output_dir, "checkpoint"), encoding="utf-8") as f:
            match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', f.read(), re.M)
    except FileNotFoundError:
        return None
    return int(match[1]) if match else None


# ------------------------------------------------------------------- waiting
def wait_for(predicate, seconds: float) -> bool:
    """Polls `predicate` every 50 ms until it is true (True) or `seconds` pass (False)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------ full disks
@contextlib.contextmanager
def mounted_tmpfs(mount_point, size: str, why_skipped: str = ""):
    """A tmpfs of `size` (e.g. "2m") mounted on the new folder `mount_point` (needs root);
    the test is skipped, saying why, where mounting is not allowed."""
    import subprocess

    import pytest

    mount_point.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                        str(mount_point)], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"cannot mount a tmpfs here ({e}){why_skipped}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True,
                       timeout=30)


def fill_disk(disk, leave: int):
    """A file that fills `disk` but for `leave` bytes (deleting it frees the space)."""
    stat = os.statvfs(disk)
    ballast = disk / "ballast"
    ballast.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - leave))
    return ballast


# ---------------------------------------------------------------- user code
USR_INIT = '''"""Problems of the robustness suite (loaded with --t2t_usr_dir)."""

import os
import time

from t2t import registry
from t2t.problems import algorithmic, download, extract, problem

STALL_AT = "T2T_ROBUSTNESS_STALL_AT"  # train example index at which generation stalls
STALL_FILE = "T2T_ROBUSTNESS_STALL_FILE"  # written when it does
URL, SHA256, SIZE = "T2T_ROBUSTNESS_URL", "T2T_ROBUSTNESS_SHA256", "T2T_ROBUSTNESS_SIZE"


@registry.register_problem
class ZzRobustnessSharded(algorithmic.AlgorithmicReverseBinary40):
    """400 training examples in 4 shards of 100; generation can be made to stall."""

    train_length = dev_length = 10
    train_size, dev_size, train_shards = 400, 40, 4

    def generate_examples(self, data_dir, tmp_dir, split, *, mirror=None):
        stall = int(os.environ.get(STALL_AT, "-1"))
        examples = super().generate_examples(data_dir, tmp_dir, split, mirror=mirror)
        for index, example in enumerate(examples):
            if split == problem.TRAIN_SPLIT and index == stall:
                with open(os.environ[STALL_FILE], "w") as f:
                    f.write(str(index))
                time.sleep(600)  # until killed
            yield example


@registry.register_problem
class ZzRobustnessFetched(algorithmic.AlgorithmicReverseBinary40Test):
    """Downloads the pinned file at $T2T_ROBUSTNESS_URL first (an archive is extracted)."""

    def prepare(self, data_dir, tmp_dir, *, mirror=None):
        resource = download.Resource(os.environ[URL], sha256=os.environ[SHA256],
                                     size=int(os.environ[SIZE]))
        path = download.fetch(resource, tmp_dir, mirror, progress=False)
        if path.endswith(".tar.gz"):
            extract.extract(path, os.path.join(tmp_dir, "extracted"))
'''


def write_usr_dir(root: str) -> str:
    """Writes the suite's --t2t_usr_dir package under `root`; returns its path."""
    path = os.path.join(root, USR_PACKAGE)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(USR_INIT)
    return path
