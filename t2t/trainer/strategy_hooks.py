"""The default strategy hooks: one program on every replica per step.

    hooks = StrategyHooks(runtime)
    step = hooks.train_step(replica_step)
    loss, grad_norm, counts, stop = hooks.run_steps(step, iterator, ...)

One device, MirroredStrategy and MultiWorkerMirroredStrategy: each call runs one step on
every replica and reduces [loss, grad norm, stop, examples, tokens] in one collective
(between workers each collective is a network round trip). The other strategies' hooks
derive from these: t2t.trainer.hooks (parameter servers, TPUs, and `hooks_for`, which
picks a runtime's) and t2t.trainer.mesh_hooks (a DTensor mesh).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from t2t.data.pipeline import input_pipeline
from t2t.trainer import accumulation
from t2t.trainer.runtime import Runtime
from t2t.trainer.task import NUM_COUNTS


def _is_trackable(obj: Any) -> bool:
    try:
        tf.train.Checkpoint(probe=obj)
        return True
    except ValueError:
        return False


class StrategyHooks:
    """Default hooks: one program on every replica per step (the input distributed by
    `distribute_datasets_from_function`)."""

    parameter_server = False
    dense_gradients = False  # whether steps must turn sparse gradients dense

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.strategy = runtime.strategy

    def batching(self, batching: input_pipeline.Batching) -> input_pipeline.Batching:
        """The batching the strategy can run (unchanged here)."""
        return batching

    def train_iterator(self, dataset_fn: Callable[[Any], Any]) -> Any:
        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def iterator_checkpointable(self, iterator: Any) -> bool:
        """Whether the input position can be saved with the checkpoints."""
        return _is_trackable(iterator)

    def inference_model(self, model: Any, task: Any) -> Any:
        """The model to decode with outside the training step (here: `model` itself)."""
        return model

    def train_step(self, replica_step: Callable) -> Callable:
        """step(iterator, stop float32) -> (loss, grad_norm, [examples, tokens], stop).

        A step is one update: with `replica_step.accumulate_steps` N > 1 it adds up N
        micro-batches in replica-local variables (no communication), then applies their
        mean (t2t.trainer.accumulation)."""
        strategy = self.strategy
        steps = getattr(replica_step, "accumulate_steps", 1)
        sums: accumulation.ReplicaAccumulators | None = None
        if steps > 1:
            with strategy.scope():
                sums = accumulation.ReplicaAccumulators(replica_step.variables, NUM_COUNTS)

        def add_micro_batch(features):
            sums.add(replica_step.micro_batch(features))

        def packed_results(loss, grad_norm, counts, stop):
            head = tf.stack([tf.cast(loss, tf.float32), tf.cast(grad_norm, tf.float32)])
            stop = tf.reshape(tf.cast(stop, tf.float32), [1])
            return tf.concat([head, stop, tf.cast(counts, tf.float32)], axis=0)

        def replica_update(features, stop):
            if sums is not None:  # the micro-batches are in the sums already
                return packed_results(*replica_step.finish(sums.read()), stop)
            return packed_results(*replica_step(features), stop)

        @tf.function
        def train_step(iterator, stop):
            features = None
            if sums is not None:
                strategy.run(sums.reset)
                for _ in tf.range(steps):
                    strategy.run(add_micro_batch, args=(next(iterator),))
            else:
                features = next(iterator)
            packed = strategy.run(replica_update, args=(features, stop))
            summed = strategy.reduce(tf.distribute.ReduceOp.SUM, packed, axis=None)
            # Each replica's loss is its share of the global mean: their sum is the mean.
            # The norm is averaged. Any process asked to stop (SIGTERM): all stop after
            # this step, together.
            norm = summed[1] / strategy.num_replicas_in_sync
            return summed[0], norm, summed[3:], summed[2]

        return train_step

    def last_step(self, step: int, target: int, every: Sequence[int]) -> int:
        """The step the next `run_steps` call from `step` ends at (here: the next one)."""
        return step + 1

    def run_steps(self, train_step: Callable, iterator: Any, step: int, target: int,
                  every: Sequence[int], stop_requested: bool
                  ) -> tuple[float, float, list[float], bool]:
        """Runs one step; (loss, grad norm, counts (see Task.train_step_fn: examples,
        tokens, positions, per-layer squared gradient norms; summed over replicas),
        whether all agreed to stop)."""
        stop = tf.constant(1.0 if stop_requested else 0.0)
        loss, grad_norm, counts, stops = train_step(iterator, stop)
        return float(loss), float(grad_norm), counts.numpy().tolist(), float(stops) > 0

    def eval_dataset(self, dataset_fn: Callable[[Any], Any]) -> Any:
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def eval_step(self, replica_eval: Callable) -> Callable:
        """features -> metrics summed over replicas (traced once for any bucket shape)."""
        strategy = self.strategy

        @tf.function(reduce_retracing=True)
        def eval_step(features):
            per_replica = strategy.run(replica_eval, args=(features,))
            return tf.nest.map_structure(
                lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), per_replica
            )

        return eval_step
