"""Optional dependencies (setup.py's extras): imported on use, or one clear error.

    optuna = optional_deps.require("optuna", "tuning", "t2t-tuner")

returns the module, or raises `MissingDependencyError` whose message is one line naming
the extra to install:

    t2t-tuner needs optuna, which is not installed: pip install 't2t[tuning]'

The binaries print it as one `error:` line and exit with status 1 (t2t.bin.flag_help
catches it around every binary's main), instead of ending in a traceback.
"""

from __future__ import annotations

import importlib
import types


class MissingDependencyError(ImportError):
    """An optional dependency is not installed (or does not import); the message says
    which extra installs it."""


def install_hint(extra: str) -> str:
    """The pip command that installs `extra` (quoted for shells that expand brackets)."""
    return f"pip install 't2t[{extra}]'"


def require(module: str, extra: str, feature: str) -> types.ModuleType:
    """The imported `module` (e.g. "optuna", "matplotlib.figure"), which `feature` (what
    needs it, e.g. "t2t-tuner", "--sampler=cmaes") gets from setup.py's extra `extra`.

    Raises:
      MissingDependencyError: `module` (or a package it needs) cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        missing = getattr(e, "name", None)
        if isinstance(e, ModuleNotFoundError) and missing in (module, top):
            why = "which is not installed"
        else:  # installed, but broken or missing a dependency of its own
            why = f"which cannot be imported ({type(e).__name__}: {e})"
        raise MissingDependencyError(
            f"{feature} needs {top}, {why}: {install_hint(extra)}", name=top) from None
