"""The training loop: runs steps, checkpoints, evaluates, writes summaries, stops.

It receives ready objects (a Task, the built model and optimizer, the run's
checkpoints, the strategy hooks, the actions) and builds none of them: see
t2t.trainer.trainer, which assembles a run. Stopping: train_steps reached, SIGTERM
(agreed between all processes at the next step, then saved), Ctrl-C (saved), a NaN/Inf
loss (the last good checkpoint is kept), a cluster peer lost, or an action asking
(early stopping).

Everything else runs as actions registered on the loop (t2t.trainer.actions: decoded
examples and sampled images for TensorBoard, per-layer statistics, early stopping, the
best checkpoints), called before each step, after each logged step and after each
evaluation (t2t.trainer.actions.base says with what).
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.config import InputConfig, TrainerConfig
from t2t.data import problem as problem_lib
from t2t.data.pipeline import input_pipeline
from t2t.trainer import debugging, eval_decoding, profiling, run_dir, strategy_cluster, summaries
from t2t.trainer import metrics as metrics_lib
from t2t.trainer import task as task_lib
from t2t.trainer.actions import base as actions_lib
from t2t.trainer.checkpointing import RunCheckpoints
from t2t.trainer.strategy_hooks import StrategyHooks
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
    """Steps, checkpoints, evaluation, summaries and stopping for one run; `actions`
    (t2t.trainer.actions.base.LoopAction) run at their points, in the order given."""

    def __init__(self, task: Task, hooks: StrategyHooks, model: Any, optimizer: Any,
                 learning_rate: Any, checkpoints: RunCheckpoints, iterator: Any,
                 config: TrainerConfig, output_dir: str, *, input_config: InputConfig,
                 batching: input_pipeline.Batching, xla_compile: bool = False,
                 actions: Sequence[actions_lib.LoopAction] = ()):
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
        self.actions = list(actions)
        self._save_evaluated = any(action.saves_evaluated_steps for action in self.actions)
        self._decoding_actions = any(action.decodes for action in self.actions)
        self.train_step = hooks.train_step(task.train_step_fn(
            model, optimizer, xla_compile, grad_groups=actions_lib.gradient_groups(self.actions),
            dense_gradients=hooks.dense_gradients))
        self.profiler = profiling.StepProfiler(
            profiling.parse_profile_steps(config.profile_steps),
            os.path.join(output_dir, "train"), enabled=self.is_chief)
        self._eval_step = None
        task.eval_metric_names()  # an unknown metric name fails now, not after training
        # Decoded metrics (BLEU, ROUGE, WER...; eval_run_autoregressive) at each
        # evaluation: the count, the scorers' packages and the problem checked now.
        self._decoded_eval = eval_decoding.plan_decoded_eval(
            task, config.eval_decode_examples, config.eval_steps)
        if self.is_chief and self._decoded_eval.announcement:
            print(self._decoded_eval.announcement, flush=True)
        self._eval_decoder: Any = None  # eval_decoding.make_eval_decoder's, made once
        self._inference = model  # what decodes at evaluations (hooks.inference_model)
        self.stop_reason = ""  # why training stopped before train_steps (an action's)
        self._signalled = False
        # The actions check the metric names they read (early stopping, best checkpoints).
        reported = self._reported_metrics()
        for action in self.actions:
            for line in action.start(reported):
                if self.is_chief:
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
            f"({strategy_cluster.peer_error_summary(error, self._cluster())}). "
            f"The last checkpoint ({self.checkpoints.latest or 'none yet'}) "
            f"is kept: re-run the same launch command to resume from it."
        ) from error

    def _cluster(self) -> dict[str, Any] | None:
        """The run's TF_CONFIG (cluster and this task), to name a lost peer; None alone."""
        runtime = getattr(self.hooks, "runtime", None)
        return strategy_cluster.cluster_config(runtime.config) if runtime is not None else None

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def request_stop(self, reason: str) -> None:
        """Stops training after this step, saying `reason` (the first reason given wins)."""
        if not self.stop_reason:
            self.stop_requested, self.stop_reason = True, reason

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
            for action in self.actions:
                action.after_log(step, counts[task_lib.NUM_COUNTS:])

    def _log_due(self, next_step: int, target: int) -> bool:
        every = max(1, self.config.log_every_steps)
        return next_step % every == 0 or next_step == target

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
            while (step := self.step) < target and not self._stopping():
                logged = self._log_due(step + 1, target)
                for action in self.actions:
                    action.before_step(step, logged)
                loss, grad_norm, counts = self._run_steps(target)
                step = self.step
                self.loss_history.append((step, loss))
                self._check_finite(step, loss)
                self._log(progress, step, loss, grad_norm, counts)
                evaluating = (evaluate_every and step % config.local_eval_frequency == 0
                              and step < target)
                # An evaluated step is saved when an action keeps the best checkpoints
                # (every process saves: saving may run collectives).
                if step % config.save_checkpoints_steps == 0 or (
                        evaluating and self._save_evaluated):
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
        if self.stop_requested:  # an action has just evaluated; a signal: no time
            return last_metrics if self.stop_reason else {}
        return self.evaluate()

    # ---------------------------------------------------------------- evaluate
    def _eval_dataset(self, problem: Any = None) -> Any:
        config = dataclasses.replace(self.input_config, deterministic=True)
        return self.hooks.eval_dataset(self.task.input_fn(problem_lib.EVAL, config,
                                                          self.batching, problem=problem))

    def _eval_metrics(self) -> tuple[dict[str, float], int, int]:
        """(metrics on the eval split, batches read, parts: a multi-problem's tasks are
        evaluated one by one, their metrics also under their prefixes)."""
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
        return results, batches, len(parts)

    def evaluate(self) -> dict[str, float]:
        """Metrics on the task's eval split (eval_steps batches, or all of it when
        eval_steps <= 0), recorded under its name (eval/ and eval_results.jsonl for dev,
        eval_SPLIT/ and eval_results_SPLIT.jsonl for another split); then the actions."""
        results, batches, parts = self._eval_metrics()
        step = self.step
        if self._decoded_eval.enabled or self._decoding_actions:
            # Every process: gathering a mesh's weights for decoding is collective.
            self._inference = self.hooks.inference_model(self.model, self.task)
        if not self.is_chief:
            return results
        if self._decoded_eval.enabled and parts == 1:  # not per task of a multi-problem
            results.update(self._decode_metrics())
        split = self.task.eval_split
        run_dir.append_eval_results(self.output_dir, step, results, split=split)
        latest = self.checkpoints.latest
        outcome = actions_lib.EvalOutcome(
            step, dict(results), latest if latest and latest.endswith(f"-{step}") else None,
            self._inference)
        with self.eval_writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
            for action in self.actions:
                reason = action.after_eval(outcome)
                if reason:
                    self.request_stop(reason)
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
