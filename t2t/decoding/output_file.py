"""The files t2t-decoder writes: whole at once (`write_lines`: a temporary file renamed
when complete), or chunk by chunk and resumable (`ResumableOutput`).

    with ResumableOutput(output_path, input_path, settings="what the lines depend on") as out:
        for first_line, chunk in chunks:              # the same chunks on every run
            if out.decoded_before(len(chunk)):
                continue                              # an interrupted run wrote it
            out.file.write(decoded(chunk))            # bytes
            out.commit(len(chunk))                    # on disk and recorded
    out.lines                                         # lines OUTPUT holds

Chunks go to OUTPUT.partial; after each, OUTPUT.partial.json records the lines and
bytes done, the input's sha256 and the settings (t2t.decoding.decode_progress). A
re-run of a killed decode continues after the last recorded chunk; a changed input or
changed settings start over, with a warning. OUTPUT appears (one rename) only when
complete.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import IO, Any

from absl import logging

from t2t.decoding import decode_progress
from t2t.decoding.decode_progress import PARTIAL_SUFFIX, RECORD_SUFFIX
from t2t.decoding.decode_scores import DecodeError


def atomic_writer(path: str) -> tuple[IO[str], str]:
    """(text file open for writing, its temporary path) in `path`'s folder (made if
    missing); the caller renames the temporary file to `path` once complete."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    return os.fdopen(fd, "w", encoding="utf-8", newline="\n"), tmp


def write_lines(path: str, lines: Iterable[str]) -> None:
    """Writes one line per item, atomically (a temporary file renamed when complete)."""
    f, tmp = atomic_writer(path)
    try:
        with f:
            for line in lines:
                f.write(line + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class ResumableOutput:
    """OUTPUT written chunk by chunk through OUTPUT.partial, resumable after a kill (see
    the module's docstring); a context manager whose `file` (binary) takes the chunks."""

    def __init__(self, output_path: str, input_path: str, settings: str):
        """`settings`: what the output depends on besides the input file; a resumed
        decode must have the same."""
        self.output_path, self.input_path, self.settings = output_path, input_path, settings
        self.partial = output_path + PARTIAL_SUFFIX
        self.record_path = output_path + RECORD_SUFFIX
        self.record: dict[str, Any] = {"lines": 0, "bytes": 0}
        self.file: IO[bytes]  # OUTPUT.partial, open inside the with block
        self._to_skip = 0  # lines of the chunks an earlier run decoded, still to pass

    @property
    def lines(self) -> int:
        """Lines written (and recorded) so far, resumed ones included."""
        return self.record["lines"]

    def __enter__(self) -> ResumableOutput:
        os.makedirs(os.path.dirname(os.path.abspath(self.output_path)), exist_ok=True)
        self.record = {"input_sha256": decode_progress.file_sha256(self.input_path),
                       "settings": self.settings, "lines": 0, "bytes": 0}
        resumed = decode_progress.resume_point(self.partial, self.record_path, self.record)
        self._to_skip = self.record["lines"]
        try:
            self.file = open(self.partial, "r+b" if resumed else "wb")  # noqa: SIM115
        except BaseException:
            self._stopped()
            raise
        try:
            self.file.truncate(self.record["bytes"])  # a chunk cut by a kill is decoded again
            self.file.seek(self.record["bytes"])
        except BaseException:
            self.file.close()
            self._stopped()
            raise
        return self

    def decoded_before(self, chunk_lines: int) -> bool:
        """Whether the next chunk (of `chunk_lines` lines) was written by an interrupted
        run, so is to be passed over; DecodeError if the record ends inside it."""
        if 0 < self._to_skip < chunk_lines:
            raise DecodeError(f"{self.record_path} does not end on a chunk: delete it and "
                              f"{self.partial}, and decode again.")
        if self._to_skip:
            self._to_skip -= chunk_lines
            return True
        return False

    def commit(self, chunk_lines: int) -> None:
        """Records the chunk just written to `file` (`chunk_lines` lines), once it is on
        disk: a kill from now on resumes after it."""
        self.file.flush()
        os.fsync(self.file.fileno())  # the record never counts bytes not on disk
        self.record.update(lines=self.record["lines"] + chunk_lines, bytes=self.file.tell())
        decode_progress.write_record(self.record_path, self.record)

    def __exit__(self, error_type: Any, error: Any, traceback: Any) -> None:
        try:
            self.file.close()
            if error_type is None:
                os.replace(self.partial, self.output_path)
                decode_progress.remove_if_exists(self.record_path)
        except BaseException:
            self._stopped()
            raise
        if error_type is not None:
            self._stopped()

    def _stopped(self) -> None:
        """After a failure: nothing decoded leaves nothing behind; else a warning says
        how to continue."""
        if self.record["lines"] == 0:
            decode_progress.remove_if_exists(self.partial)
            decode_progress.remove_if_exists(self.record_path)
        else:
            logging.warning("Decoding stopped after %d lines of %s: run the same command "
                            "again to continue (progress in %s).", self.record["lines"],
                            self.input_path, self.record_path)
