"""Assigning a Hugging Face checkpoint's tensors to a built t2t model, checked both ways:
every weight of the model gets a value of its shape, and every tensor of the checkpoint
is used or checked (a tied alias equal to its table, a fixed position table equal to
t2t's), so an architecture t2t-import misreads fails instead of importing quietly wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UnsupportedCheckpointError(ValueError):
    """A checkpoint whose architecture or options t2t-import cannot express."""


def resolve(root: Any, path: str) -> Any:
    """The attribute at dotted `path` under `root` ("encoder.stack_layers.0.ffn.inner.
    inner.kernel"); integer parts index lists."""
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


class Assignments:
    """Values for a model's variables, taken from `tensors` ({Hugging Face name: array})."""

    def __init__(self, tensors: dict[str, np.ndarray]):
        self.tensors = tensors
        self.used: set[str] = set()
        self.values: list[tuple[Any, np.ndarray, str]] = []  # (variable, value, source)

    def take(self, name: str) -> np.ndarray:
        if name not in self.tensors:
            raise UnsupportedCheckpointError(
                f"the checkpoint has no tensor {name!r}, which this architecture needs (is "
                f"it another architecture, or a partial/converted checkpoint?).")
        self.used.add(name)
        return self.tensors[name]

    def check_equal(self, name: str, expected: np.ndarray) -> None:
        """A tensor that must equal `expected` when the checkpoint holds it (tied weights)."""
        if name not in self.tensors:
            return
        self.used.add(name)
        if self.tensors[name].shape != expected.shape or not np.allclose(self.tensors[name], expected):
            raise UnsupportedCheckpointError(
                f"{name} differs from the table it is tied to: untied weights are not "
                f"supported for this architecture.")

    def check_sinusoid(self, name: str) -> None:
        """A stored position table [P, H] that must equal hparams.pos "sinusoid"'s signal."""
        if name not in self.tensors:
            return
        from t2t.layers import positional

        table = self.tensors[name]
        self.used.add(name)
        expected = positional.timing_signal(table.shape[0], table.shape[1], kind="sinusoid")[0]
        if not np.allclose(table, expected.numpy(), atol=1e-4):
            raise UnsupportedCheckpointError(
                f"{name} is not the sinusoid table t2t computes (learned or other positions "
                f"are not supported for this architecture).")

    def put(self, variable: Any, value: np.ndarray, source: str = "") -> None:
        if tuple(variable.shape) != tuple(value.shape):
            raise UnsupportedCheckpointError(
                f"{source or 'a tensor'} has shape {tuple(value.shape)} but t2t's "
                f"{variable.path} has {tuple(variable.shape)}: config.json does not describe "
                f"these weights.")
        self.values.append((variable, value, source))

    def put_paths(self, model: Any, names: dict[str, str], transpose_kernels: bool) -> None:
        """`names`: {t2t path under model: Hugging Face name}; torch's Linear weights are
        [out, in], Keras kernels [in, out]."""
        for path, hf_name in names.items():
            value, source = self.take(hf_name), hf_name
            if transpose_kernels and path.endswith(".kernel"):
                value = value.T
                source = f"{hf_name} (stored {tuple(value.T.shape)}, transposed)"
            self.put(resolve(model, path), value, source)

    def apply(self, model: Any) -> int:
        """Assigns every value after checking completeness; returns the count assigned."""
        unused = sorted(set(self.tensors) - self.used)
        if unused:
            raise UnsupportedCheckpointError(
                f"the checkpoint holds {len(unused)} tensor(s) this architecture does not "
                f"use, e.g. {unused[:4]}: another architecture or option (nothing was "
                f"imported).")
        assigned = {id(variable) for variable, _, _ in self.values}
        missing = [v.path for v in model.weights
                   if v.trainable and id(v) not in assigned]
        if missing:
            raise UnsupportedCheckpointError(
                f"no value for {len(missing)} weight(s) of t2t's model, e.g. {missing[:4]} "
                f"(nothing was imported).")
        for variable, value, _ in self.values:
            variable.assign(value.astype(np.float32))
        return len(self.values)
