"""Tests of strategy selection (in a fresh process: devices are split before TF starts)."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from t2t.trainer import strategy as strategy_lib


def test_default_is_one_device():
    strategy = strategy_lib.create_strategy(strategy_lib.StrategyConfig())
    assert strategy.num_replicas_in_sync == 1
    assert strategy_lib.describe(strategy) == "default (one device), 1 replica(s)"


def test_worker_gpu_without_gpus_says_what_to_do():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs")
    with pytest.raises(strategy_lib.StrategyError, match="0 visible GPU.*--cpu_devices"):
        strategy_lib.create_strategy(strategy_lib.StrategyConfig(worker_gpu=2))
    with pytest.raises(strategy_lib.StrategyError, match="cannot be combined"):
        strategy_lib.create_strategy(strategy_lib.StrategyConfig(worker_gpu=2, cpu_devices=2))


def test_cpu_devices_mirror_in_a_fresh_process():
    script = textwrap.dedent("""
        from t2t.trainer import strategy as s
        strategy = s.create_strategy(s.StrategyConfig(cpu_devices=2))
        print(s.describe(strategy))
        import os; os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "MirroredStrategy, 2 replica(s)" in out.stdout, out.stderr[-2000:]


def _config(**kwargs):
    return strategy_lib.StrategyConfig(tf_config=kwargs.pop("tf_config", ""), **kwargs)


def test_tf_config_parsing_and_its_errors(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert strategy_lib.cluster_config(_config()) is None
    assert strategy_lib.cluster_config(_config(tf_config='{"environment": "cloud"}')) is None
    with pytest.raises(strategy_lib.StrategyError, match="not valid JSON"):
        strategy_lib.cluster_config(_config(tf_config="{worker"))
    bad_task = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'
    with pytest.raises(strategy_lib.StrategyError, match="not in its cluster"):
        strategy_lib.cluster_config(_config(tf_config=bad_task))


def test_worker_hosts_build_a_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    built = strategy_lib.cluster_config(_config(worker_hosts="h1:1, h2:2", worker_id=1))
    assert built == {"cluster": {"worker": ["h1:1", "h2:2"]}, "task": {"type": "worker", "index": 1}}
    assert "TF_CONFIG" not in os.environ  # later strategies in this process stay local
    with pytest.raises(strategy_lib.StrategyError, match="--worker_id=2 is not an index"):
        strategy_lib.cluster_config(_config(worker_hosts="h1:1,h2:2", worker_id=2))
    with pytest.raises(strategy_lib.StrategyError, match="--worker_replicas=3 but --worker_hosts lists 2"):
        strategy_lib.cluster_config(_config(worker_hosts="h1:1,h2:2", worker_replicas=3))
    with pytest.raises(strategy_lib.StrategyError, match="needs --worker_hosts"):
        strategy_lib.cluster_config(_config(worker_replicas=2))


def test_parameter_server_flags_are_checked(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    ps_cluster = ('{"cluster": {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"]}, '
                  '"task": {"type": "chief", "index": 0}}')
    with pytest.raises(strategy_lib.StrategyError, match="synchronous training with parameter servers"):
        strategy_lib.create_strategy(_config(tf_config=ps_cluster))
    with pytest.raises(strategy_lib.StrategyError, match="t2t-launch --num_workers=N --num_ps=M"):
        strategy_lib.create_strategy(_config(ps_replicas=1, sync=False))
    with pytest.raises(strategy_lib.StrategyError, match="--ps_replicas=2 but TF_CONFIG lists 1"):
        strategy_lib.create_strategy(_config(tf_config=ps_cluster, ps_replicas=2, sync=False))
    no_chief = '{"cluster": {"worker": ["w:1"], "ps": ["p:1"]}, "task": {"type": "worker", "index": 0}}'
    with pytest.raises(strategy_lib.StrategyError, match='needs a "chief" task'):
        strategy_lib.create_strategy(_config(tf_config=no_chief, sync=False))
    # Not a member of a ps cluster: nothing to serve.
    assert strategy_lib.serve_if_cluster_member(_config()) is False


def test_strategies_that_cannot_be_combined(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(strategy_lib.StrategyError, match="--use_tpu and --cpu_devices cannot be combined"):
        strategy_lib.create_strategy(_config(use_tpu=True, tpu="local", cpu_devices=2))
    with pytest.raises(strategy_lib.StrategyError, match="--all_reduce='mpi'"):
        strategy_lib._multi_worker(_config(all_reduce="mpi"))


@pytest.mark.parametrize("tpu, message", [
    (None, "--use_tpu needs --tpu=NAME_OR_GRPC_ADDRESS"),
    ("grpc://nowhere", "a TPU address looks like grpc://10.0.0.2:8470"),
    ("grpc://127.0.0.1:1", "nothing answers on 127.0.0.1:1"),
    ("local", "no TPU devices"),
    ("my-tpu", "metadata server is unreachable"),
])
def test_tpu_errors_are_immediate_and_say_what_to_do(monkeypatch, tpu, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setattr(strategy_lib.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(strategy_lib, "_can_connect", lambda host, port, timeout_s=3.0: False)
    with pytest.raises(strategy_lib.StrategyError, match=message):
        strategy_lib.create_strategy(_config(use_tpu=True, tpu=tpu))


def test_parameter_server_partitioners_from_the_flags():
    partitioners = tf.distribute.experimental.partitioners
    assert strategy_lib.variable_partitioner(_config(), num_ps=2) is None
    by_min = strategy_lib.variable_partitioner(_config(ps_min_shard_bytes=1024), num_ps=2)
    assert isinstance(by_min, partitioners.MinSizePartitioner)
    # [4096, 64] float32 = 1 MiB: at most one shard per ps task, or --ps_max_shards.
    assert by_min(tf.TensorShape([4096, 64]), tf.float32) == [2, 1]
    by_max = strategy_lib.variable_partitioner(
        _config(ps_max_shard_bytes=256 * 1024, ps_max_shards=3), num_ps=2)
    assert by_max(tf.TensorShape([4096, 64]), tf.float32) == [3, 1]
    with pytest.raises(strategy_lib.StrategyError, match="choose one way to split"):
        strategy_lib.variable_partitioner(
            _config(ps_min_shard_bytes=1, ps_max_shard_bytes=1), num_ps=2)
    with pytest.raises(strategy_lib.StrategyError, match="needs --ps_min_shard_bytes"):
        strategy_lib.variable_partitioner(_config(ps_max_shards=2), num_ps=2)
    with pytest.raises(strategy_lib.StrategyError, match="--ps_min_shard_bytes=-1"):
        strategy_lib.variable_partitioner(_config(ps_min_shard_bytes=-1), num_ps=2)


def test_a_split_variable_trains_shard_by_shard():
    """A Keras variable backed by a ShardedVariable (as ParameterServerStrategy makes
    with a partitioner): the optimizer updates its shards, exactly as the whole."""
    import keras
    import numpy as np
    from tensorflow.python.distribute import sharded_variable

    from t2t.trainer import optimizers

    class Model:
        def __init__(self, split: bool):
            self.embedding = keras.Variable(np.arange(12.0).reshape(6, 2), name="embedding")
            if split:
                self.embedding._value = sharded_variable.ShardedVariable(
                    [tf.Variable(np.arange(6.0).reshape(3, 2)),
                     tf.Variable(np.arange(6.0, 12.0).reshape(3, 2))])
            self.trainable_variables = [self.embedding]

    results = []
    for split in (False, True):
        model = Model(split)
        parts = optimizers.trainable_parts(model)
        assert len(parts) == (2 if split else 1)
        assert optimizers.trainable_parts(model) is parts  # made once
        optimizer = keras.optimizers.SGD(0.5)
        optimizer.build(parts)
        with tf.GradientTape() as tape:
            rows = tf.gather(tf.convert_to_tensor(model.embedding), [1, 4, 4])
            loss = tf.reduce_sum(rows * rows)
        optimizer.apply_gradients(zip(tape.gradient(loss, parts), parts, strict=True))
        assert strategy_lib.split_variables([model.embedding]) == (
            ["embedding [6, 2] split in 2: [3, 2] on localhost:0, [3, 2] on localhost:0"]
            if split else [])
        results.append(np.asarray(tf.convert_to_tensor(model.embedding)))
    np.testing.assert_allclose(results[0], results[1])
    assert results[0][4].tolist() == [-8.0, -9.0]  # row 4 twice: 8 - 0.5 * 2 * 2 * 8
