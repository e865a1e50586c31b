"""The training loop's hooks for a model laid out on a DTensor mesh (t2t.parallel).

There is one program for the whole mesh (DTensor's SPMD expansion runs it on every
device), so no `strategy.run`: the input pipeline yields the global batch on the host,
`MeshPlan.to_mesh` splits it on the batch axis (padding it to a multiple of the batch
shards with empty examples), and the step is one `tf.function` over DTensors. The
Task's step code is unchanged: in the default replica context its loss is the global
mean already, and DTensor inserts the collectives the layouts need.

`batch_size` is therefore the global batch (Mesh TensorFlow's meaning), not a
per-replica one. Across processes (multi-client), every client reads the same global
batch (the same deterministic pipeline) and packs its own devices' part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from t2t.parallel import sharding
from t2t.trainer import accumulation
from t2t.trainer.runtime import Runtime
from t2t.trainer.strategy_hooks import StrategyHooks


def with_positions(features: dict[str, Any]) -> dict[str, Any]:
    """`features` plus "<name>_position" [B, L] = 0 .. L-1 for the token features
    ("inputs", "targets": int [B, L]) that have none: the same timing signal, computed
    from run-time positions. Why: DTensor in TF 2.21 crashes (SIGSEGV, or a garbled
    error) when a step adds a batch-split tensor to a [L, H] timing signal it can fold
    from shapes alone, once L * H passes a few thousand (e.g. L >= 32 at H = 128)."""
    out = dict(features)
    for name in ("inputs", "targets"):
        value = features.get(name)
        if (value is not None and f"{name}_position" not in features
                and value.dtype.is_integer and len(value.shape) == 2):
            length = tf.shape(value)[1]
            out[f"{name}_position"] = tf.tile(tf.range(length)[None], [tf.shape(value)[0], 1])
    return out


def _any_shape_function(fn: Callable[[dict[str, Any]], Any]) -> Callable:
    """`fn(features)` as a tf.function traced once for every batch shape: DTensor's SPMD
    expansion of a training step costs ~10 CPU-s per trace, and bucketed batches would
    otherwise retrace a few times as their shapes generalize."""
    traced = None

    def call(features):
        nonlocal traced
        if traced is None:
            spec = {name: tf.TensorSpec([None] * len(value.shape), value.dtype)
                    for name, value in features.items()}
            traced = tf.function(fn, input_signature=[spec])
        return traced(features)

    return call


class MeshHooks(StrategyHooks):
    """Steps of a model whose weights are DVariables on `runtime.mesh`."""

    dense_gradients = True  # DTensor expands no sparse (scatter) variable updates

    def __init__(self, runtime: Runtime):
        super().__init__(runtime)
        self.plan: sharding.MeshPlan = runtime.mesh
        self._host_model: Any = None

    def train_iterator(self, dataset_fn: Callable[[Any], Any]) -> Any:
        return iter(dataset_fn(None))  # the global batch, on the host

    def iterator_checkpointable(self, iterator: Any) -> bool:
        # A checkpoint holding DVariables is written by one DTensor function, which
        # cannot take the iterator's serialized state (a host string tensor): a resumed
        # mesh run reads its data in a new order (seed + step) instead.
        return False

    def inference_model(self, model: Any, task: Any) -> Any:
        """A one-device twin of the model holding the mesh weights' current values:
        decoding loops have run-time shapes, which DTensor's layout propagation cannot
        expand (t2t-decoder and t2t-exporter read the checkpoints on one device too)."""
        if self._host_model is None:
            self._host_model = task.build_model()
        for host, mesh in zip(self._host_model.variables, model.variables, strict=True):
            host.assign(sharding.fetch(mesh))
        return self._host_model

    def train_step(self, replica_step: Any) -> Callable:
        """step(iterator, stop) -> (loss, grad_norm, counts, stop), host values.

        The gradients and their application run as two functions: in one, DTensor (TF
        2.21) loses Adam's updates of the weights (its slots move, the weights do not;
        plain SGD is unaffected), measured here with transformer_tiny. With
        `accumulate_steps` N > 1 the N micro-batches' gradients (DTensors, laid out as
        their weights) are added up by a third function, then applied once."""
        plan = self.plan
        steps = getattr(replica_step, "accumulate_steps", 1)
        if steps == 1:
            gradients = _any_shape_function(replica_step.gradients)
            apply = tf.function(replica_step.apply)
        else:  # N micro-batches from Python, their DTensor sums added up, one update
            micro_batch = _any_shape_function(replica_step.micro_batch)
            add, finish = tf.function(accumulation.add), tf.function(replica_step.finish)

        def next_batch(iterator):
            return plan.to_mesh(with_positions(next(iterator)))

        def train_step(iterator, stop):
            if steps == 1:
                loss, grad_norm, counts = apply(*gradients(next_batch(iterator)))
            else:
                sums = micro_batch(next_batch(iterator))
                for _ in range(steps - 1):
                    sums = add(sums, micro_batch(next_batch(iterator)))
                loss, grad_norm, counts = finish(sums)
            head = sharding.fetch(tf.stack([tf.cast(loss, tf.float32),
                                            tf.cast(grad_norm, tf.float32)]))
            return head[0], head[1], sharding.fetch(counts), stop

        return train_step

    def run_steps(self, train_step: Callable, iterator: Any, step: int, target: int,
                  every: Sequence[int], stop_requested: bool
                  ) -> tuple[float, float, list[float], bool]:
        loss, grad_norm, counts, _ = train_step(iterator, stop_requested)
        # Across processes, a stop asked of any (SIGTERM) is agreed after this step, so
        # all save the same step together.
        stop = self.plan.agree_any(stop_requested) if self.runtime.task[0] else False
        return float(loss), float(grad_norm), [float(c) for c in counts], stop

    def eval_dataset(self, dataset_fn: Callable[[Any], Any]) -> Any:
        return dataset_fn(None)

    def eval_step(self, replica_eval: Callable) -> Callable:
        """features (host) -> metrics of the global batch (host tensors)."""
        plan = self.plan
        mesh_eval = _any_shape_function(replica_eval)

        def eval_step(features):
            results = mesh_eval(plan.to_mesh(with_positions(features)))
            return tf.nest.map_structure(lambda v: tf.constant(sharding.fetch(v)), results)

        return eval_step
