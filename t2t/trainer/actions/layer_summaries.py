"""Per top-level layer TensorBoard scalars on logged steps (--layer_summaries).

    action = LayerSummaries(model, num_replicas=1, is_chief=True, parameter_server=False)

On each logged step the chief writes, under the training summary writer:
parameter_global_norm, layers/parameter_norm/LAYER, layers/gradient_norm/LAYER (from the
squared norms the step computed for `gradient_groups`) and, when it measured the step's
update, update_ratio and layers/update_ratio/LAYER (||update|| / ||parameters||, from a
t2t.trainer.layer_stats.WeightSnapshot taken just before the step; not with parameter
servers, whose steps run on the workers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from t2t.trainer import layer_stats, optimizers
from t2t.trainer.actions.base import LoopAction


class LayerSummaries(LoopAction):
    """Parameter and gradient norms and update ratios per top-level layer."""

    def __init__(self, model: Any, num_replicas: int, is_chief: bool, parameter_server: bool):
        self.model, self.is_chief, self.parameter_server = model, is_chief, parameter_server
        self.num_replicas = max(1, num_replicas)
        self.gradient_groups = layer_stats.variable_groups(
            model, optimizers.trainable_parts(model))
        self.snapshot: layer_stats.WeightSnapshot | None = None

    def before_step(self, step: int, logged: bool) -> None:
        """Takes the weights' values before a logged step, to measure its update."""
        if self.is_chief and not self.parameter_server and logged:
            self.snapshot = layer_stats.WeightSnapshot(optimizers.trainable_parts(self.model))

    def after_log(self, step: int, layer_counts: Sequence[float]) -> None:
        """The scalars of this step (the gradient norms with several replicas: the root
        mean square of the replicas' parts, like gradient_global_norm; exact with one)."""
        if not self.is_chief:
            return
        names, index = self.gradient_groups
        variables = optimizers.trainable_parts(self.model)
        param_norms, param_global = layer_stats.parameter_norms(variables, index, len(names))
        tf.summary.scalar("parameter_global_norm", param_global)
        ratios = None
        if self.snapshot is not None:
            ratios, total = self.snapshot.update_ratios(variables, index, len(names))
            tf.summary.scalar("update_ratio", total)
            self.snapshot = None
        for i, name in enumerate(names):
            tf.summary.scalar(f"layers/parameter_norm/{name}", param_norms[i])
            if i < len(layer_counts):
                tf.summary.scalar(f"layers/gradient_norm/{name}", math.sqrt(
                    max(float(layer_counts[i]), 0.0) / self.num_replicas))
            if ratios is not None:
                tf.summary.scalar(f"layers/update_ratio/{name}", ratios[i])
