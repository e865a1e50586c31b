"""Tests for t2t.data.generation.extract."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zipfile

import pytest

from t2t.data.generation.extract import UnsafeArchiveError, extract, gunzip


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **attrs: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def _tar(path, entries: list[tuple[str, bytes, dict]], mode: str = "w:gz") -> str:
    with tarfile.open(path, mode) as tar:
        for name, data, attrs in entries:
            _add(tar, name, data, **attrs)
    return str(path)


def _listing(root) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def test_tar_gz(tmp_path):
    archive = _tar(
        tmp_path / "a.tar.gz",
        [
            ("top/", b"", {"type": tarfile.DIRTYPE, "mode": 0o755}),
            ("top/x.txt", b"hello", {}),
            ("top/sub/y.txt", b"world", {}),
            ("top/link", b"", {"type": tarfile.SYMTYPE, "linkname": "x.txt"}),
        ],
    )
    out = tmp_path / "out"
    assert extract(archive, str(out)) == str(out)
    assert (out / "top" / "x.txt").read_bytes() == b"hello"
    assert (out / "top" / "sub" / "y.txt").read_bytes() == b"world"
    assert (out / "top" / "link").read_bytes() == b"hello"
    assert (out / ".a.tar.gz.extracted").exists()


@pytest.mark.parametrize(
    "suffix,mode",
    [(".tar", "w"), (".tgz", "w:gz"), (".tar.bz2", "w:bz2"), (".tar.xz", "w:xz")],
)
def test_tar_variants(tmp_path, suffix, mode):
    archive = _tar(tmp_path / f"a{suffix}", [("f.txt", b"data", {})], mode)
    extract(archive, str(tmp_path / "out"))
    assert (tmp_path / "out" / "f.txt").read_bytes() == b"data"


def test_zip(tmp_path):
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("d/x.txt", "hello")
        zf.writestr("y.txt", "world")
    out = tmp_path / "out"
    extract(str(archive), str(out))
    assert (out / "d" / "x.txt").read_text() == "hello"
    assert (out / "y.txt").read_text() == "world"


@pytest.mark.parametrize(
    "entry,attrs",
    [
        ("../evil", {}),
        ("ok/../../evil", {}),
        ("/abs/evil", {}),
        ("out_link", {"type": tarfile.SYMTYPE, "linkname": "../../outside"}),
        ("abs_link", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}),
        ("hard", {"type": tarfile.LNKTYPE, "linkname": "../outside"}),
        ("fifo", {"type": tarfile.FIFOTYPE}),
        ("dev", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}),
    ],
)
def test_unsafe_tar_refused_and_nothing_written(tmp_path, entry, attrs):
    # The good entry comes first: the check must cover every member before writing.
    archive = _tar(
        tmp_path / "bad.tar.gz", [("good.txt", b"ok", {}), (entry, b"", attrs)]
    )
    out = tmp_path / "sandbox" / "out"
    with pytest.raises(UnsafeArchiveError) as e:
        extract(archive, str(out))
    assert "bad.tar.gz" in str(e.value) and entry in str(e.value)
    assert _listing(out) == []
    assert _listing(tmp_path / "sandbox") == ["out"]


def test_member_beneath_symlink_refused(tmp_path):
    # Writing through a link from the same archive could land wherever the link leads.
    archive = _tar(
        tmp_path / "b.tar",
        [
            ("d", b"", {"type": tarfile.SYMTYPE, "linkname": "sub"}),
            ("d/file", b"x", {}),
        ],
        "w",
    )
    with pytest.raises(UnsafeArchiveError, match="beneath the link"):
        extract(archive, str(tmp_path / "out"))


def test_unsafe_zip_refused(tmp_path):
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("good.txt", "ok")
        zf.writestr("../evil.txt", "bad")
    out = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=r"\.\./evil\.txt"):
        extract(str(archive), str(out))
    assert _listing(out) == []


def test_zip_symlink_outside_refused(tmp_path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "../../etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="outside"):
        extract(str(archive), str(tmp_path / "out"))


def test_marker_skips_rerun_and_crash_reextracts(tmp_path):
    archive = _tar(tmp_path / "a.tar.gz", [("f.txt", b"data", {})])
    out = tmp_path / "out"
    extract(archive, str(out))
    (out / "f.txt").write_bytes(b"changed by user")
    extract(archive, str(out))  # marker present: skipped
    assert (out / "f.txt").read_bytes() == b"changed by user"
    os.remove(out / ".a.tar.gz.extracted")  # as if the first run had crashed
    extract(archive, str(out))
    assert (out / "f.txt").read_bytes() == b"data"


def test_unknown_type(tmp_path):
    path = tmp_path / "a.rar"
    path.write_bytes(b"x")
    with pytest.raises(ValueError, match=r"a\.rar.*\.tar\.gz"):
        extract(str(path), str(tmp_path / "out"))


def test_gunzip(tmp_path):
    payload = b"line\n" * 10000
    gz = tmp_path / "x.txt.gz"
    gz.write_bytes(gzip.compress(payload))
    out = tmp_path / "sub" / "x.txt"
    assert gunzip(str(gz), str(out)) == str(out)
    assert out.read_bytes() == payload
    assert _listing(tmp_path / "sub") == ["x.txt"]


def test_gunzip_corrupt_leaves_nothing(tmp_path):
    gz = tmp_path / "x.gz"
    gz.write_bytes(gzip.compress(b"abc" * 1000)[:-20])
    with pytest.raises(EOFError):
        gunzip(str(gz), str(tmp_path / "out" / "x"))
    assert _listing(tmp_path / "out") == []
