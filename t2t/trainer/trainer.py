"""A training run assembled: Task, runtime, strategy hooks, checkpoints and the loop.

    runtime = runtime_lib.start(RuntimeConfig(...))      # once, first thing
    trainer = Trainer(problem, "transformer", hparams, data_dir, output_dir,
                      TrainerConfig(train_steps=1000), runtime)
    trainer.train_and_evaluate()

`Trainer` refuses an incompatible resume before building anything, builds the model
and optimizer under the strategy's scope, restores the latest checkpoint (or warm
starts), records the run (run.json, hparams.json) once the restore succeeded and the
data opened, and
hands the ready objects, with the actions the config asks for (t2t.trainer.actions:
early stopping, best checkpoints, TensorBoard extras), to a `TrainingLoop`, which runs.
Re-running the same command resumes from the latest checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow as tf
from absl import logging

from t2t import registry
from t2t.config import InputConfig, RuntimeConfig, TrainerConfig
from t2t.data import problem as problem_lib
from t2t.data.pipeline import length_report
from t2t.hparams import t2t_names
from t2t.hparams.hparams import HParams, HParamsError
from t2t.parallel import mesh_layout, sharding
from t2t.trainer import (
    accumulation,
    debugging,
    distillation,
    profiling,
    run_dir,
    strategy_cluster,
    strategy_parameter_servers,
)
from t2t.trainer import hooks as hooks_lib
from t2t.trainer import runtime as runtime_lib
from t2t.trainer.actions.standard import standard_actions
from t2t.trainer.checkpointing import RunCheckpoints
from t2t.trainer.loop import ClusterError, NonFiniteLossError, NumericsError, TrainingLoop
from t2t.trainer.task import Task

# The schedules that train: their runs record where their data and code are.
TRAINING_SCHEDULES = ("train", "train_and_evaluate")

__all__ = ["ClusterError", "NonFiniteLossError", "NumericsError", "Trainer", "TrainerConfig"]


def check_config(config: TrainerConfig) -> None:
    """ValueError for TrainerConfig values that can never work (before anything is built)."""
    profiling.parse_profile_steps(config.profile_steps)
    if config.overfit_batches < 0:
        raise ValueError(f"overfit_batches={config.overfit_batches}: give the number of "
                         f"batches to overfit (>= 1), or 0 to train normally.")


def _started_runtime(runtime: Any, hparams: HParams) -> runtime_lib.Runtime:
    """`runtime` (a Runtime, a RuntimeConfig or None to start, or a strategy to wrap) as a
    started Runtime, in the mixed precision Tensor2Tensor's hparam activation_dtype asks
    for when the config names none (t2t.hparams.t2t_names.mixed_precision)."""
    if isinstance(runtime, tf.distribute.Strategy):  # as t2t < #18 took it
        runtime = runtime_lib.start(None, strategy=runtime)
    elif not isinstance(runtime, runtime_lib.Runtime):
        config = runtime or RuntimeConfig()
        config = dataclasses.replace(config, mixed_precision=t2t_names.mixed_precision(
            hparams, config.mixed_precision))
        runtime = runtime_lib.start(config, mesh_shape=hparams.get("mesh_shape") or "",
                                    layout=hparams.get("layout") or "")
    wanted = t2t_names.mixed_precision(hparams, runtime.config.mixed_precision)
    if wanted != runtime.config.mixed_precision:
        raise HParamsError(
            f"hparam activation_dtype={hparams.activation_dtype!r} asks for mixed_precision="
            f"{wanted!r}, but the given runtime was started without it: start it with "
            f"RuntimeConfig(mixed_precision={wanted!r}), or set activation_dtype=float32.")
    return runtime


class Trainer:
    """Builds a run's model, optimizer, data and checkpoints, then trains and evaluates
    through its `loop` (train, train_and_evaluate, evaluate, continuous_eval, save)."""

    def __init__(
        self,
        problem: problem_lib.Problem,
        model_name: str,
        hparams: HParams,
        data_dir: str,
        output_dir: str,
        config: TrainerConfig | None = None,
        runtime: runtime_lib.Runtime | RuntimeConfig | tf.distribute.Strategy | None = None,
        input_config: InputConfig | None = None,
        run_info: dict[str, Any] | None = None,
    ):
        runtime = _started_runtime(runtime, hparams)
        mesh_layout.check_runtime_mesh(hparams, runtime.mesh)
        self.runtime, self.config = runtime, config or TrainerConfig()
        check_config(self.config)
        if runtime.mesh is not None and runtime.task[0] is not None and self.config.layer_summaries:
            # The chief alone reads them, and a DTensor across processes is read by all.
            logging.warning("--layer_summaries is off: a mesh across processes cannot "
                            "write them.")
            self.config = dataclasses.replace(self.config, layer_summaries=False)
        self.output_dir, self.run_info = output_dir, run_info or {}
        self.task = Task(problem, model_name, hparams, data_dir, self.config.eval_split,
                         hparams_set=self.run_info.get("hparams_set"))
        if self.config.teacher_dir:
            distillation.check_hparams(hparams)
        self.hooks = hooks_lib.hooks_for(runtime)
        self.batching = self.hooks.batching(self.task.batching())
        self.input_config = runtime.input_config(input_config)
        self._check_resume()
        with runtime.strategy.scope():
            model = self.task.build_model()
            if runtime.mesh is not None:  # before the optimizer: it keys slots by variable
                dims = sharding.shard_model(model, runtime.mesh, model.WEIGHT_DIMENSIONS)
            optimizer, learning_rate = self.task.build_optimizer(
                model, self.config.train_steps, runtime.config.mixed_precision)
            if runtime.mesh is not None:
                sharding.shard_optimizer(optimizer, runtime.mesh, dims,
                                         model.trainable_variables)
            if self.config.teacher_dir:  # frozen, outside the checkpoints
                self.task.teacher = distillation.load_teacher(
                    self.config.teacher_dir, problem, data_dir)
        if self.hooks.parameter_server and runtime.is_chief:
            for line in strategy_parameter_servers.split_variables(model.variables):
                print(f"Parameter servers hold {line}", flush=True)
        self.checkpoints = self._checkpoints(model, optimizer)
        latest = self._restore()
        iterator = self._train_iterator(latest)
        # Recorded once the checkpoint restored and the data opened. A resumed run's new
        # data or code folder is recorded with its first checkpoint: a run that fails
        # before one (damaged data) leaves run.json as it was.
        self._record(latest, update_locations=latest is None)
        if latest is not None and self.config.schedule in TRAINING_SCHEDULES:
            self.checkpoints.after_save = self._record_locations
        if runtime.is_chief:  # what the length filter drops, said before the first step
            length_report.report_input_lengths(
                problem, data_dir, hparams, self.batching,
                train=self.config.schedule in TRAINING_SCHEDULES,
                eval_split=None if self.config.schedule == "train" else self.task.eval_split)
        if (runtime.is_chief and self.task.accumulate_steps > 1
                and self.config.schedule in TRAINING_SCHEDULES):  # steps count updates
            print(accumulation.description_of_run(
                self.task.accumulate_steps, self.batching, problem.batch_size_means_tokens,
                runtime.num_replicas, on_mesh=runtime.mesh is not None), flush=True)
        self.loop = TrainingLoop(
            self.task, self.hooks, model, optimizer, learning_rate, self.checkpoints,
            iterator, self.config, output_dir, input_config=self.input_config,
            batching=self.batching, xla_compile=runtime.config.xla_compile,
            actions=standard_actions(self.config, self.task, model, self.hooks, output_dir))

    # ------------------------------------------------------------------ assembly
    @property
    def _run_record(self) -> dict[str, Any]:
        """run.json: what t2t-decoder, t2t-exporter and an evaluation need to find the
        run's problem, data and code again (run_info adds the binary's flags)."""
        import t2t

        teacher = self.config.teacher_dir
        imported = run_dir.read_run_record(self.output_dir).get(run_dir.IMPORTED_KEY) if (
            os.path.exists(os.path.join(self.output_dir, run_dir.RUN_FILE))) else None
        return {**({run_dir.IMPORTED_KEY: imported} if imported else {}),
                "problem": self.task.problem.name, "model": self.task.model_name,
                "data_dir": run_dir.absolute_path(self.task.data_dir),
                **({"teacher_dir": run_dir.absolute_path(teacher)} if teacher else {}),
                "problem_hparams": self.task.problem_hparams.to_dict(),
                **({run_dir.PS_SPLIT_KEY: split} if (split := self._ps_split()) else {}),
                "t2t_version": t2t.__version__, **self.run_info}

    def _ps_split(self) -> str:
        """How variables are split over parameter servers ("" when whole)."""
        config = self.runtime.config
        if not (self.hooks.parameter_server
                and (config.ps_min_shard_bytes or config.ps_max_shard_bytes)):
            return ""
        num_ps = len(strategy_cluster.cluster_config(config)["cluster"]["ps"])
        size = (f"min_shard_bytes={config.ps_min_shard_bytes}" if config.ps_min_shard_bytes
                else f"max_shard_bytes={config.ps_max_shard_bytes}")
        return f"{size},max_shards={config.ps_max_shards or num_ps}"

    def _check_resume(self) -> None:
        """Refuses an incompatible resume before anything is built (nothing is written)."""
        warnings = run_dir.check_and_record(
            self.output_dir, self._run_record, self.task.hparams,
            has_checkpoint=self._latest_checkpoint() is not None and not self._imported(),
            record=False,  # recorded once the checkpoint has restored
            model_structural=registry.model(self.task.model_name).STRUCTURAL_HPARAMS,
        )
        for warning in warnings:
            logging.warning(warning)

    def _latest_checkpoint(self) -> str | None:
        return tf.train.latest_checkpoint(self.output_dir)

    def _imported(self) -> dict[str, Any] | None:
        """run.json's import record while the run holds only t2t-import's checkpoint."""
        if self.config.resume_from:
            return None
        return run_dir.imported_checkpoint(self.output_dir, self._latest_checkpoint())

    def _checkpoints(self, model: Any, optimizer: Any) -> RunCheckpoints:
        task_type, index = self.runtime.task
        scratch = (None if self.runtime.is_chief else
                   os.path.join(self.output_dir, "tmp_workers", f"{task_type}_{index}"))
        return RunCheckpoints(model, optimizer, self.output_dir, is_chief=self.runtime.is_chief,
                              scratch_dir=scratch, keep=self.config.keep_checkpoint_max,
                              shared=self.runtime.mesh is not None)

    def _restore(self) -> str | None:
        """Restores the latest checkpoint (or --resume_from's), or warm-starts; returns
        the checkpoint read."""
        imported = self._imported()
        if imported:  # t2t-import's weights: fine-tuning starts (a new optimizer, step 0)
            run_dir.check_imported_vocab(imported, self.task.problem_hparams.vocab_size,
                                         self.task.problem.name, self.output_dir)
            read = self.checkpoints.warm_start(self._latest_checkpoint())
            print(f"Fine-tuning the {imported.get('architecture')} imported from "
                  f"{imported.get('from')} ({os.path.basename(read)}).", flush=True)
            return None
        latest = self.checkpoints.resume_point(self.config.resume_from)
        if latest:
            self.checkpoints.restore(latest, self.task.model_name)
            step = int(self.checkpoints.optimizer.iterations.numpy())
            print(f"Resumed from {os.path.basename(latest)} at step {step}.", flush=True)
            unlisted = self.checkpoints.make_latest(latest) if self.config.resume_from else []
            if unlisted:  # --resume_from an earlier checkpoint: the newer ones stay on disk
                print(f"{os.path.basename(latest)} is now the latest checkpoint; the newer "
                      f"{', '.join(unlisted)} stay on disk, unlisted (training overwrites "
                      f"them when it reaches their steps).", flush=True)
        elif self.config.warm_start_from:
            self.checkpoints.warm_start(self.config.warm_start_from)
        return latest

    def _record(self, latest: str | None, update_locations: bool) -> None:
        """Records the run (run.json, hparams.json): the chief, once it is known to work,
        so a refused run (or one without data) leaves the records as they were."""
        if self.runtime.is_chief:
            run_dir.record_run(self.output_dir, self._run_record, self.task.hparams,
                               has_checkpoint=latest is not None,
                               update_locations=update_locations)

    def _record_locations(self) -> None:
        """After a resumed run's first checkpoint: where its data and code now are."""
        self.checkpoints.after_save = None
        self._record(self.checkpoints.latest, update_locations=True)

    def _train_iterator(self, latest: str | None) -> Any:
        """The training input, positioned where the checkpoint left it when it can be.

        The input position is saved with the checkpoints where the strategy's iterator
        supports it (one device) and the problem allows it (not audio: its buffers are
        gigabytes); otherwise, or when a checkpoint lacks it, a resumed run reads the
        data in a new order (seed + step) rather than repeating it."""
        iterator = self._make_iterator()
        trackable = (self.config.checkpoint_iterator and self.hooks.iterator_checkpointable(iterator)
                     and self.task.problem.checkpoint_input_position)
        if latest and not (trackable and self.checkpoints.restore_iterator(latest, iterator)):
            step = int(self.checkpoints.optimizer.iterations.numpy())
            iterator = self._make_iterator(seed_offset=step)
        self.checkpoints.track(iterator if trackable else None)
        return iterator

    def _make_iterator(self, seed_offset: int = 0) -> Any:
        config = self.input_config
        if seed_offset and config.seed is not None:
            config = dataclasses.replace(config, seed=config.seed + seed_offset)
        dataset_fn = self.task.input_fn(problem_lib.TRAIN, config, self.batching)
        if self.config.overfit_batches:
            dataset_fn = debugging.overfit_dataset_fn(dataset_fn, self.config.overfit_batches)
        return self.hooks.train_iterator(dataset_fn)

    # ------------------------------------------------------------------ running
    @property
    def model(self) -> Any:
        return self.loop.model

    @property
    def optimizer(self) -> Any:
        return self.loop.optimizer

    @property
    def step(self) -> int:
        return self.loop.step

    @property
    def is_chief(self) -> bool:
        return self.runtime.is_chief

    @property
    def num_replicas(self) -> int:
        return self.runtime.num_replicas

    @property
    def loss_history(self) -> list[tuple[int, float]]:
        return self.loop.loss_history

    def train(self, until_step: int | None = None, evaluate_every: bool = False) -> dict[str, float]:
        """Trains to `until_step` (default train_steps); evaluates on the way if asked."""
        return self.loop.train(until_step, evaluate_every)

    def train_and_evaluate(self) -> dict[str, float]:
        return self.loop.train_and_evaluate()

    def evaluate(self) -> dict[str, float]:
        return self.loop.evaluate()

    def continuous_eval(self, timeout_s: float = 600.0, poll_s: float = 5.0) -> dict[str, float]:
        return self.loop.continuous_eval(timeout_s, poll_s)

    def save(self) -> str | None:
        return self.loop.save()

    def run(self, schedule: str) -> dict[str, float]:
        """Runs a TrainerConfig.schedule: train, train_and_evaluate, evaluate or
        continuous_eval."""
        runs = {"train": self.train, "train_and_evaluate": self.train_and_evaluate,
                "evaluate": self.evaluate, "continuous_eval": self.continuous_eval}
        if schedule not in runs:
            raise ValueError(f"Unknown schedule {schedule!r}: use one of {', '.join(runs)}.")
        return runs[schedule]()
