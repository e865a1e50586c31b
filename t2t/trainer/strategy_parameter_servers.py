"""Asynchronous training with parameter servers (TF2's ParameterServerStrategy).

A TF_CONFIG with "ps" tasks and --sync=false: the chief drives training through a
ClusterCoordinator; the "ps" and "worker" tasks only serve (`serve_if_cluster_member`).
Variables may be split over the ps tasks (--ps_min_shard_bytes / --ps_max_shard_bytes /
--ps_max_shards: `variable_partitioner`); `split_variables` reports how they were.
"""

from __future__ import annotations

import re
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.trainer import strategy_cluster
from t2t.trainer.strategy_config import StrategyConfig, StrategyError

__all__ = ["is_parameter_server", "parameter_server_strategy", "serve_if_cluster_member",
           "split_variables", "uses_parameter_servers", "variable_partitioner"]


def uses_parameter_servers(tf_config: dict[str, Any] | None, config: StrategyConfig) -> bool:
    """Whether the run trains with parameter servers; StrategyError for settings that
    ask for them but cannot have them (--sync, no "ps" or "chief" task, a count that
    differs from TF_CONFIG's)."""
    has_ps = bool(tf_config and tf_config["cluster"].get("ps"))
    if config.ps_replicas > 0 or has_ps:
        if config.sync:
            raise StrategyError(
                "synchronous training with parameter servers does not exist in TF2: use "
                "--sync=false for asynchronous ParameterServerStrategy, or drop the ps "
                "tasks for synchronous MultiWorkerMirroredStrategy."
            )
        if not has_ps:
            raise StrategyError(
                f"--ps_replicas={config.ps_replicas} needs a TF_CONFIG whose cluster has "
                f'"chief", "worker" and "ps" tasks: start the job with '
                f"t2t-launch --num_workers=N --num_ps=M -- t2t-trainer ..."
            )
        if config.ps_replicas and config.ps_replicas != len(tf_config["cluster"]["ps"]):
            raise StrategyError(
                f"--ps_replicas={config.ps_replicas} but TF_CONFIG lists "
                f"{len(tf_config['cluster']['ps'])} ps task(s)."
            )
        if "chief" not in tf_config["cluster"]:
            raise StrategyError('parameter-server training needs a "chief" task in TF_CONFIG.')
        return True
    return False


def serve_if_cluster_member(config: StrategyConfig) -> bool:
    """In parameter-server training the "ps" and "worker" tasks only run a server:
    starts it and blocks (until killed) when this process is one; False otherwise."""
    tf_config = strategy_cluster.cluster_config(config)
    if not uses_parameter_servers(tf_config, config):
        return False
    task = tf_config["task"]
    if task["type"] not in ("ps", "worker"):
        return False
    resolver = strategy_cluster.resolver(tf_config)
    # Workers run the chief's functions; keep their inter-op pools from starving.
    if task["type"] == "worker":
        tf.config.threading.set_inter_op_parallelism_threads(4)
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=task["type"], task_index=int(task.get("index", 0)),
        protocol=resolver.rpc_layer or "grpc", start=True,
    )
    logging.info("Serving as %s %s for parameter-server training.", task["type"], task.get("index", 0))
    server.join()
    return True


def variable_partitioner(config: StrategyConfig, num_ps: int) -> Any:
    """The partitioner of --ps_min_shard_bytes / --ps_max_shard_bytes (None: none), at
    most --ps_max_shards (default: one shard per ps task) shards per variable."""
    if config.ps_min_shard_bytes and config.ps_max_shard_bytes:
        raise StrategyError(
            f"--ps_min_shard_bytes={config.ps_min_shard_bytes} and --ps_max_shard_bytes="
            f"{config.ps_max_shard_bytes}: choose one way to split variables.")
    for name in ("ps_min_shard_bytes", "ps_max_shard_bytes", "ps_max_shards"):
        if getattr(config, name) < 0:
            raise StrategyError(f"--{name}={getattr(config, name)}: use a size >= 0.")
    shards = config.ps_max_shards or num_ps
    partitioners = tf.distribute.experimental.partitioners
    if config.ps_min_shard_bytes:
        return partitioners.MinSizePartitioner(config.ps_min_shard_bytes, max_shards=shards)
    if config.ps_max_shard_bytes:
        return partitioners.MaxSizePartitioner(config.ps_max_shard_bytes, max_shards=shards)
    if config.ps_max_shards:
        raise StrategyError(f"--ps_max_shards={config.ps_max_shards} needs "
                            f"--ps_min_shard_bytes or --ps_max_shard_bytes.")
    return None


def split_variables(variables: Any) -> list[str]:
    """One line per variable split over parameter servers (a ShardedVariable behind a
    Keras variable): its path, shape, and the shards' shapes and tasks."""
    from tensorflow.python.distribute import sharded_variable

    lines = []
    for variable in variables:
        value = variable.value  # the TensorFlow variable behind the Keras one
        if isinstance(value, sharded_variable.ShardedVariable):
            shards = ", ".join(
                f"{list(shard.shape)} on {re.sub(r'^/job:|/replica:0|/device:CPU:0$', '', shard.device).replace('/task:', ':')}"
                for shard in value.variables)
            lines.append(f"{variable.path} {list(variable.shape)} split in "
                         f"{len(value.variables)}: {shards}")
    return lines


def parameter_server_strategy(tf_config: dict[str, Any], config: StrategyConfig
                              ) -> tf.distribute.Strategy:
    """ParameterServerStrategy over the checked cluster, variables split as configured."""
    partitioner = variable_partitioner(config, len(tf_config["cluster"]["ps"]))
    return tf.distribute.experimental.ParameterServerStrategy(
        strategy_cluster.resolver(tf_config), variable_partitioner=partitioner)


def is_parameter_server(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
