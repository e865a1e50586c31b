"""Stopping a run whose eval metric has plateaued (--eval_early_stopping_steps).

    action = EarlyStopping(output_dir, "dev", metric="loss", steps=2000, delta=0.1,
                           minimize=None)

`start` checks the metric against what the evaluation reports
(t2t.trainer.early_stopping.StoppingRule); after each evaluation the rule reads the
run's eval_results.jsonl (so a resumed run keeps what it has seen) and returns why to
stop, e.g. "Early stopping at step 3000: loss has not decreased by 0.1 or more in the
last 2000 steps (...)".
"""

from __future__ import annotations

from collections.abc import Sequence

from t2t.trainer import run_dir
from t2t.trainer.actions.base import EvalOutcome, LoopAction
from t2t.trainer.early_stopping import StoppingRule


class EarlyStopping(LoopAction):
    """Asks the loop to stop once `metric` has not improved by `delta` in `steps` steps."""

    def __init__(self, output_dir: str, split: str, metric: str, steps: int, delta: float,
                 minimize: bool | None):
        self.output_dir, self.split = output_dir, split
        self.metric, self.steps, self.delta, self.minimize = metric, steps, delta, minimize
        self.rule: StoppingRule | None = None  # made by start(), once the names are known

    def start(self, reported: Sequence[str]) -> list[str]:
        self.rule = StoppingRule.create(self.metric, self.steps, self.delta, self.minimize,
                                        reported)
        return []

    def after_eval(self, outcome: EvalOutcome) -> str | None:
        if self.rule is None:
            raise RuntimeError("EarlyStopping.after_eval before start(): register the "
                               "action with the TrainingLoop, which starts it.")
        return self.rule.check(run_dir.read_eval_results(self.output_dir, self.split))
