"""A model's folder on disk, as t2t-serve reads it: the base path, its version folders
(integer names, TF Serving's layout), t2t-exporter's staging folders (temp-VERSION-PID,
never loaded), and paths cut out of what clients see (redact_paths).
"""

from __future__ import annotations

import contextlib
import os
import re

from absl import logging

from t2t.serving.model_config import ServerConfigError


def resolve_base_path(path: str) -> str:
    """The folder holding `path`'s version folders (`path` itself, or RUN/export)."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        raise ServerConfigError(f"model base path {path} does not exist; give the folder that "
                                "t2t-exporter wrote (RUN/export) or the run folder RUN")
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        raise ServerConfigError(f"{path} is one version of a model; give the folder holding the "
                                f"version folders: {os.path.dirname(path)}")
    if not version_folders(path) and os.path.isdir(os.path.join(path, "export")):
        return os.path.join(path, "export")
    return path


# t2t-exporter's staging folder (temp-VERSION-PID): renamed to VERSION once complete.
_STAGING = re.compile(r"temp-\d+(-\d+)?")
# An absolute path in an error message (not a URL: no ':' or '/' just before it).
_ABS_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"/:;,()\[\]{}<>]+/)+([^\s'\"/:;,()\[\]{}<>]*)")


def redact_paths(text: str, folder: str | None = None) -> str:
    """`text` without the server's filesystem paths, for a client: paths inside
    `folder` become relative to it, any other absolute path becomes .../its base name."""
    if folder:
        folder = folder.rstrip(os.sep)
        text = text.replace(folder + os.sep, "").replace(folder, ".")
    return _ABS_PATH.sub(lambda m: ".../" + m[1], text)


def staging_folders(base_path: str) -> list[str]:
    """Names of the export staging folders (temp-VERSION-PID) under `base_path`: exports
    being written, or left by an exporter that was killed. Never loaded."""
    try:
        return sorted(n for n in os.listdir(base_path) if _STAGING.fullmatch(n))
    except OSError:
        return []


def version_folders(base_path: str) -> dict[int, str]:
    """{version: folder} of the integer-named folders holding a saved_model.pb (a staging
    folder, temp-VERSION-PID, is not a version: t2t-exporter renames it when complete)."""
    found = {}
    try:
        names = os.listdir(base_path)
    except OSError:
        return found
    for name in names:
        folder = os.path.join(base_path, name)
        if name.isdigit() and os.path.isfile(os.path.join(folder, "saved_model.pb")):
            found[int(name)] = folder
    return found


def folder_stamp(folder: str) -> tuple[tuple[str, float, int], ...]:
    """(name, mtime, size) of saved_model.pb and the variables files: a version that
    failed to load is tried again when any of them changes (e.g. a copy that finished)."""
    names = ["saved_model.pb"]
    with contextlib.suppress(OSError):
        names += [os.path.join("variables", n)
                  for n in sorted(os.listdir(os.path.join(folder, "variables")))]
    stamp = []
    for name in names:
        with contextlib.suppress(OSError):
            stat = os.stat(os.path.join(folder, name))
            stamp.append((name, stat.st_mtime, stat.st_size))
    return tuple(stamp)


def note_staging(model_name: str, base_path: str, seen: set[str]) -> set[str]:
    """Warns once per stale staging folder (temp-VERSION-PID whose exporter process is
    not running on this host): never loaded, it only takes disk space. `seen`: the stale
    folders warned about before; returns those of now."""
    stale = [n for n in staging_folders(base_path) if not _pid_running(n)]
    for name in stale:
        if name not in seen:
            logging.warning(
                "t2t-serve: model %r: ignoring %s, left by an exporter that was killed (its "
                "process %s is not running; t2t-exporter renames a finished export to its "
                "version number); delete it to free the space.", model_name,
                os.path.join(base_path, name), name.rsplit("-", 1)[-1])
    if len(stale) > 1 and not set(stale) <= seen:
        logging.warning("t2t-serve: model %r: %d unfinished exports (temp-*) in %s; delete "
                        "them.", model_name, len(stale), base_path)
    return set(stale)


def _pid_running(staging_name: str) -> bool:
    """Whether the exporter of temp-VERSION-PID still runs (on this host); True when the
    name has no PID (it cannot be told)."""
    parts = staging_name.split("-")
    if len(parts) < 3:
        return True
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True
    return True
