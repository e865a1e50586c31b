"""Flags shared by every t2t binary, and their handling before main work starts."""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

from absl import flags

from t2t import config
from t2t.bin import config_flags

# TensorFlow's C++ start-up chatter (CUDA probing, oneDNN notes) hides the binaries'
# own output; a user can still ask for it with TF_CPP_MIN_LOG_LEVEL=0.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS

flags.DEFINE_string("t2t_usr_dir", None,
                    "A package directory (or .py file) of your own problems, models and "
                    "hparams sets to import, so that its registrations are visible.")
flags.DEFINE_bool("registry_help", False, "Print every registered name and exit.")
flags.DEFINE_multi_string("gin_file", [], "gin config files (runtime settings).")
flags.DEFINE_multi_string("gin_param", [], "gin bindings, e.g. 'InputConfig.seed=1'.")
config_flags.define(config.DataConfig, only=("data_mirror",))


def default_data_dir() -> str:
    return os.path.expanduser(os.environ.get("T2T_DATA_DIR", "~/t2t_data"))


class UsageError(Exception):
    """A bad flag value: printed as one message without a traceback."""


def setup() -> bool:
    """Imports the user dir, loads gin, handles --registry_help; False means exit now."""
    from t2t import gin_config, registry, usr_dir

    if FLAGS.t2t_usr_dir:
        usr_dir.import_usr_dir(FLAGS.t2t_usr_dir)
    gin_config.parse_gin(FLAGS.gin_file, FLAGS.gin_param)
    if FLAGS.registry_help:
        print(registry.help_string())
        return False
    return True


def start(argv: list[str]) -> bool:
    """A binary's first step: rejects positional arguments, then `setup()`, a bad
    --gin_param/--gin_file/--t2t_usr_dir failing with its message. False means exit now."""
    if len(argv) > 1:
        fail(f"unexpected arguments {argv[1:]}; flags look like --problem=NAME.")
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

    run = (read_json(os.path.join(output_dir, "run.json")) if output_dir else None) or {}
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
