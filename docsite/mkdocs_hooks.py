"""MkDocs hook: under each command block that CI shortens, slows or skips, a one-line
note saying so (the marker itself is an HTML comment a reader never sees)."""

from __future__ import annotations

import pathlib
import re
import sys

# MkDocs loads this file by path: the repository root must be importable for `docsite`.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from docsite import blocks  # noqa: E402

_MARKER_LINE = re.compile(r"^\s*<!--\s*ci:.*-->\s*$")


def _note(block: blocks.Block) -> str:
    if block.mode == "skip":
        return f"Not run by CI: {block.reason}."
    parts = []
    if block.slow_only:
        parts.append("Run by the slow test set only")
    if block.substitutions:
        changes = "; ".join(f"`{run or '(nothing)'}` for `{shown}`"
                            for shown, run in block.substitutions)
        parts.append(f"CI runs it shortened: {changes}")
    return ". ".join(parts) + "." if parts else ""


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' hook signature
    """Adds the CI note after each marked block; raises on a bad or missing marker, so
    `mkdocs build` fails where the docs test would."""
    found = blocks.page_blocks(markdown, page.file.src_uri)
    notes = {block.line: _note(block) for block in found}
    lines = markdown.splitlines()
    out: list[str] = []
    closing_at: dict[int, str] = {}
    for block in found:
        if notes[block.line]:
            close = block.line + block.text.count("\n")  # the closing fence (0-based)
            closing_at[close] = notes[block.line]
    for i, line in enumerate(lines):
        out.append(line)
        if i in closing_at:
            out += ["", f"*{closing_at[i]}*", "{: .ci-note }", ""]
    return "\n".join(out) + "\n"
