"""absl flags generated from the config tree (t2t.config), and configs built from them.

    config_flags.define(config.TrainerConfig)           # --train_steps, --eval_steps, ...
    trainer = config_flags.build(config.TrainerConfig)  # gin's values, then the flags given

A flag's name, type, default, choices, aliases and help all come from the field, so a
new setting is one `setting(...)` line in t2t/config.py. A flag given on the command
line wins over gin; an absent one leaves gin's value (or the field's default).
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Iterable
from typing import Any

from absl import flags

FLAGS = flags.FLAGS

_config_class_names: dict[str, str] = {}  # flag name -> its config class's name


def flag_fields(config_cls: type, only: Iterable[str] | None = None,
                exclude: Iterable[str] = ()) -> list[tuple[dataclasses.Field, str]]:
    """[(field, flag name)] of the fields of `config_cls` that have a flag."""
    wanted = None if only is None else set(only)
    skipped = set(exclude)
    chosen = []
    for field in dataclasses.fields(config_cls):
        flag = field.metadata.get("flag", False)
        if flag is False or field.name in skipped or (wanted is not None
                                                      and field.name not in wanted):
            continue
        chosen.append((field, field.name if flag is True else flag))
    if wanted is not None:
        unknown = wanted - {f.name for f, _ in chosen}
        if unknown:
            raise ValueError(f"{config_cls.__name__} has no flag fields {sorted(unknown)}.")
    return chosen


def _base_type(annotation: Any) -> type:
    """int for `int | None`, str for `str`, ..."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kinds[0]
    return annotation


def define(config_cls: type, *, only: Iterable[str] | None = None, exclude: Iterable[str] = (),
           help: dict[str, str] | None = None, flag_values: flags.FlagValues = FLAGS
           ) -> list[str]:
    """Defines one absl flag per flag field of `config_cls`; returns their names.

    only / exclude: field names to define (default: every field with a flag).
    help: per-field replacements of the help text, for a binary whose flag means
    something narrower (t2t-tuner's --train_steps: per trial)."""
    hints = typing.get_type_hints(config_cls)
    module_name = _calling_module()
    names = []
    for field, name in flag_fields(config_cls, only, exclude):
        meta = field.metadata
        text = (help or {}).get(field.name, meta["help"])
        default = _default(field)
        kind = _base_type(hints[field.name])
        # Declared as the calling binary's own flags, so its --help lists them.
        owner = {"module_name": module_name, "flag_values": flag_values}
        if meta.get("choices"):
            flags.DEFINE_enum(name, default, list(meta["choices"]), text, **owner)
        elif kind is bool:
            flags.DEFINE_bool(name, default, text, **owner)
        elif kind is int:
            flags.DEFINE_integer(name, default, text, **owner)
        elif kind is float:
            flags.DEFINE_float(name, default, text, **owner)
        elif kind is str:
            flags.DEFINE_string(name, default, text, **owner)
        else:
            raise TypeError(f"{config_cls.__name__}.{field.name}: no flag type for {kind}.")
        for alias in meta.get("aliases") or ():
            flags.DEFINE_alias(alias, name, **owner)
        _config_class_names[name] = config_cls.__name__
        names.append(name)
    return names


def config_class_name(flag_name: str) -> str | None:
    """The name of the config class ("TrainerConfig") whose field `define` made the flag
    --`flag_name`; None for a flag not made by `define`."""
    return _config_class_names.get(flag_name)


def _calling_module() -> str:
    """The name absl gives the module that called `define` (a script run as __main__
    is known by its path, sys.argv[0])."""
    frame = sys._getframe(2)
    name = frame.f_globals.get("__name__", "")
    return sys.argv[0] if name == "__main__" else name


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def build(config_cls: type, *, only: Iterable[str] | None = None,
          exclude: Iterable[str] = (), flag_values: flags.FlagValues = FLAGS,
          **values: Any) -> Any:
    """An instance of `config_cls`: gin's bindings (else the defaults), then every flag
    of its fields given on the command line, then `values` (computed by the binary)."""
    given = {field.name: flag_values[name].value
             for field, name in flag_fields(config_cls, only, exclude)
             if name in flag_values and flag_values[name].present}
    # Passed to the constructor: gin fills only the other fields (so the operative gin
    # config records what gin supplied, not defaults that a flag replaced).
    return config_cls(**{**given, **values})


def given(config_cls: type, *, only: Iterable[str] | None = None,
          exclude: Iterable[str] = (), flag_values: flags.FlagValues = FLAGS) -> list[str]:
    """The flag arguments (`--name=value`) of `config_cls` given on the command line."""
    args = []
    for _, name in flag_fields(config_cls, only, exclude):
        if name not in flag_values or not flag_values[name].present:
            continue
        value = flag_values[name].value
        if isinstance(value, bool):
            args.append(f"--{name}" if value else f"--no{name}")
        elif value is not None:
            args.append(f"--{name}={value}")
    return args
