"""t2t-trainer: train (and evaluate) any registered model on any registered problem.

  t2t-trainer --generate_data --problem=algorithmic_reverse_binary40_test \\
      --model=transformer --hparams_set=transformer_tiny --train_steps=2000

Re-running the same command resumes from the last checkpoint in --output_dir. The
flags are the fields of t2t.config's TaskConfig, DataConfig, TrainerConfig and
RuntimeConfig; gin binds the same fields (--gin_param=TrainerConfig.train_steps=500).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, flag_help, output_paths

FLAGS = flags.FLAGS

config_flags.define(config.TaskConfig)
config_flags.define(config.DataConfig, only=("generate_data", "tmp_dir"))
config_flags.define(config.TrainerConfig)
config_flags.define(config.RuntimeConfig)
flags.DEFINE_bool("dry_run", False, "Print the resolved problem, model, hparams and "
                  "strategy, then exit without training.")
flag_help.group("Problem, model and run", "dry_run")
flags.DEFINE_string("use_vocab_from", None, "With --generate_data: encode the text "
                    "problem's data with an imported model's vocabulary (RUN: the run folder "
                    "t2t-import wrote, holding vocab.pretrained.json), as t2t-datagen "
                    "--use_vocab_from does (Tensor2Tensor had no such flag).")
flag_help.group("Data", "use_vocab_from")


def experiment_from_flags() -> config.ExperimentConfig:
    """The config tree: gin's bindings, then the flags given on the command line."""
    return config.ExperimentConfig(
        task=config_flags.build(config.TaskConfig),
        data=config_flags.build(config.DataConfig, only=("generate_data", "tmp_dir", "data_mirror")),
        trainer=config_flags.build(config.TrainerConfig),
        runtime=config_flags.build(config.RuntimeConfig),
        input=config.InputConfig(),
    )


def _wait_for_data(problem, data_dir: str, timeout_s: float = 3600.0, poll_s: float = 2.0) -> None:
    """Blocks until the chief has written every split (and vocabulary) of `problem`."""
    from t2t.data import problem as problem_lib

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            for split in problem.splits:
                problem.data_files(data_dir, split.name)
            problem.hparams(data_dir)
            return
        except (problem_lib.DataMissingError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(poll_s)


def _print_dry_run(problem, hparams, runtime, experiment, output_dir, data_dir) -> None:
    from t2t import registry
    from t2t.trainer import strategy as strategy_lib

    task = experiment.task
    print(f"problem:     {problem.name} ({type(problem).__module__}.{type(problem).__name__})")
    try:
        print(f"  hparams:   {problem.hparams(data_dir).to_dict()}")
    except FileNotFoundError as e:
        print(f"  hparams:   unavailable until the data exists ({e})")
    model_cls = registry.model(task.model)
    print(f"model:       {task.model} ({model_cls.__module__}.{model_cls.__name__})")
    print(f"hparams_set: {task.hparams_set} + {task.hparams!r}")
    for name in hparams:
        print(f"  {name} = {hparams.get(name)!r}")
    print(f"strategy:    {strategy_lib.describe(runtime.strategy)}")
    for section, values in experiment.to_dict().items():  # the whole config tree
        print(f"{section + ':':<12} {values}")
    print(f"data_dir:    {data_dir}")
    print(f"output_dir:  {output_dir}")


def _prepare_data(problem, runtime, experiment, data_dir: str, tmp_dir: str) -> None:
    """--generate_data: the chief writes the data, the others wait for its files."""
    if not experiment.data.generate_data:
        return
    if runtime.is_chief:
        problem.generate_data(data_dir, tmp_dir, mirror=experiment.data.data_mirror)
    else:
        _wait_for_data(problem, data_dir)


def _locations(experiment: config.ExperimentConfig) -> tuple[str, str]:
    """(output_dir, data_dir): the flags, else the run's record, else the defaults. A
    recorded data_dir that is gone is an error unless --generate_data makes it again."""
    task = experiment.task
    output_dir = os.path.expanduser(task.output_dir or common_flags.default_run_dir(
        task.problem, task.model, task.hparams_set))
    data_dir = common_flags.resolve_data_dir(task.data_dir, output_dir,
                                             must_exist=not experiment.data.generate_data)
    return output_dir, data_dir


def train(experiment: config.ExperimentConfig) -> None:
    """Runs the experiment; library errors propagate (main turns them into messages)."""
    from t2t import gin_config, registry
    from t2t.hparams import t2t_names
    from t2t.hparams.basic import create_hparams
    from t2t.trainer import runtime as runtime_lib
    from t2t.trainer import strategy as strategy_lib
    from t2t.trainer import strategy_parameter_servers
    from t2t.trainer.trainer import Trainer

    task = experiment.task
    # GPU memory and the strategy first: both must be set before TensorFlow starts.
    _configure_gpus(experiment.runtime)
    if strategy_parameter_servers.serve_if_cluster_member(experiment.runtime):
        return  # a ps or worker task of parameter-server training: served until killed
    output_dir, data_dir = _locations(experiment)
    tmp_dir = os.path.expanduser(experiment.data.tmp_dir or os.path.join(data_dir, "tmp"))
    _check_output_paths(output_dir, data_dir, tmp_dir, experiment.data.generate_data)
    problem = registry.problem(task.problem)
    if FLAGS.use_vocab_from:  # an imported model's vocabulary for --generate_data
        _use_vocab_from(problem, FLAGS.use_vocab_from, data_dir,
                        experiment.data.generate_data)
    registry.model(task.model)
    hparams = create_hparams(task.hparams_set, task.hparams)
    # Tensor2Tensor's activation_dtype=bfloat16/float16 asks for --mixed_precision.
    experiment = dataclasses.replace(experiment, runtime=dataclasses.replace(
        experiment.runtime, mixed_precision=t2t_names.mixed_precision(
            hparams, experiment.runtime.mixed_precision)))
    # A mesh (hparams mesh_shape/layout) replaces the strategy; it is made with it.
    runtime = runtime_lib.start(experiment.runtime, mesh_shape=hparams.mesh_shape,
                                layout=hparams.layout)
    if FLAGS.dry_run:
        _print_dry_run(problem, hparams, runtime, experiment, output_dir, data_dir)
        return
    if runtime.is_chief:
        common_flags.print_locations(data_dir, output_dir)
    _prepare_data(problem, runtime, experiment, data_dir, tmp_dir)
    os.makedirs(output_dir, exist_ok=True)
    trainer = Trainer(problem, task.model, hparams, data_dir, output_dir, experiment.trainer,
                      runtime, experiment.input,
                      run_info={"hparams_set": task.hparams_set, "hparams": task.hparams,
                                "t2t_usr_dir": common_flags.usr_dir_in_use(),
                                # A run on the default folder follows the default later.
                                "data_dir_given": data_dir != common_flags.default_data_dir()})
    schedule = experiment.trainer.schedule
    trains = schedule in ("train", "train_and_evaluate")
    if runtime.is_chief:  # after Trainer accepted the run: a refused one writes nothing
        # An evaluation keeps the training run's flags.txt: its own go beside them.
        name = "flags.txt" if trains else f"flags_{schedule}.txt"
        with open(os.path.join(output_dir, name), "w", encoding="utf-8") as f:
            f.write(FLAGS.flags_into_string())
    doing = "Training" if trains else f"Evaluating ({schedule}, {experiment.trainer.eval_split} split)"
    if runtime.mesh is not None:  # batch_size is the global batch, split by the mesh
        where = (f"a DTensor mesh {hparams.mesh_shape} ({runtime.mesh.dmesh.device_type()}, "
                 f"layout {hparams.layout or 'all replicated'}); global batch "
                 f"{hparams.batch_size}")
    else:
        where = (f"{strategy_lib.describe(runtime.strategy)}; global batch "
                 f"{hparams.batch_size} x {runtime.num_replicas} replica(s)")
    print(f"{doing} {task.model}/{task.hparams_set} on {problem.name} with {where}; "
          f"output in {output_dir}", flush=True)
    trainer.run(schedule)
    if runtime.is_chief:
        gin_config.save_config(output_dir)


def _use_vocab_from(problem, run_folder: str, data_dir: str, generate_data: bool) -> None:
    """--use_vocab_from: sets the problem's imported vocabulary; one-line failures for a
    problem or folder it cannot apply to, or a data_dir another vocabulary encoded."""
    from t2t.data.bases import text_core
    from t2t.data.encoders import pretrained_vocab

    try:
        text_core.set_use_vocab_from(problem, run_folder)
        if generate_data:
            problem.check_pretrained_vocab_target(data_dir)
    except (ValueError, OSError) as e:
        common_flags.fail(str(e))
    if not generate_data and not pretrained_vocab.has_pretrained_vocab(
            data_dir, problem.pretrained_vocab_prefix):
        common_flags.fail(f"--use_vocab_from={run_folder} sets the vocabulary data is "
                          f"generated with: add --generate_data, or run t2t-datagen "
                          f"--problem={problem.name} --use_vocab_from={run_folder} "
                          f"--data_dir={data_dir} first.")


def _check_output_paths(output_dir: str | None, data_dir: str | None, tmp_dir: str | None,
                        generate_data: bool) -> None:
    """The folders this run writes, checked before any work (t2t.bin.output_paths: one
    line, exit 1): the run's, and with --generate_data the data and tmp folders."""
    output_paths.check_dir("output_dir", output_dir)
    if generate_data:
        output_paths.check_dir("data_dir", data_dir)
        output_paths.check_dir("tmp_dir", tmp_dir)


def _configure_gpus(runtime_config: config.RuntimeConfig) -> None:
    """Applies --gpu_memory_growth/--gpu_memory_limit_mb; says what was done when they
    were given (a CPU-only machine: that they do not apply)."""
    from t2t.trainer import runtime as runtime_lib

    message = runtime_lib.configure_gpus(runtime_config.gpu_memory_growth,
                                         runtime_config.gpu_memory_limit_mb)
    if FLAGS["gpu_memory_growth"].present or FLAGS["gpu_memory_limit_mb"].present:
        print(message, file=sys.stderr, flush=True)


def _check(experiment: config.ExperimentConfig) -> None:
    """Fails with one message for settings that can never work, before any work."""
    from t2t.trainer import runtime as runtime_lib
    from t2t.trainer import trainer as trainer_lib

    try:
        runtime_lib.check(experiment.runtime)
        trainer_lib.check_config(experiment.trainer)
    except ValueError as e:
        common_flags.fail(str(e))


def _from_run_record(experiment: config.ExperimentConfig) -> config.ExperimentConfig:
    """A run in an existing --output_dir (resumed, or evaluated) takes --problem, --model,
    --hparams_set and --hparams that are not given from its run.json (as t2t-decoder
    does): `t2t-trainer --output_dir=RUN --train_steps=N` continues RUN."""
    task = experiment.task
    if not task.output_dir:
        return experiment
    run = common_flags.recorded_run(task.output_dir)
    if not run or task.hparams_set:
        return experiment if not run else dataclasses.replace(experiment, task=dataclasses.replace(
            task, problem=task.problem or run.get("problem"), model=task.model or run.get("model")))
    recorded = {"problem": task.problem or run.get("problem"), "model": task.model or run.get("model"),
                "hparams_set": run.get("hparams_set"),
                "hparams": ",".join(h for h in (run.get("hparams", ""), task.hparams) if h)}
    return dataclasses.replace(experiment, task=dataclasses.replace(task, **recorded))


def main(argv: list[str]) -> None:
    if not FLAGS.registry_help:  # the flags given, before TensorFlow starts
        _check_output_paths(FLAGS.output_dir, FLAGS.data_dir, FLAGS.tmp_dir, FLAGS.generate_data)
    if not common_flags.start(argv):
        return
    experiment = _from_run_record(experiment_from_flags())
    task = experiment.task
    missing = [f"--{n}" for n in ("problem", "model", "hparams_set") if not getattr(task, n)]
    if missing:
        where = (f" ({task.output_dir} holds no run.json naming them: a typo, or not a "
                 f"training run's --output_dir?)" if task.output_dir else "")
        common_flags.fail(f"{', '.join(missing)} required{where} (see --registry_help for "
                          f"the names).")
    from t2t import registry
    from t2t.data import problem as problem_lib
    from t2t.data.generation.download import DownloadError
    from t2t.data.generation.generator_utils import MixedShardsError
    from t2t.hparams.hparams import HParamsError, MissingHParamError
    from t2t.parallel.mesh_layout import MeshLayoutError
    from t2t.trainer import run_dir
    from t2t.trainer import strategy as strategy_lib
    from t2t.trainer.checkpointing import CheckpointWriteError
    from t2t.trainer.loop import ClusterError, NonFiniteLossError
    from t2t.trainer.runtime import DeviceSettingsError
    from t2t.utils.lazy_import import lazy_module

    tf = lazy_module("tensorflow")
    _check(experiment)
    try:
        train(experiment)
    except (registry.UnknownNameError, HParamsError, MissingHParamError, problem_lib.DataMissingError,
            run_dir.IncompatibleRunError, strategy_lib.StrategyError, NonFiniteLossError,
            ClusterError, DownloadError, MixedShardsError, FileNotFoundError,
            DeviceSettingsError, CheckpointWriteError, MeshLayoutError) as e:
        common_flags.fail(str(e))
    except tf.errors.DataLossError as e:  # a damaged shard: say which, and how to rewrite it
        problem = registry.problem(task.problem)
        common_flags.fail(problem.damaged_data_message(_locations(experiment)[1], e))
    except KeyboardInterrupt:
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-trainer")
    flag_help.run(main, __doc__)


if __name__ == "__main__":
    run()
