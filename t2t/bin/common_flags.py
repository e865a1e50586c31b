"""Flags shared by every t2t binary, and their handling before main work starts."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import NoReturn

from absl import flags

from t2t import config
from t2t.bin import config_flags
from t2t.bin.t2t_flag_compat import accept_shared_flags  # noqa: F401  (for the binaries)

FLAGS = flags.FLAGS

flags.DEFINE_string("t2t_usr_dir", None,
                    "A package directory (or .py file) of your own problems, models and "
                    "hparams sets to import, so that its registrations are visible.")
flags.DEFINE_bool("registry_help", False, "Print every registered name and exit.")
flags.DEFINE_multi_string("gin_file", [], "gin config files (runtime settings).")
flags.DEFINE_multi_string("gin_param", [], "gin bindings, e.g. 'InputConfig.seed=1'.")
config_flags.define(config.DataConfig, only=("data_mirror",))
# The flags `setup()` reads: binaries that do not call it leave them out of --help.
SETUP_FLAGS = ("t2t_usr_dir", "registry_help", "gin_file", "gin_param", "data_mirror")


def default_data_dir() -> str:
    """$T2T_DATA_DIR, or ~/t2t_data where it is unset or empty (`T2T_DATA_DIR=` unsets)."""
    return os.path.expanduser(os.environ.get("T2T_DATA_DIR") or "~/t2t_data")


class UsageError(Exception):
    """A bad flag value: printed as one message without a traceback."""


def recorded_run(output_dir: str | None) -> dict:
    """What the training run in `output_dir` recorded (its run.json); {} if none."""
    if not output_dir:
        return {}
    run = read_json(os.path.join(os.path.expanduser(output_dir), "run.json"))
    return run if isinstance(run, dict) else {}


def _output_dir_flag() -> str | None:
    return FLAGS["output_dir"].value if "output_dir" in FLAGS else None


def recorded_path(output_dir: str | None, key: str, must_exist: bool = True) -> str | None:
    """The `key` path (data_dir, t2t_usr_dir) the run in `output_dir` recorded, or None;
    fails naming it when it no longer exists (unless not `must_exist`)."""
    path = recorded_run(output_dir).get(key)
    if must_exist and path and "://" not in path and not os.path.exists(path):
        fail(f"{os.path.join(output_dir, 'run.json')} records {key}={path!r}, which no "
             f"longer exists: give --{key}=DIR (where it is now).")
    return path or None


def usr_dir_in_use() -> str | None:
    """--t2t_usr_dir, else the one the run in --output_dir was trained with (absolute)."""
    from t2t.trainer import run_dir

    path = FLAGS.t2t_usr_dir or recorded_path(_output_dir_flag(), "t2t_usr_dir")
    return run_dir.absolute_path(path) if path else None


def resolve_data_dir(data_dir: str | None, output_dir: str | None,
                     must_exist: bool = True) -> str:
    """--data_dir, else the data_dir the run in `output_dir` was given (recorded in its
    run.json; it must still exist unless not `must_exist`, e.g. to generate it again),
    else the default ($T2T_DATA_DIR or ~/t2t_data, as it is now: a run that used the
    default follows it)."""
    if data_dir:
        return os.path.expanduser(data_dir)
    if recorded_run(output_dir).get("data_dir_given", True):
        recorded = recorded_path(output_dir, "data_dir", must_exist)
        if recorded:
            return recorded
    return default_data_dir()


def print_locations(data_dir: str | None, output_dir: str | None, stream=None) -> None:
    """The first lines of a run: where its data and its output are (absolute), on
    `stream` (default stdout)."""
    from t2t.trainer import run_dir

    stream = stream or sys.stdout
    if data_dir:
        stream.write(f"Data:   {run_dir.absolute_path(data_dir)}\n")
    if output_dir:
        stream.write(f"Output: {run_dir.absolute_path(output_dir)}\n")
    stream.flush()


def setup() -> bool:
    """Imports the user dir (--t2t_usr_dir, else the run's), loads gin, handles
    --registry_help; False means exit now."""
    from t2t import gin_config, registry, usr_dir

    path = usr_dir_in_use()
    if path:
        if not FLAGS.t2t_usr_dir:  # say whose code runs: the run's record chose it
            print(f"Code:   {path} (the t2t_usr_dir in {_output_dir_flag()}/run.json)",
                  file=sys.stderr, flush=True)
        usr_dir.import_usr_dir(path)
    gin_config.parse_gin(FLAGS.gin_file, FLAGS.gin_param)
    if FLAGS.registry_help:
        print(registry.help_string())
        return False
    return True


def import_tensorflow() -> None:
    """Imports TensorFlow; its start-up chatter is filtered unless --verbosity >= 1."""
    from t2t.utils import tf_startup

    # The flag's value, parsed or not (a test may call main() without parsing flags).
    tf_startup.import_tensorflow(quiet=FLAGS["verbosity"].value < 1)


# TensorFlow 2.21 logs this at ERROR severity, once per process (naming the first dtype
# met), the first time it optimizes a graph holding e.g. an int32/int64 Transpose (a
# loaded SavedModel's decoding graph does), even on CPUs with AVX-512: a notice (oneDNN
# falls back to Eigen), not an error.
ONEDNN_NOTICE = re.compile(rb"oneDNN supports DT_\w+ only on platforms with AVX-512")
_notice_settled = False


def settle_onednn_notice() -> None:
    """Has TensorFlow print its once-per-process oneDNN dtype notice now, with file
    descriptor 2 captured; every other captured line is written back (~0.1 s). For
    binaries that run graphs they did not build (t2t-serve printed it at its first
    request): it runs an op, which fixes TensorFlow's devices, so a binary that splits
    the CPU into logical devices (the trainer) must not call it."""
    global _notice_settled
    if _notice_settled:
        return
    _notice_settled = True
    import tempfile

    import tensorflow as tf

    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            transpose = tf.function(tf.transpose, autograph=False)
            transpose(tf.constant([[0, 1]], tf.int64))
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        kept = [line for line in captured.read().splitlines(keepends=True)
                if not ONEDNN_NOTICE.search(line)]
    if kept:
        os.write(2, b"".join(kept))


def start(argv: list[str], *, tensorflow: bool = True) -> bool:
    """A binary's first step: rejects positional arguments, imports TensorFlow (when the
    binary uses it) without its start-up chatter unless --verbosity >= 1, then
    `setup()`, a bad --gin_param/--gin_file/--t2t_usr_dir failing with its message.
    False means exit now."""
    if len(argv) > 1:
        fail(f"unexpected arguments {argv[1:]}; flags look like --problem=NAME.")
    if tensorflow:
        import_tensorflow()
    try:
        return setup()
    except (ValueError, OSError) as e:
        fail(str(e))


def default_run_dir(problem: str, model: str, hparams_set: str) -> str:
    """A training run's default output dir: ~/t2t_train/PROBLEM/MODEL-HPARAMS_SET."""
    return os.path.expanduser(os.path.join("~", "t2t_train", problem, f"{model}-{hparams_set}"))


def read_json(path: str):
    """The JSON value in `path`, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def resolve_run(output_dir: str | None, problem: str | None, model: str | None,
                hparams_set: str | None, hparams_overrides: str):
    """(problem, model, hparams_set, hparams) from the flags' values, else the run's
    records in `output_dir` (run.json, hparams.json); fails naming what is missing."""
    from t2t.hparams.basic import create_hparams
    from t2t.hparams.hparams import HParams

    run = recorded_run(output_dir)
    problem = problem or run.get("problem")
    model = model or run.get("model")
    hparams = None
    if hparams_set:
        hparams = create_hparams(hparams_set, hparams_overrides)
    elif output_dir:
        recorded = read_json(os.path.join(output_dir, "hparams.json"))
        if recorded is not None:
            hparams = HParams(**recorded).parse(hparams_overrides)
            hparams_set = run.get("hparams_set") or "hparams"
    missing = [f"--{name}" for name, value in
               (("problem", problem), ("model", model), ("hparams_set", hparams)) if not value]
    if missing:
        where = (f" ({output_dir} holds no run.json/hparams.json naming them)"
                 if output_dir else "")
        fail(f"{', '.join(missing)} required{where}: give them, or the "
             f"--output_dir of a training run.")
    return problem, model, hparams_set, hparams


def fail(message: str) -> NoReturn:
    """Prints a clear error (no traceback) and exits with status 1."""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)
