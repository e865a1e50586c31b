"""Tests for t2t.data.encoders.vocab_files: line files written and read back exactly,
atomic writes that leave the old file (and no temp file) when they fail, and the
missing-file error naming the path and the hint."""

import os

import pytest

from t2t.data.encoders import vocab_files as vf


@pytest.mark.parametrize(
    "lines",
    [[], [""], ["a", "", "b", ""], ["naïve café", "日本語", "😀", "tab\there", "cr\rinside"]],
)
def test_write_then_read_lines_round_trip(tmp_path, lines):
    path = tmp_path / "lines.txt"
    vf.write_lines(path, iter(lines))
    assert path.read_bytes() == "".join(f"{line}\n" for line in lines).encode("utf-8")
    assert vf.read_lines(path, "test file", None) == lines


def test_read_lines_accepts_crlf_and_a_missing_final_newline(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"a\r\nb\r\nc")
    assert vf.read_lines(str(path), "test file", None) == ["a", "b", "c"]


def test_atomic_write_creates_folders_and_replaces(tmp_path):
    path = tmp_path / "new" / "deeper" / "model.bin"
    vf.atomic_write(path, b"one")
    vf.atomic_write(str(path), b"\x00two")
    assert path.read_bytes() == b"\x00two"
    assert os.listdir(path.parent) == ["model.bin"]


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "vocab.txt"
    vf.write_lines(path, ["old"])

    def lines():
        yield "new"
        raise RuntimeError("generator broke")

    with pytest.raises(RuntimeError, match="generator broke"):
        vf.write_lines(path, lines())
    with pytest.raises(TypeError):
        vf.atomic_write(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_text(encoding="utf-8") == "old\n"
    # The rename itself fails (the target is a folder): the temp file is removed.
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError):
        vf.atomic_write(tmp_path / "folder", b"data")
    assert sorted(os.listdir(tmp_path)) == ["folder", "vocab.txt"]
    assert os.listdir(tmp_path / "folder") == []


def test_missing_file_names_path_what_and_hint(tmp_path):
    missing = tmp_path / "vocab.missing"
    with pytest.raises(FileNotFoundError) as e:
        vf.read_lines(missing, "token vocabulary", None)
    message = str(e.value)
    assert message.startswith("token vocabulary not found: ")
    assert repr(str(missing)) in message and vf.DEFAULT_HINT in message
    error = vf.missing_file_error(missing, "model", "run make_vocab first")
    assert isinstance(error, FileNotFoundError)
    assert str(error).endswith("; run make_vocab first.")
    assert vf.DEFAULT_HINT not in str(error)
    with pytest.raises(FileNotFoundError, match="folder not found"):
        vf.read_lines(tmp_path, "folder", None)  # A directory is not a file.
