"""Runtime start-up: the strategy, seeds and what the input pipeline inherits."""

import dataclasses

import pytest
import tensorflow as tf

from t2t.config import InputConfig, RuntimeConfig
from t2t.trainer import runtime as runtime_lib


def test_start_returns_the_strategy_and_the_seed_and_edits_nothing():
    config = RuntimeConfig(random_seed=3)
    before = dataclasses.asdict(config)
    runtime = runtime_lib.start(config)
    assert runtime.seed == 3 and runtime.num_replicas == 1 and runtime.is_chief
    assert runtime.task == (None, 0)
    assert dataclasses.asdict(config) == before
    # Not deterministic: the input pipeline's own settings are kept.
    assert runtime.input_config(InputConfig(seed=9)) == InputConfig(seed=9)


def test_deterministic_runtime_makes_the_input_ordered_and_seeded():
    runtime = runtime_lib.Runtime(RuntimeConfig(deterministic=True), tf.distribute.get_strategy(),
                                  seed=runtime_lib.DETERMINISTIC_DEFAULT_SEED)
    base = InputConfig(shuffle_buffer_size=7)
    derived = runtime.input_config(base)
    assert (derived.deterministic, derived.seed, derived.shuffle_buffer_size) == (True, 1, 7)
    assert base.deterministic is False  # the config passed in is not edited


def test_bad_precision_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="mixed_precision='int8': use bfloat16 or float16"):
        runtime_lib.check(RuntimeConfig(mixed_precision="int8"))
