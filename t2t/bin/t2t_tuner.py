"""t2t-tuner: tune hyperparameters over a ranged hparams set, each trial a training run.

  t2t-tuner --generate_data --problem=algorithmic_reverse_binary40_test \\
      --model=transformer --hparams_set=transformer_tiny \\
      --hparams_range=transformer_tiny_range --objective=accuracy_per_sequence --maximize \\
      --num_trials=6 --parallel_trials=2 --train_steps=300 --output_dir=/tmp/tune

Trial N trains in OUTPUT_DIR/trial_N with the trainer flags given here. Re-running the
same command continues the study (finished trials are kept, never re-run). Tuners on
several hosts share one study through --storage=postgresql://user:password@host/db.
At the end: OUTPUT_DIR/trials.tsv, best_hparams.txt/.json, objective.png, importance.png.
"""

from __future__ import annotations

import os
import subprocess
import sys

from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, flag_help, output_paths
from t2t.utils import optional_deps

FLAGS = flags.FLAGS

# Trainer flags, forwarded to every trial's trainer when given (the trainer's own
# fields of t2t.config, with help about trials).
config_flags.define(config.TaskConfig, help={
    "hparams": "Your overrides for every trial, e.g. 'batch_size=1024'; the values a trial "
               "samples win over them.",
    "output_dir": "The study's directory: trial_N/ runs, study.db, the table and plots "
                  "(default: ~/t2t_train/PROBLEM/MODEL-HPARAMS_SET-HPARAMS_RANGE).",
})
config_flags.define(config.DataConfig, only=("generate_data", "tmp_dir"))
_TRAINER_FIELDS = ("train_steps", "eval_steps", "local_eval_frequency",
                   "save_checkpoints_steps", "keep_checkpoint_max", "log_every_steps",
                   "warm_start_from")
_RUNTIME_FIELDS = ("random_seed", "deterministic", "xla_compile", "mixed_precision",
                   "worker_gpu", "cpu_devices")
config_flags.define(config.TrainerConfig, only=_TRAINER_FIELDS, help={
    "train_steps": "Training steps of each trial.",
    "local_eval_frequency": "Evaluate (and report to the pruner) every this many steps.",
    "keep_checkpoint_max": "Checkpoints kept per trial.",
    "warm_start_from": "Checkpoint (or dir) every trial starts from.",
})
config_flags.define(config.RuntimeConfig, only=_RUNTIME_FIELDS, help={
    "worker_gpu": "GPUs per trial (-1: all visible). With parallel trials, give each its GPU "
                  "via CUDA_VISIBLE_DEVICES per tuner process.",
    "cpu_devices": "Logical CPU devices per trial (testing only).",
})
# Tuning flags.
config_flags.define(config.TunerConfig)
flags.DEFINE_bool("maximize", None, "Maximize --objective (default for all but loss-like "
                  "metrics).")
flags.DEFINE_bool("minimize", None, "Minimize --objective (default for 'loss' and names "
                  "ending in loss, perplexity, error or bits_per_byte).")

_COMMON_FORWARDED = ("data_mirror", "t2t_usr_dir", "gin_file", "gin_param")
_LOSS_LIKE = ("loss", "perplexity", "error", "bits_per_byte")


def direction(objective: str, maximize: bool | None, minimize: bool | None) -> str:
    """'maximize' or 'minimize' from the flags, else from the metric's name."""
    if maximize and minimize:
        common_flags.fail("give --maximize or --minimize, not both.")
    if maximize is not None or minimize is not None:
        return "maximize" if (maximize or minimize is False) else "minimize"
    loss_like = objective.endswith(_LOSS_LIKE) and not objective.startswith("neg_")
    return "minimize" if loss_like else "maximize"


def trainer_args(task: config.TaskConfig, data_dir: str) -> list[str]:
    """The flags every trial's trainer gets (those given here, plus the fixed ones)."""
    args = [f"--problem={task.problem}", f"--model={task.model}",
            f"--hparams_set={task.hparams_set}", f"--data_dir={data_dir}",
            "--schedule=train_and_evaluate"]
    args += config_flags.given(config.TrainerConfig, only=_TRAINER_FIELDS)
    args += config_flags.given(config.RuntimeConfig, only=_RUNTIME_FIELDS)
    for name in _COMMON_FORWARDED:
        flag = FLAGS[name]
        if not flag.present:
            continue
        values = flag.value if isinstance(flag.value, list) else [flag.value]
        args += [f"--{name}={value}" for value in values if value is not None]
    return args


def _run_checked(command: list[str], what: str) -> None:
    """Runs a helper (datagen, the trainer's --dry_run); fails with its error output."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        detail = "\n".join(lines) or result.stderr[-3000:] or result.stdout[-3000:]
        common_flags.fail(f"{what} failed:\n{detail}")


def _study_config(task: config.TaskConfig, data_dir: str) -> config.TunerConfig:
    """The TunerConfig of the flags (gin's bindings under them), resolved."""
    tuner = config_flags.build(config.TunerConfig, hparams_set=task.hparams_set,
                               trainer_args=trainer_args(task, data_dir), hparams=task.hparams)
    tuner.output_dir = os.path.abspath(os.path.expanduser(task.output_dir or (
        common_flags.default_run_dir(task.problem, task.model, task.hparams_set)
        + f"-{tuner.hparams_range}")))
    tuner.direction = direction(tuner.objective, FLAGS.maximize, FLAGS.minimize)
    if not tuner.study_name:
        tuner.study_name = "-".join((task.problem, task.model, task.hparams_set,
                                     tuner.hparams_range, tuner.objective))
    return tuner


def _check_output_paths(tuner: config.TunerConfig, data_dir: str) -> None:
    """What the study writes, checked before any work (t2t.bin.output_paths: one line,
    exit 1): its folder, a --storage=sqlite:///FILE (its folder is made), and with
    --generate_data the data and tmp folders."""
    output_paths.check_dir("output_dir", tuner.output_dir)
    storage = tuner.storage or ""  # the default, OUTPUT_DIR/study.db, is checked above
    sqlite_file = storage[len("sqlite:///"):] if storage.startswith("sqlite:///") else ""
    if sqlite_file not in ("", ":memory:"):
        output_paths.check_file("storage", sqlite_file, make_parents=True)
    data = config_flags.build(config.DataConfig, only=("generate_data", "tmp_dir"))
    if data.generate_data:
        output_paths.check_dir("data_dir", data_dir)
        output_paths.check_dir("tmp_dir", data.tmp_dir or os.path.join(data_dir, "tmp"))


def _check_and_prepare(task: config.TaskConfig, tuner: config.TunerConfig, rhp, data_dir: str
                       ) -> None:
    """--generate_data, then the trainer's --dry_run of a sample trial: the problem,
    model, flags and ranges are checked before any trial starts."""
    from t2t.tuning import search_space

    data = config_flags.build(config.DataConfig, only=("generate_data", "tmp_dir"))
    common = [a for a in tuner.trainer_args if a.split("=", 1)[0] in
              tuple(f"--{name}" for name in _COMMON_FORWARDED)]
    if data.generate_data:
        tmp_dir = os.path.abspath(os.path.expanduser(data.tmp_dir or os.path.join(data_dir, "tmp")))
        _run_checked([sys.executable, "-m", "t2t.bin.t2t_datagen", f"--problem={task.problem}",
                      f"--data_dir={data_dir}", f"--tmp_dir={tmp_dir}", "--noprogress",
                      *common], "--generate_data")
    probe = {r.name: (r.low if r.kind in ("float", "int") else r.values[0])
             for r in rhp.ranges()}
    _run_checked([sys.executable, "-m", "t2t.bin.t2t_trainer", *tuner.trainer_args,
                  f"--output_dir={os.path.join(tuner.output_dir, 'dry_run')}",
                  f"--hparams={search_space.merge_overrides(task.hparams, probe)}",
                  "--dry_run"], "Checking the trial flags (t2t-trainer --dry_run)")


def main(argv: list[str]) -> None:
    if not common_flags.start(argv, tensorflow=False):  # trials run in processes of their own
        return
    # The study and its plots need the "tuning" extra: checked before any trial runs.
    optional_deps.require("optuna", "tuning", "t2t-tuner")
    optional_deps.require("matplotlib", "tuning", "t2t-tuner")
    task = config_flags.build(config.TaskConfig)
    tuning = config_flags.build(config.TunerConfig)
    missing = [f"--{n}" for n, v in (("problem", task.problem), ("model", task.model),
                                     ("hparams_set", task.hparams_set),
                                     ("hparams_range", tuning.hparams_range),
                                     ("objective", tuning.objective)) if not v]
    if missing:
        common_flags.fail(f"{', '.join(missing)} required (see --registry_help for the names; "
                          f"--objective is an eval metric such as accuracy_per_sequence).")
    from t2t import registry
    from t2t.hparams.basic import create_hparams
    from t2t.hparams.hparams import HParamsError
    from t2t.tuning import report, search_space
    from t2t.tuning import study as study_lib

    data_dir = os.path.abspath(os.path.expanduser(task.data_dir or
                                                  common_flags.default_data_dir()))
    try:
        rhp = search_space.load_ranges(tuning.hparams_range)
        hparams = create_hparams(task.hparams_set, task.hparams)
        search_space.check_ranges(rhp, hparams, tuning.hparams_range, task.hparams_set)
        tuner = _study_config(task, data_dir)
        study_lib.check_sampler(tuner, rhp)
    except (registry.UnknownNameError, HParamsError, study_lib.TunerError) as e:
        common_flags.fail(str(e))
    _check_output_paths(tuner, data_dir)
    common_flags.print_locations(data_dir, tuner.output_dir)
    _check_and_prepare(task, tuner, rhp, data_dir)
    try:
        study, completed = study_lib.run_study(tuner, rhp)
    except study_lib.TunerError as e:
        if e.study is not None:  # the study ran: show where it stands
            print(report.write_report(e.study, rhp, tuner.output_dir, task.hparams))
        common_flags.fail(str(e))
    print(report.write_report(study, rhp, tuner.output_dir, task.hparams))
    if not completed:
        print("Stopped before the study finished: re-run the same command to continue it.")
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-tuner")
    flag_help.run(main, __doc__)


if __name__ == "__main__":
    run()
