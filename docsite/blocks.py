"""The command blocks of the documentation and the CI markers that say how they run.

Every fenced block of a docs page whose language is a command language (``sh``,
``bash``, ``python``) carries a marker on the line just above it (blank lines allowed
between), an HTML comment that MkDocs does not show:

    <!-- ci: run -->                 CI runs the block as written
    <!-- ci: run | --train_steps=4000 => --train_steps=20 -->
                                     CI runs it with each `A => B` replaced (shortened);
                                     every A must occur in the block
    <!-- ci: slow | ... -->          only the slow set runs it (same options)
    <!-- ci: background | ready=Serving -->
                                     started and left running while the page's later
                                     blocks run (a server); CI waits until its output
                                     matches the regular expression `ready=`
    <!-- ci: skip: REASON -->        never run; the reason is shown on the page and
                                     counted by the docs test (a GPU, a download)
    <!-- ci: background | slow | ready=Serving -->
                                     a background block of the slow set only (a
                                     server whose model a slow block trains)

Further options: `fails` (the block must exit non-zero: an error the page shows),
`timeout=SECONDS` (default 900). A page's blocks run in order in one scratch folder, so a
later block sees the files an earlier one made (see docsite.runner).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

COMMAND_LANGUAGES = ("sh", "bash", "python")
MODES = ("run", "slow", "background", "skip")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_MARKER = re.compile(r"^\s*<!--\s*ci:\s*(?P<body>.*?)\s*-->\s*$")
DEFAULT_TIMEOUT_S = 900


class MarkerError(ValueError):
    """A docs page has a command block without a CI marker, or a marker that is wrong."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One marked command block of a page.

    Attributes:
      page: the page's path as given (e.g. docs/tutorials/quickstart.md).
      line: the 1-based line of the opening fence.
      language: "sh", "bash" or "python".
      text: the block as the page shows it.
      mode: "run", "slow", "background" or "skip".
      substitutions: (shown, run) pairs CI applies, in order.
      reason: why a "skip" block never runs.
      fails: whether the block must exit non-zero.
      ready: for "background": the regular expression its output must match.
      timeout_s: seconds the block may take.
      slow: for "background": started by the slow set only.
    """

    page: str
    line: int
    language: str
    text: str
    mode: str
    substitutions: tuple[tuple[str, str], ...] = ()
    reason: str = ""
    fails: bool = False
    ready: str = ""
    timeout_s: int = DEFAULT_TIMEOUT_S
    slow: bool = False

    @property
    def quick(self) -> bool:
        """Whether CI's quick run (and `python -m docsite run` without --slow) runs it."""
        return self.mode in ("run", "background") and not self.slow

    @property
    def slow_only(self) -> bool:
        """Whether only the slow set (`--slow`) runs it."""
        return self.mode == "slow" or self.slow

    @property
    def where(self) -> str:
        """`page:line`, for messages."""
        return f"{self.page}:{self.line}"

    @property
    def shortened(self) -> bool:
        """Whether CI runs something other than what the page shows."""
        return bool(self.substitutions)

    def ci_text(self) -> str:
        """The block as CI runs it: the page's text with each substitution applied.

        Raises MarkerError when a substitution's left side is not in the block (the
        marker went stale when the command changed)."""
        text = self.text
        for shown, run in self.substitutions:
            if shown not in text:
                raise MarkerError(f"{self.where}: the CI marker replaces {shown!r}, which the "
                                  f"block does not contain: update the marker to the command")
            text = text.replace(shown, run)
        return text


def parse_marker(body: str, where: str) -> dict:
    """The fields of a marker's body (`run | a => b | fails`) as Block keyword arguments."""
    if body.startswith("skip"):
        reason = body[len("skip"):].lstrip(" :").strip()
        if not reason:
            raise MarkerError(f"{where}: '<!-- ci: skip -->' needs a reason: "
                              f"'<!-- ci: skip: needs 8 GPUs -->'")
        return {"mode": "skip", "reason": reason}
    mode, *options = [part.strip() for part in body.split("|")]
    if mode not in MODES:
        raise MarkerError(f"{where}: unknown CI mode {mode!r} in '<!-- ci: {body} -->': use one "
                          f"of {', '.join(MODES)}")
    fields: dict = {"mode": mode, "substitutions": []}
    for option in options:
        if "=>" in option:
            shown, run = (side.strip() for side in option.split("=>", 1))
            if not shown:
                raise MarkerError(f"{where}: empty left side in {option!r}: write 'SHOWN => RUN'")
            fields["substitutions"].append((shown, run))
        elif option == "fails":
            fields["fails"] = True
        elif option == "slow" and mode == "background":
            fields["slow"] = True
        elif option.startswith("ready="):
            fields["ready"] = option[len("ready="):]
            re.compile(fields["ready"])
        elif option.startswith("timeout="):
            value = option[len("timeout="):]
            if not value.isdigit() or int(value) <= 0:
                raise MarkerError(f"{where}: timeout={value!r}: give whole seconds > 0")
            fields["timeout_s"] = int(value)
        else:
            raise MarkerError(f"{where}: unknown CI option {option!r}: use 'SHOWN => RUN', "
                              f"'fails', 'ready=REGEX', 'timeout=SECONDS' or (background "
                              f"blocks) 'slow'")
    if mode == "background" and not fields.get("ready"):
        raise MarkerError(f"{where}: a background block needs 'ready=REGEX' (what its output "
                          f"prints once it serves)")
    fields["substitutions"] = tuple(fields["substitutions"])
    return fields


def page_blocks(text: str, page: str) -> list[Block]:
    """The command blocks of one page's markdown `text`, each with its marker.

    Raises MarkerError naming `page:line` for a command block without a marker, a marker
    with no block under it, or a marker that does not parse."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: tuple[int, dict] | None = None
    i = 0
    while i < len(lines):
        marker = _MARKER.match(lines[i])
        fence = _FENCE.match(lines[i])
        if marker:
            if pending:
                raise MarkerError(f"{page}:{pending[0]}: a CI marker with no command block "
                                  f"under it")
            pending = (i + 1, parse_marker(marker["body"], f"{page}:{i + 1}"))
        elif fence:
            close = next((j for j in range(i + 1, len(lines))
                          if lines[j].strip().startswith(fence["fence"])
                          and not lines[j].strip().strip(fence["fence"][0])), None)
            if close is None:
                raise MarkerError(f"{page}:{i + 1}: a code block that is never closed")
            language = (fence["info"].strip().split() or [""])[0]
            body = "\n".join(line[len(fence["indent"]):] for line in lines[i + 1:close])
            if language in COMMAND_LANGUAGES:
                if not pending:
                    raise MarkerError(
                        f"{page}:{i + 1}: this {language} block has no CI marker: put "
                        f"'<!-- ci: run -->' (or slow, background, skip: REASON) above it")
                blocks.append(Block(page=page, line=i + 1, language=language,
                                    text=body + "\n", **pending[1]))
            elif pending:
                raise MarkerError(f"{page}:{pending[0]}: a CI marker above a "
                                  f"{language or 'plain'} block: markers go above sh, bash "
                                  f"or python blocks")
            pending = None
            i = close
        elif pending and lines[i].strip():
            raise MarkerError(f"{page}:{pending[0]}: a CI marker with no command block "
                              f"under it")
        i += 1
    if pending:
        raise MarkerError(f"{page}:{pending[0]}: a CI marker with no command block under it")
    return blocks


def docs_pages(docs_dir: str | pathlib.Path = "docs") -> list[pathlib.Path]:
    """Every markdown page under `docs_dir`, sorted."""
    return sorted(pathlib.Path(docs_dir).rglob("*.md"))


def all_blocks(docs_dir: str | pathlib.Path = "docs") -> dict[str, list[Block]]:
    """Page path -> its marked command blocks, for every page under `docs_dir`."""
    return {str(path): page_blocks(path.read_text(encoding="utf-8"), str(path))
            for path in docs_pages(docs_dir)}
