"""What differs per strategy, as small hooks the training loop calls.

    hooks = hooks_for(runtime)
    batching = hooks.batching(task.batching())          # TPU: fixed shapes
    iterator = hooks.train_iterator(dataset_fn)
    step = hooks.train_step(replica_step)
    loss, grad_norm, counts, stop = hooks.run_steps(step, iterator, ...)

- `StrategyHooks` (one device, MirroredStrategy, MultiWorkerMirroredStrategy; defined in
  t2t.trainer.strategy_hooks): each call runs one step on every replica and reduces
  [loss, grad norm, stop, examples, tokens] in one collective (between workers each
  collective is a network round trip).
- `ParameterServerHooks`: the chief schedules steps on the workers through a
  ClusterCoordinator, up to the next log/checkpoint/eval boundary, and evaluates by
  itself on the variables the ps tasks hold.
- `TPUHooks`: one program per shape, so fixed [batch, max_length] batches.
- `MeshHooks` (t2t.trainer.mesh_hooks): a model laid out on a DTensor mesh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from t2t.data.pipeline import input_pipeline
from t2t.trainer import accumulation, strategy_parameter_servers, strategy_tpu
from t2t.trainer.mesh_hooks import MeshHooks
from t2t.trainer.runtime import Runtime
from t2t.trainer.strategy_config import StrategyError
from t2t.trainer.strategy_hooks import StrategyHooks
from t2t.trainer.task import NUM_COUNTS

__all__ = ["MeshHooks", "ParameterServerHooks", "StrategyHooks", "TPUHooks", "hooks_for"]


class ParameterServerHooks(StrategyHooks):
    """Asynchronous training: the chief schedules steps on the workers."""

    parameter_server = True

    def __init__(self, runtime: Runtime):
        super().__init__(runtime)
        self.coordinator = None  # created with the first input, once the model exists

    def train_iterator(self, dataset_fn: Callable[[Any], Any]) -> Any:
        if self.coordinator is None:
            self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
                self.strategy)
        # Each worker reads its own copy of the pipeline.
        return iter(self.coordinator.create_per_worker_dataset(
            lambda: self.strategy.distribute_datasets_from_function(dataset_fn)))

    def iterator_checkpointable(self, iterator: Any) -> bool:
        return False

    def last_step(self, step: int, target: int, every: Sequence[int]) -> int:
        """The next log/checkpoint/eval boundary after `step` (or `target`)."""
        boundary = min(target, *((step // n + 1) * n for n in every if n > 0))
        return max(boundary, step + 1)

    def train_step(self, replica_step: Callable) -> Callable:
        """step(iterator) -> (loss, grad norm, counts), scheduled on one worker. With
        `accumulate_steps` N > 1 the worker adds up N micro-batches in tensors carried
        through a loop (no variables: each worker accumulates its own), then updates."""
        strategy = self.strategy
        steps = getattr(replica_step, "accumulate_steps", 1)
        traced: list[accumulation.Sums] = []  # a micro-batch as traced: its None gradients

        def add_micro_batch(sums, iterator):
            traced[:] = [strategy.run(replica_step.micro_batch, args=(next(iterator),))]
            return accumulation.add(sums, traced[0])

        @tf.function
        def ps_train_step(iterator):  # runs on one worker, scheduled by the chief
            if steps == 1:
                return strategy.run(replica_step, args=(next(iterator),))
            sums = accumulation.zeros(replica_step.variables, NUM_COUNTS)
            for _ in tf.range(steps):
                sums = add_micro_batch(sums, iterator)
            sums = accumulation.without_missing(sums, traced[0])
            return strategy.run(replica_step.finish, args=(sums,))

        return ps_train_step

    def run_steps(self, train_step: Callable, iterator: Any, step: int, target: int,
                  every: Sequence[int], stop_requested: bool
                  ) -> tuple[float, float, list[float], bool]:
        """Schedules the steps up to the next log/checkpoint/eval boundary (or `target`);
        the last step's loss and norm, and [examples, tokens] of all the steps run."""
        boundary = self.last_step(step, target, every)
        results = [self.coordinator.schedule(train_step, args=(iterator,))
                   for _ in range(boundary - step)]
        self.coordinator.join()
        loss, grad_norm, last = results[-1].fetch()
        # Examples, tokens and positions add up over the steps; the per-layer gradient
        # norms that follow are the last step's.
        counts = [sum(float(r.fetch()[2][i]) for r in results) for i in range(NUM_COUNTS)]
        return float(loss), float(grad_norm), counts + list(last[NUM_COUNTS:]), False

    def eval_dataset(self, dataset_fn: Callable[[Any], Any]) -> Any:
        return dataset_fn(None)  # the chief evaluates by itself, reading the ps variables

    def eval_step(self, replica_eval: Callable) -> Callable:
        return tf.function(replica_eval, reduce_retracing=True)


class TPUHooks(StrategyHooks):
    """TPUs compile one program per shape: fixed [batch, max_length] batches."""

    def batching(self, batching: input_pipeline.Batching) -> input_pipeline.Batching:
        if not batching.max_length:
            raise StrategyError(
                "TPU training needs fixed shapes: set --hparams=max_length=N.")
        return dataclasses.replace(batching, static_shapes=True)


def hooks_for(runtime: Runtime) -> StrategyHooks:
    """The hooks of the runtime's strategy (or of its DTensor mesh)."""
    if runtime.mesh is not None:
        return MeshHooks(runtime)
    if strategy_parameter_servers.is_parameter_server(runtime.strategy):
        return ParameterServerHooks(runtime)
    if strategy_tpu.is_tpu(runtime.strategy):
        return TPUHooks(runtime)
    return StrategyHooks(runtime)
