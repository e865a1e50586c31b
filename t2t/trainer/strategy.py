"""Choosing the tf.distribute strategy a run trains under.

- default: the one local device (the first GPU if there is one, else the CPU);
- worker_gpu=N (N > 1, or -1 for all visible GPUs): MirroredStrategy over N GPUs;
- cpu_devices=N (N > 1): MirroredStrategy over N logical CPU devices, for trying
  multi-replica training (and testing it) on a machine without GPUs. It must be chosen
  before TensorFlow initializes its devices, i.e. first thing in the process;
- a TF_CONFIG (environment, or built from worker_hosts + worker_id) whose cluster has
  no "ps" job: MultiWorkerMirroredStrategy, synchronous all-reduce between processes
  (all_reduce auto|ring|nccl), each collective bounded by collective_timeout_s so a
  lost worker ends the job with an error instead of a hang;
- a TF_CONFIG with "ps" tasks and sync=False: ParameterServerStrategy, asynchronous
  training driven by the chief through a ClusterCoordinator; the "ps" and "worker"
  tasks only serve (`serve_if_cluster_member`);
- use_tpu (tpu=name or grpc address): TPUStrategy through TPUClusterResolver.
`batch_size` stays per replica (as in Tensor2Tensor), so the global batch is
batch_size * num_replicas: scale the learning rate (or warmup) with the replica count
if a larger global batch needs it.

This module chooses; each family of strategies has its own module:
t2t.trainer.strategy_cluster (TF_CONFIG, a process's role, lost peers),
t2t.trainer.strategy_parameter_servers (ParameterServerStrategy, variable partitioners,
serving ps/worker tasks), t2t.trainer.strategy_tpu (TPU checks, TPUStrategy);
t2t.trainer.strategy_config holds the settings and StrategyError they share.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from absl import logging

from t2t.config import ALL_REDUCE_CHOICES
from t2t.trainer import strategy_cluster, strategy_parameter_servers, strategy_tpu
from t2t.trainer.strategy_config import StrategyConfig, StrategyError

__all__ = ["ALL_REDUCE_CHOICES", "StrategyConfig", "StrategyError", "create_strategy",
           "describe", "split_cpu"]


def split_cpu(num_devices: int) -> list[str]:
    """Splits the first physical CPU into `num_devices` logical devices; returns their names."""
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current is None or len(current) != num_devices:
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices
            )
        except RuntimeError as e:
            raise StrategyError(
                f"cannot split the CPU into {num_devices} devices after TensorFlow started "
                f"using it ({e}); choose the strategy first thing in the process."
            ) from e
    return [d.name for d in tf.config.list_logical_devices("CPU")][:num_devices]


# ------------------------------------------------------------------ multi-worker
def _multi_worker(config: StrategyConfig, tf_config: dict[str, Any] | None = None
                  ) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy with config.all_reduce, each collective bounded by
    config.collective_timeout_s."""
    if config.all_reduce not in ALL_REDUCE_CHOICES:
        raise StrategyError(
            f"--all_reduce={config.all_reduce!r}: choose one of {', '.join(ALL_REDUCE_CHOICES)}."
        )
    if config.all_reduce == "nccl" and not tf.config.list_physical_devices("GPU"):
        raise StrategyError("--all_reduce=nccl needs GPUs; use ring or auto on CPUs.")
    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[config.all_reduce]
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation,
        timeout_seconds=config.collective_timeout_s or None,
    )
    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=options,
        cluster_resolver=strategy_cluster.resolver(tf_config) if tf_config else None,
    )


def create_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    """The strategy `config` asks for; StrategyError when the machine cannot do it."""
    tf_config = strategy_cluster.cluster_config(config)
    wants_gpus = config.worker_gpu > 1 or config.worker_gpu == -1
    chosen = [name for name, on in (
        ("--use_tpu", config.use_tpu),
        ("--cpu_devices", config.cpu_devices > 1),
        # A multi-worker cluster mirrors over each worker's local GPUs by itself.
        ("--worker_gpu", wants_gpus and tf_config is None),
        ("a cluster (TF_CONFIG / --worker_hosts)", tf_config is not None),
    ) if on]
    if len(chosen) > 1:
        raise StrategyError(f"{' and '.join(chosen)} cannot be combined; choose one.")
    parameter_servers = strategy_parameter_servers.uses_parameter_servers(tf_config, config)
    if config.use_tpu:
        strategy = strategy_tpu.tpu_strategy(config)
    elif tf_config is not None:
        strategy = (strategy_parameter_servers.parameter_server_strategy(tf_config, config)
                    if parameter_servers else _multi_worker(config, tf_config))
    elif config.cpu_devices and config.cpu_devices > 1:
        devices = split_cpu(config.cpu_devices)
        strategy = tf.distribute.MirroredStrategy(
            devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    elif config.worker_gpu and (config.worker_gpu > 1 or config.worker_gpu == -1):
        gpus = tf.config.list_logical_devices("GPU")
        wanted = len(gpus) if config.worker_gpu == -1 else config.worker_gpu
        if not gpus or wanted > len(gpus):
            raise StrategyError(
                f"--worker_gpu={config.worker_gpu} but this machine has {len(gpus)} visible "
                f"GPU(s). Use --worker_gpu=-1 for all of them, or --cpu_devices=N to try "
                f"multi-replica training on the CPU."
            )
        strategy = tf.distribute.MirroredStrategy([g.name for g in gpus[:wanted]])
    else:
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            strategy = tf.distribute.OneDeviceStrategy(gpus[0].name)
        else:
            strategy = tf.distribute.get_strategy()  # the default: the CPU, no distribution
    logging.info("Strategy: %s.", describe(strategy))
    return strategy


def describe(strategy: tf.distribute.Strategy) -> str:
    """One line: the strategy, its replicas and, in a cluster, this process's role."""
    name = type(strategy).__name__
    if name == "_DefaultDistributionStrategy":
        name = "default (one device)"
    text = f"{name}, {strategy.num_replicas_in_sync} replica(s)"
    task_type, index = strategy_cluster.task_of(strategy)
    if task_type is not None:
        spec = strategy.cluster_resolver.cluster_spec().as_dict()
        jobs = ", ".join(f"{len(v)} {k}" for k, v in sorted(spec.items()))
        text += f", cluster of {jobs}; this is {task_type} {index}"
        text += " (chief)" if strategy_cluster.is_chief(strategy) else ""
    return text
