"""t2t.decoding.interactive: one answer per line (and per pass) until EOF or "q", in the
format the settings ask for; bad UTF-8 on stdin replaced with a warning. The decode is
a stand-in (reverses the words); the real model's interactive mode is in test_decoder.py
and tests/bin/test_t2t_decoder.py."""

import io
import logging

from t2t.config import DecodeHParams
from t2t.decoding import interactive
from t2t.decoding.decode_result import DecodeResult

SETTINGS = DecodeHParams()


def _reverse(line, number, decode_pass):
    """A DecodeResult of the line's words reversed; two beams, scores from the pass."""
    text = " ".join(reversed(line.split()))
    return DecodeResult(text, -float(decode_pass), [(text, -float(decode_pass)),
                                                    (f"{text}\tx", -9.0)])


def _answer(stdin, settings=SETTINGS, num_decodes=1, num_samples=1, prompt=None):
    out = io.StringIO()
    count = interactive.answer_lines(_reverse, settings, num_decodes, num_samples, stdin, out,
                                     prompt)
    return count, out.getvalue()


def test_each_line_is_answered_until_q_or_eof():
    assert _answer(io.StringIO("a b\n\nc d e\r\nq\nnot read\n")) == (3, "b a\n\ne d c\n")
    assert _answer(io.StringIO("x y")) == (1, "y x\n")  # EOF without a line break
    assert _answer(io.StringIO("")) == (0, "")
    assert _answer(io.StringIO("a\nq\n"), prompt="> ") == (1, "> a\n> ")


def test_passes_beams_samples_and_scores():
    assert _answer(io.StringIO("a b\n"), num_decodes=2,
                   settings=DecodeHParams(write_beam_scores=True)) == (
        1, "b a\t-0.0000\nb a\t-1.0000\n")
    beams = "beam 0 (-0.0000): b a\nbeam 1 (-9.0000): b a\tx\n"
    assert _answer(io.StringIO("a b\n"), settings=DecodeHParams(return_beams=True)) == (1, beams)
    assert _answer(io.StringIO("a b\n"), num_samples=2)[1] == beams.replace("beam", "sample")


def test_bad_utf8_on_stdin_is_replaced_with_a_warning(caplog):
    stdin = io.TextIOWrapper(io.BytesIO(b"ok\n\xff\xfe x\n"), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        count, out = _answer(stdin)
    assert count == 2 and out == "ok\nx \ufffd\ufffd\n"
    assert "input line 2" in caplog.text
