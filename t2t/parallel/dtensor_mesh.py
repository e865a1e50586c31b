"""A parsed mesh and layout (t2t.parallel.mesh_layout) as TensorFlow DTensor objects.

`create_mesh` makes the dtensor Mesh of a MeshShape over the visible devices of one type;
`weight_layout` turns a weight's dimension names (e.g. ["vocab", "d_model"] for an
embedding) into the dtensor Layout that splits each named dimension over its mesh axis
and replicates the others; `sharded_variable` makes a DVariable with that layout, its
initial value created already sharded (dtensor.call_with_layout on a DTensor-aware
initializer: a regular tensor made first would not be split).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from t2t.parallel.mesh_layout import MeshLayoutError, MeshShape, check_layout
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


def _dtensor() -> Any:
    from tensorflow.experimental import dtensor

    return dtensor


def create_mesh(mesh: MeshShape, device_type: str = "CPU") -> Any:
    """The dtensor Mesh of `mesh` over the first mesh.num_devices visible devices of
    `device_type`; MeshLayoutError if there are fewer."""
    devices = tf.config.list_logical_devices(device_type)
    check_layout(mesh, {}, {}, len(devices), device_type)
    if not mesh.axes:
        raise MeshLayoutError("mesh_shape is empty: there is no mesh to create.")
    names = [d.name for d in devices[: mesh.num_devices]]
    return _dtensor().create_mesh(list(mesh.axes), devices=names, device_type=device_type)


def weight_layout(dimensions: Sequence[str | None], layout: Mapping[str, str],
                  dmesh: Any) -> Any:
    """dtensor Layout of a tensor whose axes are the named `dimensions` (None: an axis a
    layout never splits): a dimension in `layout` is split over its mesh axis."""
    dtensor = _dtensor()
    used = [layout[d] for d in dimensions if d in layout]
    if len(used) != len(set(used)):
        raise MeshLayoutError(
            f"a tensor of dimensions {list(dimensions)} would split two of them over one "
            f"mesh axis ({', '.join(f'{d}:{layout[d]}' for d in dimensions if d in layout)}); "
            "lay out at most one of them on each axis.")
    specs = [layout[d] if d in layout else dtensor.UNSHARDED for d in dimensions]
    return dtensor.Layout(specs, dmesh)


def sharded_variable(initializer: Callable[..., Any], shape: Sequence[int], dtype: Any,
                     layout: Any, name: str | None = None) -> Any:
    """A DVariable laid out as `layout`, initialized by `initializer(shape, dtype)` (a
    DTensor-aware op: tf.zeros/tf.ones, stateless random ops) run with that layout."""
    dtensor = _dtensor()
    value = dtensor.call_with_layout(initializer, layout, shape=list(shape), dtype=dtype)
    return dtensor.DVariable(value, name=name)
