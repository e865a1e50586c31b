"""Offline stand-ins for the download servers the problem tests need.

A folder of tiny files is served over HTTP on 127.0.0.1 (a URL-prefix mirror), tiny
tar archives are written in the real layouts, and resources are pinned to the tiny
files' hashes, so the fetch / verify / extract path under test is the one real data
takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import http.server
import importlib.util
import io
import os
import tarfile
import threading
from collections.abc import Iterable, Iterator

import pytest

from t2t.data.generation import download
from t2t.data.generation.download import ChecksumError, Resource


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder without logging, recording each requested path."""

    requested: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.requested.append(self.path)
        super().do_GET()


@contextlib.contextmanager
def serve_folder(
    folder: str, requested: list[str] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """Serves `folder` over HTTP; yields (URL prefix ending in "/", requested paths).

    The requested paths are appended to `requested` when given (a fresh list otherwise).
    """
    requested = [] if requested is None else requested
    handler = type("Handler", (_QuietHandler,), {"requested": requested})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=folder)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def tar_bytes(members: dict[str, bytes], *, gz: bool = True, folders: Iterable[str] = ()) -> bytes:
    """A tar (gzipped when `gz`) of `members` (name -> data), `folders` added first as
    directory entries."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as tar:
        for name in folders:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_tar(path: str, members: dict[str, bytes], folders: Iterable[str] = ()) -> str:
    """Writes `tar_bytes(members)` at `path`, gzipped unless it ends in .tar. Returns `path`."""
    with open(path, "wb") as f:
        f.write(tar_bytes(members, gz=not path.endswith(".tar"), folders=folders))
    return path


def write_pinned(folder: str, name: str, data: bytes, url: str) -> Resource:
    """Writes `data` as `folder`/`name`; a Resource for `url` pinned to it, named `name`."""
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
    return Resource(
        url, sha256=hashlib.sha256(data).hexdigest(), size=len(data), filename=name
    )


def pinned(resource: Resource, path: str) -> Resource:
    """`resource` (same URL, same file name) pinned to the size and sha256 of `path`."""
    with open(path, "rb") as f:
        data = f.read()
    return dataclasses.replace(resource, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def check_real_pin_rejects(resource: Resource, tmp_path, data: bytes) -> None:
    """A wrong file (`data`) under the resource's name in a mirror fails its real pins.

    The canonical URL is replaced by a missing local file so that nothing goes online;
    the size and sha256 pins are the real ones.
    """
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / resource.local_name).write_bytes(data)
    offline = dataclasses.replace(resource, url=f"file://{tmp_path}/gone/{resource.local_name}")
    with pytest.raises(ChecksumError, match=resource.sha256):
        download.fetch(offline, str(tmp_path / "dl"), mirror=str(mirror), progress=False)


def tfds_root() -> str | None:
    """The installed tensorflow_datasets package folder, or None."""
    spec = importlib.util.find_spec("tensorflow_datasets")
    if spec is None or spec.origin is None:
        return None
    return os.path.dirname(spec.origin)


def tfds_url_checksums(*names: str) -> dict[str, tuple[int, str]]:
    """url -> (size, sha256) from tensorflow_datasets' url_checksums/<name> files.

    Skips the calling test when tensorflow_datasets is not installed.
    """
    root = tfds_root()
    if root is None:
        pytest.skip("tensorflow_datasets is not installed")
    recorded = {}
    for name in names:
        with open(os.path.join(root, "url_checksums", name)) as f:
            for line in f:
                url, size, sha, *_ = line.split("\t")
                recorded[url] = (int(size), sha)
    return recorded
