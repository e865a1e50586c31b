"""Keeping the best checkpoints by an eval metric apart from the rolling ones (--keep_best).

    action = KeepBest(output_dir, "dev", keep=1, metric="loss", minimize=None,
                      flag="best_metric")

With this action the loop saves a checkpoint at each evaluated step; after each
evaluation the evaluated checkpoint is offered to t2t.trainer.best_checkpoints.
BestCheckpoints (OUTPUT_DIR/best, recorded in run.json), and a new best is announced:
"Best loss so far (0.2264 at step 800): best/ckpt-800 (t2t-decoder
--checkpoint_path=best)."
"""

from __future__ import annotations

from collections.abc import Sequence

from t2t.trainer import early_stopping
from t2t.trainer.actions.base import EvalOutcome, LoopAction
from t2t.trainer.best_checkpoints import BestCheckpoints


class KeepBest(LoopAction):
    """Offers each evaluated checkpoint to the `keep` best by `metric`."""

    saves_evaluated_steps = True

    def __init__(self, output_dir: str, split: str, keep: int, metric: str,
                 minimize: bool | None, flag: str):
        """`minimize`: whether `metric` improves downwards when t2t does not know it
        (None: downwards); `flag`: the flag that named `metric`, for errors. `keep` < 0
        fails at start(), after the metric's name is checked."""
        self.output_dir, self.split, self.keep = output_dir, split, keep
        self.metric, self.minimize, self.flag = metric, minimize, flag
        self.best: BestCheckpoints | None = None  # made by start(), once the names are known

    def start(self, reported: Sequence[str]) -> list[str]:
        """Checks the metric name and takes over the run's record (notes: what resuming
        did to it)."""
        metric = early_stopping.check_metric(self.metric, reported, self.flag)
        minimize = early_stopping.is_minimized(metric, self.minimize)
        self.best = BestCheckpoints(self.output_dir, metric, minimize, self.keep, self.split)
        return list(self.best.notes)

    def after_eval(self, outcome: EvalOutcome) -> None:
        best = self.best
        if best is None:
            raise RuntimeError("KeepBest.after_eval before start(): register the action "
                               "with the TrainingLoop, which starts it.")
        if not outcome.checkpoint or best.metric not in outcome.results:
            return
        value = float(outcome.results[best.metric])
        if best.offer(outcome.step, value, outcome.checkpoint) and best.best["step"] == outcome.step:
            print(f"Best {best.metric} so far ({value:.4f} at step {outcome.step}): "
                  f"{best.best['path']} (t2t-decoder --checkpoint_path=best).", flush=True)
