"""Vocabulary and model files of the text encoders: reading, atomic writing, and the
error for a file that is missing (with a hint on how to create it).

Pure standard library; imports no TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from t2t.utils import atomic_files

DEFAULT_HINT = "run `t2t-datagen --problem=... --data_dir=...` first"

PathLike = str | os.PathLike[str]


def missing_file_error(path: PathLike, what: str, hint: str | None) -> FileNotFoundError:
    """The error for a vocabulary/model file that is not there; `hint` says how to make it."""
    return FileNotFoundError(
        f"{what} not found: {os.fspath(path)!r}; {hint or DEFAULT_HINT}."
    )


def atomic_write(path: PathLike, data: bytes) -> None:
    """Writes `data` to `path` via a temp file in the same folder and a rename."""
    atomic_files.write_bytes(path, data)


def write_lines(path: PathLike, lines: Iterable[str]) -> None:
    """Writes one UTF-8 line per string (each ended by "\\n"), atomically."""
    atomic_write(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))


def read_lines(path: PathLike, what: str, hint: str | None) -> list[str]:
    """The lines of a UTF-8 file (without line ends; "\\r\\n" ends are accepted).

    Raises FileNotFoundError naming `what` and `hint` when `path` is not a file.
    """
    if not os.path.isfile(path):
        raise missing_file_error(path, what, hint)
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
