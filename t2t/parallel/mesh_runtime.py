"""Starting a DTensor mesh in this process: the devices, and the clients of a cluster.

    plan = start_mesh("batch:2;model:2", "batch:batch;vocab:model", cluster=None)

One process (single-client): the mesh is made of this process's devices; on a machine
without accelerators the CPU is split into as many logical devices as the mesh needs
(first thing in the process, before TensorFlow uses the CPU). Several processes
(multi-client, e.g. `t2t-launch --num_workers=2`): each worker of the cluster (TF_CONFIG)
is a DTensor client holding mesh.num_devices / num_workers local devices, and the mesh
spans them all. DTensor reads its cluster from DTENSOR_* environment variables, so they
are set here from the cluster (nothing else in t2t sets process state).
"""

from __future__ import annotations

import os
from typing import Any

from t2t.parallel.mesh_layout import MeshLayoutError, parse_layout, parse_mesh_shape
from t2t.parallel.sharding import MeshPlan
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


def device_type() -> str:
    """GPU where there are GPUs, else CPU (a TPU mesh is not wired in t2t yet)."""
    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def _split_cpu(count: int) -> None:
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current is not None and len(current) == count:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as e:
        raise MeshLayoutError(
            f"cannot split the CPU into the mesh's {count} devices after TensorFlow started "
            f"using it ({e}): start the mesh first thing in the process.") from e


def _client_environment(cluster: dict[str, Any]) -> dict[str, str]:
    """DTensor's DTENSOR_* variables for this worker of a TF_CONFIG-style `cluster`."""
    workers = cluster["cluster"].get("worker", [])
    task = cluster.get("task") or {}
    if set(cluster["cluster"]) - {"worker"} or task.get("type") != "worker":
        raise MeshLayoutError(
            f"a mesh across processes needs a cluster of workers only (no chief or ps): "
            f"got {sorted(cluster['cluster'])}; start it with t2t-launch --num_workers=N "
            f"(and no --num_ps).")
    return {"DTENSOR_CLIENT_ID": str(int(task.get("index", 0))),
            "DTENSOR_NUM_CLIENTS": str(len(workers)),
            "DTENSOR_JOB_NAME": "worker",
            "DTENSOR_JOBS": ",".join(workers)}


def start_mesh(mesh_shape: str, layout: str, cluster: dict[str, Any] | None = None
               ) -> MeshPlan:
    """The MeshPlan of the `mesh_shape` and `layout` hparams on this process's devices,
    or across the workers of `cluster` (a parsed TF_CONFIG); MeshLayoutError if the
    devices cannot make the mesh."""
    from tensorflow.experimental import dtensor

    shape = parse_mesh_shape(mesh_shape)
    if not shape.axes:
        raise MeshLayoutError("mesh_shape is empty: there is no mesh to start.")
    parsed_layout = parse_layout(layout, shape)
    kind = device_type()
    clients = len(cluster["cluster"].get("worker", [])) if cluster else 1
    if shape.num_devices % clients:
        raise MeshLayoutError(
            f"mesh_shape={mesh_shape!r} has {shape.num_devices} devices, which the "
            f"{clients} workers cannot hold in equal parts: use a mesh whose size divides "
            f"by {clients}, or another number of workers.")
    if kind == "CPU":
        _split_cpu(shape.num_devices // clients)
    if cluster is None:
        return MeshPlan.create(shape, parsed_layout, kind)
    os.environ.update(_client_environment(cluster))
    dtensor.initialize_accelerator_system(kind)
    return MeshPlan.create(shape, parsed_layout, kind, distributed=True)
