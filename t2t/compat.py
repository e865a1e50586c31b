"""Tensor2Tensor's import paths, answered by t2t's modules.

Code written for Tensor2Tensor imports `tensor2tensor.data_generators.problem`,
`tensor2tensor.utils.registry`, `tensor2tensor.models.transformer` and so on. While the
real `tensor2tensor` package is not installed, `enable()` (called by `import t2t`)
adds an import hook that answers those names with t2t's modules, as does the
T2T-shaped spelling under t2t itself (`t2t.data_generators.problem`,
`t2t.utils.registry`). `MODULES` is the mapping; a T2T module or name t2t does not
have raises an ImportError that says so and what to use instead.

The hook is a finder at the end of `sys.meta_path`: an installed `tensor2tensor` is
found first and wins, and nothing is imported until a T2T name is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

# T2T module (under tensor2tensor.) -> the t2t modules that answer for it, first first.
MODULES: dict[str, tuple[str, ...]] = {
    "data_generators": ("t2t.problems",),
    "data_generators.all_problems": ("t2t.problems",),
    "data_generators.problem": ("t2t.data.problem",),
    "data_generators.text_problems": ("t2t.data.bases.text_problems",),
    "data_generators.text_encoder": ("t2t.data.encoders.text_encoder",),
    "data_generators.tokenizer": ("t2t.data.encoders.tokenizer",),
    "data_generators.generator_utils": ("t2t.data.generation.generator_utils",),
    "data_generators.image_utils": ("t2t.data.bases.image_utils",),
    "data_generators.algorithmic": ("t2t.problems.algorithmic_tasks.algorithmic",),
    "data_generators.multi_problem": ("t2t.data.multi_problem",),
    "problems": ("t2t.problems",),
    "utils.registry": ("t2t.registry",),
    "utils.metrics": ("t2t.utils.metrics",),
    "utils.hparam": ("t2t.hparams.hparams",),
    "utils.t2t_model": ("t2t.models.t2t_model",),
    "utils.contrib": ("t2t.data.t2t_style",),
    "utils.usr_dir": ("t2t.usr_dir",),
    "layers.modalities": ("t2t.layers.modalities", "t2t.features"),
    "layers.common_hparams": ("t2t.hparams.basic",),
    "layers.common_layers": ("t2t.layers.common",),
    # T2T kept hparams sets beside the model; t2t keeps them in t2t.hparams.
    "models.basic": ("t2t.hparams.basic_models", "t2t.models.basic"),
    "models.transformer": ("t2t.hparams.transformer", "t2t.hparams.speech",
                           "t2t.models.transformer"),
}
# T2T packages that hold modules (their own names resolve lazily, one by one).
PACKAGES = ("", "data_generators", "utils", "layers", "models", "models.research", "bin")
# What to use instead of a T2T module t2t does not have.
INSTEAD = {
    "utils.trainer_lib": "t2t trains with Keras 3 and tf.distribute, not Estimators: run "
                         "t2t-trainer, or t2t.trainer.trainer.Trainer from Python",
    "utils.decoding": "run t2t-decoder, or use t2t.decoding.decoder.Decoder",
    "utils.hparams_lib": "registry.hparams(NAME)() gives a set; .parse('a=1,b=2') overrides it",
    "utils.optimize": "optimizers are chosen by hparams.optimizer (t2t.trainer.optimizers)",
    "utils.learning_rate": "hparams.learning_rate_schedule (t2t.trainer.learning_rate)",
    "bin": "the binaries are console scripts: t2t-trainer, t2t-datagen, t2t-decoder, "
           "t2t-exporter",
    "layers.common_layers": "Tensor2Tensor's common_layers functions are model code "
                            "(tf.layers / variable scopes), out of scope; port the model "
                            "as a T2TModel subclass with body (t2t.layers.common has "
                            "t2t's Keras building blocks)",
    "layers.common_attention": "model code written with tf.layers / variable scopes is out "
                               "of scope; t2t's attention layers are t2t.layers.attention "
                               "(Keras), and a model ports as a T2TModel subclass with body",
}
ALIAS_PREFIXES = ("tensor2tensor", "t2t.data_generators", "t2t.utils.registry",
                  "t2t.utils.hparam", "t2t.utils.t2t_model", "t2t.utils.contrib",
                  "t2t.layers.common_hparams", "t2t.layers.common_layers")


class NotInT2TError(ImportError):
    """A Tensor2Tensor module that t2t does not provide."""


class NameNotInT2TError(AttributeError):
    """A name of a Tensor2Tensor module that t2t does not provide. An AttributeError,
    so hasattr() and getattr(module, name, default) work; `from module import name`
    then raises Python's ImportError, whose "(...)" names t2t's module and the README."""


def _t2t_relative(fullname: str) -> str | None:
    """The T2T-relative name ("data_generators.problem") of an aliased import, else None."""
    if fullname == "tensor2tensor":
        return ""
    if fullname.startswith("tensor2tensor."):
        return fullname[len("tensor2tensor."):]
    if fullname.startswith("t2t.") and fullname.startswith(ALIAS_PREFIXES):
        return fullname[len("t2t."):]
    return None


def _targets(relative: str) -> tuple[str, ...] | None:
    """The t2t modules answering for T2T's `relative`, or None."""
    if relative in MODULES:
        return MODULES[relative]
    parts = relative.split(".")
    if parts[0] == "data_generators" and len(parts) == 2:
        return (f"t2t.problems.{parts[1]}",)
    if parts[0] == "models" and len(parts) >= 2:
        rest = ".".join(parts[1:])  # hparams sets and the model share T2T's module
        return (f"t2t.hparams.{rest}", f"t2t.models.{rest}")
    return None


def _instead(relative: str) -> str:
    for key, advice in INSTEAD.items():
        if relative == key or relative.startswith(key + "."):
            return advice
    return ("see the mapping table in docs/how-to/coming-from-t2t.md for what each "
            "Tensor2Tensor module is in t2t")


class _AliasModule(types.ModuleType):
    """A T2T module name whose attributes are those of t2t modules (`targets`)."""

    def __init__(self, name: str, relative: str, targets: tuple[Any, ...]):
        super().__init__(name)
        self.__dict__["_t2t_relative"] = relative
        self.__dict__["_t2t_targets"] = targets
        # What Python's "cannot import name X from M (...)" shows for a missing name.
        self.__dict__["__file__"] = (
            f"t2t's stand-in for {', '.join(t.__name__ for t in targets)}; what each "
            f"Tensor2Tensor module is in t2t: docs/how-to/coming-from-t2t.md")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        for target in self._t2t_targets:
            if hasattr(target, attr):
                return getattr(target, attr)
        names = ", ".join(t.__name__ for t in self._t2t_targets)
        raise NameNotInT2TError(
            f"Tensor2Tensor's {self._t2t_relative}.{attr} is not in t2t (looked in "
            f"{names}). Instead: {_instead(self._t2t_relative + '.' + attr)}.")

    def __dir__(self) -> list[str]:
        return sorted({n for t in self._t2t_targets for n in dir(t)})


class _AliasPackage(types.ModuleType):
    """A T2T package name (`tensor2tensor.data_generators`): its submodules resolve
    through the hook; with a t2t package behind it, that package's names too."""

    def __init__(self, name: str, relative: str, target: Any = None):
        super().__init__(name)
        self.__path__: list[str] = []
        self.__dict__["_t2t_relative"] = relative
        self.__dict__["_t2t_target"] = target

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        relative = f"{self._t2t_relative}.{attr}".lstrip(".")
        target = self._t2t_target
        if _targets(relative) is None and target is not None and hasattr(target, attr):
            return getattr(target, attr)  # a name of the package itself (problems.available)
        return importlib.import_module(f"{self.__name__}.{attr}")  # a module: through the hook


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, relative: str):
        self.relative = relative

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        relative = self.relative
        targets = _targets(relative)
        if relative in PACKAGES or relative == "data_generators":
            target = importlib.import_module(targets[0]) if targets else None
            return _AliasPackage(spec.name, relative, target)
        if targets is None:
            raise NotInT2TError(f"Tensor2Tensor's module {spec.name} is not in t2t: "
                                f"{_instead(relative)}.")
        modules = []
        for target in targets:
            try:
                modules.append(importlib.import_module(target))
            except ModuleNotFoundError as e:
                if e.name != target:  # the t2t module exists but its own import failed
                    raise
        if not modules:
            raise NotInT2TError(f"Tensor2Tensor's module {spec.name} is not in t2t (no "
                                f"{' or '.join(targets)}): {_instead(relative)}.")
        install_estimator_mode_keys()
        return _AliasModule(spec.name, relative, tuple(modules))

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        relative = _t2t_relative(fullname)
        if relative is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(relative),
            is_package=relative in PACKAGES or relative == "data_generators")


_FINDER = _AliasFinder()


def enable() -> None:
    """Answers `tensor2tensor.*` (when the real package is absent) and the T2T-shaped
    paths under t2t with t2t's modules. Idempotent; `import t2t` calls it."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def disable() -> None:
    """Removes the hook (modules already imported stay in sys.modules)."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


class _ModeKeys:
    """tf.estimator.ModeKeys' values, which are t2t's mode names."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


class _EstimatorStandIn(types.ModuleType):
    """`tf.estimator` for code written against Tensor2Tensor on a TensorFlow without
    Estimators (2.16+): ModeKeys only."""

    ModeKeys = _ModeKeys

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(
            f"tf.estimator.{attr}: TensorFlow {_tf_version()} has no Estimators; t2t "
            f"provides tf.estimator.ModeKeys only (for problems written against "
            f"Tensor2Tensor). Train with t2t-trainer.")


def _tf_version() -> str:
    tf = sys.modules.get("tensorflow")
    return getattr(tf, "__version__", "2.x")


def install_estimator_mode_keys() -> None:
    """Gives `tf.estimator.ModeKeys` (and tf.compat.v1's) to user code written for
    Tensor2Tensor, where this TensorFlow has no tf.estimator: T2T's problems compare
    the mode to ModeKeys.TRAIN / EVAL / PREDICT, whose values t2t passes."""
    tf = importlib.import_module("tensorflow")
    # The module a later `import tensorflow.compat.v1 as tf` gets (tf.compat.v1 is a lazy
    # wrapper that such an import replaces).
    v1 = importlib.import_module("tensorflow.compat.v1")
    stand_in = _EstimatorStandIn("tensorflow.estimator")
    for module in (tf, v1):
        if not hasattr(module, "estimator"):
            module.estimator = stand_in
