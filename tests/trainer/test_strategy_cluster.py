"""Tests of t2t.trainer.strategy_cluster: the TF_CONFIG a process reads, and its role."""

import os

import pytest
import tensorflow as tf

from t2t.trainer import strategy_cluster
from t2t.trainer.strategy_config import StrategyConfig, StrategyError


def _config(**kwargs):
    return StrategyConfig(tf_config=kwargs.pop("tf_config", ""), **kwargs)


def test_tf_config_parsing_and_its_errors(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert strategy_cluster.cluster_config(_config()) is None
    assert strategy_cluster.cluster_config(_config(tf_config='{"environment": "cloud"}')) is None
    with pytest.raises(StrategyError, match="not valid JSON"):
        strategy_cluster.cluster_config(_config(tf_config="{worker"))
    bad_task = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'
    with pytest.raises(StrategyError, match="not in its cluster"):
        strategy_cluster.cluster_config(_config(tf_config=bad_task))


def test_worker_hosts_build_a_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    built = strategy_cluster.cluster_config(_config(worker_hosts="h1:1, h2:2", worker_id=1))
    assert built == {"cluster": {"worker": ["h1:1", "h2:2"]}, "task": {"type": "worker", "index": 1}}
    assert "TF_CONFIG" not in os.environ  # later strategies in this process stay local
    with pytest.raises(StrategyError, match="--worker_id=2 is not an index"):
        strategy_cluster.cluster_config(_config(worker_hosts="h1:1,h2:2", worker_id=2))
    with pytest.raises(StrategyError, match="--worker_replicas=3 but --worker_hosts lists 2"):
        strategy_cluster.cluster_config(_config(worker_hosts="h1:1,h2:2", worker_replicas=3))
    with pytest.raises(StrategyError, match="needs --worker_hosts"):
        strategy_cluster.cluster_config(_config(worker_replicas=2))


def test_roles_from_the_resolver_of_a_checked_tf_config():
    """task_of / is_chief read the strategy's resolver: the chief task is the chief, else
    worker 0 of a cluster without one; outside a cluster the only process is."""
    def strategy_in(cluster, task_type, index):
        tf_config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
        return type("Strategy", (), {"cluster_resolver": strategy_cluster.resolver(tf_config)})()

    with_chief = {"chief": ["c:1"], "worker": ["w:1", "w:2"]}
    workers_only = {"worker": ["w:1", "w:2"]}
    assert strategy_cluster.task_of(strategy_in(with_chief, "worker", 1)) == ("worker", 1)
    assert strategy_cluster.is_chief(strategy_in(with_chief, "chief", 0))
    assert not strategy_cluster.is_chief(strategy_in(with_chief, "worker", 0))
    assert strategy_cluster.is_chief(strategy_in(workers_only, "worker", 0))
    assert not strategy_cluster.is_chief(strategy_in(workers_only, "worker", 1))
    default = tf.distribute.get_strategy()
    assert strategy_cluster.task_of(default) == (None, 0) and strategy_cluster.is_chief(default)
