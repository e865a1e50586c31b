"""Task: a problem and a model, and what training them means (Model Garden's Task).

    task = Task(problem, "transformer", hparams, data_dir, eval_split="dev")
    model = task.build_model()                                  # weights created
    optimizer, learning_rate = task.build_optimizer(model, train_steps=1000)
    dataset_fn = task.input_fn(TRAIN, InputConfig(), task.batching())
    replica_step = task.train_step_fn(model, optimizer)         # inside strategy.run
    metrics = task.validation_step(features, model, task.eval_metric_names())  # replica

Evaluation reads `eval_split` (checked against the problem's splits when the Task is
made). A language model (symbol targets, no inputs) is also evaluated with perplexity and
bits_per_byte; the latter needs the targets encoder's `token_byte_lengths()`, read once
here, and is skipped (with a warning) when the encoder cannot say.

A Task knows nothing of strategies, loops, checkpoints or process-wide state: the
loop (t2t.trainer.loop) runs its steps under the runtime's strategy hooks.

The loss of a replica is its sum of token losses divided by the token count of the
global batch, so Keras' `apply_gradients` (which sums gradients over replicas) applies
the exact global mean; auxiliary losses and weight decay are averaged over replicas.
With `optimizer_multistep_accumulate_steps` N > 1 an update is N micro-batches, each
weighted by its global token count (t2t.trainer.accumulation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from t2t import registry
from t2t.config import InputConfig
from t2t.data import problem as problem_lib
from t2t.data.pipeline import input_pipeline
from t2t.hparams.hparams import HParams
from t2t.models import t2t_model
from t2t.trainer import accumulation, distillation, layer_stats, optimizers
from t2t.trainer import learning_rate as lr_lib
from t2t.trainer import metrics as metrics_lib

# Images this small (px on a side) call for the hparams sets tuned on CIFAR-sized data
# (each model declares its own: T2TModel.SMALL_IMAGE_HPARAMS_SETS).
SMALL_IMAGE_PX = 64
TRAINING_LOSS = "training"  # the key of the loss the model minimizes


# The layout of a train step's counts vector: these, then each layer group's squared
# gradient norm (t2t.trainer.layer_stats).
EXAMPLES, TOKENS, POSITIONS = 0, 1, 2
NUM_COUNTS = 3


def count_tokens(features: dict[str, tf.Tensor]) -> tf.Tensor:
    """float32 [examples, non-padding tokens, token positions] of a batch (tokens and
    positions of the 2-D integer inputs and targets, and every sub-pixel of image
    targets; 1 - tokens / positions is the padding fraction)."""
    examples = tf.cast(tf.shape(features["targets"])[0], tf.float32)
    tokens = positions = tf.constant(0.0)
    for name in ("inputs", "targets"):
        value = features.get(name)
        if value is not None and value.dtype.is_integer and len(value.shape) == 2:
            tokens += tf.reduce_sum(tf.cast(tf.not_equal(value, 0), tf.float32))
            positions += tf.cast(tf.size(value), tf.float32)
        elif name == "targets" and value.dtype.is_integer and len(value.shape) == 4:
            # Image targets (uint8 [B, H, W, C]): every sub-pixel is predicted, 0 included.
            tokens += tf.cast(tf.size(value), tf.float32)
            positions += tf.cast(tf.size(value), tf.float32)
    return tf.stack([examples, tokens, positions])


class TrainStep:
    """A replica's training step, `step(features) -> (loss, grad norm, counts)`, in its
    two halves: `gradients(features) -> (loss, grads, counts)` and `apply(loss, grads,
    counts)` (a DTensor mesh runs them as two functions: see t2t.trainer.mesh_hooks).

    With `accumulate_steps` N > 1 one update takes N micro-batches (see
    t2t.trainer.accumulation): the hooks add up `micro_batch(features) -> Sums` of each,
    then `finish(sums) -> (loss, grad norm, counts)` applies their mean. `variables`:
    the trainable variables the gradients are of, in order."""

    def __init__(self, gradients: Callable, apply: Callable, micro_batch: Callable,
                 variables: list[Any], accumulate_steps: int = 1):
        self.gradients, self.apply, self.micro_batch = gradients, apply, micro_batch
        self.variables, self.accumulate_steps = variables, accumulate_steps

    def __call__(self, features: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return self.apply(*self.gradients(features))

    def finish(self, sums: accumulation.Sums) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Applies the mean of the accumulated micro-batches: (loss, grad norm, counts)."""
        return self.apply(*accumulation.mean(sums))


class Task:
    """A registered model trained on a problem, with T2T-style hparams."""

    def __init__(self, problem: problem_lib.Problem, model_name: str, hparams: HParams,
                 data_dir: str, eval_split: str = problem_lib.DEV_SPLIT,
                 hparams_set: str | None = None):
        self.eval_split = problem.check_split(eval_split)  # UnknownSplitError, before work
        self.problem, self.model_name, self.hparams = problem, model_name, hparams
        self.hparams_set = hparams_set  # the registered name `hparams` came from, if known
        # Micro-batches per optimizer update (1: none); a bad value fails here, first.
        self.accumulate_steps = accumulation.accumulate_steps(hparams)
        self.data_dir = data_dir
        self.problem_hparams = problem.hparams(data_dir)
        self._byte_lengths: np.ndarray | None = None
        self._byte_lengths_read = False
        # A distillation.Teacher (built in the strategy's scope by whoever runs the
        # task): the training loss then mixes in the teacher's distribution.
        self.teacher: Any = None

    # ------------------------------------------------------------------ building
    def build_model(self, mode: str = problem_lib.TRAIN) -> t2t_model.T2TModel:
        """The model with all its weights (call inside the strategy's scope)."""
        model = t2t_model.create_model(self.model_name, self.hparams, mode, self.problem_hparams)
        model.build_weights()
        return model

    def build_optimizer(self, model: Any, train_steps: int, mixed_precision: str | None = None
                        ) -> tuple[Any, lr_lib.LearningRateSchedule]:
        """(optimizer built for the model's variables, its learning-rate schedule)."""
        learning_rate = lr_lib.LearningRateSchedule(self.hparams, train_steps)
        optimizer = optimizers.create_optimizer(self.hparams, learning_rate,
                                                mixed_precision=mixed_precision)
        optimizer.build(optimizers.trainable_parts(model))
        return optimizer, learning_rate

    def batching(self) -> input_pipeline.Batching:
        """What a batch is, from the hparams (batch_size, max_length, ...)."""
        return input_pipeline.Batching.from_hparams(self.hparams)

    def input_fn(self, mode: str, config: InputConfig, batching: input_pipeline.Batching,
                 split: str | None = None, problem: problem_lib.Problem | None = None
                 ) -> Callable[[Any], Any]:
        """`dataset_fn(input_context)` of per-replica batches of `split` (default: the
        mode's own; `eval_split` in EVAL) of `problem` (default: the task's own; one of
        `eval_parts()` in evaluation)."""
        if split is None and mode == problem_lib.EVAL:
            split = self.eval_split
        return input_pipeline.make_input_fn(problem or self.problem, mode, self.data_dir,
                                            self.hparams, config, batching, split=split)

    def eval_parts(self) -> list[tuple[str, problem_lib.Problem]]:
        """(metric prefix, problem) of each part evaluated apart: a multi-problem's
        tasks ("TASK/" prefixes; their union gives the unprefixed metrics), else the
        problem itself with no prefix."""
        views = getattr(self.problem, "task_views", None)
        if views is None:
            return [("", self.problem)]
        return [(f"{view.name}/", view) for view in views()]

    def divergence_hint(self) -> str:
        """Advice for a loss that became NaN, beyond the generic (or ""): an image problem
        of small images (<= SMALL_IMAGE_PX on a side) names the hparams sets the model
        declares for such images (SMALL_IMAGE_HPARAMS_SETS; a model without any: those of
        t2t_model.SMALL_IMAGE_MODEL), whose learning rates suit them (ImageNet's sets
        start at 0.4)."""
        shape = self.problem_hparams.image_shape or []
        sides = [d for d in shape[:2] if d]
        if len(sides) < 2 or max(sides) > SMALL_IMAGE_PX:
            return ""
        own_sets = getattr(registry.model(self.model_name), "SMALL_IMAGE_HPARAMS_SETS", ())
        switch_to = "" if own_sets else t2t_model.SMALL_IMAGE_MODEL
        sets = [name for name in own_sets or registry.model(switch_to).SMALL_IMAGE_HPARAMS_SETS
                if name != self.hparams_set]
        if len(sets) < len(own_sets):
            return ""  # one of them already diverged: the generic advice applies
        model = f" --model={switch_to}" if switch_to else ""
        chosen = " or ".join(f"--hparams_set={name}" for name in sets)
        return (f" Its images are small ({sides[0]}x{sides[1]} px): the sets made for "
                f"28-32 px images train stably on them:{model} {chosen}.")

    def is_language_model(self) -> bool:
        """Symbol targets and no inputs: the model predicts the targets from their prefix."""
        return self.problem_hparams.is_language_model

    def target_byte_lengths(self) -> np.ndarray | None:
        """float32 [vocab] bytes of text per target id (for bits_per_byte), read once
        from the targets encoder; None when it cannot say."""
        if not self._byte_lengths_read:
            self._byte_lengths_read = True
            encoder = self.problem.feature_encoders(self.data_dir).get("targets")
            try:
                if encoder is None:
                    raise NotImplementedError(f"{self.problem.name} has no targets encoder")
                self._byte_lengths = np.asarray(encoder.token_byte_lengths(), np.float32)
            except (NotImplementedError, AttributeError) as e:
                logging.warning("bits_per_byte skipped: %s", e)
        return self._byte_lengths

    def eval_metric_names(self) -> list[str]:
        """The problem's eval metrics (language models: plus perplexity and bits_per_byte;
        bits_per_byte dropped when the encoder cannot give byte lengths)."""
        names = list(self.problem.eval_metrics())
        if self.is_language_model():
            names += [name for name in metrics_lib.LM_METRICS if name not in names]
        if metrics_lib.BITS_PER_BYTE in names and self.target_byte_lengths() is None:
            names.remove(metrics_lib.BITS_PER_BYTE)
        return metrics_lib.trainable_metric_names(names)

    # --------------------------------------------------------------------- steps
    def build_losses(self, losses: dict[str, tuple[tf.Tensor, tf.Tensor]],
                     variables: list[Any]) -> tf.Tensor:
        """This replica's share of the loss to minimize (in a replica context): the
        training loss over the global token count, plus the auxiliary losses and weight
        decay divided among the replicas."""
        return self.weighted_losses(losses, variables)[0]

    def weighted_losses(self, losses: dict[str, tuple[tf.Tensor, tf.Tensor]],
                        variables: list[Any]) -> tuple[tf.Tensor, tf.Tensor]:
        """(`build_losses`, the global token count of the batch: float32 scalar, the
        batch's weight among accumulated micro-batches, t2t.trainer.accumulation)."""
        ctx = tf.distribute.get_replica_context()
        numerator, denominator = losses[TRAINING_LOSS]
        global_denominator = ctx.all_reduce(tf.distribute.ReduceOp.SUM, denominator)
        loss = numerator / tf.maximum(global_denominator, 1.0)
        for name, (value, _) in losses.items():
            if name != TRAINING_LOSS:
                loss += value / ctx.num_replicas_in_sync
        loss += optimizers.weight_decay_loss(variables, self.hparams) / ctx.num_replicas_in_sync
        return loss, tf.cast(global_denominator, tf.float32)

    def training_losses(self, model: Any, features: dict[str, tf.Tensor]
                        ) -> dict[str, tuple[tf.Tensor, tf.Tensor]]:
        """The model's losses in training; with a teacher, the training loss is the
        distillation mix (t2t.trainer.distillation.distilled_loss)."""
        logits, losses = model(features, training=True)
        if self.teacher is not None:
            weights = model.targets_modality.targets_weights(features["targets"])
            losses = {**losses, TRAINING_LOSS: distillation.distilled_loss(
                losses[TRAINING_LOSS], logits, self.teacher.logits(features), weights,
                self.hparams)}
        return losses

    def train_step_fn(self, model: Any, optimizer: Any, xla_compile: bool = False,
                      grad_groups: tuple[list[str], list[int]] | None = None,
                      dense_gradients: bool = False) -> TrainStep:
        """A replica's training step: features -> (loss, gradient global norm, counts:
        [examples, tokens, positions] then, with `grad_groups` (names, group of each
        trainable variable; layer_stats.variable_groups), each group's squared gradient
        norm before clipping); the forward/backward pass is XLA-compiled if asked.
        `dense_gradients`: embedding gradients as dense tensors (a DTensor mesh has no
        sparse scatter updates). The TrainStep carries the task's `accumulate_steps`
        and the `micro_batch` half the hooks accumulate with."""
        variables = optimizers.trainable_parts(model)
        clip_norm = self.hparams.clip_grad_norm

        def forward_backward(features):
            with tf.GradientTape() as tape:
                loss, weight = self.weighted_losses(self.training_losses(model, features),
                                                    variables)
                scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
            return loss, tape.gradient(scaled, variables), count_tokens(features), weight

        if xla_compile:
            model.xla_ops_only = True  # layers with a faster op XLA cannot compile use another
            forward_backward = tf.function(forward_backward, jit_compile=True)

        def gradients(features):
            loss, grads, counts, _ = forward_backward(features)
            if dense_gradients:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                         for g in grads]
            return loss, grads, counts

        def apply(loss, grads, counts):
            if grad_groups is not None:
                names, index = grad_groups
                squared = layer_stats.grouped_squared_norms(grads, index, len(names))
                scale = getattr(optimizer, "dynamic_scale", None)
                if scale is not None:  # gradients of a scaled loss: unscale the norms
                    squared = squared / tf.square(tf.cast(tf.convert_to_tensor(scale),
                                                          tf.float32))
                counts = tf.concat([counts, squared], axis=0)
            grads, grad_norm = optimizers.clip_gradients(
                grads, clip_norm, loss_scale=getattr(optimizer, "dynamic_scale", None))
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss, grad_norm, counts

        def micro_batch(features):  # dense gradients: they are added up
            return accumulation.weighted(*forward_backward(features))

        return TrainStep(gradients, apply, micro_batch, variables, self.accumulate_steps)

    def validation_step(self, features: dict[str, tf.Tensor], model: Any,
                        metric_names: list[str]) -> dict[str, tf.Tensor]:
        """A replica's evaluation of one batch: {metric: [sum, count], "loss": ...}."""
        logits, losses = model(features, training=False)
        byte_lengths = None
        if metrics_lib.BITS_PER_BYTE in metric_names:
            byte_lengths = self.target_byte_lengths()
        targets = model.targets_modality.metric_targets(features["targets"])
        results = metrics_lib.compute_metrics(
            metric_names, logits, targets, self.problem_hparams.modality["targets"],
            byte_lengths=byte_lengths)
        results["loss"] = losses[TRAINING_LOSS]
        return results
