"""The project's documentation as a corpus of real English for tests that train on text
(a language model, a tokenizer), and the page that holds a documented snippet."""

from __future__ import annotations

import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def docs_text() -> str:
    """Every docs page, in path order, joined: a few hundred KB of English and commands."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.rglob("*.md")))


def prose_paragraphs(min_chars: int = 200) -> list[str]:
    """The paragraphs of the docs longer than `min_chars` that are prose (no table, code
    block, heading or marker)."""
    return [p.strip() for p in docs_text().split("\n\n")
            if len(p.strip()) > min_chars and not p.lstrip().startswith(("|", "```", "#", "<!--"))]


def python_blocks(page: str, containing: str) -> list[str]:
    """The ```python blocks of docs/`page` whose code contains `containing`."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if containing in b]
