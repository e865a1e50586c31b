"""The parity gate's comparison: texts equal, scores within 1e-3, beams in order."""

from t2t.decoding.decoder import DecodeResult
from t2t.serving import parity


def _want(text="1 0", score=-1.0, beams=None):
    return DecodeResult(text=text, score=score, beams=beams or [(text, score)])


def test_equal_outputs_and_close_scores_pass():
    comparison = parity.Comparison(sampling=False)
    comparison.add(parity.TEXT_SIGNATURE, "'0 1'", _want(), "1 0", -1.0004, None)
    comparison.add(parity.EXAMPLES_SIGNATURE, "[3, 2, 1]", _want(), "1 0", -1.0, [("1 0", -1.0)])
    assert comparison.compared == 2 and not comparison.differences
    assert comparison.samples == [{"input": "'0 1'", "output": "1 0"}]


def test_each_difference_is_named():
    comparison = parity.Comparison(sampling=False)
    comparison.add(parity.TEXT_SIGNATURE, "'0 1'", _want(), "1 1", -1.0, None)
    comparison.add(parity.TEXT_SIGNATURE, "'1'", _want(), "1 0", -1.5, None)
    want = _want(beams=[("1 0", -1.0), ("0", -2.0)])
    comparison.add(parity.EXAMPLES_SIGNATURE, "[3]", want, "1 0", -1.0, [("0", -2.0), ("1 0", -1.0)])
    assert len(comparison.differences) == 3
    assert "output '1 1' != t2t '1 0'" in comparison.differences[0]
    assert "score -1.50000 != t2t -1.00000" in comparison.differences[1]
    assert comparison.differences[2].startswith("[serve_tf_example] input [3]: beams")


def test_sampled_outputs_are_only_counted():
    comparison = parity.Comparison(sampling=True)
    comparison.add(parity.TEXT_SIGNATURE, "'0'", _want(), "anything", 5.0, None)
    assert comparison.compared == 1 and not comparison.differences
