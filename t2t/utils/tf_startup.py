"""Starting TensorFlow without its start-up chatter, and without hiding real errors.

Importing TensorFlow 2.21 prints, twice (two shared libraries each log before absl's
C++ logging is initialised, so TF_CPP_MIN_LOG_LEVEL does not reach them), a oneDNN
notice, "Could not find cuda drivers" and, on a machine without an NVIDIA driver, an
"E0000 ... failed call to cuInit" line. `import_tensorflow(quiet=True)` imports
TensorFlow and probes its devices with file descriptor 2 sent through a filter process,
which passes every line on as it comes except known start-up chatter: C++ INFO/WARNING
lines (what TF_CPP_MIN_LOG_LEVEL=2 would hide) and a few ERROR lines known to be
harmless (cuInit failing where no NVIDIA device node exists; CUDA plugin factories
registered twice). Any other line, an error of the import included, is shown.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator

_PRE_INIT_NOTICE = re.compile(
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$")
# glog/absl C++ lines: severity letter, MMDD, time, thread id, file:line]
_CPP_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ (\S+:\d+)\] (.*)$")
# TensorFlow <= 2.19's own logger: date time: severity file:line]
_TSL_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+: ([IWEF]) (\S+:\d+)\] (.*)$")
_CPU_FEATURE_CONTINUATION = re.compile(
    r"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$")
_HARMLESS_ERRORS = (
    re.compile(r"Unable to register cu(DNN|FFT|BLAS) factory"),
    re.compile(r"computation placer already registered"),
)
_CUINIT_FAILED = re.compile(r"failed call to cuInit")


def has_nvidia_device_nodes() -> bool:
    """True where an NVIDIA driver exposes devices (/dev/nvidia0, /dev/nvidiactl...)."""
    return bool(glob.glob("/dev/nvidia*"))


def is_chatter(line: str, *, nvidia_present: bool) -> bool:
    """Whether a line of TensorFlow's start-up output is harmless noise.

    nvidia_present: a failed cuInit is an error worth showing only where a driver exists."""
    line = line.rstrip("\n")
    if _PRE_INIT_NOTICE.match(line) or _CPU_FEATURE_CONTINUATION.match(line):
        return True
    match = _CPP_LINE.match(line) or _TSL_LINE.match(line)
    if not match:
        return False
    severity, message = match[1], match[3]
    if severity in "IW":
        return True
    if severity == "E":
        if _CUINIT_FAILED.search(message):
            return not nvidia_present
        return any(p.search(message) for p in _HARMLESS_ERRORS)
    return False  # FATAL


def filter_lines(source, sink, nvidia_present: bool) -> None:
    """Copies the lines of binary stream `source` to `sink`, leaving out chatter."""
    for raw in iter(source.readline, b""):
        if not is_chatter(raw.decode("utf-8", "replace"), nvidia_present=nvidia_present):
            sink.write(raw)
            sink.flush()


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """Sends file descriptor 2 through a filter process for the block: every line that is
    not start-up chatter reaches the real stderr, as it is written. The filter is a
    separate process so that a crash of this one (an abort in TensorFlow's import)
    still gets its last lines out. Without a usable stderr, the block runs unfiltered."""
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    nvidia = "1" if has_nvidia_device_nodes() else "0"
    try:
        # -I -S: an isolated interpreter; this file needs only the standard library.
        filter_process = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), nvidia],
            stdin=subprocess.PIPE, stdout=saved, stderr=saved)
    except OSError:
        os.close(saved)
        yield
        return
    os.dup2(filter_process.stdin.fileno(), 2)
    try:
        yield
    finally:
        if sys.stderr is not None:
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        filter_process.stdin.close()  # the filter sees end of file, writes the rest, exits
        try:
            filter_process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            filter_process.kill()


def import_tensorflow(quiet: bool = True) -> None:
    """Imports TensorFlow and probes its devices (which runs cuInit), filtering the
    start-up chatter when `quiet`. Devices are only listed: logical-device settings
    (a split CPU for MirroredStrategy) can still be made afterwards. Quiet also sets
    TF_CPP_MIN_LOG_LEVEL=2 (unless set) and hides the INFO log lines of TensorFlow's and
    Keras' Python code (internal detail, e.g. SavedModel input renames)."""
    if "tensorflow" in sys.modules:
        return
    if not quiet:
        import tensorflow as tf

        tf.config.list_physical_devices()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with filtered_stderr():
        import tensorflow as tf

        tf.config.list_physical_devices()
    hide_library_info_logs()


class LibraryInfoFilter(logging.Filter):
    """Drops INFO (and DEBUG) records logged from the source files of TensorFlow and
    Keras (e.g. "Sharding callback duration", SavedModel input renames); t2t's own
    records and every warning or error pass."""

    def __init__(self, package_dirs: list[str]):
        super().__init__()
        self.package_dirs = tuple(os.path.join(d, "") for d in package_dirs)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.pathname.startswith(
            self.package_dirs)


def hide_library_info_logs() -> None:
    """Adds a `LibraryInfoFilter` to absl's log handler (the binaries' one handler)."""
    from absl import logging as absl_logging

    dirs = []
    for name in ("tensorflow", "keras"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            # As imported and resolved: a record's pathname is the path as imported, which
            # may run through a symbolic link.
            dirs += {os.path.dirname(os.path.abspath(module.__file__)),
                     os.path.dirname(os.path.realpath(module.__file__))}
    handler = absl_logging.get_absl_handler()
    if not any(isinstance(f, LibraryInfoFilter) for f in handler.filters):
        handler.addFilter(LibraryInfoFilter(dirs))


if __name__ == "__main__":  # the filter process of `filtered_stderr`
    filter_lines(sys.stdin.buffer, sys.stdout.buffer, nvidia_present=sys.argv[1:] == ["1"])
