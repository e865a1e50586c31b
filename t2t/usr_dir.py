"""Importing a user's own code (--t2t_usr_dir) so its registrations are visible."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType


def import_usr_dir(usr_dir: str) -> ModuleType:
    """Imports `usr_dir`: a package directory (with __init__.py) or a single .py file.

    The package's own imports decide what it registers, as in Tensor2Tensor: its
    __init__.py imports the modules holding @registry.register_* decorations.
    """
    path = os.path.abspath(os.path.expanduser(usr_dir.rstrip("/")))
    if os.path.isfile(path) and path.endswith(".py"):
        name = "t2t_usr_" + os.path.splitext(os.path.basename(path))[0]
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"--t2t_usr_dir={usr_dir!r}: no such directory or .py file (resolved to {path})."
        )
    if not os.path.exists(os.path.join(path, "__init__.py")):
        raise FileNotFoundError(
            f"--t2t_usr_dir={usr_dir!r} has no __init__.py: make it a package whose "
            f"__init__.py imports your problem/model modules, or point at one .py file."
        )
    parent, name = os.path.split(path)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return importlib.import_module(name)
