"""Strategy hooks: which one a runtime gets, TPU shapes, parameter-server scheduling."""

import pytest
import tensorflow as tf

from t2t.config import RuntimeConfig
from t2t.data.pipeline.input_pipeline import Batching
from t2t.trainer import hooks as hooks_lib
from t2t.trainer import strategy as strategy_lib
from t2t.trainer import strategy_hooks
from t2t.trainer.runtime import Runtime


def _runtime():
    return Runtime(RuntimeConfig(), tf.distribute.get_strategy(), seed=None)


def test_one_device_gets_the_default_hooks_and_a_checkpointable_iterator():
    hooks = hooks_lib.hooks_for(_runtime())
    assert type(hooks) is hooks_lib.StrategyHooks and not hooks.parameter_server
    assert hooks_lib.StrategyHooks is strategy_hooks.StrategyHooks  # the old path still works
    batching = Batching(batch_size=64)
    assert hooks.batching(batching) is batching
    iterator = hooks.train_iterator(lambda ctx: tf.data.Dataset.range(4).batch(2))
    assert hooks.iterator_checkpointable(iterator)


def test_tpu_hooks_need_and_set_fixed_shapes():
    hooks = hooks_lib.TPUHooks(_runtime())
    assert hooks.batching(Batching(max_length=16)).static_shapes
    with pytest.raises(strategy_lib.StrategyError, match="set --hparams=max_length=N"):
        hooks.batching(Batching(max_length=0))


class _Result:
    def __init__(self, step):
        self.step = step

    def fetch(self):
        # [examples, tokens, positions, squared gradient norm of each layer group]
        return float(self.step), 0.5, [2.0, 10.0, 16.0, float(self.step), 4.0]


class _Coordinator:
    def __init__(self):
        self.scheduled = 0

    def schedule(self, fn, args):
        self.scheduled += 1
        return _Result(self.scheduled)

    def join(self):
        pass


def test_parameter_servers_schedule_steps_up_to_the_next_boundary():
    hooks = hooks_lib.ParameterServerHooks.__new__(hooks_lib.ParameterServerHooks)
    hooks.coordinator = _Coordinator()
    # At step 13 with logs every 10, checkpoints every 25, evals every 100: to 20.
    loss, norm, counts, stop = hooks.run_steps(None, None, 13, 1000, (10, 25, 100), False)
    assert hooks.coordinator.scheduled == 7 and (loss, norm) == (7.0, 0.5)
    # Counts summed over the 7 steps; the layers' gradient norms are the last step's.
    assert counts == [14.0, 70.0, 112.0, 7.0, 4.0] and stop is False
    hooks.coordinator = _Coordinator()
    hooks.run_steps(None, None, 18, 19, (10, 25, 100), False)  # the target comes first
    assert hooks.coordinator.scheduled == 1
