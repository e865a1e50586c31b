"""t2t-decoder's interactive mode: read a line, write its answer, until EOF or "q".

    answer_lines(decode_line, decode_hparams, num_decodes=1, num_samples=1)  # stdin/stdout

`decode_line(text, line_number, decode_pass)` decodes one line (Decoder.decode_texts of
one line); each line gets one answer per pass (num_decodes).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO

from t2t.config import DecodeHParams
from t2t.decoding import input_records
from t2t.decoding.decode_result import DecodeResult, one_line

DecodeLine = Callable[[str, int, int], DecodeResult]


def answer_text(result: DecodeResult, decode_hparams: DecodeHParams, num_samples: int) -> str:
    """An answer's lines (each ending in a newline): the text (and score, with
    write_beam_scores), or each beam or sample with its score."""
    if decode_hparams.return_beams or num_samples > 1:
        kind = "sample" if num_samples > 1 else "beam"
        return "".join(f"{kind} {k} ({score:.4f}): {one_line(text, False)}\n"
                       for k, (text, score) in enumerate(result.beams))
    if decode_hparams.write_beam_scores:
        return f"{one_line(result.text, True)}\t{result.score:.4f}\n"
    return one_line(result.text, False) + "\n"


def _read_line(stdin: IO[str], number: int) -> str | None:
    """The next line without its line break; None at EOF. Read as bytes where the
    stream has them (a strict UTF-8 stdin would raise on a bad byte): like files,
    invalid UTF-8 is replaced with a warning."""
    raw_stdin = getattr(stdin, "buffer", None)
    line = raw_stdin.readline() if raw_stdin is not None else stdin.readline()
    if not line:
        return None
    if isinstance(line, bytes):
        line = input_records.decode_utf8(line.rstrip(b"\r\n"), f"input line {number}")
    return line.rstrip("\r\n")


def answer_lines(decode_line: DecodeLine, decode_hparams: DecodeHParams, num_decodes: int,
                 num_samples: int, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
                 prompt: str | None = None) -> int:
    """Answers each line read from stdin (default sys.stdin) on stdout (default
    sys.stdout) until EOF or "q"; returns the count. `prompt` (default "> " on a
    terminal, else none) is written before each read."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    if prompt is None:
        prompt = "> " if stdin.isatty() else ""
    count = 0
    while True:
        if prompt:
            stdout.write(prompt)
            stdout.flush()
        line = _read_line(stdin, count + 1)
        if line is None or line.strip() == "q":
            break
        count += 1
        for decode_pass in range(num_decodes):  # one answer per pass
            stdout.write(answer_text(decode_line(line, count, decode_pass), decode_hparams,
                                     num_samples))
        stdout.flush()
    return count
