"""Gradient accumulation: N micro-batches per optimizer update, under Tensor2Tensor's
name `hparams.optimizer_multistep_accumulate_steps` (0 or 1: none).

One training step is one optimizer update: the step function draws the N micro-batches
from the input itself, so `optimizer.iterations` (train_steps, checkpoints, evaluations,
the learning-rate schedule) counts updates and no accumulation spans a checkpoint.

Exactness: a replica's loss on micro-batch i is `num_i / D_i + aux_i / R + decay / R`
(t2t.trainer.task.Task.build_losses; D_i the token count of the global micro-batch, R
the replicas). Each micro-batch's gradient is weighted by D_i and the sum divided by
sum(D_i): the token-loss part is then the gradient of one batch holding all N
micro-batches, whatever their lengths; weight decay is exact; auxiliary losses are
their token-weighted average. The final sum is clipped (clip_grad_norm) as one big
batch's gradient would be, and its norm reported.

    sums = zeros(variables, NUM_COUNTS)
    for features in the N micro-batches:
        sums = add(sums, micro_batch(features))       # Sums, weighted by D
    loss, grad_norm, counts = finish(sums)            # apply(*mean(sums))

Where the sums live between micro-batches depends on the strategy: replica-local
variables (`ReplicaAccumulators`, t2t.trainer.hooks.StrategyHooks), tensors carried
through a loop (parameter servers) or host-side DTensors (a mesh).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from t2t.hparams.hparams import HParamsError

HPARAM = "optimizer_multistep_accumulate_steps"


class Sums(NamedTuple):
    """Running sums over micro-batches of one replica, each weighted by its global token
    count D_i: loss (float32 scalar, sum D_i * loss_i), grads (one per trainable
    variable: sum D_i * grad_i, dense; None where the variable gets no gradient),
    counts (float32 [NUM_COUNTS]: examples, tokens, positions, unweighted) and weight
    (float32 scalar, sum D_i)."""

    loss: tf.Tensor
    grads: list[Any]
    counts: tf.Tensor
    weight: tf.Tensor


def accumulate_steps(hparams: Any) -> int:
    """Micro-batches per update from `hparams.optimizer_multistep_accumulate_steps`
    (0 and 1 both mean 1: no accumulation; absent, as in the hparams.json of a run
    recorded before the key existed, means 0); HParamsError (a ValueError) for a
    negative or non-integer value."""
    value = hparams.get(HPARAM, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HParamsError(
            f"{HPARAM}={value!r}: give the number of micro-batches per optimizer update "
            f"(an integer >= 2), or 0 to update after every batch.")
    return max(1, value)


def weighted(loss: tf.Tensor, grads: Sequence[Any], counts: tf.Tensor,
             weight: tf.Tensor) -> Sums:
    """One micro-batch's Sums: its loss and gradients (IndexedSlices made dense)
    multiplied by `weight` (its global token count D)."""
    weight = tf.cast(weight, tf.float32)
    dense = [None if g is None else tf.convert_to_tensor(g) for g in grads]
    return Sums(tf.cast(loss, tf.float32) * weight,
                [None if g is None else g * tf.cast(weight, g.dtype) for g in dense],
                tf.cast(counts, tf.float32), weight)


def add(a: Sums, b: Sums) -> Sums:
    """The sums of two sets of micro-batches (a gradient None in one is the other's)."""
    grads = [y if x is None else x if y is None else x + y
             for x, y in zip(a.grads, b.grads, strict=True)]
    return Sums(a.loss + b.loss, grads, a.counts + b.counts, a.weight + b.weight)


def mean(sums: Sums) -> tuple[tf.Tensor, list[Any], tf.Tensor]:
    """(loss, grads, counts) of the update: the weighted means of loss and gradients
    (sums over sum D_i; 0 tokens in all micro-batches: the sums themselves, all zero
    but nothing divided by 0) and the summed counts."""
    total = tf.where(sums.weight > 0, sums.weight, tf.ones_like(sums.weight))
    grads = [None if g is None else g / tf.cast(total, g.dtype) for g in sums.grads]
    return sums.loss / total, grads, sums.counts


def zeros(variables: Sequence[Any], num_counts: int) -> Sums:
    """Sums of no micro-batch yet: a zero gradient for each variable."""
    return Sums(tf.zeros([]), [tf.zeros(v.shape, v.dtype) for v in variables],
                tf.zeros([num_counts]), tf.zeros([]))


def without_missing(sums: Sums, like: Sums) -> Sums:
    """`sums` with None where `like` (a micro-batch's Sums) has no gradient: a variable
    no micro-batch reaches stays out of the update, as without accumulation."""
    grads = [None if g is None else s for s, g in zip(sums.grads, like.grads, strict=True)]
    return sums._replace(grads=grads)


class ReplicaAccumulators:
    """Sums kept between micro-batches in replica-local variables (made in the strategy's
    scope with synchronization ON_READ: no communication per micro-batch; the update's
    apply_gradients all-reduces once). Not tracked by any checkpoint: each step starts
    with `reset`, `add`s its micro-batches and ends with `read`."""

    def __init__(self, variables: Sequence[Any], num_counts: int):
        def local(shape, dtype, name):
            return tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name,
                               synchronization=tf.VariableSynchronization.ON_READ,
                               aggregation=tf.VariableAggregation.SUM)

        self.sums = Sums(local([], tf.float32, "accumulated_loss"),
                         [local(v.shape, v.dtype, f"accumulated_gradient_{i}")
                          for i, v in enumerate(variables)],
                         local([num_counts], tf.float32, "accumulated_counts"),
                         local([], tf.float32, "accumulated_weight"))
        self._added: Sums | None = None  # a micro-batch's Sums as traced: which grads exist

    def _variables(self) -> list[Any]:
        return [self.sums.loss, self.sums.counts, self.sums.weight, *self.sums.grads]

    def reset(self) -> None:
        """Zeroes this replica's sums (in a replica context)."""
        for variable in self._variables():
            variable.assign(tf.zeros_like(variable))

    def add(self, sums: Sums) -> None:
        """Adds a micro-batch's sums to this replica's (in a replica context)."""
        self._added = sums
        values = [sums.loss, sums.counts, sums.weight, *sums.grads]
        for variable, value in zip(self._variables(), values, strict=True):
            if value is not None:
                variable.assign_add(value)

    def read(self) -> Sums:
        """This replica's sums (in a replica context), None for the gradients the added
        micro-batches did not have."""
        if self._added is None:
            raise RuntimeError("ReplicaAccumulators.read before any add was traced.")
        values = tf.nest.map_structure(lambda v: v.read_value(), self.sums)
        return without_missing(values, self._added)


def description(steps: int, batch_size: int, unit: str, replicas: int,
                global_batch: bool = False) -> str:
    """The line the trainer shows at the start of an accumulating run, e.g.
    "Accumulating 4 micro-batches per update: effective batch 4 x 1024 tokens x 2
    replicas = 8192 tokens per update; steps count updates." (`global_batch`: batch_size
    is the whole step's, as on a DTensor mesh.)"""
    if global_batch or replicas <= 1:
        product, total = f"{steps} x {batch_size} {unit}", steps * batch_size
        where = " (the global batch of the mesh)" if global_batch else ""
    else:
        product = f"{steps} x {batch_size} {unit} x {replicas} replicas"
        total, where = steps * batch_size * replicas, ""
    return (f"Accumulating {steps} micro-batches per update: effective batch {product}"
            f"{where} = {total} {unit} per update; steps count updates.")


def description_of_run(steps: int, batching: Any, batch_size_means_tokens: bool,
                       replicas: int, on_mesh: bool) -> str:
    """`description` for a run: `batching` (input_pipeline.Batching) and the problem's
    `batch_size_means_tokens` give the unit; on a mesh batch_size is the global batch."""
    tokens = batch_size_means_tokens and not batching.use_fixed_batch_size
    return description(steps, batching.batch_size, "tokens" if tokens else "examples",
                       replicas, global_batch=on_mesh)
