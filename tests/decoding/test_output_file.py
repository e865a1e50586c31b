"""t2t.decoding.output_file: atomic whole-file writes, and the resumable output of a
chunked decode (interrupted, resumed, refused when the input changed). No model: the
"decode" here upper-cases lines. (Kills of the real t2t-decoder:
tests/robustness/test_io_faults.py.)"""

import json
import logging
import os

import pytest

from t2t.decoding import output_file
from t2t.decoding.decode_scores import DecodeError

CHUNK = 2


class Interrupted(Exception):
    pass


def _chunks(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    return [(first + 1, lines[first:first + CHUNK]) for first in range(0, len(lines), CHUNK)]


def _decode(input_path, output_path, settings="s", fail_at_chunk=None):
    """Writes each chunk upper-cased through ResumableOutput; Interrupted while writing
    the chunk numbered fail_at_chunk (its bytes half written, never committed). Returns
    (lines OUTPUT holds, first lines of the chunks decoded by this run)."""
    decoded = []
    with output_file.ResumableOutput(str(output_path), str(input_path), settings) as out:
        for number, (first, chunk) in enumerate(_chunks(input_path)):
            if out.decoded_before(len(chunk)):
                continue
            text = "".join(line.upper() + "\n" for line in chunk).encode()
            if number == fail_at_chunk:
                out.file.write(text[:3])
                raise Interrupted
            out.file.write(text)
            decoded.append(first)
            out.commit(len(chunk))
    return out.lines, decoded


def _files(folder):
    return sorted(os.listdir(folder))


def test_an_interrupted_decode_resumes_after_its_last_chunk(tmp_path, caplog):
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\nc\nd\neee\n")
    with pytest.raises(Interrupted), caplog.at_level(logging.WARNING):
        _decode(source, out, fail_at_chunk=2)
    assert "Decoding stopped after 4 lines of" in caplog.text
    assert _files(tmp_path) == ["in.txt", "out.txt.partial", "out.txt.partial.json"]  # no OUTPUT
    record = json.loads((tmp_path / "out.txt.partial.json").read_text())
    assert (record["lines"], record["bytes"], record["settings"]) == (4, 8, "s")
    assert (tmp_path / "out.txt.partial").read_bytes() == b"A\nB\nC\nD\nEEE"  # chunk 3 cut
    with caplog.at_level(logging.WARNING):
        assert _decode(source, out) == (5, [5])  # only the last chunk decoded again
    assert "Resuming the unfinished decode in" in caplog.text and "after line 4" in caplog.text
    assert out.read_text() == "A\nB\nC\nD\nEEE\n"  # the cut chunk's bytes were dropped
    assert _files(tmp_path) == ["in.txt", "out.txt"]


def test_a_changed_input_or_settings_start_over(tmp_path, caplog):
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\nc\nd\n")
    with pytest.raises(Interrupted):
        _decode(source, out, fail_at_chunk=1)
    source.write_text("w\nx\ny\nz\n")
    with caplog.at_level(logging.WARNING):
        assert _decode(source, out) == (4, [1, 3])
    assert "the input file changed since" in caplog.text
    assert "Decoding from the first line" in caplog.text
    assert out.read_text() == "W\nX\nY\nZ\n"
    os.remove(out)
    with pytest.raises(Interrupted):
        _decode(source, out, fail_at_chunk=1)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert _decode(source, out, settings="other") == (4, [1, 3])
    assert "the decode settings changed since (were: s; now: other)" in caplog.text


def test_nothing_decoded_leaves_nothing_and_a_record_inside_a_chunk_is_refused(tmp_path):
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\nc\n")
    with pytest.raises(Interrupted):
        _decode(source, out, fail_at_chunk=0)
    assert _files(tmp_path) == ["in.txt"]
    (tmp_path / "out.txt.partial").write_bytes(b"A\n")
    record = {"input_sha256": output_file.decode_progress.file_sha256(str(source)),
              "settings": "s", "lines": 1, "bytes": 2}  # 1 line: not a whole chunk of 2
    (tmp_path / "out.txt.partial.json").write_text(json.dumps(record))
    with pytest.raises(DecodeError, match=r"out.txt.partial.json does not end on a chunk: "
                                          r"delete it and .*out.txt.partial, and decode again"):
        _decode(source, out)
    assert not out.exists()


def test_write_lines_replaces_the_file_whole_or_not_at_all(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    output_file.write_lines(str(path), ["a", "b"])
    assert path.read_text() == "a\nb\n"

    def failing():
        yield "new"
        raise Interrupted

    with pytest.raises(Interrupted):
        output_file.write_lines(str(path), failing())
    assert path.read_text() == "a\nb\n" and _files(path.parent) == ["out.txt"]  # no temp left
    f, tmp = output_file.atomic_writer(str(path))
    with f:
        f.write("x\r\n")
    assert os.path.dirname(tmp) == str(path.parent) and path.read_text() == "a\nb\n"
    os.replace(tmp, path)
    assert path.read_bytes() == b"x\r\n"
