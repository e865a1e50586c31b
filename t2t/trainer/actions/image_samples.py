"""Images sampled by an image-target model at each evaluation, as a TensorBoard image.

    action = ImageSamples(problem, data_dir, split="dev", count=3)  # decode_summaries

The evaluation writer's "samples" grid (t2t.trainer.image_summaries.ImageSampleSummary:
one sample per class, per dev input, or `count` unconditional ones; a fixed seed, so
successive evaluations show the same draws of a changing model). A failure is logged,
never raised: a summary must not stop training.
"""

from __future__ import annotations

from typing import Any

from absl import logging

from t2t.trainer import image_summaries
from t2t.trainer.actions.base import EvalOutcome, LoopAction


class ImageSamples(LoopAction):
    """Writes "samples" after each evaluation (chief)."""

    decodes = True

    def __init__(self, problem: Any, data_dir: str, split: str, count: int):
        if count < 1:
            raise ValueError(f"decode_summaries={count}: give the number of images to "
                             f"sample (>= 1), or leave the action out for none.")
        self.problem, self.data_dir, self.split, self.count = problem, data_dir, split, count
        self.summary: image_summaries.ImageSampleSummary | None = None  # made once

    def after_eval(self, outcome: EvalOutcome) -> None:
        try:
            if self.summary is None:
                self.summary = image_summaries.ImageSampleSummary(
                    outcome.inference_model, self.problem, self.data_dir, self.split,
                    self.count)
            self.summary()
        except Exception as e:  # a summary must never stop training
            logging.warning("Could not decode examples for TensorBoard: %s", e)
