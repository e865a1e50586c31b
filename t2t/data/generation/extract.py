"""Safe, restartable extraction of downloaded archives.

Every member of an archive is checked before anything is written: absolute paths,
`..` escapes, links that resolve outside the target folder, and device files or FIFOs
are refused with `UnsafeArchiveError`. A marker file `.<archive>.extracted` in the
target folder records a completed extraction, so a re-run skips it and a run that
crashed half way extracts again.

Pure standard library; imports no TensorFlow.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile

from absl import logging

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_SUFFIXES = (".zip",)
SUPPORTED_SUFFIXES = TAR_SUFFIXES + ZIP_SUFFIXES

_CHUNK = 1 << 20


class UnsafeArchiveError(ValueError):
    """An archive member would write outside the target folder or is not a plain file."""


def _kind(archive_path: str) -> str:
    lower = archive_path.lower()
    if lower.endswith(TAR_SUFFIXES):
        return "tar"
    if lower.endswith(ZIP_SUFFIXES):
        return "zip"
    raise ValueError(
        f"Unknown archive type for {archive_path!r}; supported suffixes are "
        f"{', '.join(SUPPORTED_SUFFIXES)}."
    )


def _marker_path(archive_path: str, target_dir: str) -> str:
    return os.path.join(target_dir, f".{os.path.basename(archive_path)}.extracted")


def _marker_content(archive_path: str) -> dict[str, object]:
    return {
        "archive": os.path.basename(archive_path),
        "size": os.path.getsize(archive_path),
    }


def _already_extracted(archive_path: str, marker: str) -> bool:
    try:
        with open(marker) as f:
            return json.load(f) == _marker_content(archive_path)
    except (OSError, ValueError):
        return False


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


class _Checker:
    """Validates member names and link targets against one target folder."""

    def __init__(self, archive_path: str, target_dir: str):
        self.archive = archive_path
        self.root = os.path.realpath(target_dir)
        self.links: set[str] = set()  # normalized relative paths of link members

    def fail(self, entry: str, why: str) -> None:
        raise UnsafeArchiveError(
            f"Refusing to extract {self.archive}: entry {entry!r} {why}. Nothing was "
            "extracted from it. Delete this archive and fetch it again from the official "
            "source or a trusted mirror (--data_mirror)."
        )

    def dest(self, name: str) -> str:
        """Checks a member name; returns its normalized path relative to the root."""
        if not name or "\x00" in name:
            self.fail(name, "has an empty or invalid name")
        if (
            name.startswith(("/", "\\"))
            or os.path.isabs(name)
            or (len(name) > 1 and name[0].isalpha() and name[1] == ":")
        ):
            self.fail(name, "has an absolute path")
        parts = name.replace("\\", "/").split("/")
        if ".." in parts:
            self.fail(name, "contains a '..' component")
        rel = os.path.normpath(name.replace("\\", "/"))
        full = os.path.join(self.root, rel)
        if not _inside(self.root, os.path.normpath(full)):
            self.fail(name, "escapes the target folder")
        # A member under a link from this archive could be written anywhere.
        parent = os.path.dirname(rel)
        while parent and parent != ".":
            if parent in self.links:
                self.fail(name, f"lies beneath the link {parent!r}")
            parent = os.path.dirname(parent)
        # Links already on disk in the target folder must not lead out of it either.
        if not _inside(self.root, os.path.realpath(full)):
            self.fail(name, "resolves outside the target folder")
        return rel

    def link(self, name: str, rel: str, target: str, *, hard: bool) -> None:
        """Checks a link's target; hard link targets are relative to the archive root."""
        if not target or os.path.isabs(target) or target.startswith(("/", "\\")):
            self.fail(name, f"is a link to the absolute path {target!r}")
        base = self.root if hard else os.path.join(self.root, os.path.dirname(rel))
        resolved = os.path.normpath(os.path.join(base, target))
        if not _inside(self.root, resolved) or not _inside(
            self.root, os.path.realpath(resolved)
        ):
            self.fail(name, f"is a link to {target!r}, outside the target folder")
        self.links.add(rel)


def _check_tar(tar: tarfile.TarFile, checker: _Checker) -> list[tarfile.TarInfo]:
    members = tar.getmembers()
    for m in members:
        rel = checker.dest(m.name)
        if m.isdev() or m.isfifo():
            checker.fail(m.name, "is a device file or FIFO")
        if m.issym() or m.islnk():
            checker.link(m.name, rel, m.linkname, hard=m.islnk())
        elif not (m.isfile() or m.isdir()):
            checker.fail(m.name, f"has an unsupported type {m.type!r}")
    return members


def _check_zip(zf: zipfile.ZipFile, checker: _Checker) -> None:
    for info in zf.infolist():
        rel = checker.dest(info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            target = zf.read(info).decode("utf-8", "replace")
            checker.link(info.filename, rel, target, hard=False)
        elif (
            mode
            and stat.S_IFMT(mode)
            and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
        ):
            checker.fail(info.filename, "is a device file or FIFO")


def extract(archive_path: str, target_dir: str) -> str:
    """Safely extracts .tar, .tar.gz/.tgz, .tar.bz2, .tar.xz, .zip into target_dir.

    Returns target_dir. Skips the work when a marker shows the same archive was already
    fully extracted there.

    Raises:
      ValueError: the archive type is not supported.
      UnsafeArchiveError: a member is unsafe; nothing is extracted.
    """
    kind = _kind(archive_path)
    os.makedirs(target_dir, exist_ok=True)
    marker = _marker_path(archive_path, target_dir)
    if _already_extracted(archive_path, marker):
        logging.info(
            "%s is already extracted in %s; skipping.", archive_path, target_dir
        )
        return target_dir
    if os.path.exists(marker):
        os.remove(marker)
    checker = _Checker(archive_path, target_dir)
    logging.info("Extracting %s into %s", archive_path, target_dir)
    if kind == "tar":
        with tarfile.open(archive_path, "r:*") as tar:
            members = _check_tar(tar, checker)
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            try:
                tar.extractall(target_dir, members=members, **kwargs)
            except tarfile.FilterError as e:
                raise UnsafeArchiveError(
                    f"Refusing to extract {archive_path}: {e}"
                ) from e
    else:
        with zipfile.ZipFile(archive_path) as zf:
            _check_zip(zf, checker)
            zf.extractall(target_dir)
    tmp_marker = marker + ".tmp"
    with open(tmp_marker, "w") as f:
        json.dump(_marker_content(archive_path), f)
    os.replace(tmp_marker, marker)
    return target_dir


def gunzip(gz_path: str, out_path: str) -> str:
    """Decompresses gz_path to out_path, streaming; out_path appears only when complete."""
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    prefix = f".{os.path.basename(out_path)}."
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=prefix, suffix=".tmp")
    try:
        with gzip.open(gz_path, "rb") as fin, os.fdopen(fd, "wb") as fout:
            shutil.copyfileobj(fin, fout, _CHUNK)
        os.replace(tmp, out_path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise
    return out_path
