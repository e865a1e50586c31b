"""Output paths a user gives on the command line, checked before any work is done.

    output_paths.check_file("decode_to_file", FLAGS.decode_to_file)   # SystemExit(1)
    output_paths.check_dir("output_dir", FLAGS.output_dir)
    output_paths.check_given(dirs=("output_dir",))   # only flags given: before TF starts

Each failure is one line on stderr, `error: --FLAG=PATH: why; the fix` (a folder where a
file is wanted, a missing parent folder, a file where a folder is wanted, no permission,
a read-only disk), and exit status 1: nothing has been written yet. Whether a folder
takes files is tried for real (a temporary file made and removed): file modes do not
stop root, a read-only mount does. Remote paths (gs://, s3://, ...) are left to the
filesystem that writes them.

This module imports no other t2t.bin module: t2t-launch and t2t-make-tf-configs use it
without taking the trainer's shared flags.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from collections.abc import Iterable
from typing import NoReturn


def is_remote(path: str) -> bool:
    """Whether `path` is a URL-style remote path (gs://bucket/..., s3://...)."""
    return "://" in path


def _nearest_existing(path: str) -> str:
    """The deepest existing folder (or file) on the way to `path` (absolute)."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def _probe_folder(folder: str) -> OSError | None:
    """None when a file can be created in `folder` (tried for real: root ignores modes)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".t2t-write-check-", dir=folder)
    except OSError as e:
        return e
    os.close(fd)
    os.remove(name)
    return None


def _reason(error: OSError) -> str:
    """What stopped the probe; an existing folder answering ENOENT (/proc) takes no files."""
    if error.errno == errno.ENOENT:
        return "it takes no new files"
    return error.strerror or str(error)


def _folder_problem(head: str, folder: str, target: str) -> str | None:
    """Why no file can be made in `folder` (made with its parents when missing), after
    `head` ("--flag=path"); None when one can. `target`: the folder named to the user."""
    existing = _nearest_existing(folder)
    if not os.path.isdir(existing):
        return (f"{head}: {existing} is a file, not a folder: give another path or move "
                f"the file.")
    error = _probe_folder(existing)
    if error is None:
        return None
    where = target if existing == os.path.abspath(folder) else (
        f"{existing} (where {target} would be made)")
    return (f"{head}: cannot write in the folder {where}: {_reason(error)}: give a path "
            f"in a folder you can write.")


def file_problem(flag: str, path: str, suffix: str = "",
                 make_parents: bool = False) -> str | None:
    """Why the file `path` + `suffix` (`path` given as --flag; `suffix`, e.g. '.inputs',
    when the flag is a prefix) cannot be written, in one line; None when it can. Its
    folder must exist and take files, unless `make_parents` (the binary makes it): then
    the nearest existing folder on the way must take files. An existing file must be
    writable; a folder in its place is an error."""
    if not path or is_remote(path):
        return None
    path = os.path.expanduser(path)
    head = f"--{flag}={path}"
    target = path + suffix
    if target.endswith(("/", os.sep)):
        return (f"{head} ends with '/', so it names a folder: give a file name (e.g. "
                f"{os.path.join(target, 'out.txt')}).")
    if os.path.isdir(target):
        what = f"{head} is" if not suffix else f"{head}: {target} is"
        return (f"{what} a folder, not a file: give a file name (e.g. "
                f"{os.path.join(target, 'out.txt')}) or remove the folder.")
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.lexists(parent) and not make_parents:
        existing = _nearest_existing(parent)
        if not os.path.isdir(existing):
            return (f"{head}: {existing} is a file, not a folder: give another path or "
                    f"move the file.")
        return (f"{head}: its folder {parent} does not exist: create it "
                f"(mkdir -p {parent}) or give a path in an existing folder.")
    problem = _folder_problem(head, parent, parent)
    if problem:
        return problem
    if os.path.lexists(target) and not os.access(target, os.W_OK):
        return (f"{head}: {target} exists and is not writable: make it writable or give "
                f"another path.")
    return None


def dir_problem(flag: str, path: str) -> str | None:
    """Why `path` (given as --flag) cannot be used as an output folder (made with its
    parents when missing), in one line; None when it can."""
    if not path or is_remote(path):
        return None
    path = os.path.expanduser(path)
    head = f"--{flag}={path}"
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"{head} is a file, not a folder: give a folder's path or move the file."
    return _folder_problem(head, path, path)


def fail(message: str) -> NoReturn:
    """Prints `error: message` (no traceback) and exits with status 1 (common_flags.fail's
    twin, without the shared flags that module defines)."""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)


def check_file(flag: str, path: str | None, suffix: str = "",
               make_parents: bool = False) -> None:
    """Exits with a one-line error when `path` + `suffix` cannot be written as a file
    (see file_problem)."""
    problem = file_problem(flag, path or "", suffix, make_parents)
    if problem:
        fail(problem)


def check_dir(flag: str, path: str | None) -> None:
    """Exits with a one-line error when `path` cannot be made or written as a folder."""
    problem = dir_problem(flag, path or "")
    if problem:
        fail(problem)


def check_given(dirs: Iterable[str] = (), files: Iterable[str] = (), flag_values=None) -> None:
    """Checks the output folders `dirs` and files `files` (flag names) that were given on
    the command line, before TensorFlow starts; defaults and gin bindings are left to a
    check of the resolved paths later. `flag_values`: absl's FLAGS (the default)."""
    if flag_values is None:
        from absl import flags

        flag_values = flags.FLAGS
    for check, names in ((check_dir, dirs), (check_file, files)):
        for name in names:
            if flag_values[name].present:
                check(name, flag_values[name].value)
