"""Choosing the tf.distribute strategy a run trains under.

- default: the one local device (the first GPU if there is one, else the CPU);
- worker_gpu=N (N > 1, or -1 for all visible GPUs): MirroredStrategy over N GPUs;
- cpu_devices=N (N > 1): MirroredStrategy over N logical CPU devices, for trying
  multi-replica training (and testing it) on a machine without GPUs. It must be chosen
  before TensorFlow initializes its devices, i.e. first thing in the process.
`batch_size` stays per replica (as in Tensor2Tensor), so the global batch is
batch_size * num_replicas.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from absl import logging


@dataclasses.dataclass
class StrategyConfig:
    worker_gpu: int = 0  # GPUs for MirroredStrategy; -1: all visible; 0/1: one device
    cpu_devices: int = 0  # >1: MirroredStrategy over this many logical CPU devices


class StrategyError(ValueError):
    """A hardware flag that cannot be honoured on this machine."""


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


def create_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    """The strategy `config` asks for; StrategyError when the machine cannot do it."""
    if config.cpu_devices and config.cpu_devices > 1:
        if config.worker_gpu and config.worker_gpu > 1:
            raise StrategyError("--cpu_devices and --worker_gpu cannot be combined; choose one.")
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
    logging.info(
        "Strategy: %s with %d replica(s).", type(strategy).__name__, strategy.num_replicas_in_sync
    )
    return strategy


def describe(strategy: tf.distribute.Strategy) -> str:
    name = type(strategy).__name__
    if name == "_DefaultDistributionStrategy":
        name = "default (one device)"
    return f"{name}, {strategy.num_replicas_in_sync} replica(s)"
