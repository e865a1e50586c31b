"""t2t-decoder fed empty, huge and non-UTF-8 lines (and other junk): every line gets one
output line, each odd line a warning naming it, and nothing crashes; a bad input or
reference path fails clearly and leaves the earlier decodes as they were."""

from __future__ import annotations

import io
import os
import sys

import pytest

from tests.robustness import support
from tests.robustness.support import FAST_DECODE, run_binary

HUGE_TOKENS = 500_000  # a 1 MB line
# (line bytes, what is wrong with it, the warning about it or None)
LINES = [
    (b"\xef\xbb\xbf1 0 1", "a UTF-8 byte order mark", None),
    (b"", "empty", "line 2 is empty: decoded as an empty input"),
    (b"0 \xff 1", "an invalid UTF-8 byte", "line 3 of {source} is not valid UTF-8"),
    (b"1 0 " * (HUGE_TOKENS // 2), "huge",
     f"line 4 has {HUGE_TOKENS} tokens: cut to the first 12 (max_input_length)"),
    (b"   \t ", "blanks only", "line 5 is empty"),
    (b"0 7 1", "a token outside the vocabulary",
     "line 6 cannot be encoded (token '7' is not in the vocabulary)"),
    (b"\xc3\x28 1", "a broken two-byte sequence", "line 7 of {source} is not valid UTF-8"),
    (b"1\x000 1", "a NUL byte", "line 8 cannot be encoded"),
    (b"1 1 0\r", "a CRLF line end", None),
    (b"0 1 1 0", "fine", None),
]
DECODE = f"--decode_hparams={FAST_DECODE},max_input_length=12"


def _write_source(path) -> None:
    path.write_bytes(b"\n".join(line for line, _, _ in LINES) + b"\n")


def _assert_answer(text: str) -> None:
    assert set(text.split()) <= {"0", "1"}, text


def test_decode_file_with_bad_lines(robustness, trained_run, data_dir, tmp_path):
    source, decodes, reference = tmp_path / "source.txt", tmp_path / "out.decodes", \
        tmp_path / "reference.txt"
    _write_source(source)
    decodes.write_text("stale decodes of an earlier run\n")
    reference.write_bytes(b"\n".join([b"1 0 1", b"", b"1 \xfe 0", b"0", b"", b"1", b"1", b"1",
                                      b"0 1 1", b"0 1 1 0"]) + b"\n")
    for _, what, _ in LINES:
        if what != "fine":
            robustness.bad_input(f"t2t-decoder input line: {what}")
    source_hash, run_before = support.sha256_of(source), support.snapshot(trained_run)
    result = run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        DECODE, f"--decode_from_file={source}", f"--decode_to_file={decodes}",
                        f"--decode_reference={reference}")
    assert result.code == 0 and not result.traceback, result.err
    robustness.run_completed("t2t-decoder on a file of bad lines")
    for _, _, warning in LINES:
        if warning:
            assert warning.format(source=source) in result.err, (warning, result.err)
    assert f"Decoded {len(LINES)} lines of {source}" in result.out
    assert "BLEU|nrefs:1|" in result.out and "chrF2|nrefs:1|" in result.out
    answers = decodes.read_text(encoding="utf-8").split("\n")
    assert len(answers) == len(LINES) + 1 and answers[-1] == ""  # one line per input line
    for answer in answers[:-1]:
        _assert_answer(answer)
    # The input and the run are untouched; no temporary file is left next to the output.
    lost = [] if support.sha256_of(source) == source_hash else [str(source)]
    robustness.data_lost(lost)
    assert not lost
    support.assert_kept(robustness, trained_run, run_before)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["source.txt", "out.decodes", "out.decodes.scores.json", "reference.txt"])


@pytest.mark.parametrize("bad", ["input", "reference", "short_reference"])
def test_decode_file_errors_keep_earlier_decodes(robustness, trained_run, data_dir, tmp_path,
                                                 bad):
    source, decodes = tmp_path / "source.txt", tmp_path / "out.decodes"
    reference = tmp_path / "reference.txt"
    source.write_text("1 0 1\n0 0 1\n")
    reference.write_text("1 0 1\n1 0 0\n")
    decodes.write_text("decodes of an earlier run\n")
    if bad == "input":
        source = tmp_path / "no_such_source.txt"
    elif bad == "reference":
        reference = tmp_path / "no_such_reference.txt"
    else:
        reference.write_text("1 0 1\n")
    robustness.bad_input({"input": "t2t-decoder --decode_from_file=<missing>",
                          "reference": "t2t-decoder --decode_reference=<missing>",
                          "short_reference": "t2t-decoder --decode_reference=<a line short>"}[bad])
    before = support.snapshot(str(tmp_path))
    result = run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        DECODE, f"--decode_from_file={source}", f"--decode_to_file={decodes}",
                        f"--decode_reference={reference}")
    assert result.code == 1 and not result.traceback, result.err
    if bad == "short_reference":
        # The decodes are complete (they are written first); the scoring refuses.
        assert "error: 2 translations but 1 references: they must be line-aligned" in result.err
        assert len(decodes.read_text().splitlines()) == 2
        before.pop("out.decodes")
    else:
        flag = "decode_from_file" if bad == "input" else "decode_reference"
        assert f"error: --{flag}={str(source if bad == 'input' else reference)!r}: no such " \
               f"file." in result.err, result.err
    support.assert_kept(robustness, str(tmp_path), before)


def test_decoder_flag_conflicts(robustness, trained_run):
    for flags, message in [
        (["--decode_reference=ref.txt"], "--decode_reference scores --decode_from_file's "
                                         "decodes: give both."),
        (["--decode_interactive", "--decode_from_file=in.txt"],
         "--decode_interactive and --decode_from_file: choose one."),
    ]:
        robustness.bad_input(f"t2t-decoder {' '.join(flags)}")
        before = support.snapshot(trained_run)
        result = run_binary("t2t-decoder", f"--output_dir={trained_run}", *flags)
        assert result.code == 1 and f"error: {message}" in result.err, result.err
        assert not result.traceback
        support.assert_kept(robustness, trained_run, before)


def _stdin(data: bytes, errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors)


@pytest.mark.parametrize("errors", [
    "surrogateescape",  # what Python gives stdin under the C / POSIX locale
    "strict",  # what it gives under a UTF-8 locale
])
def test_interactive_bad_lines(robustness, trained_run, data_dir, monkeypatch, errors):
    lines = [b"1 0 1", b"", b"0 \xff 1", b"1 0 " * 50_000, b"0 0 1"]
    robustness.bad_input(f"t2t-decoder --decode_interactive: empty, huge and non-UTF-8 lines "
                         f"(stdin errors={errors})")
    monkeypatch.setattr(sys, "stdin", _stdin(b"\n".join(lines) + b"\nq\n", errors))
    before = support.snapshot(trained_run)
    result = run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        DECODE, "--decode_interactive")
    support.assert_kept(robustness, trained_run, before)
    assert result.code == 0 and not result.traceback, result.err
    answers = result.out.split("\n")
    assert len(answers) == len(lines) + 1 and answers[-1] == "", result.out
    for answer in answers[:-1]:
        _assert_answer(answer)
    assert "line 2 is empty" in result.err
    assert "line 4 has 100000 tokens: cut to the first 12" in result.err
    robustness.run_completed(f"t2t-decoder --decode_interactive (stdin errors={errors})")
