"""Process-wide state, set in one place at start-up: GPU memory, the strategy, op
determinism, seeds, the mixed-precision policy and numerics checking.

    runtime = start(RuntimeConfig(deterministic=True))   # first thing in the process
    runtime.strategy, runtime.seed, runtime.is_chief

Nothing else in t2t changes process-wide TensorFlow or Keras state, and nothing edits
the configs it is given: what start-up resolved (the seed under --deterministic, the
input pipeline's determinism) is returned in the `Runtime`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import tensorflow as tf
from absl import logging

from t2t.config import MIXED_PRECISION_CHOICES, InputConfig, RuntimeConfig
from t2t.trainer import strategy as strategy_lib
from t2t.trainer import strategy_cluster

DETERMINISTIC_DEFAULT_SEED = 1  # --deterministic without --random_seed


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What start-up applied: the strategy, and the settings as resolved."""

    config: RuntimeConfig
    strategy: tf.distribute.Strategy
    seed: int | None  # the seed in effect (None: unseeded)
    # A t2t.parallel.sharding.MeshPlan when the run lays its model out on a DTensor
    # mesh (hparams mesh_shape/layout); the strategy is then the default one.
    mesh: Any = None

    @property
    def is_chief(self) -> bool:
        """Whether this process writes checkpoints, summaries and results."""
        if self.mesh is not None:
            return self.task[1] == 0
        return strategy_cluster.is_chief(self.strategy)

    @property
    def task(self) -> tuple[str | None, int]:
        """(task type, index) in the cluster; (None, 0) outside one."""
        if self.mesh is not None:
            from tensorflow.experimental import dtensor

            return ("worker", dtensor.client_id()) if dtensor.num_clients() > 1 else (None, 0)
        return strategy_cluster.task_of(self.strategy)

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def input_config(self, base: InputConfig | None = None) -> InputConfig:
        """`base` (default InputConfig()) with the runtime's determinism and seed.

        A mesh across processes always reads deterministically, with a seed shared by all
        of them: every process packs its part of the same global batch, and processes
        that read different batches (other shapes) would wait for each other forever."""
        base = base or InputConfig()
        if self.config.deterministic:
            return dataclasses.replace(base, deterministic=True, seed=self.seed)
        if self.mesh is not None and self.task[0] is not None:
            return dataclasses.replace(base, deterministic=True, seed=self.seed)
        return base


def check(config: RuntimeConfig) -> None:
    """ValueError for settings that can never work, before anything starts."""
    if config.gpu_memory_limit_mb < 0:
        raise ValueError(f"gpu_memory_limit_mb={config.gpu_memory_limit_mb}: use a size in "
                         f"MiB, or 0 for no limit.")
    if config.check_numerics and config.xla_compile:
        raise ValueError("--check_numerics cannot check ops inside an XLA-compiled step: "
                         "drop --xla_compile while checking numerics.")
    if config.mixed_precision and config.mixed_precision not in MIXED_PRECISION_CHOICES:
        raise ValueError(
            f"mixed_precision={config.mixed_precision!r}: use "
            f"{' or '.join(MIXED_PRECISION_CHOICES)}."
        )


class DeviceSettingsError(RuntimeError):
    """GPU settings that cannot be applied (TensorFlow already uses the GPUs)."""


def configure_gpus(memory_growth: bool = True, memory_limit_mb: int = 0,
                   gpus: list[Any] | None = None) -> str:
    """Applies the GPU memory settings to every visible GPU, before any op runs; returns
    what was done, in one line.

    memory_growth: allocate as needed (so jobs can share a GPU) instead of all memory.
    memory_limit_mb: > 0 caps each GPU at this many MiB (a logical device of that size;
    TensorFlow cannot combine it with memory growth, so it replaces it).
    gpus: the physical GPUs (default: tf.config.list_physical_devices("GPU"))."""
    if memory_limit_mb < 0:
        raise ValueError(f"gpu_memory_limit_mb={memory_limit_mb}: use a size in MiB, or 0 "
                         f"for no limit.")
    gpus = tf.config.list_physical_devices("GPU") if gpus is None else gpus
    if not gpus:
        asked = f"--gpu_memory_limit_mb={memory_limit_mb}" if memory_limit_mb else (
            "--gpu_memory_growth" if memory_growth else "--nogpu_memory_growth")
        return f"No GPU visible: {asked} does not apply (training on the CPU)."
    try:
        for gpu in gpus:
            if memory_limit_mb:
                current = tf.config.get_logical_device_configuration(gpu) or []
                if [c.memory_limit for c in current] == [memory_limit_mb]:
                    continue  # applied already (a binary applies it before start())
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)])
            elif tf.config.experimental.get_memory_growth(gpu) != memory_growth:
                tf.config.experimental.set_memory_growth(gpu, memory_growth)
    except (RuntimeError, ValueError) as e:
        raise DeviceSettingsError(
            f"Could not apply the GPU memory settings (gpu_memory_growth={memory_growth}, "
            f"gpu_memory_limit_mb={memory_limit_mb}): {e}. They must be set before "
            f"TensorFlow first uses a GPU: call t2t.trainer.runtime.start (or "
            f"configure_gpus) first thing in the process.") from None
    names = ", ".join(gpu.name.replace("/physical_device:", "") for gpu in gpus)
    if memory_limit_mb:
        return f"GPUs {names}: at most {memory_limit_mb} MiB each."
    return f"GPUs {names}: memory growth {'on' if memory_growth else 'off (all memory)'}."


def _mesh_clients() -> int:
    from tensorflow.experimental import dtensor

    return dtensor.num_clients()


def _start_mesh(config: RuntimeConfig, mesh_shape: str, layout: str) -> Any:
    """The MeshPlan of the mesh hparams (alone or across a TF_CONFIG's workers)."""
    from t2t.parallel import mesh_runtime

    chosen = [name for name, on in (("--use_tpu", config.use_tpu),
                                    ("--cpu_devices", config.cpu_devices > 1),
                                    ("--worker_gpu", config.worker_gpu not in (0, 1)),
                                    ("--ps_replicas / --sync=false", config.ps_replicas
                                     or not config.sync)) if on]
    if chosen:
        raise strategy_lib.StrategyError(
            f"mesh_shape={mesh_shape!r} lays the model out on a DTensor mesh of its own "
            f"devices; {' and '.join(chosen)} choose another distribution: drop them (the "
            f"mesh uses the visible GPUs, or splits the CPU).")
    return mesh_runtime.start_mesh(mesh_shape, layout, strategy_cluster.cluster_config(config))


def start(config: RuntimeConfig | None = None, strategy: Any = None, *,
          mesh_shape: str = "", layout: str = "") -> Runtime:
    """Applies `config` to this process and returns the Runtime.

    The strategy comes first (splitting the CPU into logical devices must happen before
    TensorFlow starts using it), then op determinism, seeds and the dtype policy.
    `strategy`: an already created strategy to use instead of creating one.
    `mesh_shape`, `layout`: Mesh TensorFlow's hparams (t2t.parallel): with a mesh, the
    model is laid out on a DTensor mesh instead of a tf.distribute strategy."""
    config = config or RuntimeConfig()
    check(config)
    if strategy is None:  # a given strategy has already initialized the devices
        logging.info(configure_gpus(config.gpu_memory_growth, config.gpu_memory_limit_mb))
    mesh = None
    if mesh_shape:
        if strategy is not None:
            raise strategy_lib.StrategyError(
                f"mesh_shape={mesh_shape!r} cannot run under the given strategy "
                f"{type(strategy).__name__}: start the runtime without one.")
        mesh = _start_mesh(config, mesh_shape, layout)
        strategy = tf.distribute.get_strategy()
    strategy = strategy or strategy_lib.create_strategy(config)
    seed = config.random_seed
    if seed is None and mesh is not None and _mesh_clients() > 1:
        # The clients of one mesh must draw the same initial weights and dropout masks
        # and read the same batches: one seed for all of them.
        seed = DETERMINISTIC_DEFAULT_SEED
        logging.info("A mesh across processes: --random_seed=%d for every process (set "
                     "--random_seed to choose another).", seed)
    if config.deterministic:
        if seed is None:
            seed = DETERMINISTIC_DEFAULT_SEED
        tf.config.experimental.enable_op_determinism()
    if seed is not None:
        keras.utils.set_random_seed(seed)
    # float32 unless asked: a run never inherits another run's 16-bit policy.
    precision = config.mixed_precision
    keras.mixed_precision.set_global_policy(f"mixed_{precision}" if precision else "float32")
    if config.check_numerics:
        # Instruments every op of the functions traced from now on (before the first
        # train step is traced): the first NaN/Inf raises, naming its op.
        tf.debugging.enable_check_numerics()
    return Runtime(config, strategy, seed, mesh)
