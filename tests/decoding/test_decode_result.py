"""t2t.decoding.decode_result: a result is always one line of a decodes file."""

from t2t.config import DecodeHParams
from t2t.decoding.decode_result import DecodeResult, format_result, one_line


def test_one_line_removes_line_breaks_and_tabs_where_tabs_separate():
    assert one_line("a\r\nb\nc\rd\te", tabs=False) == "a b c d\te"
    assert one_line("a\r\nb\nc\rd\te", tabs=True) == "a b c d e"


def test_format_result_with_scores_beams_and_samples():
    result = DecodeResult("x\ty", -1.5, [("x\ty", -1.5), ("z", -2.25)])
    assert format_result(result, DecodeHParams()) == "x\ty"
    assert format_result(result, DecodeHParams(write_beam_scores=True)) == "x y\t-1.5000"
    assert format_result(result, DecodeHParams(return_beams=True, write_beam_scores=True)) \
        == "x y\t-1.5000\tz\t-2.2500"
    assert format_result(result, DecodeHParams(num_samples=2, beam_size=1)) == "x y\tz"
