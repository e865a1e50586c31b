"""The docs' table of registered hparams sets, generated from the registry.

    python -m t2t.hparams.catalog            # print the markdown table
    python -m t2t.hparams.catalog --write docs/reference/models.md   # replace the marked block

One row per module that registers sets (its family), with the module docstring's first
line; a set whose docstring starts with "A t2t addition" is named in its row as such.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

from t2t import registry
from t2t.utils import readme_tables

BEGIN, END = "<!-- hparams_sets:begin -->", "<!-- hparams_sets:end -->"
ADDITION = "A t2t addition"


def natural_key(name: str) -> list[str | int]:
    """Sort key that orders the digits in `name` by value: resnet_18 before resnet_101."""
    # re.split with a group alternates text and digits, so the types line up across names.
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name))]


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n")[0].strip().replace("|", "/")


def families() -> dict[str, list[str]]:
    """Module name -> the built-in hparams sets it registers, each list sorted naturally."""
    found: dict[str, list[str]] = defaultdict(list)
    for name in registry.list_hparams():
        fn = registry.hparams(name)
        if readme_tables.is_builtin(fn):
            found[fn.__module__].append(name)
    return {module: sorted(names, key=natural_key) for module, names in found.items()}


def _summary(module: str, names: list[str]) -> str:
    parts = [_first_line(sys.modules[module].__doc__)]
    for name in names:
        doc = _first_line(registry.hparams(name).__doc__)
        if doc.startswith(ADDITION):
            parts.append(f"`{name}` is a t2t addition{doc[len(ADDITION):]}")
    return " ".join(part for part in parts if part)


def markdown_table() -> str:
    """One row per family of built-in hparams sets: its module, its sets, what they are for."""
    rows = ["| family | hparams sets | what they are for |", "|---|---|---|"]
    found = families()
    for module in sorted(found, key=lambda m: natural_key(m.rsplit(".", 1)[-1])):
        names = found[module]
        sets = ", ".join(f"`{name}`" for name in names)
        rows.append(f"| {module.rsplit('.', 1)[-1]} | {sets} | {_summary(module, names)} |")
    return "\n".join(rows)


def replace_block(text: str, block: str) -> str:
    """`text` with the lines between the hparams_sets markers replaced by `block`."""
    return readme_tables.replace_block(text, block, BEGIN, END)


def main(argv: list[str] | None = None) -> int:
    """The command line: print the hparams table, or write it into a docs page."""
    doc = (__doc__ or "").split("\n")[0]
    return readme_tables.run_cli(argv, doc, markdown_table, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
