"""Tests of t2t.parallel.mesh_layout: Mesh TensorFlow's mesh_shape and layout strings."""

from __future__ import annotations

import pytest

from t2t.hparams.hparams import HParams
from t2t.parallel import mesh_layout as ml


def test_mesh_shape_and_layout_parse_in_mesh_tensorflows_syntax():
    mesh = ml.parse_mesh_shape(" batch:4 ; model:2 ")
    assert mesh.axes == (("batch", 4), ("model", 2)) and mesh.num_devices == 8
    assert str(mesh) == "batch:4;model:2" and mesh.size("model") == 2
    layout = ml.parse_layout("batch:batch;vocab:model;d_ff:model;heads:model", mesh)
    assert layout == {"batch": "batch", "vocab": "model", "d_ff": "model", "heads": "model"}
    assert ml.parse_mesh_shape("") == ml.MeshShape() and ml.MeshShape().num_devices == 1
    assert ml.parse_layout("", ml.MeshShape()) == {}


@pytest.mark.parametrize("text, match", [
    ("batch:4;model", "entry 'model' is not NAME:VALUE"),
    ("batch:0", "axis 'batch' has size '0'"),
    ("batch:two", "axis 'batch' has size 'two'"),
    ("batch:2;batch:2", "axis 'batch' is named twice"),
    ("2d:2", "axis name '2d' is not an identifier"),
])
def test_bad_mesh_shapes_are_named(text, match):
    with pytest.raises(ml.MeshLayoutError, match=match):
        ml.parse_mesh_shape(text)


@pytest.mark.parametrize("text, match", [
    ("vocab:modl", r"mesh axis 'modl', which mesh_shape='batch:2;model:2' does not have "
                   r"\(did you mean 'model'\?\)"),
    ("d_ffn:model", r"unknown dimension 'd_ffn' \(did you mean 'd_ff'\?\)"),
    ("vocab:model;vocab:batch", "dimension 'vocab' is laid out twice"),
])
def test_bad_layouts_are_named_with_close_matches(text, match):
    with pytest.raises(ml.MeshLayoutError, match=match):
        ml.parse_layout(text, ml.parse_mesh_shape("batch:2;model:2"))


def test_a_layout_without_a_mesh_asks_for_one():
    with pytest.raises(ml.MeshLayoutError, match="needs a mesh: set mesh_shape"):
        ml.parse_layout("vocab:model", ml.MeshShape())


def test_sizes_must_divide_and_the_devices_must_exist():
    mesh = ml.parse_mesh_shape("batch:2;model:4")
    hparams = HParams(hidden_size=64, filter_size=256, num_heads=6)
    dims = ml.model_dimensions(hparams, vocab_size=1000, global_batch=32)
    assert dims == {"batch": 32, "vocab": 1000, "d_model": 64, "d_ff": 256, "heads": 6}
    ml.check_layout(mesh, {"batch": "batch", "vocab": "model", "d_ff": "model"}, dims, 8)
    with pytest.raises(ml.MeshLayoutError, match=r"heads = 6 \(num_heads \(attention\)\) does "
                                                 r"not divide by mesh axis 'model' of size 4"):
        ml.check_layout(mesh, {"heads": "model"}, dims, 8)
    with pytest.raises(ml.MeshLayoutError, match="needs 8 CPU devices; 4 are visible"):
        ml.check_layout(mesh, {}, dims, 4)


DTENSOR_SCRIPT = r"""
import json, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)
from tensorflow.experimental import dtensor
from t2t.parallel import dtensor_mesh, mesh_layout as ml
mesh = ml.parse_mesh_shape("batch:2;model:2")
layout = ml.parse_layout("batch:batch;vocab:model;d_ff:model", mesh)
dmesh = dtensor_mesh.create_mesh(mesh)
embedding = dtensor_mesh.sharded_variable(tf.ones, [8, 6], tf.float32,
    dtensor_mesh.weight_layout(["vocab", "d_model"], layout, dmesh))
inputs = dtensor.call_with_layout(tf.ones, dtensor_mesh.weight_layout(
    ["batch", "d_model"], layout, dmesh), shape=[4, 6], dtype=tf.float32)
logits = tf.matmul(inputs, embedding, transpose_b=True)
value = embedding.read_value()
out = {"specs": dtensor.fetch_layout(value).sharding_specs,
       "shards": [list(t.shape) for t in dtensor.unpack(value)],
       "logits": float(tf.reduce_sum(logits).numpy())}
try:
    dtensor_mesh.weight_layout(["d_ff", "vocab"], layout, dmesh)
except ml.MeshLayoutError as e:
    out["same_axis"] = str(e)
try:
    dtensor_mesh.create_mesh(ml.parse_mesh_shape("batch:4;model:2"))
except ml.MeshLayoutError as e:
    out["too_many"] = str(e)
from t2t.parallel import sharding
import numpy as np
plan = sharding.MeshPlan(mesh, layout, dmesh)
rules = [("odd/kernel$", ("d_model", "d_ff")), ("twice/kernel$", ("vocab", "d_ff"))]
for name, shape in (("odd", (6, 5)), ("twice", (8, 6))):
    try:
        weight = type("Weight", (), {"path": name + "/kernel", "shape": shape})()
        sharding.check_weights([weight], plan, rules)
    except ml.MeshLayoutError as e:
        out[name] = str(e)
batch = plan.to_mesh({"targets": np.arange(3 * 2).reshape(3, 2).astype("int32")})
out["padded"] = sharding.fetch(batch["targets"]).tolist()
print(json.dumps(out))
"""


def test_layouts_become_dtensor_shards_on_logical_cpus():
    """In a fresh process (logical devices must be set before TensorFlow starts)."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", DTENSOR_SCRIPT], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["specs"] == ["model", "unsharded"]
    assert out["shards"] == [[4, 6]] * 4  # the vocabulary split in 2, on each of 4 devices
    assert out["logits"] == 4 * 8 * 6.0
    assert "lay out at most one of them on each axis" in out["same_axis"]
    assert "needs 8 CPU devices; 4 are visible" in out["too_many"]
    assert "weight odd/kernel (6, 5): its d_ff axis of 5 does not divide" in out["odd"]
    assert "weight twice/kernel (8, 6)" in out["twice"] and "at most one" in out["twice"]
    # 3 examples on 2 batch shards: one empty example (all padding) is added.
    assert out["padded"] == [[0, 1], [2, 3], [4, 5], [0, 0]]


def test_the_runtime_mesh_must_be_the_hparams_mesh():
    from t2t.hparams.hparams import HParams
    from t2t.parallel.sharding import MeshPlan

    hparams = HParams(mesh_shape="batch:2;model:2", layout="vocab:model", hidden_size=64,
                      num_heads=4, filter_size=6)
    with pytest.raises(ml.MeshLayoutError, match="runtime was started with ''"):
        ml.check_runtime_mesh(hparams, None)
    plan = MeshPlan(ml.parse_mesh_shape("batch:2;model:2"), {"vocab": "model"}, dmesh=None)
    ml.check_runtime_mesh(hparams, plan)
    with pytest.raises(ml.MeshLayoutError, match="differs from the runtime's"):
        ml.check_runtime_mesh(HParams(mesh_shape="batch:2;model:2", layout=""), plan)
    odd = HParams(mesh_shape="batch:2;model:2", layout="vocab:model;d_ff:model",
                  filter_size=5)
    plan_odd = MeshPlan(ml.parse_mesh_shape("batch:2;model:2"),
                        {"vocab": "model", "d_ff": "model"}, dmesh=None)
    with pytest.raises(ml.MeshLayoutError, match="d_ff = 5 .* does not divide by mesh axis"):
        ml.check_runtime_mesh(odd, plan_odd)
    with pytest.raises(ml.MeshLayoutError, match="needs a mesh"):
        ml.check_runtime_mesh(HParams(mesh_shape="", layout="vocab:model"), None)


def test_a_mesh_across_processes_needs_a_cluster_of_workers():
    from t2t.parallel import mesh_runtime

    env = mesh_runtime._client_environment(
        {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
         "task": {"type": "worker", "index": 1}})
    assert env == {"DTENSOR_CLIENT_ID": "1", "DTENSOR_NUM_CLIENTS": "2",
                   "DTENSOR_JOB_NAME": "worker", "DTENSOR_JOBS": "127.0.0.1:1,127.0.0.1:2"}
    with pytest.raises(ml.MeshLayoutError, match="workers only"):
        mesh_runtime._client_environment(
            {"cluster": {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]},
             "task": {"type": "chief", "index": 0}})


def test_a_mesh_refuses_another_distribution():
    from t2t.config import RuntimeConfig
    from t2t.trainer import runtime as runtime_lib
    from t2t.trainer.strategy import StrategyError

    for config, flag in ((RuntimeConfig(cpu_devices=2), "--cpu_devices"),
                         (RuntimeConfig(use_tpu=True), "--use_tpu"),
                         (RuntimeConfig(sync=False), "--sync=false")):
        with pytest.raises(StrategyError, match=f"mesh_shape='batch:2'.*{flag}"):
            runtime_lib.start(config, mesh_shape="batch:2")
