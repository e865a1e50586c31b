"""Runs the marked command blocks of docs pages, as a reader would type them.

A page's blocks run in order, in one fresh scratch folder that is also $HOME (so
`~/t2t_data` lands there), with the project's virtual environment first on PATH and the
repository on PYTHONPATH (so `python -m regression` works from the scratch folder). A
`sh`/`bash` block runs under `bash -euo pipefail`, a `python` block as a script. The first
block that fails stops the page: DocsCommandError names `page:line`, the command as run
and the end of its output.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

from docsite.blocks import Block

REPO = pathlib.Path(__file__).resolve().parents[1]
_OUTPUT_TAIL_LINES = 40


class DocsCommandError(AssertionError):
    """A docs command block failed (or succeeded where the page says it fails)."""


@dataclasses.dataclass
class PageRun:
    """What running one page did: blocks run, skipped for the slow set, never run."""

    page: str
    ran: list[Block] = dataclasses.field(default_factory=list)
    left_for_slow: list[Block] = dataclasses.field(default_factory=list)
    never_run: list[Block] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    block_seconds: dict[int, float] = dataclasses.field(default_factory=dict)  # by line


def block_env(scratch: pathlib.Path) -> dict[str, str]:
    """The environment a block runs in: $HOME = the scratch folder, the running
    interpreter's bin folder first on PATH, the repository on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("T2T_")}
    bin_dir = os.path.dirname(sys.executable)
    env.update(HOME=str(scratch), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
               PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    return env


def _command(block: Block, scratch: pathlib.Path) -> list[str]:
    text = block.ci_text()
    if block.language == "python":
        script = scratch / f".docs_block_{block.line}.py"
        script.write_text(text, encoding="utf-8")
        return [sys.executable, str(script)]
    return ["bash", "-euo", "pipefail", "-c", text]


def _tail(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-_OUTPUT_TAIL_LINES:])


def _failure(block: Block, why: str, output: str) -> DocsCommandError:
    return DocsCommandError(f"{block.where}: {why}\n--- the block as CI ran it ---\n"
                            f"{block.ci_text().rstrip()}\n--- the end of its output ---\n"
                            f"{_tail(output)}")


def _run_foreground(block: Block, scratch: pathlib.Path, env: dict[str, str]) -> None:
    try:
        done = subprocess.run(_command(block, scratch), cwd=scratch, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=block.timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        raise _failure(block, f"did not finish in {block.timeout_s} s",
                       (e.output or b"").decode("utf-8", "replace")
                       if isinstance(e.output, bytes) else (e.output or "")) from None
    if block.fails and done.returncode == 0:
        raise _failure(block, "exited 0, but the page shows it failing (marker 'fails')",
                       done.stdout)
    if not block.fails and done.returncode != 0:
        raise _failure(block, f"exited with status {done.returncode}", done.stdout)


def _start_background(block: Block, scratch: pathlib.Path,
                      env: dict[str, str]) -> subprocess.Popen:
    log = scratch / f".docs_block_{block.line}.log"
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(_command(block, scratch), cwd=scratch, env=env,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + block.timeout_s
    while True:
        output = log.read_text(encoding="utf-8", errors="replace")
        if re.search(block.ready, output):
            return process
        if process.poll() is not None:
            raise _failure(block, f"exited with status {process.returncode} before its output "
                                  f"matched ready={block.ready!r}", output)
        if time.monotonic() > deadline:
            _stop(process)
            raise _failure(block, f"output did not match ready={block.ready!r} within "
                                  f"{block.timeout_s} s", output)
        time.sleep(0.2)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


def run_page(blocks: list[Block], *, include_slow: bool,
             scratch: pathlib.Path | None = None) -> PageRun:
    """Runs one page's blocks in order (`slow` ones only with `include_slow`) in `scratch`
    (default: a new temporary folder, removed afterwards). Background blocks are stopped
    when the page ends. Raises DocsCommandError at the first failing block."""
    if not blocks:
        return PageRun(page="")
    result = PageRun(page=blocks[0].page)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="t2t-docs-") as tmp:
        folder = scratch or pathlib.Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        env = block_env(folder)
        background: list[subprocess.Popen] = []
        try:
            for block in blocks:
                if block.mode == "skip":
                    result.never_run.append(block)
                elif block.slow_only and not include_slow:
                    result.left_for_slow.append(block)
                elif block.mode == "background":
                    background.append(_start_background(block, folder, env))
                    result.ran.append(block)
                else:
                    block_started = time.monotonic()
                    _run_foreground(block, folder, env)
                    result.block_seconds[block.line] = time.monotonic() - block_started
                    result.ran.append(block)
        finally:
            for process in background:
                _stop(process)
    result.seconds = time.monotonic() - started
    return result
