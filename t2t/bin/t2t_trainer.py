"""t2t-trainer: train (and evaluate) any registered model on any registered problem.

  t2t-trainer --generate_data --problem=algorithmic_reverse_binary40_test \\
      --model=transformer --hparams_set=transformer_tiny --train_steps=2000

Re-running the same command resumes from the last checkpoint in --output_dir.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from absl import app, flags

from t2t.bin import common_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("problem", None, "Registered problem name (see --registry_help).")
flags.DEFINE_string("model", None, "Registered model name, e.g. transformer.")
flags.DEFINE_string("hparams_set", None, "Registered hparams set, e.g. transformer_tiny.")
flags.DEFINE_string("hparams", "", "Overrides, e.g. 'learning_rate_constant=0.5,num_heads=2'.")
flags.DEFINE_string("data_dir", None, "Prepared data (default: $T2T_DATA_DIR or ~/t2t_data).")
flags.DEFINE_string("tmp_dir", None, "Downloads for --generate_data (default: DATA_DIR/tmp).")
flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and results (default: "
                    "~/t2t_train/PROBLEM/MODEL-HPARAMS_SET).")
flags.DEFINE_bool("generate_data", False, "Prepare the problem's data first (skipped if present).")
flags.DEFINE_enum("schedule", "train_and_evaluate",
                  ["train", "train_and_evaluate", "continuous_eval", "evaluate"],
                  "What to run.")
flags.DEFINE_integer("train_steps", 1000, "Total training steps (the run's last step).")
flags.DEFINE_integer("eval_steps", 100, "Dev batches per evaluation; <= 0 for the whole dev set.")
flags.DEFINE_integer("local_eval_frequency", 1000, "Evaluate every this many steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
flags.DEFINE_integer("keep_checkpoint_max", 20, "Checkpoints kept.")
flags.DEFINE_integer("log_every_steps", 100, "Progress line and summaries every this many steps.")
flags.DEFINE_string("warm_start_from", None, "Checkpoint (or dir) to load weights from.")
flags.DEFINE_integer("random_seed", None, "Seed of weights, dropout and data order.")
flags.DEFINE_bool("deterministic", False, "Repeatable run: op determinism, fixed seeds, "
                  "ordered input (slower).")
flags.DEFINE_bool("xla_compile", False, "Compile the forward/backward pass with XLA.")
flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                  "Compute in 16 bits (float16 adds loss scaling).")
flags.DEFINE_integer("worker_gpu", 0, "GPUs to mirror over (-1: all visible).")
flags.DEFINE_integer("cpu_devices", 0, "Mirror over this many logical CPU devices (testing "
                     "multi-replica training without GPUs).")
flags.DEFINE_string("worker_hosts", "", "Multi-worker training without a TF_CONFIG: "
                    "'host:port,host:port' of every worker (this one at --worker_id).")
flags.DEFINE_integer("worker_id", 0, "This worker's index in --worker_hosts.")
flags.DEFINE_integer("worker_replicas", 0, "Number of workers (checked against --worker_hosts).")
flags.DEFINE_enum("all_reduce", "auto", ["auto", "ring", "nccl"],
                  "Multi-worker all-reduce implementation.")
flags.DEFINE_float("collective_timeout", 300.0, "Seconds a multi-worker collective may wait "
                   "for the other workers before the job fails (0: forever).")
flags.DEFINE_integer("ps_replicas", 0, "Parameter servers (with --sync=false and a TF_CONFIG "
                     "that lists them; see t2t-launch --num_ps).")
flags.DEFINE_bool("sync", True, "Synchronous training; --sync=false with ps tasks: "
                  "asynchronous ParameterServerStrategy.")
flags.DEFINE_bool("use_tpu", False, "Train on a Cloud TPU (TPUStrategy).")
flags.DEFINE_string("tpu", None, "TPU name or grpc:// address for --use_tpu ('local' on a TPU VM).")
flags.DEFINE_alias("master", "tpu")
flags.DEFINE_alias("cloud_tpu_name", "tpu")
flags.DEFINE_bool("dry_run", False, "Print the resolved problem, model, hparams and "
                  "strategy, then exit without training.")

_CONFIG_FLAGS = ("train_steps", "eval_steps", "local_eval_frequency", "save_checkpoints_steps",
                 "keep_checkpoint_max", "log_every_steps", "warm_start_from", "random_seed",
                 "deterministic", "xla_compile", "mixed_precision")


def trainer_config():
    """TrainerConfig from gin's defaults, with the flags given on the command line on top."""
    from t2t.trainer.trainer import TrainerConfig

    config = TrainerConfig()
    for name in _CONFIG_FLAGS:
        if FLAGS[name].present or not hasattr(config, name):
            setattr(config, name, FLAGS[name].value)
    return config


def _wait_for_data(problem, data_dir: str, timeout_s: float = 3600.0, poll_s: float = 2.0) -> None:
    """Blocks until the chief has written every split (and vocabulary) of `problem`."""
    from t2t.problems import problem as problem_lib

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


def strategy_config_from_flags():
    from t2t.trainer import strategy as strategy_lib

    return strategy_lib.StrategyConfig(
        worker_gpu=FLAGS.worker_gpu, cpu_devices=FLAGS.cpu_devices,
        worker_hosts=FLAGS.worker_hosts, worker_id=FLAGS.worker_id,
        worker_replicas=FLAGS.worker_replicas, all_reduce=FLAGS.all_reduce,
        collective_timeout_s=FLAGS.collective_timeout, ps_replicas=FLAGS.ps_replicas,
        sync=FLAGS.sync, use_tpu=FLAGS.use_tpu, tpu=FLAGS.tpu,
    )


def default_output_dir() -> str:
    return common_flags.default_run_dir(FLAGS.problem, FLAGS.model, FLAGS.hparams_set)


def _print_dry_run(problem, hparams, strategy, config, output_dir, data_dir) -> None:
    from t2t import registry
    from t2t.trainer import strategy as strategy_lib

    print(f"problem:     {problem.name} ({type(problem).__module__}.{type(problem).__name__})")
    try:
        print(f"  hparams:   {problem.hparams(data_dir).to_dict()}")
    except FileNotFoundError as e:
        print(f"  hparams:   unavailable until the data exists ({e})")
    model_cls = registry.model(FLAGS.model)
    print(f"model:       {FLAGS.model} ({model_cls.__module__}.{model_cls.__name__})")
    print(f"hparams_set: {FLAGS.hparams_set} + {FLAGS.hparams!r}")
    for name in hparams:
        print(f"  {name} = {hparams.get(name)!r}")
    print(f"strategy:    {strategy_lib.describe(strategy)}")
    print(f"trainer:     {dataclasses.asdict(config)}")
    print(f"data_dir:    {data_dir}")
    print(f"output_dir:  {output_dir}")


def main(argv: list[str]) -> None:
    if not common_flags.start(argv):
        return
    missing = [f"--{n}" for n in ("problem", "model", "hparams_set") if not FLAGS[n].value]
    if missing:
        common_flags.fail(f"{', '.join(missing)} required (see --registry_help for the names).")
    from t2t import gin_config, registry
    from t2t.hparams.basic import create_hparams
    from t2t.hparams.hparams import HParamsError
    from t2t.problems import problem as problem_lib
    from t2t.problems.download import DownloadError
    from t2t.problems.generator_utils import MixedShardsError
    from t2t.trainer import run_dir
    from t2t.trainer import strategy as strategy_lib
    from t2t.trainer.trainer import ClusterError, NonFiniteLossError, Trainer
    from t2t.utils.lazy_import import lazy_module

    tf = lazy_module("tensorflow")

    data_dir = os.path.expanduser(FLAGS.data_dir or common_flags.default_data_dir())
    tmp_dir = os.path.expanduser(FLAGS.tmp_dir or os.path.join(data_dir, "tmp"))
    output_dir = os.path.expanduser(FLAGS.output_dir or default_output_dir())
    try:
        # The strategy first: splitting the CPU must happen before TensorFlow starts.
        strategy_config = strategy_config_from_flags()
        if strategy_lib.serve_if_cluster_member(strategy_config):
            return  # a ps or worker task of parameter-server training: served until killed
        strategy = strategy_lib.create_strategy(strategy_config)
        problem = registry.problem(FLAGS.problem)
        registry.model(FLAGS.model)
        hparams = create_hparams(FLAGS.hparams_set, FLAGS.hparams)
        config = trainer_config()
        if FLAGS.dry_run:
            _print_dry_run(problem, hparams, strategy, config, output_dir, data_dir)
            return
        if FLAGS.generate_data and strategy_lib.is_chief(strategy):
            problem.generate_data(data_dir, tmp_dir, mirror=FLAGS.data_mirror)
        elif FLAGS.generate_data:  # one writer per cluster: the others wait for its data
            _wait_for_data(problem, data_dir)
        if not FLAGS.output_dir:
            print(f"No --output_dir given: writing to {output_dir}")
        os.makedirs(output_dir, exist_ok=True)
        trainer = Trainer(
            problem, FLAGS.model, hparams, data_dir, output_dir, config, strategy,
            run_info={"hparams_set": FLAGS.hparams_set, "hparams": FLAGS.hparams},
        )
        if strategy_lib.is_chief(strategy):  # after Trainer accepted the run: a refused one writes nothing
            with open(os.path.join(output_dir, "flags.txt"), "w", encoding="utf-8") as f:
                f.write(FLAGS.flags_into_string())
        print(f"Training {FLAGS.model}/{FLAGS.hparams_set} on {problem.name} with "
              f"{strategy_lib.describe(strategy)}; global batch {hparams.batch_size} x "
              f"{trainer.num_replicas} replica(s); output in {output_dir}", flush=True)
        schedule = FLAGS.schedule
        if schedule == "train":
            trainer.train()
        elif schedule == "train_and_evaluate":
            trainer.train_and_evaluate()
        elif schedule == "evaluate":
            trainer.evaluate()
        else:
            trainer.continuous_eval()
        if trainer.is_chief:
            gin_config.save_config(output_dir)
    except (registry.UnknownNameError, HParamsError, problem_lib.DataMissingError,
            run_dir.IncompatibleRunError, strategy_lib.StrategyError, NonFiniteLossError,
            ClusterError, DownloadError, MixedShardsError, FileNotFoundError) as e:
        common_flags.fail(str(e))
    except tf.errors.DataLossError as e:  # a damaged shard: say which, and how to rewrite it
        common_flags.fail(problem.damaged_data_message(data_dir, e))
    except KeyboardInterrupt:
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    app.run(main)


if __name__ == "__main__":
    run()
