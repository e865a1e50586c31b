"""Mesh TensorFlow's two hparams, parsed and checked: `mesh_shape` and `layout`.

Mesh TensorFlow (and Tensor2Tensor's mtf models) described model parallelism with two
strings:
  mesh_shape  "batch:4;model:2"   the devices as a named grid: axis "batch" of 4, axis
                                  "model" of 2 (8 devices);
  layout      "batch:batch;vocab:model;d_ff:model;heads:model"
                                  which tensor dimension is split over which mesh axis;
                                  a dimension not named is replicated.
`parse_mesh_shape` and `parse_layout` read them (an empty string: no mesh / no split);
`check_layout` checks a layout against a mesh, the model's dimension sizes and the devices
there are, with an error naming the bad value and what to write instead.

A dimension is split over one mesh axis (Mesh TensorFlow also allowed a list of axes per
dimension; t2t does not yet). The dimension names are those of t2t's sharded models:
MODEL_DIMENSIONS.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any

# Tensor dimensions a layout may name: the batch of the inputs, and the weights' axes.
MODEL_DIMENSIONS = {
    "batch": "examples of the global batch",
    "vocab": "the vocabulary (embeddings and softmax)",
    "d_model": "hidden_size",
    "d_ff": "filter_size (feed-forward layers)",
    "heads": "num_heads (attention)",
    "experts": "moe_num_experts (mixture-of-experts layers)",
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MeshLayoutError(ValueError):
    """A mesh_shape or layout that cannot be used; the message names it and the fix."""


@dataclasses.dataclass(frozen=True)
class MeshShape:
    """Named mesh axes in order, e.g. (("batch", 4), ("model", 2))."""

    axes: tuple[tuple[str, int], ...] = ()

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.axes]

    @property
    def num_devices(self) -> int:
        """Devices the mesh needs: the product of its axis sizes (1 for no mesh)."""
        count = 1
        for _, size in self.axes:
            count *= size
        return count

    def size(self, axis: str) -> int:
        return dict(self.axes)[axis]

    def __str__(self) -> str:
        return ";".join(f"{name}:{size}" for name, size in self.axes)


def _pairs(text: str, what: str, example: str) -> list[tuple[str, str]]:
    """"a:b;c:d" -> [("a", "b"), ("c", "d")] (spaces ignored, empty entries skipped)."""
    pairs = []
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        name, sep, value = (part.strip() for part in entry.partition(":"))
        if not sep or not name or not value:
            raise MeshLayoutError(f"{what}={text!r}: entry {entry!r} is not NAME:VALUE; write "
                                  f"e.g. {what}=\"{example}\".")
        pairs.append((name, value))
    return pairs


def parse_mesh_shape(text: str) -> MeshShape:
    """"batch:4;model:2" -> MeshShape((("batch", 4), ("model", 2))); "" -> no mesh."""
    axes: list[tuple[str, int]] = []
    for name, value in _pairs(text, "mesh_shape", "batch:2;model:2"):
        if not _NAME.match(name):
            raise MeshLayoutError(f"mesh_shape={text!r}: axis name {name!r} is not an "
                                  "identifier (letters, digits, _).")
        if any(name == seen for seen, _ in axes):
            raise MeshLayoutError(f"mesh_shape={text!r}: axis {name!r} is named twice.")
        if not value.isdigit() or int(value) < 1:
            raise MeshLayoutError(f"mesh_shape={text!r}: axis {name!r} has size {value!r}; "
                                  "a size is a whole number >= 1.")
        axes.append((name, int(value)))
    return MeshShape(tuple(axes))


def _close(name: str, choices: list[str]) -> str:
    matches = difflib.get_close_matches(name, choices, n=3)
    return f" (did you mean {', '.join(repr(m) for m in matches)}?)" if matches else ""


def parse_layout(text: str, mesh: MeshShape) -> dict[str, str]:
    """"vocab:model;d_ff:model" -> {"vocab": "model", "d_ff": "model"}, checked against the
    dimension names (MODEL_DIMENSIONS) and the mesh's axes; "" -> {} (all replicated)."""
    layout: dict[str, str] = {}
    for dimension, axis in _pairs(text, "layout", "batch:batch;vocab:model"):
        if dimension not in MODEL_DIMENSIONS:
            raise MeshLayoutError(
                f"layout={text!r}: unknown dimension {dimension!r}"
                f"{_close(dimension, list(MODEL_DIMENSIONS))}; use one of "
                f"{', '.join(MODEL_DIMENSIONS)}.")
        if dimension in layout:
            raise MeshLayoutError(f"layout={text!r}: dimension {dimension!r} is laid out twice.")
        if axis not in mesh.names:
            raise MeshLayoutError(
                f"layout={text!r}: {dimension}:{axis} names mesh axis {axis!r}, which "
                f"mesh_shape={str(mesh)!r} does not have{_close(axis, mesh.names)}; use one "
                f"of {mesh.names} or add it to mesh_shape." if mesh.axes else
                f"layout={text!r} needs a mesh: set mesh_shape (e.g. \"batch:2;model:2\").")
        layout[dimension] = axis
    return layout


def model_dimensions(hparams: Any, vocab_size: int | None, global_batch: int | None
                     ) -> dict[str, int]:
    """Sizes of the dimensions a layout may split, for a model's hparams (those it has)."""
    sizes = {"batch": global_batch, "vocab": vocab_size,
             "d_model": hparams.get("hidden_size"), "d_ff": hparams.get("filter_size"),
             "heads": hparams.get("num_heads"), "experts": hparams.get("moe_num_experts")}
    return {name: int(size) for name, size in sizes.items() if size}


def check_layout(mesh: MeshShape, layout: Mapping[str, str], dimensions: Mapping[str, int],
                 available_devices: int, device_type: str = "CPU") -> None:
    """Raises MeshLayoutError unless every split dimension divides by its axis size and
    the mesh fits the devices there are."""
    if mesh.num_devices > available_devices:
        raise MeshLayoutError(
            f"mesh_shape={str(mesh)!r} needs {mesh.num_devices} {device_type} devices; "
            f"{available_devices} are visible. Use a smaller mesh, or (on a CPU) split the "
            f"CPU into {mesh.num_devices} logical devices first "
            f"(tf.config.set_logical_device_configuration).")
    for dimension, axis in layout.items():
        size = dimensions.get(dimension)
        if size is not None and size % mesh.size(axis):
            raise MeshLayoutError(
                f"layout {dimension}:{axis}: {dimension} = {size} "
                f"({MODEL_DIMENSIONS[dimension]}) does not divide by mesh axis {axis!r} of "
                f"size {mesh.size(axis)}; change mesh_shape, or the hparam, or leave "
                f"{dimension} out of the layout (replicated).")


def check_runtime_mesh(hparams: Any, plan: Any) -> None:
    """MeshLayoutError unless the runtime's mesh (`plan`, a MeshPlan or None) is the one
    the hparams ask for (mesh_shape, layout), and the layout divides the model's
    dimensions (hidden_size, num_heads, filter_size, moe_num_experts)."""
    wanted = parse_mesh_shape(hparams.get("mesh_shape") or "")
    have = plan.mesh_shape if plan is not None else MeshShape()
    if wanted != have:
        raise MeshLayoutError(
            f"the hparams ask for mesh_shape={str(wanted)!r} but the runtime was started "
            f"with {str(have)!r}: start it with the same mesh (runtime.start(config, "
            f"mesh_shape=..., layout=...)), as t2t-trainer does.")
    if plan is None:
        if hparams.get("layout"):
            raise MeshLayoutError(f"layout={hparams.layout!r} needs a mesh: set mesh_shape "
                                  f'(e.g. "batch:2;model:2").')
        return
    layout = parse_layout(hparams.get("layout") or "", wanted)
    if layout != plan.layout:
        raise MeshLayoutError(f"the hparams' layout {layout} differs from the runtime's "
                              f"{plan.layout}: start the runtime with the same layout.")
    check_layout(wanted, layout, model_dimensions(hparams, None, None), wanted.num_devices)
