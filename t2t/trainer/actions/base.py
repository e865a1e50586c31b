"""The points at which a TrainingLoop calls its actions, and what it hands them.

    loop = TrainingLoop(..., actions=[EarlyStopping(...), DecodeSummaries(task, 3)])

The loop calls every action, in the order given:

- `start(reported)` once, while the loop is built (before the first step), with the
  metric names an evaluation reports: a name the evaluation lacks fails here, not after
  training; returns lines the chief prints;
- `before_step(step, logged)` before each step (`logged`: the step about to run,
  step + 1, is a logging step);
- `after_log(step, layer_counts)` after each logged step, with the training summary
  writer as the default one (`layer_counts`: what the step returned after Task's
  counts, e.g. the squared gradient norm of each `gradient_groups` group);
- `after_eval(outcome)` after each evaluation, on the chief only, once the results are
  in eval_results.jsonl and their scalars written, with the evaluation's summary writer
  as the default one; a returned line is why training should stop (the loop stops after
  this step and prints it).

Attributes the loop reads once: `gradient_groups` (names, the group of each trainable
variable; the training step then returns each group's squared gradient norm),
`saves_evaluated_steps` (save a checkpoint at every evaluated step, so `outcome.
checkpoint` holds the evaluated weights) and `decodes` (the evaluation refreshes the
model to decode with first, see StrategyHooks.inference_model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class EvalOutcome:
    """One evaluation, as an action sees it."""

    step: int
    results: Mapping[str, float]  # what eval_results.jsonl recorded for `step`
    checkpoint: str | None  # the checkpoint prefix of step `step`, None when not saved
    inference_model: Any  # the model to decode with (a mesh model's one-device twin)


class LoopAction:
    """An action doing nothing at every point; subclasses override the points they use."""

    gradient_groups: tuple[list[str], list[int]] | None = None
    saves_evaluated_steps = False
    decodes = False

    def start(self, reported: Sequence[str]) -> list[str]:
        """Checks what the action needs of the evaluation; lines to print."""
        return []

    def before_step(self, step: int, logged: bool) -> None:
        """Before the step from `step` to step + 1 (`logged`: that step is logged)."""

    def after_log(self, step: int, layer_counts: Sequence[float]) -> None:
        """After logged step `step`, under the training summary writer."""

    def after_eval(self, outcome: EvalOutcome) -> str | None:
        """After an evaluation (chief), under its summary writer; why to stop, or None."""
        return None


def gradient_groups(actions: Sequence[LoopAction]) -> tuple[list[str], list[int]] | None:
    """The one action's `gradient_groups` the training step computes norms for, or None;
    ValueError when two actions ask (the step returns one set of groups)."""
    asking = [action for action in actions if action.gradient_groups is not None]
    if len(asking) > 1:
        names = ", ".join(type(action).__name__ for action in asking)
        raise ValueError(f"Actions {names} all ask for gradient groups: register one of them.")
    return asking[0].gradient_groups if asking else None
