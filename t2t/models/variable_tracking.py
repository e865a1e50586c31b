"""Stable names for every variable of a model, for tf.train.Checkpoint.

Keras 3 layers held in Python lists or dicts are invisible to TensorFlow's object-graph
checkpointing (only direct attributes are followed), and Keras' variable paths carry
global name counters (`dense_7`) that differ between processes. A T2TModel therefore
hands the checkpoint a flat {name: variable} map whose names come from the attribute
path of each variable ("encoder.stack_layers.0.self_attention.inner.q._kernel"),
which depends only on the model's code and hparams.
"""

from __future__ import annotations

from typing import Any

import keras
from keras.src.random.seed_generator import SeedGenerator


def _is_variable(value: Any) -> bool:
    return isinstance(value, keras.Variable)


def named_variables(root: Any) -> dict[str, Any]:
    """{attribute path: variable} for every variable reachable from `root`, each once.

    Variables that no attribute path reaches (rare) get "unnamed.<index>" names in the
    order of `root.variables`.
    """
    names: dict[str, Any] = {}
    seen_variables: set[int] = set()
    visited: set[int] = {id(root)}

    def visit(obj: Any, prefix: str) -> None:
        items = sorted(vars(obj).items()) if hasattr(obj, "__dict__") else []
        for attr, value in items:
            if attr in ("_parent_path", "_tracker", "_layers", "_trainable_variables",
                        "_non_trainable_variables", "_seed_generators"):
                continue
            walk(value, f"{prefix}{attr}", private=attr.startswith("_"))

    def walk(value: Any, path: str, private: bool) -> None:
        if _is_variable(value):
            if id(value) not in seen_variables:
                seen_variables.add(id(value))
                names[path] = value
            return
        if isinstance(value, (keras.layers.Layer, SeedGenerator)):
            if id(value) not in visited:
                visited.add(id(value))
                visit(value, path + ".")
            return
        if private:
            return
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key], f"{path}.{key}", private=False)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}", private=False)

    visit(root, "")
    for index, variable in enumerate(root.variables):
        if id(variable) not in seen_variables:
            seen_variables.add(id(variable))
            names[f"unnamed.{index}"] = variable
    return names
