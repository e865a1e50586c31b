"""Tests of strategy selection (t2t.trainer.strategy; the families have their own:
test_strategy_cluster, test_strategy_parameter_servers, test_strategy_tpu). A CPU split
runs in a fresh process: devices are split before TF starts."""

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


def test_strategies_that_cannot_be_combined(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(strategy_lib.StrategyError, match="--use_tpu and --cpu_devices cannot be combined"):
        strategy_lib.create_strategy(_config(use_tpu=True, tpu="local", cpu_devices=2))
    with pytest.raises(strategy_lib.StrategyError, match="--all_reduce='mpi'"):
        strategy_lib._multi_worker(_config(all_reduce="mpi"))
