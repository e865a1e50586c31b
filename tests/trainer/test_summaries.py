"""Tests of the progress line and id decoding helpers."""

from t2t.data.encoders import text_encoder
from t2t.trainer import summaries


def test_progress_reports_every_n_steps_and_at_the_end():
    progress = summaries.Progress(0, 10, every=4)
    lines = [progress.update(step, 1.0, examples=2, tokens=10) for step in range(1, 11)]
    shown = [i + 1 for i, line in enumerate(lines) if line]
    assert shown == [4, 8, 10]
    assert lines[3].startswith("step 4/10 loss 1.0000") and "tokens/s" in lines[3]
    assert set(progress.rates()) == {"steps_per_sec", "examples_per_sec", "tokens_per_sec"}


def test_examples_rate_when_no_tokens():
    progress = summaries.Progress(0, 2, every=1)
    assert "examples/s" in progress.update(1, 0.5, examples=8, tokens=0)


def test_decode_ids():
    encoder = text_encoder.TokenTextEncoder(["0", "1"])
    assert summaries.decode_ids(encoder, [3, 2, 1, 0]) == "1 0"
    assert summaries.decode_ids(text_encoder.ClassLabelEncoder(["a", "b"]), [1]) == "b"
    assert summaries.decode_ids(None, [[4, 5]]) == "4 5"
