"""Stable checkpoint names for every variable of a model, built from names t2t owns.

A name is the attribute path of the variable through the model's own layers (t2t's and
the user's: attributes, and lists and dicts in public ones), e.g.
"encoder.stack_layers.0.self_attention.inner.q.kernel". A layer that Keras itself
defines (Dense, LSTM, Dropout, ...) is a leaf: its variables are named by their public
`keras.Variable.name` ("kernel", "bias", "embeddings", "gamma", "seed_generator_state"),
which must be unique within it. Nothing depends on Keras' private attributes or on its
global layer counters (`dense_7`), so the names are the same in every process and
across Keras releases that keep the public weight names.

Checkpoints of format 1 (t2t before issue #18) named the variables inside Keras layers
by Keras' private attributes (an underscore before "kernel" or "embeddings", the LSTM's
"cell", the Dropout's "seed_generator.state"). `legacy_names` lists, for each variable,
the names format 1 may have used, so those checkpoints keep loading (see
t2t.models.checkpoints).
"""

from __future__ import annotations

from typing import Any

import keras

# How format 1 spelled a Keras layer's variable NAME under the layer's path P: first
# match wins (the names below are frozen: they describe files already written).
_LEGACY_LEAF_SPELLINGS = ("{p}.{n}", "{p}._{n}", "{p}.cell.{n}", "{p}.cell._{n}")
_LEGACY_SEED_SPELLINGS = ("{p}.seed_generator.state", "{p}.cell.seed_generator.state")
_SEED_STATE = "seed_generator_state"


class VariableNameError(ValueError):
    """A model whose variables cannot be given unique stable names."""


def is_keras_layer(value: Any) -> bool:
    """Whether `value` is a layer that Keras defines (a leaf of the naming)."""
    return (isinstance(value, keras.layers.Layer)
            and type(value).__module__.split(".", 1)[0] == "keras")


def legacy_spellings(name: str) -> tuple[str, ...]:
    """The names a format-1 checkpoint may hold the variable of stable name `name` under,
    if it is a Keras layer's weight ("PATH.WEIGHT_NAME"); `name` itself first."""
    path, _, leaf = name.rpartition(".")
    if not path:
        return (name,)
    spellings = _LEGACY_LEAF_SPELLINGS + (_LEGACY_SEED_SPELLINGS if leaf == _SEED_STATE else ())
    return tuple(dict.fromkeys(s.format(p=path, n=leaf) for s in spellings))


def _walk(root: Any) -> list[tuple[str, Any, tuple[str, ...]]]:
    """[(name, variable, format-1 names)] for every variable reachable from `root`."""
    found: list[tuple[str, Any, tuple[str, ...]]] = []
    seen_variables: set[int] = set()
    visited: set[int] = {id(root)}

    def add(name: str, variable: Any, legacy: tuple[str, ...]) -> None:
        if id(variable) not in seen_variables:
            seen_variables.add(id(variable))
            found.append((name, variable, legacy))

    def keras_leaf(layer: Any, path: str) -> None:
        names = [v.name for v in layer.variables]
        if len(set(names)) != len(names):
            raise VariableNameError(
                f"{path} ({type(layer).__name__}) holds several variables named alike "
                f"({names}): wrap its parts in layers of your own so each has a path.")
        for variable in layer.variables:
            name = f"{path}.{variable.name}"
            add(name, variable, legacy_spellings(name))

    def walk(value: Any, path: str) -> None:
        if isinstance(value, keras.Variable):
            add(path, value, (path,))
        elif isinstance(value, keras.random.SeedGenerator):
            add(f"{path}.state", value.state, (f"{path}.state",))
        elif is_keras_layer(value):
            if id(value) not in visited:
                visited.add(id(value))
                keras_leaf(value, path)
        elif isinstance(value, keras.layers.Layer):
            if id(value) not in visited:
                visited.add(id(value))
                visit(value, path + ".")
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key], f"{path}.{key}")
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}")

    def visit(layer: Any, prefix: str) -> None:
        for attr, value in sorted(vars(layer).items()):
            # A private attribute counts when it holds a layer or weight itself (a user's
            # `self._proj = Dense(...)`); private containers are bookkeeping (Keras').
            if not attr.startswith("_") or isinstance(
                    value, (keras.layers.Layer, keras.Variable, keras.random.SeedGenerator)):
                walk(value, f"{prefix}{attr}")

    visit(root, "")
    for index, variable in enumerate(root.variables):
        name = f"unnamed.{index}"  # a weight no public attribute holds (rare)
        add(name, variable, (name,))
    return found


def named_variables(root: Any) -> dict[str, Any]:
    """{stable name: keras.Variable} of every variable of `root` (a model), each once."""
    return {name: variable for name, variable, _ in _walk(root)}


def legacy_names(root: Any) -> dict[str, tuple[str, ...]]:
    """{stable name: the names a format-1 checkpoint may hold it under, in order}."""
    return {name: legacy for name, _, legacy in _walk(root)}
