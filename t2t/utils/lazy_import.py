"""A module proxy that imports on first attribute access.

Library modules write `tf = lazy_module("tensorflow")` so that importing them (as the
registry does to list problems) costs no TensorFlow start-up; the real import happens
the first time a TensorFlow symbol is used.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def _load(self) -> types.ModuleType:
        target = self.__dict__["_lazy_target"]
        if target is None:
            target = importlib.import_module(self.__name__)
            self.__dict__["_lazy_target"] = target
        return target

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._load())


def lazy_module(name: str) -> Any:
    """A stand-in for `import name` that defers the import until first use."""
    return _LazyModule(name)
