"""The training loop: runs steps, checkpoints, evaluates, writes summaries, stops.

It receives ready objects (a Task, the built model and optimizer, the run's
checkpoints, the strategy hooks) and builds none of them: see t2t.trainer.trainer,
which assembles a run. Stopping: train_steps reached, SIGTERM (agreed between all
processes at the next step, then saved), Ctrl-C (saved), a NaN/Inf loss (the last good
checkpoint is kept), or a cluster peer lost.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.config import InputConfig, TrainerConfig
from t2t.decoding import image_samples, infer
from t2t.features import Modality
from t2t.problems import input_pipeline
from t2t.problems import problem as problem_lib
from t2t.trainer import (
    debugging,
    early_stopping,
    eval_decoding,
    image_summaries,
    layer_stats,
    optimizers,
    profiling,
    run_dir,
    summaries,
)
from t2t.trainer import metrics as metrics_lib
from t2t.trainer import strategy as strategy_lib
from t2t.trainer import task as task_lib
from t2t.trainer.checkpointing import RunCheckpoints
from t2t.trainer.hooks import StrategyHooks
from t2t.trainer.task import Task


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept."""


class NumericsError(NonFiniteLossError):
    """--check_numerics found the first NaN/Inf; the message names its op and layer."""


class ClusterError(RuntimeError):
    """Another process of a multi-worker run stopped answering (or failed)."""


# What a collective or a remote call raises when a peer process is gone or too slow.
PEER_ERRORS = (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
               tf.errors.CancelledError, tf.errors.AbortedError, tf.errors.InternalError)


class TrainingLoop:
    """Steps, checkpoints, evaluation, summaries and stopping for one run."""

    def __init__(self, task: Task, hooks: StrategyHooks, model: Any, optimizer: Any,
                 learning_rate: Any, checkpoints: RunCheckpoints, iterator: Any,
                 config: TrainerConfig, output_dir: str, *, input_config: InputConfig,
                 batching: input_pipeline.Batching, xla_compile: bool = False):
        self.task, self.hooks, self.model, self.optimizer = task, hooks, model, optimizer
        self.learning_rate, self.checkpoints, self.iterator = learning_rate, checkpoints, iterator
        self.config, self.output_dir = config, output_dir
        self.input_config, self.batching = input_config, batching
        self.is_chief = hooks.runtime.is_chief
        self.in_cluster = hooks.runtime.task[0] is not None
        self.stop_requested = False  # asked here (SIGTERM) or, once agreed, anywhere
        self.stop_agreed = False  # all processes of the run agreed to stop after this step
        self._known_step = 0  # the last step read (the step variable may live on a lost ps)
        self.loss_history: list[tuple[int, float]] = []  # (step, training loss) here
        variables = optimizers.trainable_parts(model)
        self.groups = (layer_stats.variable_groups(model, variables)
                       if config.layer_summaries else None)
        self.train_step = hooks.train_step(task.train_step_fn(
            model, optimizer, xla_compile, grad_groups=self.groups,
            dense_gradients=hooks.dense_gradients))
        self.profiler = profiling.StepProfiler(
            profiling.parse_profile_steps(config.profile_steps),
            os.path.join(output_dir, "train"), enabled=self.is_chief)
        self._snapshot: layer_stats.WeightSnapshot | None = None
        self._eval_step = None
        self._summary_decoder = None  # traced once: eager greedy decoding costs seconds
        self._image_summary: image_summaries.ImageSampleSummary | None = None
        task.eval_metric_names()  # an unknown metric name fails now, not after training
        # Decoded metrics (BLEU, ROUGE, WER...; eval_run_autoregressive) at each
        # evaluation: the count, the scorers' packages and the problem checked now.
        self._decoded_eval = eval_decoding.plan_decoded_eval(
            task, config.eval_decode_examples, config.eval_steps)
        if self.is_chief and self._decoded_eval.announcement:
            print(self._decoded_eval.announcement, flush=True)
        self._eval_decoder: Any = None  # eval_decoding.make_eval_decoder's, made once
        self._inference = model  # what decodes at evaluations (hooks.inference_model)
        self.stop_reason = ""  # why training stopped before train_steps (early stopping)
        self._signalled = False
        # Best checkpoints and early stopping; their metric names are checked here.
        self.watch = early_stopping.EvalWatch(config, output_dir, task.eval_split,
                                              self._reported_metrics())
        for line in self.watch.notes() if self.is_chief else ():
            print(line, flush=True)
        if self.is_chief:
            self.train_writer = tf.summary.create_file_writer(os.path.join(output_dir, "train"))
            self.eval_writer = tf.summary.create_file_writer(
                os.path.join(output_dir, run_dir.eval_name(task.eval_split)))
        else:
            self.train_writer = self.eval_writer = tf.summary.create_noop_writer()

    def _reported_metrics(self) -> list[str]:
        """The keys an evaluation reports: loss, the task's metrics and the decoded ones."""
        names = ["loss", *self.task.eval_metric_names()]
        if self._decoded_eval.enabled:
            names += self._decoded_eval.reported_keys
        return names

    def _stopping(self) -> bool:
        """Whether to stop before the next step. The workers of a synchronous cluster stop
        only on the agreed stop (the step's all-reduce of every process's request): a
        process stopping on its own request would leave the others waiting in the next
        step's collective, to fail there instead of saving the same step."""
        if self.in_cluster and not self.hooks.parameter_server:
            return self.stop_agreed
        return self.stop_requested

    def _raise_cluster_error(self, error: Exception) -> None:
        """A ClusterError naming the lost peer and the kept checkpoint, raised from
        `error` (a PEER_ERRORS one) in a cluster; nothing for a process alone."""
        if not (self.in_cluster or self.hooks.parameter_server):
            return
        raise ClusterError(
            # The last step known, not self.step: with parameter servers that reads the
            # lost ps.
            f"Training stopped at step {self._known_step}: another process of the "
            f"cluster failed or stopped answering "
            f"({strategy_lib.peer_error_summary(error, self._cluster())}). "
            f"The last checkpoint ({self.checkpoints.latest or 'none yet'}) "
            f"is kept: re-run the same launch command to resume from it."
        ) from error

    def _cluster(self) -> dict[str, Any] | None:
        """The run's TF_CONFIG (cluster and this task), to name a lost peer; None alone."""
        runtime = getattr(self.hooks, "runtime", None)
        return strategy_lib.cluster_config(runtime.config) if runtime is not None else None

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def save(self) -> str | None:
        """A checkpoint at the current step (see RunCheckpoints.save)."""
        return self.checkpoints.save(self.step)

    # ------------------------------------------------------------------- train
    def _install_signal_handlers(self):
        def request_stop(signum, frame):
            logging.warning("Signal %d: saving a checkpoint and stopping.", signum)
            self.stop_requested = self._signalled = True

        previous = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, request_stop)
        except ValueError:  # not the main thread
            return lambda: None
        return lambda: signal.signal(signal.SIGTERM, previous)

    def _run_steps(self, target: int) -> tuple[float, float, list[float]]:
        """One step (or, with parameter servers, a batch of them): (loss, grad norm,
        [examples, tokens] of the steps run)."""
        config = self.config
        every = (config.log_every_steps, config.save_checkpoints_steps,
                 config.local_eval_frequency)
        step = self._known_step = self.step
        self.profiler.before(step, self.hooks.last_step(step, target, every))
        try:
            with self.profiler.step_context(step + 1):
                loss, grad_norm, counts, stop = self.hooks.run_steps(
                    self.train_step, self.iterator, step, target, every, self.stop_requested)
        except tf.errors.InvalidArgumentError as e:
            if not debugging.is_numerics_error(e):
                raise
            raise NumericsError(debugging.numerics_message(
                e, step, self.checkpoints.manager.latest_checkpoint)) from None
        except PEER_ERRORS as e:
            self._raise_cluster_error(e)
            raise
        self.profiler.after(self.step)
        self._known_step = self.step
        self.stop_agreed = self.stop_agreed or stop
        self.stop_requested = self.stop_requested or stop
        self.checkpoints.examples_seen.assign_add(int(counts[task_lib.EXAMPLES]))
        return loss, grad_norm, counts

    def _log(self, progress: summaries.Progress, step: int, loss: float, grad_norm: float,
             counts: list[float]) -> None:
        line = progress.update(step, loss, *counts[:task_lib.NUM_COUNTS])
        if line is None:
            return
        lr = float(self.learning_rate(step))
        print(f"{line} lr {lr:.3g}", flush=True)
        with self.train_writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
            tf.summary.scalar("learning_rate", lr)
            tf.summary.scalar("gradient_global_norm", grad_norm)
            tf.summary.scalar("examples_seen", int(self.checkpoints.examples_seen.numpy()))
            for name, value in progress.rates().items():
                tf.summary.scalar(name, value)
            self._layer_summaries(counts[task_lib.NUM_COUNTS:])

    def _log_due(self, next_step: int, target: int) -> bool:
        every = max(1, self.config.log_every_steps)
        return next_step % every == 0 or next_step == target

    def _layer_summaries(self, grad_squares: list[float]) -> None:
        """Per top-level layer: gradient and parameter norms, update/parameter ratio of
        this step (the gradient norms with several replicas: the root mean square of the
        replicas' parts, like gradient_global_norm; exact with one)."""
        if self.groups is None or not self.is_chief:
            return
        names, index = self.groups
        variables = optimizers.trainable_parts(self.model)
        replicas = max(1, self.hooks.runtime.num_replicas)
        param_norms, param_global = layer_stats.parameter_norms(variables, index, len(names))
        tf.summary.scalar("parameter_global_norm", param_global)
        ratios = None
        if self._snapshot is not None:
            ratios, total = self._snapshot.update_ratios(variables, index, len(names))
            tf.summary.scalar("update_ratio", total)
            self._snapshot = None
        for i, name in enumerate(names):
            tf.summary.scalar(f"layers/parameter_norm/{name}", param_norms[i])
            if i < len(grad_squares):
                tf.summary.scalar(f"layers/gradient_norm/{name}",
                                  math.sqrt(max(float(grad_squares[i]), 0.0) / replicas))
            if ratios is not None:
                tf.summary.scalar(f"layers/update_ratio/{name}", ratios[i])

    def _check_finite(self, step: int, loss: float) -> None:
        if not math.isfinite(loss):
            raise NonFiniteLossError(
                f"The training loss became {loss} at step {step}. The last good "
                f"checkpoint ({self.checkpoints.manager.latest_checkpoint or 'none yet'}) is "
                f"kept. Try a lower learning rate (--hparams=learning_rate_constant=...), "
                f"gradient clipping (clip_grad_norm) or float32.{self.task.divergence_hint()}"
            )

    def train(self, until_step: int | None = None, evaluate_every: bool = False) -> dict[str, float]:
        """Trains to `until_step` (default train_steps); evaluates on the way if asked."""
        config = self.config
        target = config.train_steps if until_step is None else until_step
        if self.step >= target:
            logging.info("Already at step %d >= %d: nothing to train.", self.step, target)
            return {}
        restore_signals = self._install_signal_handlers()
        progress = summaries.Progress(self.step, target, config.log_every_steps,
                                      self.task.accumulate_steps)
        last_metrics: dict[str, float] = {}
        try:
            while self.step < target and not self._stopping():
                if (self.groups is not None and self.is_chief and not self.hooks.parameter_server
                        and self._log_due(self.step + 1, target)):
                    # The update of the coming (logged) step, measured against these values.
                    self._snapshot = layer_stats.WeightSnapshot(
                        optimizers.trainable_parts(self.model))
                loss, grad_norm, counts = self._run_steps(target)
                step = self.step
                self.loss_history.append((step, loss))
                self._check_finite(step, loss)
                self._log(progress, step, loss, grad_norm, counts)
                evaluating = (evaluate_every and step % config.local_eval_frequency == 0
                              and step < target)
                # An evaluated step is saved when the best checkpoints are kept (every
                # process saves: saving may run collectives).
                if step % config.save_checkpoints_steps == 0 or (
                        evaluating and self.watch.best is not None):
                    self.save()
                if evaluating:
                    last_metrics = self.evaluate()
        except PEER_ERRORS as e:  # a ps lost while the chief logs or saves between steps
            self._raise_cluster_error(e)
            raise
        except KeyboardInterrupt:
            path = self.save()
            print(f"Interrupted at step {self.step}: saved {path}. Re-run the same command to resume.")
            raise
        finally:
            restore_signals()
            self.profiler.stop()
        path = self.save()
        if self.stop_reason:
            print(f"{self.stop_reason} Saved {path}.", flush=True)
        elif self.stop_requested:
            saved = f"saved {path}" if path else "the chief saved the checkpoint"
            why = "by a signal" if self._signalled else "as the other processes agreed"
            print(f"Stopped {why} at step {self.step}: {saved}.", flush=True)
        if self.config.overfit_batches and self.is_chief:
            _, verdict = debugging.overfit_report(self.loss_history, self.config.overfit_batches,
                                                  self.task.hparams)
            print(verdict, flush=True)
        return last_metrics

    def train_and_evaluate(self) -> dict[str, float]:
        """Trains to train_steps, evaluating every local_eval_frequency steps and at the end."""
        last_metrics = self.train(evaluate_every=True)
        if self.stop_requested:  # early stopping has just evaluated; a signal: no time
            return last_metrics if self.stop_reason else {}
        return self.evaluate()

    # ---------------------------------------------------------------- evaluate
    def _eval_dataset(self, problem: Any = None) -> Any:
        config = dataclasses.replace(self.input_config, deterministic=True)
        return self.hooks.eval_dataset(self.task.input_fn(problem_lib.EVAL, config,
                                                          self.batching, problem=problem))

    def evaluate(self) -> dict[str, float]:
        """Metrics on the task's eval split (eval_steps batches, or all of it when
        eval_steps <= 0), recorded under its name (eval/ and eval_results.jsonl for dev,
        eval_SPLIT/ and eval_results_SPLIT.jsonl for another split)."""
        if self._eval_step is None:
            names = self.task.eval_metric_names()
            self._eval_step = self.hooks.eval_step(
                lambda features: self.task.validation_step(features, self.model, names))
        overall = metrics_lib.MetricsAccumulator()
        results, batches = {}, 0
        parts = self.task.eval_parts()
        for prefix, problem in parts:  # a multi-problem's tasks one by one, else one part
            own = metrics_lib.MetricsAccumulator()
            part_batches = 0
            for features in self._eval_dataset(problem if prefix else None):
                if 0 < self.config.eval_steps <= part_batches:
                    break
                values = tf.nest.map_structure(lambda t: t.numpy(), self._eval_step(features))
                overall.add(values)
                own.add(values)
                part_batches += 1
            batches += part_batches
            if prefix:
                results.update({prefix + k: v for k, v in own.result().items()})
        results.update(overall.result())
        step = self.step
        if self._decoded_eval.enabled or self.config.decode_summaries:
            # Every process: gathering a mesh's weights for decoding is collective.
            self._inference = self.hooks.inference_model(self.model, self.task)
        if not self.is_chief:
            return results
        if self._decoded_eval.enabled and len(parts) == 1:  # not per task of a multi-problem
            results.update(self._decode_metrics())
        split = self.task.eval_split
        run_dir.append_eval_results(self.output_dir, step, results, split=split)
        latest = self.checkpoints.latest
        reason = self.watch.after_eval(
            step, results, latest if latest and latest.endswith(f"-{step}") else None)
        if reason and not self.stop_reason:
            self.stop_requested, self.stop_reason = True, reason
        with self.eval_writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
            self._decode_summaries()
        shown = " ".join(f"{k} {v:.4f}" for k, v in sorted(results.items()))
        on = "" if split == problem_lib.DEV_SPLIT else f" on {split}"
        print(f"eval step {step}{on}: {shown} ({batches} batches)", flush=True)
        return results

    def _decode_metrics(self) -> dict[str, float]:
        model = self._inference  # the model, or its one-device twin (refreshed above)
        if self._eval_decoder is None:
            config = dataclasses.replace(self.input_config, deterministic=True)
            self._eval_decoder = eval_decoding.make_eval_decoder(
                self._decoded_eval, model, self.task,
                self.task.input_fn(problem_lib.EVAL, config, self.batching),
                eval_decoding.eval_batches(self.config.eval_steps, self.hooks))
        return self._eval_decoder()

    def _summary_batch(self) -> dict[str, tf.Tensor] | None:
        count = self.config.decode_summaries
        if not count or "targets" not in self.task.problem_hparams.modality:
            return None
        dataset = self.task.problem.dataset(problem_lib.EVAL, self.task.data_dir,
                                            deterministic=True, split=self.task.eval_split)
        if "inputs" not in dataset.element_spec:
            return None
        examples = dataset.take(count).map(lambda e: {"inputs": e["inputs"],
                                                      "targets": e["targets"]})
        return next(iter(examples.padded_batch(count)), None)

    def _decode_summaries(self) -> None:
        """A few eval-split examples decoded greedily in one batch, as TensorBoard text
        (image targets: a few sampled images, t2t.trainer.image_summaries)."""
        if not self.config.decode_summaries:
            return
        if self.task.problem_hparams.modality.get("targets") == Modality.REAL:
            return  # nothing to decode: the evaluation's rmse says how close predictions are
        try:
            model = self._inference  # the model, or its one-device twin (refreshed above)
            if image_samples.is_image_target(self.task.problem_hparams):
                if self._image_summary is None:
                    self._image_summary = image_summaries.ImageSampleSummary(
                        model, self.task.problem, self.task.data_dir,
                        self.task.eval_split, self.config.decode_summaries)
                self._image_summary()
                return
            batch = self._summary_batch()
            if batch is None:
                return
            if self._summary_decoder is None:
                self._summary_decoder = tf.function(
                    lambda inputs, length: infer.infer(
                        model, {"inputs": inputs}, decode_length=length)["outputs"],
                    reduce_retracing=True)
            length = tf.constant(int(tf.shape(batch["targets"])[1]) + 10, tf.int32)
            outputs = self._summary_decoder(batch["inputs"], length).numpy()
            encoders = self.task.problem.feature_encoders(self.task.data_dir)
            image_inputs = self.task.problem_hparams.modality.get("inputs") == Modality.IMAGE

            def decode(key, ids):  # images as their shape (an image encoder writes files)
                if key == "inputs" and image_inputs:
                    return f"<image {'x'.join(str(d) for d in ids.shape)}>"
                return summaries.decode_ids(encoders.get(key), ids)

            lines = [
                f"inputs: {decode('inputs', inputs)}  \n"
                f"targets: {decode('targets', targets)}  \n"
                f"outputs: {decode('targets', output)}"
                for inputs, targets, output in zip(
                    batch["inputs"].numpy(), batch["targets"].numpy(), outputs, strict=True)
            ]
            tf.summary.text("decoded_examples", "\n\n".join(lines))
        except Exception as e:  # a summary must never stop training
            logging.warning("Could not decode examples for TensorBoard: %s", e)

    def continuous_eval(self, timeout_s: float = 600.0, poll_s: float = 5.0) -> dict[str, float]:
        """Evaluates each new checkpoint until train_steps is reached or none appears in time."""
        last, results, waited = None, {}, 0.0
        while waited < timeout_s:
            latest = self.checkpoints.latest
            if latest and latest != last:
                self.checkpoints.read_latest(latest)
                results, last, waited = self.evaluate(), latest, 0.0
                if self.step >= self.config.train_steps:
                    break
            else:
                time.sleep(poll_s)
                waited += poll_s
        return results
