"""The docs' table of registered models (reference/models.md), from the registry:

    python -m docsite.model_table                      # print it
    python -m docsite.model_table --write PAGE         # replace PAGE's marked block
"""

from __future__ import annotations

import sys

from t2t import registry
from t2t.hparams.catalog import natural_key
from t2t.utils import readme_tables

BEGIN, END = readme_tables.markers("models")


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split()).replace("|", "/")


def markdown_table() -> str:
    """One row per built-in model: its name, module (research or not) and first docstring
    paragraph."""
    rows = ["| model | module | what it is |", "|---|---|---|"]
    for name in sorted(registry.list_models(), key=natural_key):
        cls = registry.model(name)
        if not readme_tables.is_builtin(cls):
            continue
        module = cls.__module__.removeprefix("t2t.")
        rows.append(f"| `{name}` | `{module}` | {_first_line(cls.__doc__)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """The command line: print the model table, or write it into a page."""
    return readme_tables.run_cli(argv, __doc__.split("\n")[0], markdown_table, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main())
