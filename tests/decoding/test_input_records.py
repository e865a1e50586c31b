"""t2t.decoding.input_records: a decode input's records (lines, or pieces between a
delimiter), contiguous parts of them, shard file names and target prefixes."""

import logging

import numpy as np
import pytest

from t2t.decoding import input_records


def test_newline_records_are_lines_with_bad_bytes_replaced(tmp_path, caplog):
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfa b\r\n\nc \xff\nd")
    with caplog.at_level(logging.WARNING):
        assert input_records.read_records(str(path)) == ["a b", "", "c \ufffd", "d"]
    assert f"line 3 of {path} is not valid UTF-8" in caplog.text
    assert input_records.read_text_lines(str(path)) == input_records.read_records(str(path))


def test_delimited_records_drop_line_breaks_around_them_and_a_last_empty_one(tmp_path, caplog,
                                                                            monkeypatch):
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfa b;\nc;\r\n;d \xff e\n;\n")
    monkeypatch.setattr(input_records, "_BLOCK_BYTES", 3)  # records across read blocks
    with caplog.at_level(logging.WARNING):
        records = input_records.read_records(str(path), ";")
    assert records == ["a b", "c", "", "d \ufffd e"]  # an empty record inside is kept
    assert f"record 4 of {path} is not valid UTF-8" in caplog.text
    (tmp_path / "para.txt").write_text("one\ntwo\n\nthree\n\n")
    assert input_records.read_records(str(tmp_path / "para.txt"), "\n\n") == ["one\ntwo", "three"]
    (tmp_path / "multi.txt").write_text("x||y||z")  # a delimiter of several characters
    assert input_records.read_records(str(tmp_path / "multi.txt"), "||") == ["x", "y", "z"]
    assert input_records.count_records(str(tmp_path / "multi.txt"), "||") == 3
    (tmp_path / "empty.txt").write_text("")
    assert input_records.read_records(str(tmp_path / "empty.txt"), ";") == []
    with pytest.raises(ValueError, match="delimiter=''"):
        input_records.read_records(str(path), "")


def test_parts_are_contiguous_and_cover_every_record_once(tmp_path):
    for total in (0, 1, 5, 7):
        for parts in (1, 2, 3, 4):
            bounds = [input_records.part_bounds(total, k, parts) for k in range(parts)]
            assert bounds[0][0] == 0 and bounds[-1][1] == total
            assert all(a[1] == b[0] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
            sizes = [stop - start for start, stop in bounds]
            assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="part=3: need 0 <= part < parts=3"):
        input_records.part_bounds(5, 3, 3)
    path = tmp_path / "in.txt"
    path.write_text("".join(f"r{i}\n" for i in range(1, 8)))
    chunks = list(input_records.iter_record_chunks(str(path), "\n", size=2, part=(1, 2)))
    assert chunks == [(5, ["r5", "r6"]), (7, ["r7"])]  # 1-based numbers of the file
    whole = [r for k in range(3) for _, chunk in input_records.iter_record_chunks(
        str(path), "\n", size=2, part=(k, 3)) for r in chunk]
    assert whole == [f"r{i}" for i in range(1, 8)]


def test_shard_names_prefixes_and_padding():
    assert input_records.shard_path("out.txt", 3) == "out.txt003"  # T2T's "%.3d"
    assert input_records.split_target_prefix("1 0\t0 1\tx") == ("1 0", "0 1\tx")
    assert input_records.split_target_prefix("1 0") == ("1 0", "")
    padded = input_records.pad_rows([np.array([5, 6]), np.array([], np.int32)], 2)
    np.testing.assert_array_equal(padded, [[5, 6], [0, 0]])
    assert input_records.pad_rows([], 3).shape == (3, 0)
