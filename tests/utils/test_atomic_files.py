"""Tests of t2t/utils/atomic_files.py."""

import os
import stat

import pytest

from t2t.utils import atomic_files


def test_write_text_creates_the_folder_and_replaces_keeping_the_mode(tmp_path):
    path = tmp_path / "new" / "a.txt"
    atomic_files.write_text(path, "héllo\n")
    assert path.read_text(encoding="utf-8") == "héllo\n"
    os.chmod(path, 0o640)
    atomic_files.write_text(path, "again\n")
    assert path.read_text(encoding="utf-8") == "again\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(path.parent) == ["a.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "b.bin"
    atomic_files.write_bytes(path, b"old")

    class Unwritable:  # not bytes: f.write raises inside the temporary file
        pass

    with pytest.raises(TypeError):
        atomic_files.write_bytes(path, Unwritable())  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["b.bin"]


def test_a_failed_rename_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("old\n", encoding="utf-8")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        atomic_files.write_text(str(readme), "new\n")
    assert readme.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
