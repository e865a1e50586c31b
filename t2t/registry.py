"""Name-keyed registries of problems, models, hyperparameter sets and ranged sets.

Importing this module imports no TensorFlow. The built-in catalogue is discovered
lazily: the first lookup or listing of a kind imports the modules of its package
(`t2t.data` and `t2t.problems`, `t2t.models`, `t2t.hparams`) and the installed plugins (entry point
group `t2t.plugins`). User code registers with the decorators:

    @registry.register_problem            # name: my_problem (snake_case of the class)
    class MyProblem(problem.Problem): ...

    @registry.register_hparams("my_set")  # explicit name
    def my_hparams(): ...

A module can also claim a whole family of problem names that are built on demand
instead of registered one by one (t2t.data.tfds.adapter does so for `tfds_`):

    registry.register_problem_family("tfds_", make_problem, make_class)
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

PLUGIN_ENTRY_POINT_GROUP = "t2t.plugins"
REVERSE_SUFFIX = "_rev"
COPY_SUFFIX = "_copy"  # Tensor2Tensor's: the targets are a copy of the inputs

_FIRST_CAP_RE = re.compile("(.)([A-Z][a-z0-9]+)")
_ALL_CAP_RE = re.compile("([a-z0-9])([A-Z])")


def default_name(class_or_fn: Any) -> str:
    """snake_case of a class or function name: `LSTMSeq2seq` -> `lstm_seq2seq`."""
    name = class_or_fn.__name__
    return _ALL_CAP_RE.sub(r"\1_\2", _FIRST_CAP_RE.sub(r"\1_\2", name)).lower()


class UnknownNameError(KeyError):
    """A name that no registry entry has; the message lists the close matches."""

    def __str__(self) -> str:  # KeyError would quote the message.
        return str(self.args[0])


class BadProblemNameError(UnknownNameError, ValueError):
    """A problem name that cannot name a problem (e.g. reversed twice)."""


class DuplicateNameError(ValueError):
    """Two different definitions registered under one name."""


def close_matches(name: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """Registered names closest to `name` (edit similarity, then shared substrings)."""
    candidates = sorted(set(candidates))
    matches = difflib.get_close_matches(name, candidates, n=n, cutoff=0.6)
    for candidate in candidates:
        if len(matches) >= n:
            break
        shared = name in candidate or (len(candidate) >= 4 and candidate in name)
        if candidate not in matches and shared:
            matches.append(candidate)
    return matches


def _location(obj: Any) -> str:
    try:
        return f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (TypeError, OSError):
        return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"


def _import_package_modules(package_name: str) -> None:
    """Imports every module of the package and of its subpackages (t2t/models/research/),
    in name order; a "_"-prefixed module or subpackage is private and not imported."""
    package = importlib.import_module(package_name)
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module.name.startswith("_"):
            continue
        if module.ispkg:
            _import_package_modules(f"{package_name}.{module.name}")
        else:
            importlib.import_module(f"{package_name}.{module.name}")


class Registry:
    """One name -> object table with lazy discovery of the built-in modules."""

    def __init__(self, kind: str, packages: tuple[str, ...], *, hint: str = ""):
        self.kind = kind
        self._packages = packages
        self._hint = hint
        self._entries: dict[str, Any] = {}
        self._locations: dict[str, str] = {}
        self._discovered = False

    @property
    def plural(self) -> str:
        """`problems`, `models`, `hparams`, `ranged_hparams` (as in the list_* functions)."""
        return self.kind if self.kind.endswith("s") else self.kind + "s"

    def register(self, obj: Any = None, *, name: str | None = None) -> Any:
        """Registers `obj`; usable as `@register`, `@register("name")` or a call."""
        if isinstance(obj, str):
            return self.register(name=obj)
        if obj is None:
            return lambda o: self.register(o, name=name)
        key = name or default_name(obj)
        if not re.fullmatch(r"[a-z0-9_]+", key):
            raise ValueError(
                f"Invalid {self.kind} name {key!r}: use lower-case letters, digits and _."
            )
        location = _location(obj)
        if key in self._entries and self._locations[key] != location:
            raise DuplicateNameError(
                f"{self.kind} {key!r} is already registered.\n"
                f"  existing:  {self._locations[key]}\n"
                f"  duplicate: {location}\n"
                f"Rename one of them (e.g. @register_{self.kind}(\"another_name\"))."
            )
        self._entries[key] = obj
        self._locations[key] = location
        if inspect.isclass(obj):
            obj.registered_name = key  # lets instances report the name they were found by
        return obj

    def discover(self) -> None:
        """Imports the built-in modules of this kind and the installed plugins, once."""
        if self._discovered:
            return
        self._discovered = True
        for package in self._packages:
            _import_package_modules(package)
        load_plugins()

    def get(self, name: str) -> Any:
        """The object registered as `name`; UnknownNameError lists close matches."""
        self.discover()
        if name not in self._entries:
            raise UnknownNameError(self._unknown_message(name))
        return self._entries[name]

    def _unknown_message(self, name: str) -> str:
        matches = close_matches(name, self._entries)
        message = f"Unknown {self.kind} {name!r}."
        if matches:
            message += " Did you mean: " + ", ".join(matches) + "?"
        message += (
            f" See all {len(self._entries)} with --registry_help or "
            f"t2t.registry.list_{self.plural}()."
        )
        if self._hint:
            message += " " + self._hint
        return message

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def location(self, name: str) -> str:
        self.get(name)
        return self._locations[name]

    def __contains__(self, name: str) -> bool:
        self.discover()
        return name in self._entries

    def unregister(self, name: str) -> None:
        """Removes an entry (for tests and interactive sessions)."""
        self._entries.pop(name, None)
        self._locations.pop(name, None)


_USER_CODE_HINT = "Code of your own is loaded with --t2t_usr_dir=PATH."
# The data framework registers the problem combinators ("a+b", "distilled:P") and the
# tfds_ family; the data sets register themselves in t2t.problems' family folders.
_problems = Registry("problem", ("t2t.data", "t2t.problems"), hint=_USER_CODE_HINT)
_models = Registry("model", ("t2t.models",), hint=_USER_CODE_HINT)
_hparams = Registry("hparams", ("t2t.hparams",), hint=_USER_CODE_HINT)
_ranged_hparams = Registry("ranged_hparams", ("t2t.hparams",), hint=_USER_CODE_HINT)
REGISTRIES = {r.kind: r for r in (_problems, _models, _hparams, _ranged_hparams)}

_plugins_loaded = False


def load_plugins() -> list[str]:
    """Loads installed packages' `t2t.plugins` entry points once; returns their names."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    loaded = []
    for entry_point in importlib.metadata.entry_points(group=PLUGIN_ENTRY_POINT_GROUP):
        entry_point.load()
        loaded.append(entry_point.name)
    return loaded


def register_problem(obj: Any = None, name: str | None = None) -> Any:
    """Registers a Problem class (bare decorator, or with a name)."""
    return _problems.register(obj, name=name)


def register_model(obj: Any = None, name: str | None = None) -> Any:
    """Registers a Model class (bare decorator, or with a name)."""
    return _models.register(obj, name=name)


def register_hparams(obj: Any = None, name: str | None = None) -> Any:
    """Registers a function returning an HParams (bare decorator, or with a name)."""
    return _hparams.register(obj, name=name)


def register_ranged_hparams(obj: Any = None, name: str | None = None) -> Any:
    """Registers a function filling a RangedHParams (bare decorator, or with a name)."""
    return _ranged_hparams.register(obj, name=name)


def parse_problem_name(name: str) -> tuple[str, bool]:
    """Splits `name` into (base name, was_reversed); `_rev_rev` is refused."""
    if not name.endswith(REVERSE_SUFFIX) or name in _problems:
        return name, False
    base = name[: -len(REVERSE_SUFFIX)]
    if base.endswith(REVERSE_SUFFIX):
        raise BadProblemNameError(
            f"Problem name {name!r} reverses twice: use {base[: -len(REVERSE_SUFFIX)]!r},"
            f" or {base!r} for the reversed direction."
        )
    return base, True


@dataclasses.dataclass(frozen=True)
class ProblemFamily:
    """Problem names starting with `prefix` that are built on demand (see
    `register_problem_family`)."""

    prefix: str
    make_problem: Callable[[str, bool], Any]
    make_class: Callable[[str], type]


_problem_families: dict[str, ProblemFamily] = {}


def register_problem_family(
    prefix: str,
    make_problem: Callable[[str, bool], Any],
    make_class: Callable[[str], type],
) -> None:
    """Claims the problem names starting with `prefix` that are not registered.

    `problem(name)` and `problem_class(name)` first discover the built-in modules and
    plugins; a name that is then still unregistered and starts with `prefix` is built
    by `make_problem(base_name, was_reversed)` (a Problem instance; `_rev` already
    split off the name) or `make_class(name)` (the Problem class) instead of raising
    UnknownNameError; both raise UnknownNameError themselves for names they cannot
    build. Call it at import of the module that defines the family. The longest
    matching prefix wins; registering a prefix again from the same place replaces it.
    """
    if not re.fullmatch(r"[a-z0-9_]+", prefix):
        raise ValueError(
            f"Invalid problem family prefix {prefix!r}: use lower-case letters, digits and _."
        )
    existing = _problem_families.get(prefix)
    if existing is not None and _location(existing.make_problem) != _location(make_problem):
        raise DuplicateNameError(
            f"problem family {prefix!r} is already registered.\n"
            f"  existing:  {_location(existing.make_problem)}\n"
            f"  duplicate: {_location(make_problem)}"
        )
    _problem_families[prefix] = ProblemFamily(prefix, make_problem, make_class)


def unregister_problem_family(prefix: str) -> None:
    """Removes a problem family (for tests and interactive sessions)."""
    _problem_families.pop(prefix, None)


def _family_of(name: str) -> ProblemFamily | None:
    """The family that builds `name`: none for registered names (after discovery)."""
    if name in _problems:  # runs discovery, which registers the built-in families
        return None
    matching = [f for prefix, f in _problem_families.items() if name.startswith(prefix)]
    return max(matching, key=lambda f: len(f.prefix), default=None)


_problem_combinators: dict[str, ProblemFamily] = {}


def register_problem_combinator(
    separator: str, make_problem: Callable[[str], Any], make_class: Callable[[str], type]
) -> None:
    """Claims the problem names that contain `separator` (e.g. "+": several problems
    trained as one, registered by t2t.data.multi_problem at discovery):
    `make_problem(name)` builds the Problem, `make_class(name)` gives its class."""
    _problem_combinators[separator] = ProblemFamily(separator, make_problem, make_class)


def _combinator_of(name: str) -> ProblemFamily | None:
    if name in _problems:  # runs discovery, which registers the built-in combinators
        return None
    return next((c for sep, c in _problem_combinators.items() if sep in name), None)


def problem(name: str) -> Any:
    """A Problem instance by name; the `_rev` suffix swaps inputs and targets. Names
    joined by "+" are one multi-problem of those tasks (t2t.data.multi_problem)."""
    combinator = _combinator_of(name)
    if combinator is not None:
        return combinator.make_problem(name)
    name, was_copy = _split_copy(name)
    base, was_reversed = parse_problem_name(name)
    if not was_copy:
        base, was_copy = _split_copy(base)  # NAME_copy_rev
    family = _family_of(base)
    if family is not None:  # e.g. any TFDS data set: tfds_<name>[__<config>]
        if was_copy:
            raise BadProblemNameError(f"{COPY_SUFFIX} is not supported for {base!r} (a "
                                      f"problem family); use {base!r}.")
        return family.make_problem(base, was_reversed)
    if was_copy:  # only then: a problem class of t2t's may not take was_copy
        return _problems.get(base)(was_reversed=was_reversed, was_copy=True)
    return _problems.get(base)(was_reversed=was_reversed)


def _split_copy(name: str) -> tuple[str, bool]:
    """(name without Tensor2Tensor's `_copy` suffix, whether it had one); a registered
    name that ends in `_copy` is its own."""
    if name.endswith(COPY_SUFFIX) and name not in _problems:
        base = name[: -len(COPY_SUFFIX)]
        if base.endswith(COPY_SUFFIX):
            raise BadProblemNameError(f"Problem name {name!r} copies twice: use {base!r}.")
        return base, True
    return name, False


def problem_class(name: str) -> type:
    """The registered Problem class (without `_rev` handling)."""
    combinator = _combinator_of(name)
    if combinator is not None:
        return combinator.make_class(name)
    family = _family_of(name)
    if family is not None:
        return family.make_class(name)
    return _problems.get(name)


def model(name: str) -> type:
    """The registered Model class."""
    return _models.get(name)


def hparams(name: str) -> Callable[[], Any]:
    """The registered function that returns the HParams set `name`."""
    return _hparams.get(name)


def ranged_hparams(name: str) -> Callable[[Any], None]:
    """The registered function that fills a RangedHParams."""
    return _ranged_hparams.get(name)


def list_problems() -> list[str]:
    return _problems.names()


def list_models() -> list[str]:
    return _models.names()


def list_hparams() -> list[str]:
    return _hparams.names()


def list_ranged_hparams() -> list[str]:
    return _ranged_hparams.names()


def help_string() -> str:
    """Everything registered, as printed by the binaries' --registry_help."""
    lines = []
    for kind, registry in REGISTRIES.items():
        names = registry.names()
        lines.append(f"{registry.plural} ({len(names)}):")
        lines.extend(f"  {name}" for name in names)
        if kind == "problem":
            lines.append(f"  (append {REVERSE_SUFFIX} to a problem name to swap inputs and targets)")
    return "\n".join(lines)
