"""The best checkpoints of a run by an evaluation metric, kept apart from the rolling ones.

    best = BestCheckpoints(output_dir, metric="bleu", minimize=False, keep=1)
    best.offer(step, value, checkpoint_prefix)   # after each evaluation (the chief)

output_dir/best/ holds the `keep` best checkpoints (hard links to the files of
output_dir/ckpt-N, so keeping one costs no disk until the rolling manager deletes its
original) and a TensorFlow `checkpoint` state file whose latest entry is the best:
`t2t-decoder --checkpoint_path=best` (or OUTPUT_DIR/best) reads it like any run folder.
run.json records {"best_checkpoints": {"metric", "minimize", "split", "checkpoints":
[{"step", "value", "path"}, ...]}} best first; a resumed run continues that record.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any

from t2t.models.checkpoints import BEST_DIR
from t2t.trainer import run_dir

RECORD_KEY = "best_checkpoints"


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(source, target)


def read_record(output_dir: str) -> dict[str, Any] | None:
    """run.json's best-checkpoint record, or None."""
    return run_dir.read_run_record(output_dir).get(RECORD_KEY)


class BestCheckpoints:
    """Keeps the `keep` checkpoints with the best values of `metric` in OUTPUT_DIR/best."""

    def __init__(self, output_dir: str, metric: str, minimize: bool, keep: int,
                 split: str = run_dir.DEV_SPLIT):
        if keep < 0:
            raise ValueError(f"--keep_best={keep}: give how many best checkpoints to keep "
                             f"(>= 1), or 0 for none.")
        self.output_dir, self.metric, self.minimize = output_dir, metric, minimize
        self.keep, self.split = keep, split
        self.folder = os.path.join(output_dir, BEST_DIR)
        self.kept: list[dict[str, Any]] = []
        self.notes: list[str] = []  # what resuming did to an earlier record (to print)
        record = read_record(output_dir)
        recorded_split = record.get("split", run_dir.DEV_SPLIT) if record else split
        if record and recorded_split != split:
            # Evaluating another split (`--schedule=evaluate --eval_split=test`) must not
            # pick checkpoints by that split: best/ stays as training chose it.
            self.keep = 0
            self.notes.append(f"{BEST_DIR}/ keeps the best by {record.get('metric')} on "
                              f"{recorded_split}; evaluations of {split} do not change it.")
        elif record and record.get("metric") == metric:
            self.kept = [c for c in record.get("checkpoints", [])
                         if os.path.exists(os.path.join(output_dir, c["path"]) + ".index")]
        elif record and os.path.isdir(self.folder):
            # Another metric now: its checkpoints move aside, nothing is deleted.
            aside = f"{self.folder}_{record.get('metric', 'earlier').replace('/', '_')}"
            while os.path.exists(aside):
                aside += "_"
            os.rename(self.folder, aside)
            self.notes.append(f"The best checkpoints by {record.get('metric')} moved to "
                              f"{aside}; {BEST_DIR}/ now keeps the best by {metric}.")

    def _better(self, value: float, than: float) -> bool:
        return value < than if self.minimize else value > than

    @property
    def best(self) -> dict[str, Any] | None:
        """{"step", "value", "path"} of the best checkpoint so far, or None."""
        return self.kept[0] if self.kept else None

    def offer(self, step: int, value: float, checkpoint: str) -> bool:
        """Keeps `checkpoint` (a prefix in output_dir) if it is among the `keep` best;
        returns whether it was kept."""
        if self.keep == 0 or any(c["step"] == step for c in self.kept):
            return False
        if len(self.kept) >= self.keep and not self._better(value, self.kept[-1]["value"]):
            return False
        os.makedirs(self.folder, exist_ok=True)
        name = os.path.basename(checkpoint)
        for source in glob.glob(glob.escape(checkpoint) + ".*"):
            target = os.path.join(self.folder, os.path.basename(source))
            if os.path.lexists(target):
                os.remove(target)
            _link_or_copy(source, target)
        self.kept.append({"step": int(step), "value": float(value),
                          "path": f"{BEST_DIR}/{name}"})
        self.kept.sort(key=lambda c: (c["value"] if self.minimize else -c["value"], c["step"]))
        for dropped in self.kept[self.keep:]:
            for path in glob.glob(glob.escape(os.path.join(self.output_dir,
                                                           dropped["path"])) + ".*"):
                os.remove(path)
        self.kept = self.kept[: self.keep]
        self._write_state()
        return True

    def _write_state(self) -> None:
        """The folder's `checkpoint` file (best last, so it is the "latest") and run.json."""
        # Absolute folder and paths: given a relative folder, TF rewrites the names relative
        # to the working directory ("../../../ckpt-40" for a relative output_dir).
        folder = os.path.abspath(self.folder)
        names = [os.path.join(folder, os.path.basename(c["path"])) for c in reversed(self.kept)]
        from tensorflow.python.checkpoint import checkpoint_management

        checkpoint_management.update_checkpoint_state_internal(
            folder, model_checkpoint_path=names[-1], all_model_checkpoint_paths=names,
            save_relative_paths=True)
        run_dir.update_run_record(self.output_dir, RECORD_KEY, {
            "metric": self.metric, "minimize": self.minimize, "split": self.split,
            "checkpoints": self.kept})
