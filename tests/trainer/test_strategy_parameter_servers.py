"""Tests of t2t.trainer.strategy_parameter_servers: the flags of parameter-server
training, variable partitioners, and the report of split variables."""

import pytest
import tensorflow as tf

from t2t.trainer import strategy as strategy_lib
from t2t.trainer import strategy_parameter_servers


def _config(**kwargs):
    return strategy_lib.StrategyConfig(tf_config=kwargs.pop("tf_config", ""), **kwargs)


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
    assert strategy_parameter_servers.serve_if_cluster_member(_config()) is False


def test_parameter_server_partitioners_from_the_flags():
    partitioners = tf.distribute.experimental.partitioners
    assert strategy_parameter_servers.variable_partitioner(_config(), num_ps=2) is None
    by_min = strategy_parameter_servers.variable_partitioner(_config(ps_min_shard_bytes=1024), num_ps=2)
    assert isinstance(by_min, partitioners.MinSizePartitioner)
    # [4096, 64] float32 = 1 MiB: at most one shard per ps task, or --ps_max_shards.
    assert by_min(tf.TensorShape([4096, 64]), tf.float32) == [2, 1]
    by_max = strategy_parameter_servers.variable_partitioner(
        _config(ps_max_shard_bytes=256 * 1024, ps_max_shards=3), num_ps=2)
    assert by_max(tf.TensorShape([4096, 64]), tf.float32) == [3, 1]
    with pytest.raises(strategy_lib.StrategyError, match="choose one way to split"):
        strategy_parameter_servers.variable_partitioner(
            _config(ps_min_shard_bytes=1, ps_max_shard_bytes=1), num_ps=2)
    with pytest.raises(strategy_lib.StrategyError, match="needs --ps_min_shard_bytes"):
        strategy_parameter_servers.variable_partitioner(_config(ps_max_shards=2), num_ps=2)
    with pytest.raises(strategy_lib.StrategyError, match="--ps_min_shard_bytes=-1"):
        strategy_parameter_servers.variable_partitioner(_config(ps_min_shard_bytes=-1), num_ps=2)


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
        assert strategy_parameter_servers.split_variables([model.embedding]) == (
            ["embedding [6, 2] split in 2: [3, 2] on localhost:0, [3, 2] on localhost:0"]
            if split else [])
        results.append(np.asarray(tf.convert_to_tensor(model.embedding)))
    np.testing.assert_allclose(results[0], results[1])
    assert results[0][4].tolist() == [-8.0, -9.0]  # row 4 twice: 8 - 0.5 * 2 * 2 * 8
