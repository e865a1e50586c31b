"""Tests for t2t.data.generation.download against a local HTTP server (no internet)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import os
import socket
import threading

import pytest

from t2t.data.generation import download
from t2t.data.generation.download import ChecksumError, DownloadError, Resource, fetch

DATA = bytes(range(256)) * 4096  # 1 MiB, not all one byte


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _gz(payload: bytes, filename: str, mtime: int) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename=filename, mode="wb", fileobj=buf, mtime=mtime) as f:
        f.write(payload)
    return buf.getvalue()


class _Server:
    """State shared with the handler: what to serve and how to misbehave."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.fail_500: dict[str, int] = {}  # path -> remaining 500 answers
        self.cut: dict[str, int] = {}  # path -> remaining answers cut mid-body
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        self.url = ""

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        st: _Server = self.server.state  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        st.requests.append((self.path, rng))
        if st.fail_500.get(self.path, 0) > 0:
            st.fail_500[self.path] -= 1
            self.send_error(500, "boom")
            return
        data = st.files.get(self.path)
        if data is None:
            self.send_error(404, "no such file")
            return
        start = 0
        if rng and not st.ignore_range:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header(
                "Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}"
            )
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if st.cut.get(self.path, 0) > 0:
            st.cut[self.path] -= 1
            self.wfile.write(body[: len(body) // 3])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    state = _Server()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def dead_url() -> str:
    """A URL on a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _fast_and_clean(monkeypatch):
    monkeypatch.setattr(download, "BACKOFF_BASE", 0.0)
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _fetch(resource: Resource, directory, **kwargs) -> str:
    kwargs.setdefault("progress", False)
    kwargs.setdefault("timeout", 5.0)
    return fetch(resource, str(directory), **kwargs)


def test_plain_download_verifies(server, tmp_path, capsys):
    server.files["/d/data.bin"] = DATA
    res = Resource(f"{server.url}/d/data.bin", sha256=_sha(DATA), size=len(DATA))
    path = _fetch(res, tmp_path / "out", progress=True, chunk_size=1 << 16)
    assert path == str(tmp_path / "out" / "data.bin")
    assert _read(path) == DATA
    assert not os.path.exists(path + ".partial")
    assert "data.bin" in capsys.readouterr().err  # progress went to stderr
    assert download.sha256_of(path) == _sha(DATA)


def test_explicit_filename(server, tmp_path):
    server.files["/get?id=7"] = b"abc"
    res = Resource(f"{server.url}/get?id=7", sha256=_sha(b"abc"), filename="seven.txt")
    assert _fetch(res, tmp_path).endswith("seven.txt")


def test_wrong_sha256_raises_and_deletes(server, tmp_path):
    server.files["/data.bin"] = DATA
    wrong = "0" * 64
    res = Resource(f"{server.url}/data.bin", sha256=wrong)
    with pytest.raises(ChecksumError) as e:
        _fetch(res, tmp_path)
    msg = str(e.value)
    assert wrong in msg and _sha(DATA) in msg and f"{server.url}/data.bin" in msg
    assert "--data_mirror" in msg
    assert os.listdir(tmp_path) == []


def test_wrong_size_raises(server, tmp_path):
    server.files["/data.bin"] = DATA
    with pytest.raises(ChecksumError, match="size"):
        _fetch(Resource(f"{server.url}/data.bin", size=len(DATA) + 1), tmp_path)
    assert os.listdir(tmp_path) == []


def test_unpinned_is_accepted(server, tmp_path):
    server.files["/x.txt"] = b"x"
    assert _read(_fetch(Resource(f"{server.url}/x.txt"), tmp_path)) == b"x"


def test_resume_from_partial(server, tmp_path):
    server.files["/data.bin"] = DATA
    (tmp_path / "data.bin.partial").write_bytes(DATA[:1000])
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert server.requests == [("/data.bin", "bytes=1000-")]
    assert _read(path) == DATA


def test_resume_when_partial_already_complete(server, tmp_path):
    server.files["/data.bin"] = DATA
    (tmp_path / "data.bin.partial").write_bytes(DATA)
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert _read(path) == DATA


def test_bad_partial_is_refetched_from_zero(server, tmp_path):
    server.files["/data.bin"] = DATA
    (tmp_path / "data.bin.partial").write_bytes(b"\xff" * 1000)
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert server.requests == [("/data.bin", "bytes=1000-"), ("/data.bin", None)]
    assert _read(path) == DATA


def test_server_ignoring_range_restarts(server, tmp_path):
    server.files["/data.bin"] = DATA
    server.ignore_range = True
    (tmp_path / "data.bin.partial").write_bytes(DATA[:1000])
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert server.requests == [("/data.bin", "bytes=1000-")]
    assert _read(path) == DATA


def test_retries_on_500_then_succeeds(server, tmp_path):
    server.files["/data.bin"] = DATA
    server.fail_500["/data.bin"] = 2
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert server.paths() == ["/data.bin"] * 3
    assert _read(path) == DATA


def test_gives_up_after_retries(server, tmp_path):
    server.files["/data.bin"] = DATA
    server.fail_500["/data.bin"] = 100
    with pytest.raises(DownloadError, match="500"):
        _fetch(Resource(f"{server.url}/data.bin"), tmp_path, retries=2)
    assert len(server.requests) == 3


def test_connection_cut_mid_body_resumes(server, tmp_path):
    server.files["/data.bin"] = DATA
    server.cut["/data.bin"] = 1
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert len(server.requests) == 2
    assert server.requests[1][1] is not None  # second attempt used a Range request
    assert _read(path) == DATA


def test_404_no_retry(server, tmp_path):
    url = f"{server.url}/missing.bin"
    with pytest.raises(DownloadError) as e:
        _fetch(Resource(url, sha256=_sha(DATA)), tmp_path)
    assert not isinstance(e.value, ChecksumError)
    assert "404" in str(e.value) and url in str(e.value)
    assert len(server.requests) == 1


def test_mirror_url_prefix(server, tmp_path, dead_url):
    server.files["/mirror/data.bin"] = DATA
    res = Resource(f"{dead_url}/orig/data.bin", sha256=_sha(DATA))
    path = _fetch(res, tmp_path, mirror=f"{server.url}/mirror/")
    assert _read(path) == DATA
    assert server.paths() == ["/mirror/data.bin"]


def test_mirror_falls_back_to_canonical(server, tmp_path):
    server.files["/orig/data.bin"] = DATA
    res = Resource(f"{server.url}/orig/data.bin", sha256=_sha(DATA))
    path = _fetch(res, tmp_path, mirror=f"{server.url}/mirror")
    assert _read(path) == DATA
    assert server.paths() == ["/mirror/data.bin", "/orig/data.bin"]


def test_mirror_local_folder(tmp_path, dead_url):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "data.bin").write_bytes(DATA)
    res = Resource(f"{dead_url}/data.bin", sha256=_sha(DATA))
    assert _read(_fetch(res, tmp_path / "a", mirror=str(mirror))) == DATA
    assert _read(_fetch(res, tmp_path / "b", mirror=mirror.as_uri())) == DATA


def test_local_folder_mirror_missing_file_falls_back(server, tmp_path):
    server.files["/data.bin"] = DATA
    (tmp_path / "mirror").mkdir()
    res = Resource(f"{server.url}/data.bin", sha256=_sha(DATA))
    path = _fetch(res, tmp_path / "out", mirror=str(tmp_path / "mirror"))
    assert _read(path) == DATA
    assert server.paths() == ["/data.bin"]


def test_env_var_mirror(server, tmp_path, dead_url, monkeypatch):
    server.files["/m/data.bin"] = DATA
    monkeypatch.setenv(download.MIRROR_ENV_VAR, f"{server.url}/m")
    path = _fetch(Resource(f"{dead_url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert _read(path) == DATA
    assert server.paths() == ["/m/data.bin"]


def test_recompressed_gzip_mirror_copy(tmp_path, dead_url):
    payload = b"some training text\n" * 5000
    published = _gz(payload, "train.txt", mtime=1)
    recompressed = _gz(payload, "", mtime=2)
    assert published != recompressed
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "train.txt.gz").write_bytes(recompressed)
    url = f"{dead_url}/train.txt.gz"
    res = Resource(
        url, sha256=_sha(published), size=len(published), payload_sha256=_sha(payload)
    )
    path = _fetch(res, tmp_path / "ok", mirror=str(mirror))
    assert _read(path) == recompressed
    assert download.payload_sha256_of(path) == _sha(payload)

    strict = Resource(url, sha256=_sha(published))
    with pytest.raises(ChecksumError) as e:
        _fetch(strict, tmp_path / "strict", mirror=str(mirror), retries=0)
    assert _sha(recompressed) in str(e.value) and "canonical" in str(e.value)
    assert os.listdir(tmp_path / "strict") == []


def test_wrong_payload_is_rejected(tmp_path, dead_url):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "t.gz").write_bytes(_gz(b"tampered", "", 0))
    res = Resource(
        f"{dead_url}/t.gz", sha256="1" * 64, payload_sha256=_sha(b"original")
    )
    with pytest.raises(ChecksumError, match="payload"):
        _fetch(res, tmp_path / "out", mirror=str(mirror), retries=0)
    assert os.listdir(tmp_path / "out") == []


def test_bad_mirror_copy_falls_back_to_canonical(server, tmp_path):
    server.files["/data.bin"] = DATA
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "data.bin").write_bytes(b"stale")
    res = Resource(f"{server.url}/data.bin", sha256=_sha(DATA))
    path = _fetch(res, tmp_path / "out", mirror=str(mirror))
    assert _read(path) == DATA


def test_already_present_makes_no_request(server, tmp_path):
    (tmp_path / "data.bin").write_bytes(DATA)
    res = Resource(f"{server.url}/data.bin", sha256=_sha(DATA))
    assert _fetch(res, tmp_path) == str(tmp_path / "data.bin")
    assert server.requests == []


def test_corrupt_present_file_is_refetched(server, tmp_path):
    server.files["/data.bin"] = DATA
    (tmp_path / "data.bin").write_bytes(b"corrupt")
    path = _fetch(Resource(f"{server.url}/data.bin", sha256=_sha(DATA)), tmp_path)
    assert _read(path) == DATA
    assert len(server.requests) == 1


def test_all_sources_fail_lists_each(tmp_path, dead_url):
    folder = tmp_path / "empty_mirror"
    folder.mkdir()
    res = Resource(f"{dead_url}/data.bin", sha256=_sha(DATA))
    with pytest.raises(DownloadError) as e:
        _fetch(res, tmp_path / "out", mirror=str(folder), retries=1)
    msg = str(e.value)
    assert str(folder / "data.bin") in msg
    assert f"{dead_url}/data.bin" in msg
    assert str(tmp_path / "out" / "data.bin") in msg
    assert download.MIRROR_ENV_VAR in msg and "--data_mirror" in msg


def test_bad_resource_name():
    with pytest.raises(ValueError, match="filename"):
        _ = Resource("http://example.com/").local_name
