"""Helpers for the README tables generated from the registry (t2t.problems.catalog,
t2t.hparams.catalog): which entries are the library's own, and the marked README block
that a table replaces.

It imports nothing from t2t, so that every package can generate a table of its own.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from typing import Any


def is_builtin(obj: Any) -> bool:
    """Whether `obj` (a registered class or function, or an instance of a registered class)
    is the library's own; those registered by a --t2t_usr_dir, a plugin or a test are not."""
    is_definition = inspect.isclass(obj) or inspect.isroutine(obj)
    return (obj.__module__ if is_definition else type(obj).__module__).startswith("t2t.")


def replace_block(text: str, block: str, begin: str, end: str) -> str:
    """`text` with the lines between the `begin` and `end` marker lines replaced by `block`."""
    lines = text.split("\n")
    if lines.count(begin) != 1 or lines.count(end) != 1:
        raise ValueError(f"Expected one {begin!r} line and one {end!r} line.")
    start, stop = lines.index(begin), lines.index(end)
    return "\n".join(lines[: start + 1] + [block] + lines[stop:])


def run_cli(
    argv: list[str] | None,
    description: str,
    make_table: Callable[[], str],
    begin: str,
    end: str,
) -> int:
    """Prints `make_table()`, or with `--write FILE` puts it between FILE's markers."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--write", metavar="README", help="replace the marked block in this file")
    args = parser.parse_args(argv)
    table = make_table()
    if not args.write:
        print(table)
        return 0
    with open(args.write, encoding="utf-8") as f:
        text = f.read()
    try:
        text = replace_block(text, table, begin, end)
    except ValueError as e:
        sys.stderr.write(f"error: {e} ({args.write})\n")
        return 1
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(text)
    return 0
