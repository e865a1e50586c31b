"""The one writer of the README blocks generated from code, and a helper for the
registry's tables (t2t.data.inspection.catalog, t2t.hparams.catalog).

A generated block lies between two marker lines of one form, NAME saying what it holds:

    <!-- NAME:begin -->
    ...the generated text...
    <!-- NAME:end -->

`markers(NAME)` gives the two lines; `replace_block` puts a block between them (each
marker must be a line of its own, there exactly once, begin above end), `write_block`
rewrites a file so (atomically: a reader sees the old file or the new one), and
`run_cli` is the command line of a generator (print the block, or `--write FILE`).
Every generator of the project's README uses them: the problem, hparams-set, T2T flag
and T2T hparam tables, and regression's results block.

It imports nothing from t2t, so that every package can generate a table of its own.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

from t2t.utils import atomic_files

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_BEGIN_LINE = re.compile(r"<!-- ([a-z0-9][a-z0-9_-]*):begin -->")


class MarkerError(ValueError):
    """A README lacks the marker lines of a block, has them twice, or out of order."""


def markers(name: str) -> tuple[str, str]:
    """The begin and end marker lines of the README block `name` ("problems")."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"README block name {name!r}: use lowercase letters, digits, '_' "
                         f"and '-' (e.g. 'problems').")
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def block_name(begin: str, end: str) -> str:
    """The NAME of the marker lines `begin` and `end`; ValueError unless they are
    `markers(NAME)`."""
    match = _BEGIN_LINE.fullmatch(begin)
    if not match or markers(match[1]) != (begin, end):
        raise ValueError(f"README markers {begin!r} and {end!r}: a block's markers are "
                         f"'<!-- NAME:begin -->' and '<!-- NAME:end -->'; build them with "
                         f"readme_tables.markers(NAME).")
    return match[1]


def is_builtin(obj: Any) -> bool:
    """Whether `obj` (a registered class or function, or an instance of a registered class)
    is the library's own; those registered by a --t2t_usr_dir, a plugin or a test are not."""
    is_definition = inspect.isclass(obj) or inspect.isroutine(obj)
    return (obj.__module__ if is_definition else type(obj).__module__).startswith("t2t.")


def replace_block(text: str, block: str, begin: str, end: str) -> str:
    """`text` with the lines between the marker lines `begin` and `end` (`markers(NAME)`)
    replaced by `block` (its leading and trailing newlines dropped, one newline added).

    A marker counts only as a line of its own (surrounding spaces allowed), not inside
    prose. Raises MarkerError when `text` lacks either line, has one twice, or has the
    end line above the begin line.
    """
    name = block_name(begin, end)
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if not begins or not ends or ends[0] < begins[0]:
        raise MarkerError(f"the README has no {name} block: add a line {begin} and, below "
                          f"it, a line {end} where the table goes")
    if len(begins) > 1 or len(ends) > 1:
        raise MarkerError(f"the README has more than one {name} block: keep one line "
                          f"{begin} and, below it, one line {end}")
    head = "".join(lines[: begins[0] + 1])
    if not head.endswith("\n"):
        head += "\n"
    return head + block.strip("\n") + "\n" + "".join(lines[ends[0]:])


def write_block(path: str, block: str, begin: str, end: str) -> bool:
    """Puts `block` between the marker lines `begin` and `end` of the file `path`
    (atomically; an unchanged file is not rewritten). Returns whether the file changed.

    Raises:
      MarkerError: the markers are missing, doubled or out of order (the message names
        `path`); the file is left as it was.
      OSError: `path` cannot be read or written.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        updated = replace_block(text, block, begin, end)
    except MarkerError as e:
        raise MarkerError(f"{path}: {e}") from None
    if updated == text:
        return False
    atomic_files.write_text(path, updated)
    return True


def run_cli(
    argv: list[str] | None,
    description: str,
    make_table: Callable[[], str],
    begin: str,
    end: str,
) -> int:
    """A generator's command line: prints `make_table()`, or with `--write FILE` puts it
    between FILE's marker lines `begin` and `end`. Returns the exit status: 1, with one
    `error:` line on stderr, when FILE cannot be read or written or lacks the markers."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--write", metavar="README", help="replace the marked block in this file")
    args = parser.parse_args(argv)
    table = make_table()
    if not args.write:
        print(table)
        return 0
    try:
        write_block(args.write, table, begin, end)
    except MarkerError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    except OSError as e:
        sys.stderr.write(f"error: cannot update {args.write}: {e.strerror or e}; give "
                         f"--write an existing, writable README file\n")
        return 1
    return 0
