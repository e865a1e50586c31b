"""Process-wide state, set in one place at start-up: the strategy, op determinism, seeds
and the mixed-precision policy.

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

from t2t.config import MIXED_PRECISION_CHOICES, InputConfig, RuntimeConfig
from t2t.trainer import strategy as strategy_lib

DETERMINISTIC_DEFAULT_SEED = 1  # --deterministic without --random_seed


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What start-up applied: the strategy, and the settings as resolved."""

    config: RuntimeConfig
    strategy: tf.distribute.Strategy
    seed: int | None  # the seed in effect (None: unseeded)

    @property
    def is_chief(self) -> bool:
        """Whether this process writes checkpoints, summaries and results."""
        return strategy_lib.is_chief(self.strategy)

    @property
    def task(self) -> tuple[str | None, int]:
        """(task type, index) in the cluster; (None, 0) outside one."""
        return strategy_lib.task_of(self.strategy)

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def input_config(self, base: InputConfig | None = None) -> InputConfig:
        """`base` (default InputConfig()) with the runtime's determinism and seed."""
        base = base or InputConfig()
        if not self.config.deterministic:
            return base
        return dataclasses.replace(base, deterministic=True, seed=self.seed)


def check(config: RuntimeConfig) -> None:
    """ValueError for settings that can never work, before anything starts."""
    if config.mixed_precision and config.mixed_precision not in MIXED_PRECISION_CHOICES:
        raise ValueError(
            f"mixed_precision={config.mixed_precision!r}: use "
            f"{' or '.join(MIXED_PRECISION_CHOICES)}."
        )


def start(config: RuntimeConfig | None = None, strategy: Any = None) -> Runtime:
    """Applies `config` to this process and returns the Runtime.

    The strategy comes first (splitting the CPU into logical devices must happen before
    TensorFlow starts using it), then op determinism, seeds and the dtype policy.
    `strategy`: an already created strategy to use instead of creating one."""
    config = config or RuntimeConfig()
    check(config)
    strategy = strategy or strategy_lib.create_strategy(config)
    seed = config.random_seed
    if config.deterministic:
        if seed is None:
            seed = DETERMINISTIC_DEFAULT_SEED
        tf.config.experimental.enable_op_determinism()
    if seed is not None:
        keras.utils.set_random_seed(seed)
    # float32 unless asked: a run never inherits another run's 16-bit policy.
    precision = config.mixed_precision
    keras.mixed_precision.set_global_policy(f"mixed_{precision}" if precision else "float32")
    return Runtime(config, strategy, seed)
