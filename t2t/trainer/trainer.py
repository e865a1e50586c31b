"""The training loop: one explicit tf.distribute loop for every model and problem.

    trainer = Trainer(problem, "transformer", hparams, data_dir, output_dir, TrainerConfig())
    trainer.train_and_evaluate()

Each step runs `strategy.run` on one per-replica batch: the loss of a replica is its
sum of token losses divided by the token count of the global batch, so Keras'
`apply_gradients` (which sums gradients over replicas) applies the exact global mean.
Checkpoints hold the model, the optimizer (and its step) and, where the strategy
allows, the input iterator; re-running the same command resumes from the latest.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import signal
import time
from typing import Any

import gin
import keras
import tensorflow as tf
from absl import logging

from t2t.hparams.hparams import HParams
from t2t.models import t2t_model
from t2t.problems import input_pipeline
from t2t.problems import problem as problem_lib
from t2t.trainer import learning_rate as lr_lib
from t2t.trainer import metrics as metrics_lib
from t2t.trainer import optimizers, run_dir, summaries
from t2t.trainer import strategy as strategy_lib


def _is_trackable(obj: Any) -> bool:
    try:
        tf.train.Checkpoint(probe=obj)
        return True
    except ValueError:
        return False


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept."""


class ClusterError(RuntimeError):
    """Another process of a multi-worker run stopped answering (or failed)."""


# What a collective or a remote call raises when a peer process is gone or too slow.
_PEER_ERRORS = (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
                tf.errors.CancelledError, tf.errors.AbortedError, tf.errors.InternalError)


@gin.configurable
@dataclasses.dataclass
class TrainerConfig:
    """Settings of a training run (flags of t2t-trainer; gin can set their defaults)."""

    train_steps: int = 1000
    eval_steps: int = 100  # dev batches per evaluation (<= 0: the whole dev split)
    local_eval_frequency: int = 1000  # steps between evaluations
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 20
    log_every_steps: int = 100
    xla_compile: bool = False
    mixed_precision: str | None = None  # None, "bfloat16" or "float16"
    deterministic: bool = False
    random_seed: int | None = None
    warm_start_from: str | None = None
    decode_summaries: int = 3  # dev examples decoded into TensorBoard text per eval
    checkpoint_iterator: bool = True  # save the input position (exact resume)


def dummy_features(problem_hparams: problem_lib.ProblemHParams) -> dict[str, tf.Tensor]:
    """A one-example batch with every feature the model expects (to build weights)."""
    features = {}
    for name, kind in problem_hparams.modality.items():
        if kind == problem_lib.Modality.IMAGE:
            shape = problem_hparams.image_shape or [32, 32, 3]
            features[name] = tf.zeros([1, *shape], tf.uint8)
        elif kind == problem_lib.Modality.CLASS_LABEL:
            features[name] = tf.ones([1, 1], tf.int32)
        elif kind == problem_lib.Modality.REAL:
            features[name] = tf.zeros([1, 4, problem_hparams.vocab_size.get(name) or 1])
        else:
            features[name] = tf.ones([1, 4], tf.int32)
    return features


def _count(features: dict[str, tf.Tensor]) -> tf.Tensor:
    """[examples, non-padding tokens] of a batch (tokens of inputs and targets)."""
    examples = tf.cast(tf.shape(features["targets"])[0], tf.float32)
    tokens = tf.constant(0.0)
    for name in ("inputs", "targets"):
        value = features.get(name)
        if value is not None and value.dtype.is_integer and len(value.shape) == 2:
            tokens += tf.reduce_sum(tf.cast(tf.not_equal(value, 0), tf.float32))
    return tf.stack([examples, tokens])


class Trainer:
    """Builds the model, optimizer and data under a strategy, then trains and evaluates."""

    def __init__(
        self,
        problem: problem_lib.Problem,
        model_name: str,
        hparams: HParams,
        data_dir: str,
        output_dir: str,
        config: TrainerConfig,
        strategy: tf.distribute.Strategy | None = None,
        input_config: input_pipeline.InputConfig | None = None,
        run_info: dict[str, Any] | None = None,
    ):
        self.problem, self.model_name, self.hparams = problem, model_name, hparams
        self.data_dir, self.output_dir, self.config = data_dir, output_dir, config
        self.strategy = strategy or strategy_lib.create_strategy(strategy_lib.StrategyConfig())
        self.input_config = input_config or input_pipeline.InputConfig()
        if config.deterministic:
            seed = 1 if config.random_seed is None else config.random_seed
            config.random_seed = seed
            tf.config.experimental.enable_op_determinism()
            self.input_config = dataclasses.replace(self.input_config, deterministic=True, seed=seed)
        if config.random_seed is not None:
            keras.utils.set_random_seed(config.random_seed)
        if config.mixed_precision:
            if config.mixed_precision not in ("bfloat16", "float16"):
                raise ValueError(
                    f"mixed_precision={config.mixed_precision!r}: use bfloat16 or float16."
                )
            keras.mixed_precision.set_global_policy(f"mixed_{config.mixed_precision}")
        self.problem_hparams = problem.hparams(data_dir)
        self.is_chief = strategy_lib.is_chief(self.strategy)
        self.parameter_server = strategy_lib.is_parameter_server(self.strategy)
        self.multi_worker = strategy_lib.task_of(self.strategy)[0] is not None
        if strategy_lib.is_tpu(self.strategy):
            # TPUs compile one program per shape: fixed [batch, max_length] batches.
            if not self.hparams.get("max_length", 0):
                raise ValueError("TPU training needs fixed shapes: set --hparams=max_length=N.")
            if "static_shapes" in self.hparams:
                self.hparams.set_hparam("static_shapes", True)
            else:
                self.hparams.add_hparam("static_shapes", True)
        # Non-chief processes write their (needed) checkpoints to a scratch folder that
        # is removed; summaries and results come from the chief only.
        self.checkpoint_dir = output_dir
        if not self.is_chief:
            task_type, index = strategy_lib.task_of(self.strategy)
            self.checkpoint_dir = os.path.join(output_dir, "tmp_workers", f"{task_type}_{index}")
        self._stop_requested = False
        self.loss_history: list[tuple[int, float]] = []  # (step, training loss) of this process
        self._build(run_info or {})

    # ------------------------------------------------------------------ setup
    def _build(self, run_info: dict[str, Any]) -> None:
        # Refuse an incompatible resume before spending time on building anything.
        warnings = run_dir.check_and_record(
            self.output_dir,
            {"problem": self.problem.name, "model": self.model_name, **run_info},
            self.hparams,
            has_checkpoint=tf.train.latest_checkpoint(self.output_dir) is not None,
            record=False,  # recorded below, once the checkpoint has restored
        )
        for warning in warnings:
            logging.warning(warning)
        with self.strategy.scope():
            self.model = t2t_model.create_model(
                self.model_name, self.hparams, problem_lib.TRAIN, self.problem_hparams
            )
            self.model.build_for(dummy_features(self.problem_hparams))
            self.learning_rate = lr_lib.LearningRateSchedule(self.hparams, self.config.train_steps)
            self.optimizer = optimizers.create_optimizer(
                self.hparams, self.learning_rate, mixed_precision=self.config.mixed_precision
            )
            self.optimizer.build(self.model.trainable_variables)
        self.num_replicas = self.strategy.num_replicas_in_sync
        if self.parameter_server:  # schedules the steps on the workers
            self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        latest = tf.train.latest_checkpoint(self.output_dir)
        if latest:
            self._restore_model(latest)
        elif self.config.warm_start_from:
            self._warm_start(self.config.warm_start_from)
        if self.is_chief:
            run_dir.record_run(
                self.output_dir, {"problem": self.problem.name, "model": self.model_name,
                                  **run_info}, self.hparams, has_checkpoint=latest is not None)
        self.train_iterator, self._iterator_in_checkpoint = self._train_iterator(latest)
        items = {"model": self.model, "optimizer": self.optimizer}
        if self._iterator_in_checkpoint:
            items["train_iterator"] = self.train_iterator
        self.checkpoint = tf.train.Checkpoint(**items)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.checkpoint_dir,
            max_to_keep=self.config.keep_checkpoint_max if self.is_chief else 1,
        )
        if self.is_chief:
            self.train_writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "train"))
            self.eval_writer = tf.summary.create_file_writer(os.path.join(self.output_dir, "eval"))
        else:
            self.train_writer = self.eval_writer = tf.summary.create_noop_writer()
        self._train_step = self._make_train_step()
        self._eval_step = None
        self._summary_decoder = None  # traced once: eager greedy decoding costs seconds per eval

    def _make_train_iterator(self, seed_offset: int = 0):
        config = self.input_config
        if seed_offset and config.seed is not None:
            config = dataclasses.replace(config, seed=config.seed + seed_offset)
        dataset_fn = input_pipeline.make_input_fn(
            self.problem, problem_lib.TRAIN, self.data_dir, self.hparams, config
        )
        if self.parameter_server:  # each worker reads its own copy of the pipeline
            return iter(self.coordinator.create_per_worker_dataset(
                lambda: self.strategy.distribute_datasets_from_function(dataset_fn)
            ))
        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def _train_iterator(self, latest: str | None):
        """(iterator, whether its position is checkpointed).

        The input position is saved with the checkpoints where the strategy's iterator
        supports it (one device); otherwise, or when a checkpoint lacks it, a resumed run
        reads the data in a new order (seed + step) rather than repeating what it saw."""
        iterator = self._make_train_iterator()
        trackable = self.config.checkpoint_iterator and _is_trackable(iterator)
        if not latest:
            return iterator, trackable
        if trackable:
            try:
                tf.train.Checkpoint(train_iterator=iterator).read(latest).assert_existing_objects_matched()
                return iterator, True
            except (AssertionError, ValueError, tf.errors.OpError):
                logging.warning("%s holds no input position: the data order restarts.", latest)
        return self._make_train_iterator(seed_offset=self.step), trackable

    def _restore_model(self, latest: str) -> None:
        damaged = run_dir.damaged_checkpoint_message(latest)
        if damaged:
            raise run_dir.IncompatibleRunError(damaged)
        try:
            tf.train.Checkpoint(model=self.model, optimizer=self.optimizer).read(
                latest
            ).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            raise run_dir.IncompatibleRunError(
                f"The checkpoint {latest} does not match model {self.model_name!r} with "
                f"these hparams ({str(e)[:300]}). Use a new --output_dir."
            ) from e
        print(f"Resumed from {latest} at step {self.step}.", flush=True)

    def _warm_start(self, warm_start_from: str) -> None:
        path = warm_start_from
        if os.path.isdir(path):
            path = tf.train.latest_checkpoint(path)
        if not path or not tf.io.gfile.exists(path + ".index"):
            raise FileNotFoundError(
                f"--warm_start_from={warm_start_from!r} holds no checkpoint: "
                f"give a run's output_dir or a checkpoint prefix such as DIR/ckpt-1000."
            )
        tf.train.Checkpoint(model=self.model).read(path).expect_partial()
        logging.info("Warm-started the weights from %s (optimizer and step are new).", path)

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    # ----------------------------------------------------------- train step
    def _make_train_step(self):
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        variables = model.trainable_variables
        clip_norm = self.hparams.get("clip_grad_norm", 0.0)

        def loss_scale():
            return getattr(optimizer, "dynamic_scale", None)

        def forward_backward(features):
            ctx = tf.distribute.get_replica_context()
            with tf.GradientTape() as tape:
                _, losses = model(features, training=True)
                numerator, denominator = losses["training"]
                global_denominator = ctx.all_reduce(tf.distribute.ReduceOp.SUM, denominator)
                loss = numerator / tf.maximum(global_denominator, 1.0)
                for name, (value, _) in losses.items():
                    if name != "training":  # auxiliary losses: mean over replicas
                        loss += value / ctx.num_replicas_in_sync
                loss += optimizers.weight_decay_loss(variables, self.hparams) / ctx.num_replicas_in_sync
                scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
            grads = tape.gradient(scaled, variables)
            return loss, grads, _count(features)

        if self.config.xla_compile:
            forward_backward = tf.function(forward_backward, jit_compile=True)

        def replica_step(features):
            loss, grads, counts = forward_backward(features)
            grads, grad_norm = optimizers.clip_gradients(grads, clip_norm, loss_scale=loss_scale())
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss, grad_norm, counts

        def replica_step_with_stop(features, stop):
            loss, grad_norm, counts = replica_step(features)
            # [loss, grad_norm, stop, examples, tokens]: one vector per replica, so that a
            # single collective reports them all (between workers each collective is a
            # network round trip).
            head = tf.stack([tf.cast(loss, tf.float32), tf.cast(grad_norm, tf.float32)])
            stop = tf.reshape(tf.cast(stop, tf.float32), [1])
            return tf.concat([head, stop, tf.cast(counts, tf.float32)], axis=0)

        @tf.function
        def train_step(iterator, stop):
            packed = strategy.run(replica_step_with_stop, args=(next(iterator), stop))
            summed = strategy.reduce(tf.distribute.ReduceOp.SUM, packed, axis=None)
            # Each replica's loss is its share of the global mean: their sum is the mean.
            # The norm is averaged. Any process asked to stop (SIGTERM): all stop after
            # this step, together.
            norm = summed[1] / strategy.num_replicas_in_sync
            return summed[0], norm, summed[3:], summed[2]

        if self.parameter_server:
            @tf.function
            def ps_train_step(iterator):  # runs on one worker, scheduled by the chief
                loss, grad_norm, counts = strategy.run(replica_step, args=(next(iterator),))
                return loss, grad_norm, counts

            return ps_train_step
        return train_step

    # ---------------------------------------------------------------- train
    def _install_signal_handlers(self):
        def request_stop(signum, frame):
            logging.warning("Signal %d: saving a checkpoint and stopping.", signum)
            self._stop_requested = True

        previous = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, request_stop)
        except ValueError:  # not the main thread
            return lambda: None
        return lambda: signal.signal(signal.SIGTERM, previous)

    def save(self) -> str | None:
        """Writes a checkpoint at the current step (unless one exists for it).

        Every process of a multi-worker run saves (saving may run collectives); the
        non-chief ones write into a scratch folder that is removed at once."""
        step = self.step
        if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{step}"):
            return self.manager.latest_checkpoint
        path = self.manager.save(checkpoint_number=step)
        if not self.is_chief:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
            try:  # the shared scratch parent, once the last worker's folder is gone
                os.rmdir(os.path.dirname(self.checkpoint_dir))
            except OSError:
                pass
            self.manager = tf.train.CheckpointManager(self.checkpoint, self.checkpoint_dir, max_to_keep=1)
            return None
        return path

    def _run_steps(self, target: int) -> tuple[float, float, list[float]]:
        """Runs one training step (or, with parameter servers, a scheduled batch of
        steps up to the next log/checkpoint/eval boundary or `target`).

        Returns the last step's loss and gradient norm, and [examples, tokens] of all
        the steps run."""
        if not self.parameter_server:
            stop = tf.constant(1.0 if self._stop_requested else 0.0)
            loss, grad_norm, counts, stops = self._train_step(self.train_iterator, stop)
            if float(stops) > 0:
                self._stop_requested = True
            return float(loss), float(grad_norm), counts.numpy().tolist()
        config, step = self.config, self.step
        boundary = min(target, *(
            (step // every + 1) * every
            for every in (config.log_every_steps, config.save_checkpoints_steps,
                          config.local_eval_frequency) if every > 0
        ))
        results = [self.coordinator.schedule(self._train_step, args=(self.train_iterator,))
                   for _ in range(max(boundary - step, 1))]
        self.coordinator.join()
        loss, grad_norm, _ = results[-1].fetch()
        counts = [sum(float(r.fetch()[2][i]) for r in results) for i in range(2)]
        return float(loss), float(grad_norm), counts  # counts: of all the steps run

    def train(self, until_step: int | None = None, evaluate_every: bool = False) -> dict[str, float]:
        """Trains to `until_step` (default train_steps); evaluates on the way if asked."""
        config = self.config
        target = config.train_steps if until_step is None else until_step
        if self.step >= target:
            logging.info("Already at step %d >= %d: nothing to train.", self.step, target)
            return {}
        restore_signals = self._install_signal_handlers()
        progress = summaries.Progress(self.step, target, config.log_every_steps)
        last_metrics: dict[str, float] = {}
        try:
            while self.step < target and not self._stop_requested:
                try:
                    loss_value, grad_norm, counts = self._run_steps(target)
                except _PEER_ERRORS as e:
                    if not (self.multi_worker or self.parameter_server):
                        raise
                    raise ClusterError(
                        f"Training stopped at step {self.step}: another process of the cluster "
                        f"failed or stopped answering ({type(e).__name__}: "
                        f"{(str(e).strip().splitlines() or [''])[0][:200]}). "
                        f"The last checkpoint ({tf.train.latest_checkpoint(self.output_dir) or 'none yet'}) "
                        f"is kept: re-run the same launch command to resume from it."
                    ) from e
                step = self.step
                self.loss_history.append((step, loss_value))
                if not math.isfinite(loss_value):
                    raise NonFiniteLossError(
                        f"The training loss became {loss_value} at step {step}. The last good "
                        f"checkpoint ({self.manager.latest_checkpoint or 'none yet'}) is kept. "
                        f"Try a lower learning rate (--hparams=learning_rate_constant=...), "
                        f"gradient clipping (clip_grad_norm) or float32."
                    )
                examples, tokens = counts
                line = progress.update(step, loss_value, examples, tokens)
                if line is not None:
                    lr = float(self.learning_rate(step))
                    print(f"{line} lr {lr:.3g}", flush=True)
                    with self.train_writer.as_default(step=step):
                        tf.summary.scalar("loss", loss_value)
                        tf.summary.scalar("learning_rate", lr)
                        tf.summary.scalar("gradient_global_norm", grad_norm)
                        for name, value in progress.rates().items():
                            tf.summary.scalar(name, value)
                if step % config.save_checkpoints_steps == 0:
                    self.save()
                if evaluate_every and step % config.local_eval_frequency == 0 and step < target:
                    last_metrics = self.evaluate()
        except KeyboardInterrupt:
            path = self.save()
            print(f"Interrupted at step {self.step}: saved {path}. Re-run the same command to resume.")
            raise
        finally:
            restore_signals()
        path = self.save()
        if self._stop_requested:
            print(f"Stopped by a signal at step {self.step}: saved {path}.", flush=True)
        return last_metrics

    def train_and_evaluate(self) -> dict[str, float]:
        """Trains to train_steps, evaluating every local_eval_frequency steps and at the end."""
        self.train(evaluate_every=True)
        if self._stop_requested:
            return {}
        return self.evaluate()

    # ------------------------------------------------------------- evaluate
    def _eval_dataset(self):
        dataset_fn = input_pipeline.make_input_fn(
            self.problem, problem_lib.EVAL, self.data_dir, self.hparams,
            dataclasses.replace(self.input_config, deterministic=True),
        )
        if self.parameter_server:  # the chief evaluates by itself, reading the ps variables
            return dataset_fn(None)
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def _make_eval_step(self, metric_names: list[str]):
        model, strategy = self.model, self.strategy

        def replica_step(features):
            logits, losses = model(features, training=False)
            results = metrics_lib.compute_metrics(
                metric_names, logits, features["targets"], self.problem_hparams.modality["targets"]
            )
            results["loss"] = losses["training"]
            return results

        if self.parameter_server:
            return tf.function(replica_step, reduce_retracing=True)

        # Dev batches come in several bucket shapes: trace once for unknown lengths.
        @tf.function(reduce_retracing=True)
        def eval_step(features):
            per_replica = strategy.run(replica_step, args=(features,))
            return tf.nest.map_structure(
                lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), per_replica
            )

        return eval_step

    def evaluate(self) -> dict[str, float]:
        """Metrics on the dev split (eval_steps batches, or all of it when eval_steps <= 0)."""
        if self._eval_step is None:
            metric_names = metrics_lib.trainable_metric_names(self.problem.eval_metrics())
            self._eval_step = self._make_eval_step(metric_names)
        eval_step = self._eval_step
        accumulator = metrics_lib.MetricsAccumulator()
        batches = 0
        for features in self._eval_dataset():
            if 0 < self.config.eval_steps <= batches:
                break
            accumulator.add(tf.nest.map_structure(lambda t: t.numpy(), eval_step(features)))
            batches += 1
        results = accumulator.result()
        step = self.step
        if not self.is_chief:
            return results
        run_dir.append_eval_results(self.output_dir, step, results)
        with self.eval_writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
            self._decode_summaries()
        shown = " ".join(f"{k} {v:.4f}" for k, v in sorted(results.items()))
        print(f"eval step {step}: {shown} ({batches} batches)", flush=True)
        return results

    def _decode_summaries(self) -> None:
        """A few dev examples decoded greedily in one batch, as TensorBoard text."""
        if not self.config.decode_summaries or "targets" not in self.problem_hparams.modality:
            return
        try:
            dataset = self.problem.dataset(problem_lib.EVAL, self.data_dir, deterministic=True)
            if "inputs" not in dataset.element_spec:
                return
            examples = dataset.take(self.config.decode_summaries).map(
                lambda e: {"inputs": e["inputs"], "targets": e["targets"]})
            batch = next(iter(examples.padded_batch(self.config.decode_summaries)), None)
            if batch is None:
                return
            if self._summary_decoder is None:
                model = self.model
                self._summary_decoder = tf.function(
                    lambda inputs, length: model.infer({"inputs": inputs}, decode_length=length)["outputs"],
                    reduce_retracing=True)
            length = tf.constant(int(tf.shape(batch["targets"])[1]) + 10, tf.int32)
            outputs = self._summary_decoder(batch["inputs"], length).numpy()
            encoders = self.problem.feature_encoders(self.data_dir)
            decode = lambda key, ids: summaries.decode_ids(encoders.get(key), ids)  # noqa: E731
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
            latest = tf.train.latest_checkpoint(self.output_dir)
            if latest and latest != last:
                self.checkpoint.restore(latest).expect_partial()
                results, last, waited = self.evaluate(), latest, 0.0
                if self.step >= self.config.train_steps:
                    break
            else:
                time.sleep(poll_s)
                waited += poll_s
        return results

