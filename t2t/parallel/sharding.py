"""A built Keras model and its optimizer laid out on a DTensor mesh.

    plan = MeshPlan.create(parse_mesh_shape("batch:2;model:2"), layout, device_type="CPU")
    dims = shard_model(model, plan, model.WEIGHT_DIMENSIONS)   # weights now DVariables
    optimizer.build(model.trainable_variables)                # slots made from them
    shard_optimizer(optimizer, plan, dims)                    # slots laid out alike
    features = plan.to_mesh(batch)                            # batch split on "batch"

Each weight's axes are named by the model's rules (`WEIGHT_DIMENSIONS`: a regular
expression on the Keras variable path -> one dimension name per axis, e.g. the shared
embedding `modality.*/weights` -> ("vocab", "d_model")), Mesh TensorFlow's way of
writing a model once and laying it out by name. A weight no rule names is replicated.

The values move onto the mesh shard by shard (`dtensor.pack` of host slices): no device
ever holds a whole sharded weight. Keras variables keep their identity (checkpoints,
the optimizer's bookkeeping, layer code see the same objects); only the TensorFlow
variable behind each one becomes a `dtensor.DVariable`, so the model must be sharded
before the optimizer is built (the optimizer keys its slots by that variable).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2t.parallel import dtensor_mesh
from t2t.parallel.mesh_layout import MeshLayoutError, MeshShape
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

# (regular expression on a variable path, one dimension name or None per axis).
WeightRules = Sequence[tuple[str, tuple[str | None, ...]]]


def _dtensor() -> Any:
    from tensorflow.experimental import dtensor

    return dtensor


def weight_dimensions(path: str, rank: int, rules: WeightRules) -> tuple[str | None, ...]:
    """The dimension names of the weight at `path` (the first matching rule; a rule of
    another rank, or none: every axis unnamed, i.e. replicated)."""
    for pattern, dims in rules:
        if re.search(pattern, path) and len(dims) == rank:
            return tuple(dims)
    return (None,) * rank


@dataclasses.dataclass
class MeshPlan:
    """A mesh, the layout of dimension names on its axes, and the DTensor mesh."""

    mesh_shape: MeshShape
    layout: dict[str, str]
    dmesh: Any

    @classmethod
    def create(cls, mesh_shape: MeshShape, layout: Mapping[str, str],
               device_type: str = "CPU", distributed: bool = False) -> MeshPlan:
        """The plan over this process's devices (`distributed`: a mesh spanning every
        client of a multi-client DTensor job, initialized beforehand)."""
        if distributed:
            dmesh = _dtensor().create_distributed_mesh(
                list(mesh_shape.axes), device_type=device_type)
        else:
            dmesh = dtensor_mesh.create_mesh(mesh_shape, device_type)
        return cls(mesh_shape, dict(layout), dmesh)

    @property
    def batch_axis(self) -> str | None:
        """The mesh axis the batch is split over (None: the batch is replicated)."""
        return self.layout.get("batch")

    @property
    def batch_shards(self) -> int:
        axis = self.batch_axis
        return self.mesh_shape.size(axis) if axis else 1

    def tensor_layout(self, dims: Sequence[str | None]) -> Any:
        """The dtensor Layout of a tensor with these dimension names."""
        return dtensor_mesh.weight_layout(list(dims), self.layout, self.dmesh)

    def replicated(self, rank: int) -> Any:
        return _dtensor().Layout.replicated(self.dmesh, rank=rank)

    def pack(self, value: Any, layout: Any) -> Any:
        """A DTensor of `value` (host array, the global value) laid out as `layout`:
        each local device receives only its own slice."""
        value = np.asarray(value)
        specs = layout.sharding_specs
        shards = []
        for location in self.dmesh.local_device_locations():
            index = []
            for axis_size, spec in zip(value.shape, specs, strict=True):
                if spec in location:
                    parts = self.dmesh.dim_size(spec)
                    step = axis_size // parts
                    index.append(slice(location[spec] * step, (location[spec] + 1) * step))
                else:
                    index.append(slice(None))
            shards.append(tf.convert_to_tensor(value[tuple(index)]))
        return _dtensor().pack(shards, layout)

    def agree_any(self, flag: bool) -> bool:
        """Whether any client of the mesh passed True (a collective: every client calls
        it at the same point). One element per device, each client's flag on its own."""
        specs = self.mesh_shape.names
        local = [tf.fill([1] * len(specs), float(flag)) for _ in self.dmesh.local_devices()]
        packed = _dtensor().pack(local, _dtensor().Layout(specs, self.dmesh))
        return bool(fetch(tf.reduce_max(packed)) > 0)

    def to_mesh(self, features: Mapping[str, Any]) -> dict[str, Any]:
        """A batch of host tensors as DTensors split on the batch axis. The batch is
        padded to a multiple of the batch shards with all-zero examples (padding: they
        weigh nothing in the loss or the metrics)."""
        shards = self.batch_shards
        out = {}
        for name, value in features.items():
            value = np.asarray(value)
            extra = (-value.shape[0]) % shards if value.ndim else 0
            if extra:
                value = np.concatenate([value, np.zeros((extra, *value.shape[1:]), value.dtype)])
            dims = ("batch",) + (None,) * (value.ndim - 1) if value.ndim else ()
            out[name] = self.pack(value, self.tensor_layout(dims))
        return out


def _layout_of(value: Any) -> Any:
    """The dtensor Layout of `value`, None for a regular tensor."""
    try:
        return _dtensor().fetch_layout(value)
    except (ValueError, TypeError, tf.errors.InvalidArgumentError):
        return None


def fetch(value: Any) -> np.ndarray:
    """The global value of a DTensor, a (Keras) variable or a plain tensor on the host."""
    dtensor = _dtensor()
    if _is_keras_variable(value):
        value = value.value  # its TensorFlow variable
    if hasattr(value, "read_value"):
        value = value.read_value()
    layout = _layout_of(value)
    if layout is None:
        return np.asarray(value)
    if not layout.is_fully_replicated():
        value = dtensor.relayout(value, dtensor.Layout.replicated(layout.mesh, rank=layout.rank))
    return dtensor.unpack(value)[0].numpy()


def _is_keras_variable(value: Any) -> bool:
    import keras

    return isinstance(value, keras.Variable)


def _to_dvariable(variable: Any, plan: MeshPlan, dims: Sequence[str | None]) -> None:
    """Replaces the TensorFlow variable behind a Keras variable by a DVariable of the
    same name and value, laid out by `dims`. Keras 3 has no public way to do this (its
    own layouts do not support the TensorFlow backend): the one private write, checked
    by tests/parallel/test_mesh_training.py on every Keras release."""
    layout = plan.tensor_layout(dims)
    value = plan.pack(variable.numpy(), layout)
    variable._value = _dtensor().DVariable(  # keras-private: see the docstring
        value, trainable=variable.trainable, name=variable.name)


def check_weights(variables: Sequence[Any], plan: MeshPlan, rules: WeightRules
                  ) -> dict[str, tuple[str | None, ...]]:
    """{path: dimension names} of the variables, MeshLayoutError naming the first weight
    the layout cannot split (an axis used twice, a size that does not divide)."""
    dims_by_path = {}
    for variable in variables:
        dims = weight_dimensions(variable.path, len(variable.shape), rules)
        try:
            plan.tensor_layout(dims)
        except MeshLayoutError as e:
            raise MeshLayoutError(f"weight {variable.path} {tuple(variable.shape)}: {e}") from None
        for size, dim in zip(variable.shape, dims, strict=True):
            axis = plan.layout.get(dim) if dim else None
            if axis and size % plan.mesh_shape.size(axis):
                raise MeshLayoutError(
                    f"weight {variable.path} {tuple(variable.shape)}: its {dim} axis of "
                    f"{size} does not divide by mesh axis {axis!r} of size "
                    f"{plan.mesh_shape.size(axis)}; change mesh_shape or leave {dim} out "
                    f"of the layout.")
        dims_by_path[variable.path] = dims
    return dims_by_path


def shard_model(model: Any, plan: MeshPlan, rules: WeightRules
                ) -> dict[str, tuple[str | None, ...]]:
    """Lays every weight of the built `model` out on the mesh (before the optimizer is
    built); returns {path: dimension names}."""
    refusal = getattr(model, "MESH_BATCH_SPLIT_ERROR", None)
    if plan.batch_axis and refusal:
        raise MeshLayoutError(f"layout batch:{plan.batch_axis} with {type(model).__name__}: "
                              f"{refusal}.")
    dims_by_path = check_weights(model.variables, plan, rules)
    for variable in model.variables:
        _to_dvariable(variable, plan, dims_by_path[variable.path])
    return dims_by_path


def _slot_dimensions(slot: Any, references: Mapping[str, tuple[Any, tuple]]
                     ) -> tuple[str | None, ...]:
    """Dimension names of an optimizer variable: its model variable's (Keras names a
    slot PATH_WITH_UNDERSCORES_slotname), cut to a factored slot's shape (Adafactor's
    row and column statistics); a step counter or learning rate is replicated."""
    rank = len(slot.shape)
    keys = [key for key in references if slot.name.startswith(key + "_")]
    if not rank or not keys:
        return (None,) * rank
    variable, dims = references[max(keys, key=len)]
    shape = tuple(variable.shape)
    for kept, axes in ((dims, shape), (dims[:-1], shape[:-1]),
                       (dims[:-2] + dims[-1:], shape[:-2] + shape[-1:])):
        if tuple(slot.shape) == axes:
            return kept
    return (None,) * rank


def shard_optimizer(optimizer: Any, plan: MeshPlan,
                    dims_by_path: Mapping[str, tuple[str | None, ...]],
                    variables: Sequence[Any]) -> None:
    """Lays the built optimizer's variables out like the model variables they follow
    (`variables`: the model's, as passed to optimizer.build)."""
    references = {v.path.replace("/", "_"): (v, dims_by_path[v.path]) for v in variables}
    for slot in optimizer.variables:
        _to_dvariable(slot, plan, _slot_dimensions(slot, references))


def bytes_per_device(variables: Sequence[Any]) -> int:
    """Bytes of (Keras or DTensor) `variables` held by one device of their mesh."""
    total = 0
    for variable in variables:
        value = (variable.value if _is_keras_variable(variable) else variable).read_value()
        layout = _layout_of(value)
        shape = (list(value.shape) if layout is None
                 else layout.local_shape_from_global_shape(list(value.shape)))
        total += int(np.prod(shape)) * value.dtype.size
    return total
