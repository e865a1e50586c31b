"""Reading what t2t-decoder decodes: a text file's records (lines, or pieces between a
`delimiter`), a shard of them, and a seq2seq line's target prefix.

    for first_number, records in iter_record_chunks("in.txt", ";", 1000, part=(0, 4)):
        ...   # records 1-based from first_number, at most 1000 at a time
    shard_path("out.txt", 3)                   # "out.txt003" (Tensor2Tensor's suffix)
    split_target_prefix("1 0 1\\t0 1")         # ("1 0 1", "0 1")

Bytes that are not UTF-8 are replaced (with a warning naming the line or record), a
leading BOM is dropped. With "\\n" (Tensor2Tensor's default) a record is a line
("\\r\\n" ends count too; an empty line is an empty input). With another delimiter the
records are the pieces between delimiters; line breaks around a record are dropped, and
so is a last record that is empty (a file ending in the delimiter, or a newline).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from absl import logging

# Lines read (and sorted by length) at a time by a whole-file decode: bounds the memory.
FILE_CHUNK_LINES = 10_000
_BLOCK_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"


def decode_utf8(raw: bytes, where: str) -> str:
    """`raw` as text; invalid UTF-8 replaced by U+FFFD with a warning naming `where`."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        logging.warning("%s is not valid UTF-8 (%s): undecodable bytes replaced by U+FFFD.",
                        where, e.reason)
        return raw.decode("utf-8", errors="replace")


def iter_text_lines(path: str) -> Iterator[str]:
    """The lines of a text file (without line ends), read as bytes: invalid UTF-8 is
    replaced (with a warning naming the line), a leading BOM is dropped."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            if number == 1:
                raw = raw.removeprefix(_BOM)
            yield decode_utf8(raw, f"line {number} of {path}")


def iter_line_chunks(path: str, size: int = FILE_CHUNK_LINES) -> Iterator[list[str]]:
    """The lines of a text file (read as iter_text_lines reads them), `size` at a time:
    what a whole-file decode or score holds in memory at once."""
    chunk: list[str] = []
    for line in iter_text_lines(path):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_text_lines(path: str) -> list[str]:
    return list(iter_text_lines(path))


def _iter_delimited_bytes(path: str, separator: bytes) -> Iterator[bytes]:
    """The raw pieces of a file between `separator`s, read 1 MiB at a time."""
    buffer = b""
    with open(path, "rb") as f:
        first = True
        for block in iter(lambda: f.read(_BLOCK_BYTES), b""):
            if first:
                block, first = block.removeprefix(_BOM), False
            pieces = (buffer + block).split(separator)
            buffer = pieces.pop()
            yield from pieces
    yield buffer


def iter_records(path: str, delimiter: str = "\n") -> Iterator[str]:
    """The records of a text file, separated by `delimiter` (see the module's doc)."""
    if delimiter == "\n":
        yield from iter_text_lines(path)
        return
    if not delimiter:
        raise ValueError("delimiter='': give a separator, e.g. \\n or ;")
    pending: str | None = None
    for number, raw in enumerate(_iter_delimited_bytes(path, delimiter.encode("utf-8")), 1):
        if pending is not None:
            yield pending
        pending = decode_utf8(raw, f"record {number} of {path}").strip("\r\n")
    if pending:  # the piece after the last delimiter, unless empty
        yield pending


def read_records(path: str, delimiter: str = "\n") -> list[str]:
    return list(iter_records(path, delimiter))


def count_records(path: str, delimiter: str = "\n") -> int:
    return sum(1 for _ in iter_records(path, delimiter))


def part_bounds(total: int, part: int, parts: int) -> tuple[int, int]:
    """[start, stop) of the part-th of `parts` contiguous, near-equal parts of `total`
    records (earlier parts are not shorter than later ones)."""
    if not 0 <= part < parts:
        raise ValueError(f"part={part}: need 0 <= part < parts={parts}.")
    size, extra = divmod(total, parts)
    start = part * size + min(part, extra)
    return start, start + size + (part < extra)


def iter_record_chunks(path: str, delimiter: str = "\n", size: int = FILE_CHUNK_LINES,
                       part: tuple[int, int] | None = None) -> Iterator[tuple[int, list[str]]]:
    """(number of the first record, 1-based; up to `size` records) for the records of
    `path`, or, with part=(k, n), of its k-th of n contiguous parts (part_bounds; the
    file is read once more to count its records)."""
    start, stop = 0, None
    if part is not None:
        start, stop = part_bounds(count_records(path, delimiter), *part)
    chunk: list[str] = []
    first = start + 1
    for index, record in enumerate(iter_records(path, delimiter)):
        if index < start:
            continue
        if stop is not None and index >= stop:
            break
        chunk.append(record)
        if len(chunk) == size:
            yield first, chunk
            first, chunk = first + size, []
    if chunk:
        yield first, chunk


def shard_path(path: str, shard_id: int) -> str:
    """`path` with Tensor2Tensor's shard suffix: out.txt -> out.txt003 (shard 3)."""
    return f"{path}{shard_id:03d}"


def split_target_prefix(line: str) -> tuple[str, str]:
    """'INPUT<TAB>TARGET PREFIX' -> (input, prefix); a line without a tab has an empty
    prefix. Only the first tab splits: the prefix may hold more."""
    source, _, prefix = line.partition("\t")
    return source, prefix


def pad_rows(rows: list, count: int) -> np.ndarray:
    """int32 [count, P]: the id sequences `rows` 0-padded to the longest (P may be 0;
    no rows: `count` empty rows)."""
    longest = max((len(r) for r in rows), default=0)
    padded = np.zeros([count, longest], np.int32)
    for i, ids in enumerate(rows):
        padded[i, : len(ids)] = ids
    return padded
