"""HParams: a typed bag of plain hyperparameter values with string overrides.

Values are plain data only: int, float, bool, str, None, or lists of those. Overrides
such as `"learning_rate=0.2,num_hidden_layers=2,optimizer=adafactor,layers=[1,2]"` are
checked against the type of the existing value, so a typo or a wrong type fails early
with the key named. A Tensor2Tensor name t2t's sets lack (t2t.hparams.t2t_names) is
accepted at T2T's default value; another value is refused, or kept with one warning,
saying what to use instead.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

from absl import logging

from t2t.hparams import t2t_names
from t2t.hparams.errors import HParamsError
from t2t.registry import close_matches

_SCALAR_TYPES = (bool, int, float, str, type(None))


def _a(type_name: str) -> str:
    """'an int', 'a float': the type name with its article, for messages."""
    return ("an " if type_name[0] in "aeiou" else "a ") + type_name


_warned: set[str] = set()  # the warnings about Tensor2Tensor names given in this process


def _check_t2t_name(name: str, value: Any) -> None:
    """Refuses (HParamsError), or warns once about, a Tensor2Tensor hparam that t2t lacks
    given a value other than T2T's default (t2t.hparams.t2t_names)."""
    found = t2t_names.check_value(name, value)
    if found is None:
        return
    kind, message = found
    if kind == t2t_names.REFUSED:
        raise HParamsError(message)
    if message not in _warned:
        _warned.add(message)
        logging.warning("%s", message)


def _t2t_hint(name: str) -> str:
    """" Tensor2Tensor's hparam NAME is not in t2t: ..." for such a name, else ""."""
    note = t2t_names.note(name)
    return f" {note}" if note else ""


class MissingHParamError(AttributeError):
    """Reading an hparam the set does not define; `hparam_name` names it. An
    AttributeError (getattr and hasattr keep working); the binaries report it like an
    HParamsError."""

    def __init__(self, message: str, hparam_name: str | None = None):
        # Keras re-raises errors of a layer's call as type(e)(message): one argument.
        super().__init__(message)
        self.hparam_name = hparam_name


def _check_plain(name: str, value: Any) -> None:
    if isinstance(value, (list, tuple)):
        for item in value:
            if not isinstance(item, _SCALAR_TYPES):
                raise HParamsError(
                    f"hparam {name!r}: list items must be int/float/bool/str, got "
                    f"{type(item).__name__} ({item!r})."
                )
        return
    if not isinstance(value, _SCALAR_TYPES):
        raise HParamsError(
            f"hparam {name!r} must be a plain value (int, float, bool, str, None or a list "
            f"of them), got {type(value).__name__}. Store a name and look it up instead."
        )


def split_top_level(text: str) -> list[str]:
    """An override string split on the commas outside [...] brackets: "a=1,b=[2,3]" ->
    ["a=1", "b=[2,3]"]; HParamsError for unbalanced brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HParamsError(f"Unbalanced ']' in hparams string {text!r}.")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HParamsError(f"Unbalanced '[' in hparams string {text!r}.")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _infer_scalar(text: str) -> Any:
    """Type of an override for a key whose current value is None or unknown."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return _unquote(text)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _cast(name: str, text: str, like: Any) -> Any:
    """Parses `text` into the type of `like` (the current value of hparam `name`)."""
    if like is None:
        return _infer_scalar(text)
    kind = type(like).__name__
    try:
        if isinstance(like, bool):
            lowered = text.lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, str):
            return _unquote(text)
    except ValueError:
        pass
    raise HParamsError(
        f"hparam {name!r} is {_a(kind)} (current value {like!r}); cannot set it to {text!r}."
    )


def _cast_value(name: str, value: Any, like: Any) -> Any:
    """Type-checks a Python value against the current value of hparam `name`."""
    _check_plain(name, value)
    if like is None or value is None:
        return value
    if isinstance(like, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            raise HParamsError(f"hparam {name!r} is a list; got {value!r}.")
        return list(value)
    if isinstance(like, bool) != isinstance(value, bool):
        raise HParamsError(
            f"hparam {name!r} is {_a(type(like).__name__)} (current value {like!r}); got "
            f"{value!r}."
        )
    if isinstance(like, float) and isinstance(value, int):
        return float(value)
    if isinstance(like, int) and isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise HParamsError(f"hparam {name!r} is an int; got the float {value!r}.")
    if type(like) is not type(value) and not (isinstance(like, str) and isinstance(value, str)):
        raise HParamsError(
            f"hparam {name!r} is {_a(type(like).__name__)} (current value {like!r}); got "
            f"{type(value).__name__} {value!r}."
        )
    return value


def _parse_t2t_value(name: str, text: str) -> Any:
    """The override `text` of a Tensor2Tensor name t2t lacks, typed like T2T's default,
    after `_check_t2t_name`."""
    like = t2t_names.T2T_HPARAMS[name].t2t_default
    value = _cast(name, text, like) if isinstance(like, _SCALAR_TYPES) else _infer_scalar(text)
    _check_t2t_name(name, value)
    _check_plain(name, value)
    return value


_OVERRIDE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$", re.S)


class HParams:
    """Hyperparameters with attribute access: `hp.hidden_size`, `hp.parse("a=1")`."""

    def __init__(self, **values: Any):
        object.__setattr__(self, "_values", {})
        for name, value in values.items():
            self.add_hparam(name, value)

    def add_hparam(self, name: str, value: Any) -> None:
        """Adds a new hyperparameter; an existing name is an error."""
        if name in self._values:
            raise HParamsError(f"hparam {name!r} already exists; use set_hparam to change it.")
        if name.startswith("_") or hasattr(type(self), name):
            raise HParamsError(f"hparam name {name!r} is reserved.")
        _check_t2t_name(name, value)
        _check_plain(name, value)
        self._values[name] = list(value) if isinstance(value, tuple) else value

    def set_hparam(self, name: str, value: Any) -> None:
        """Sets an existing hyperparameter, checking the value's type. A Tensor2Tensor
        name t2t lacks is added (see t2t.hparams.t2t_names: refused or warned about unless
        at T2T's default)."""
        if t2t_names.note(name):
            _check_t2t_name(name, value)
            if name not in self._values:
                self.add_hparam(name, value)
                return
        self._require(name)
        self._values[name] = _cast_value(name, value, self._values[name])

    def del_hparam(self, name: str) -> None:
        self._values.pop(name, None)

    def _require(self, name: str) -> None:
        if name not in self._values:
            matches = close_matches(name, self._values)
            hint = f" Did you mean: {', '.join(matches)}?" if matches else ""
            raise HParamsError(
                f"Unknown hparam {name!r}.{hint} Known hparams are listed by "
                f"`t2t-trainer --dry_run`; add new ones in your hparams set with add_hparam."
            )

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("__"):  # copy, pickle and friends probe for dunder methods
            raise AttributeError(name)
        matches = close_matches(name, values)
        hint = f" Did you mean: {', '.join(matches)}?" if matches else ""
        raise MissingHParamError(
            f"HParams has no hparam {name!r}.{hint} Use an hparams set that defines it (the "
            f"model's base set), or add it in your set with add_hparam.{_t2t_hint(name)}",
            name)

    def __setattr__(self, name: str, value: Any) -> None:
        # `hp.x = v` on an existing key keeps the type check; a new key is added.
        if name in self._values:
            self.set_hparam(name, value)
        else:
            self.add_hparam(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._values))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HParams) and self._values == other._values

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def values(self) -> dict[str, Any]:
        """A copy of all values as a dict."""
        return copy.deepcopy(self._values)

    def copy(self) -> HParams:
        return HParams(**self.values())

    def override_from_dict(self, values: dict[str, Any]) -> HParams:
        """Sets every key of `values` (each must exist); returns self."""
        for name, value in values.items():
            self.set_hparam(name, value)
        return self

    def parse(self, overrides: str) -> HParams:
        """Applies `"a=1,b=0.5,c=name,d=[1,2]"`; returns self. Errors name the key."""
        if not overrides or not overrides.strip():
            return self
        parsed = {}
        for part in split_top_level(overrides):
            match = _OVERRIDE_RE.match(part)
            if not match:
                raise HParamsError(
                    f"Malformed hparams override {part!r} in {overrides!r}: expected "
                    f"name=value pairs separated by commas, e.g. 'learning_rate=0.1,"
                    f"num_hidden_layers=2'."
                )
            name, text = match.groups()
            if t2t_names.note(name):  # a Tensor2Tensor name t2t lacks
                parsed[name] = _parse_t2t_value(name, text)
                continue
            self._require(name)
            parsed[name] = self._parse_value(name, text)
        self._values.update(parsed)
        return self

    def _parse_value(self, name: str, text: str) -> Any:
        current = self._values[name]
        if isinstance(current, list) or (text.startswith("[") and text.endswith("]")):
            if not (text.startswith("[") and text.endswith("]")):
                raise HParamsError(
                    f"hparam {name!r} is a list (current value {current!r}); write it as "
                    f"[a,b,...], got {text!r}."
                )
            if current is not None and not isinstance(current, list):
                raise HParamsError(
                    f"hparam {name!r} is {_a(type(current).__name__)}, not a list; got {text!r}."
                )
            items = split_top_level(text[1:-1])
            like = current[0] if current else None
            return [_cast(name, item, like) for item in items]
        return _cast(name, text, current)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self._values, sort_keys=True, **kwargs)

    @classmethod
    def from_json(cls, text: str) -> HParams:
        return cls(**json.loads(text))

    def diff(self, other: HParams) -> dict[str, tuple[Any, Any]]:
        """{name: (self value, other value)} for every name whose values differ."""
        names = set(self._values) | set(other._values)
        return {
            n: (self._values.get(n), other._values.get(n))
            for n in sorted(names)
            if self._values.get(n) != other._values.get(n)
        }

    def __repr__(self) -> str:
        return f"HParams({self.to_json()})"
