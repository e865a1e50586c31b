"""gin-config for runtime settings.

What gin configures: the config tree of t2t.config (TaskConfig, DataConfig,
TrainerConfig, RuntimeConfig, InputConfig, DecodeHParams, ExportConfig, TunerConfig:
the same fields the binaries' flags come from; a flag given on the command line wins)
and `DownloadConfig` (retries/timeout of downloads). Model hyperparameters stay
registered Python functions returning HParams (override them with --hparams). Every
binary accepts --gin_file and --gin_param and writes what was bound next to its outputs.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Sequence

import gin
from absl import logging

OPERATIVE_CONFIG_FILENAME = "operative_config.gin"

# Configurable -> the module that registers it: gin only knows a configurable once its
# module is imported, and the binaries parse their gin settings before importing most
# of the library.
CONFIGURABLE_MODULES = {
    **{name: "t2t.config" for name in ("TaskConfig", "DataConfig", "TrainerConfig",
                                       "RuntimeConfig", "InputConfig", "DecodeHParams",
                                       "ExportConfig", "TunerConfig")},
    "DownloadConfig": "t2t.data.generation.download",
}


def _translate_moved(text: str) -> str:
    """Rewrites bindings of settings that moved to another config (see
    t2t.config.MOVED_SETTINGS), with a warning, so older gin files keep working."""
    from t2t.config import MOVED_SETTINGS

    for old, new in MOVED_SETTINGS.items():
        pattern = rf"\b{re.escape(old)}\b"
        if re.search(pattern, text):
            logging.warning("gin: %s is now %s (the binding was applied there).", old, new)
            text = re.sub(pattern, new, text)
    return text


def _import_configurables(texts: Sequence[str]) -> None:
    joined = "\n".join(texts)
    for name, module in CONFIGURABLE_MODULES.items():
        if re.search(rf"\b{name}\.", joined):
            importlib.import_module(module)


def parse_gin(files: Sequence[str] = (), bindings: Sequence[str] = ()) -> None:
    """Loads gin files and `name.param=value` bindings; errors name the bad binding."""
    texts, translated = [], {}
    for path in files:
        if not os.path.exists(path):
            raise FileNotFoundError(f"--gin_file={path!r} does not exist.")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = _translate_moved(text)
        if new != text:  # parsed from its translated text
            translated[path] = new
        texts.append(translated.get(path, text))
    bindings = [_translate_moved(b) for b in bindings]
    _import_configurables([*texts, *bindings])
    try:
        for path in files:
            if path in translated:
                gin.parse_config(translated[path])
            else:
                gin.parse_config_file(path)
        gin.parse_config(bindings)
    except (ValueError, SyntaxError) as e:
        raise ValueError(
            f"Bad gin configuration ({e}). Bindings look like "
            f"--gin_param='InputConfig.shuffle_buffer_size=2048'."
        ) from e


def save_config(directory: str, filename: str = OPERATIVE_CONFIG_FILENAME, *,
                only_if_bound: bool = False) -> str | None:
    """Writes the gin config in effect (what was bound, and used) into `directory`;
    with `only_if_bound`, nothing unless a binding was given."""
    if only_if_bound and not gin.config_str().strip():
        return None
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
