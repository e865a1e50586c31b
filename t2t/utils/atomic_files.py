"""Writing a whole file so that no reader ever sees half of it: a temporary file in the
same folder, then one rename (`os.replace`, atomic on POSIX and Windows)."""

from __future__ import annotations

import os
import shutil
import tempfile


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replaces (or creates) the file `path` by one holding `data`; its folder is made if
    missing, an existing file keeps its permission bits, and on any failure the old file
    is left as it was and no temporary file stays behind."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if os.path.exists(path):
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """`write_bytes` of `text` encoded as UTF-8."""
    write_bytes(path, text.encode("utf-8"))
