"""Flags shared by every t2t binary, and their handling before main work starts."""

from __future__ import annotations

import os
import sys

from absl import flags

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
flags.DEFINE_string("data_mirror", None,
                    "Where to fetch data files first: a URL prefix (http://host/path/) or "
                    "a local folder holding the files. Default: $T2T_DATA_MIRROR.")


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


def fail(message: str) -> None:
    """Prints a clear error (no traceback) and exits with status 1."""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)
