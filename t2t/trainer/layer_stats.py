"""Per-layer statistics for TensorBoard: parameter and gradient norms, update ratios.

Variables are grouped by the model's top-level layer: the first part of their stable
checkpoint name (t2t.models.variable_names), e.g. "encoder", "decoder",
"targets_modality". The train step returns the squared gradient norm of each group
(`grouped_squared_norms`, computed in the step, where the gradients exist); the loop
reads parameter norms and the update/parameter ratio eagerly on logging steps, from a
`WeightSnapshot` taken just before that step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from t2t.models import variable_names

OTHER_GROUP = "other"  # variables the naming does not reach (none in t2t's models)


def variable_groups(model: Any, variables: Sequence[Any]) -> tuple[list[str], list[int]]:
    """(group names, the group index of each of `variables`): groups are top-level layers,
    in the order their first variable appears."""
    group_of: dict[int, str] = {}
    try:
        for name, variable in variable_names.named_variables(model).items():
            group_of[id(variable)] = name.split(".", 1)[0]
    except variable_names.VariableNameError:
        pass  # every variable lands in OTHER_GROUP: the global figures still hold
    names: list[str] = []
    index: list[int] = []
    for variable in variables:
        group = group_of.get(id(variable), OTHER_GROUP)
        if group not in names:
            names.append(group)
        index.append(names.index(group))
    return names, index


def grouped_squared_norms(tensors: Sequence[Any], index: Sequence[int],
                          num_groups: int) -> tf.Tensor:
    """float32 [num_groups]: the sum of squares of the tensors of each group (None
    tensors, e.g. gradients of unused variables, count as 0)."""
    sums = [tf.constant(0.0)] * num_groups
    for tensor, group in zip(tensors, index, strict=True):
        if tensor is None:
            continue
        if isinstance(tensor, tf.IndexedSlices):
            tensor = tensor.values
        sums[group] = sums[group] + tf.reduce_sum(tf.square(tf.cast(tensor, tf.float32)))
    return tf.stack(sums)


class WeightSnapshot:
    """The values of `variables` at one moment, to measure the next update against."""

    def __init__(self, variables: Sequence[Any]):
        self.values = [tf.identity(tf.convert_to_tensor(v)) for v in variables]

    def update_ratios(self, variables: Sequence[Any], index: Sequence[int],
                      num_groups: int) -> tuple[tf.Tensor, tf.Tensor]:
        """(float32 [groups] ||update|| / ||parameters|| per group, the same over all
        variables) between the snapshot and the variables' values now."""
        now = [tf.convert_to_tensor(v) for v in variables]
        updates = [n - b for n, b in zip(now, self.values, strict=True)]
        update_sq = grouped_squared_norms(updates, index, num_groups)
        param_sq = grouped_squared_norms(now, index, num_groups)
        per_group = tf.sqrt(update_sq) / tf.maximum(tf.sqrt(param_sq), 1e-12)
        total = tf.sqrt(tf.reduce_sum(update_sq)) / tf.maximum(
            tf.sqrt(tf.reduce_sum(param_sq)), 1e-12)
        return per_group, total


def parameter_norms(variables: Sequence[Any], index: Sequence[int],
                    num_groups: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(float32 [groups] L2 norm of each group's variables, the global norm)."""
    squared = grouped_squared_norms([tf.convert_to_tensor(v) for v in variables], index,
                                    num_groups)
    return tf.sqrt(squared), tf.sqrt(tf.reduce_sum(squared))
