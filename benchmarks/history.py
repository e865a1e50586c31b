"""The benchmark history: one JSON line per `python -m benchmarks` run.

Each line: timestamp (UTC, ISO 8601), git commit, dirty flag and a hash of the
uncommitted diff (so that two runs of the same code can be recognized), host (CPU model
and count), versions (Python, TensorFlow, Keras, torch, NumPy), the quick flag, the load
average at the start and end of the run, every benchmark's figures (or its error), the
run's key figures (ratios and a few throughputs, as the summary printed them) and each key
figure's unit and better direction ("key_figure_info"). `previous_entry` finds the latest
earlier run with the same quick flag and `compare` sets the key figures side by side, so
that a slowdown between commits shows; benchmarks/compare.py compares two entries against
the noise seen between repeated runs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATH = os.path.join(ROOT, "benchmarks", "history.jsonl")
_DISTRIBUTIONS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"),
    "keras": ("keras", "keras-nightly"),
    "torch": ("torch",),
    "numpy": ("numpy",),
}


def to_jsonable(value: Any) -> Any:
    """`value` as plain JSON types: NumPy scalars and arrays to Python ones, tuples and
    sets to lists, mapping keys to strings, NaN and infinities to None; other objects
    to their repr."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # NumPy scalars and arrays
        return to_jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def git_commit(root: str = ROOT) -> dict[str, Any]:
    """{"commit": short hash or None, "dirty": tracked files changed (None if unknown),
    "diff": first 12 hex digits of the SHA-256 of `git diff HEAD` when dirty (None when
    clean or unknown)}: two entries with the same commit and diff ran the same code."""

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                    timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    dirty = None if status is None else bool(status)
    diff = git("diff", "HEAD", "--binary") if dirty else None
    digest = hashlib.sha256(diff.encode()).hexdigest()[:12] if diff is not None else None
    return {"commit": commit, "dirty": dirty, "diff": digest}


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (os.getloadavg), None where unavailable."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # not on Unix
        return None


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else platform's description."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def host_info() -> dict[str, Any]:
    """CPU model, logical CPUs, CPUs usable by this process, hostname, platform."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    return {"cpu_model": cpu_model(), "cpus": os.cpu_count(), "usable_cpus": usable,
            "hostname": platform.node(), "platform": platform.platform()}


def versions() -> dict[str, str | None]:
    """Installed versions of Python and the frameworks (None: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name, distributions in _DISTRIBUTIONS.items():
        found[name] = None
        for distribution in distributions:
            try:
                found[name] = metadata.version(distribution)
                break
            except metadata.PackageNotFoundError:
                continue
    return found


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def make_entry(quick: bool, results: Mapping[str, Any], key_figures: Mapping[str, float],
               argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """One history line: run metadata, each benchmark's result, the key figures."""
    entry = {"timestamp": utc_now(), "git": git_commit(), "host": host_info(),
             "versions": versions(), "quick": quick, "argv": argv or [],
             **extra, "results": results, "key_figures": key_figures}
    return to_jsonable(entry)


def append(path: str, entry: Mapping[str, Any]) -> None:
    """Appends `entry` as one JSON line to `path` (directories created as needed)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    line = json.dumps(to_jsonable(entry), sort_keys=False, allow_nan=False)
    with open(path, "a") as f:
        f.write(line + "\n")


def read(path: str) -> list[dict[str, Any]]:
    """The entries of a history file, oldest first ([] if there is none); lines that are
    not JSON objects are skipped with a warning on stderr."""
    if not os.path.exists(path):
        return []
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{path}:{number}: not JSON, skipped ({e})", file=sys.stderr)
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def previous_entry(entries: list[dict[str, Any]], quick: bool) -> dict[str, Any] | None:
    """The latest entry with the same quick flag and key figures, or None."""
    for entry in reversed(entries):
        if entry.get("quick") == quick and entry.get("key_figures"):
            return entry
    return None


def describe(entry: Mapping[str, Any]) -> str:
    """'<timestamp>, commit <hash>[+dirty], <CPU model> x <count>' of an entry."""
    git = entry.get("git") or {}
    host = entry.get("host") or {}
    commit = git.get("commit") or "unknown"
    dirty = "+dirty" if git.get("dirty") else ""
    return (f"{entry.get('timestamp', '?')}, commit {commit}{dirty}, "
            f"{host.get('cpu_model', '?')} x {host.get('cpus', '?')}")


def host_key(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    """(CPU model, logical CPUs) of an entry: runs with the same key ran on the same kind
    of machine (hostnames change from one container to the next, so they are not used)."""
    host = entry.get("host") or {}
    return host.get("cpu_model"), host.get("cpus")


def code_key(entry: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(commit, diff hash) of an entry, None when its code is not known exactly (no
    commit, or a dirty tree recorded without a diff hash by an older version)."""
    git = entry.get("git") or {}
    if not git.get("commit") or git.get("dirty") is None:
        return None
    if git["dirty"] and not git.get("diff"):
        return None
    return git["commit"], git.get("diff") if git["dirty"] else None


def compare(now: Mapping[str, float | None],
            before: Mapping[str, float | None]) -> list[tuple[str, float, float, float]]:
    """(name, before, now, now / before - 1) for each figure present in both (in the order
    of `now`; figures that are missing, None or zero before are left out)."""
    rows = []
    for name, value in now.items():
        old = before.get(name)
        if value is None or not old or not isinstance(old, (int, float)):
            continue
        rows.append((name, float(old), float(value), float(value) / float(old) - 1.0))
    return rows
