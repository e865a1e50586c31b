"""gin-config for runtime settings.

What gin configures: the settings objects of the pipeline and the binaries
(`InputConfig` of the input pipeline; `DownloadConfig` retries/timeout of downloads; the
trainer's and decoder's settings as they land). Model hyperparameters stay registered
Python functions returning HParams (override them with --hparams). Every binary
accepts --gin_file and --gin_param and writes what was bound next to its outputs.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Sequence

import gin

OPERATIVE_CONFIG_FILENAME = "operative_config.gin"

# Configurable -> the module that registers it: gin only knows a configurable once its
# module is imported, and the binaries parse their gin settings before importing most
# of the library (e.g. TrainerConfig lives with TensorFlow in t2t.trainer.trainer).
CONFIGURABLE_MODULES = {
    "TrainerConfig": "t2t.trainer.trainer",
    "InputConfig": "t2t.problems.input_pipeline",
    "DownloadConfig": "t2t.problems.download",
}


def _import_configurables(texts: Sequence[str]) -> None:
    joined = "\n".join(texts)
    for name, module in CONFIGURABLE_MODULES.items():
        if re.search(rf"\b{name}\.", joined):
            importlib.import_module(module)


def parse_gin(files: Sequence[str] = (), bindings: Sequence[str] = ()) -> None:
    """Loads gin files and `name.param=value` bindings; errors name the bad binding."""
    texts = list(bindings)
    for path in files:
        if not os.path.exists(path):
            raise FileNotFoundError(f"--gin_file={path!r} does not exist.")
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    _import_configurables(texts)
    try:
        gin.parse_config_files_and_bindings(list(files), list(bindings), finalize_config=False)
    except (ValueError, SyntaxError) as e:
        raise ValueError(
            f"Bad gin configuration ({e}). Bindings look like "
            f"--gin_param='InputConfig.shuffle_buffer_size=2048'."
        ) from e


def save_config(directory: str, filename: str = OPERATIVE_CONFIG_FILENAME) -> str | None:
    """Writes the gin config in effect (what was bound, and used) into `directory`."""
    text = gin.operative_config_str() or gin.config_str()
    if not text.strip():
        return None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, filename)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path
