"""Tests of t2t.problems.image.ocr: rendering with real fonts, the deal of lines into splits,
datagen and reading back, and the errors for a missing font or a line too wide."""

from __future__ import annotations

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.problems.image import ocr

MODULE = '"""' + "\n\n".join(
    f"Read the {noun} from the {place} and return it to the caller."
    for noun in ("header", "member", "record", "buffer", "socket", "handle", "table", "queue")
    for place in ("archive", "stream", "cache", "database", "message")) + '"""\n'


def _font(split: str = "train") -> str:
    return registry.problem("ocr_rendered_text").fonts(split)[0]


def test_a_line_is_drawn_in_ink_on_paper_inside_the_strip():
    image = ocr.render_line("Return the number of items", _font(), 16, paper=230, ink=20)
    assert image.shape == (32, 384, 1) and image.dtype == np.uint8
    ink_columns = np.nonzero((image[:, :, 0] < 125).any(axis=0))[0]
    assert 2 <= ink_columns[0] < 10 and 150 < ink_columns[-1] < 384  # starts at x, ends early
    assert set(np.unique(image[0])) <= set(range(200, 256))  # top row: paper only


def test_a_long_line_is_shrunk_to_fit_and_a_longer_one_is_refused():
    long_line = "m" * 30
    image = ocr.render_line(long_line, _font(), 18)
    assert (image[:, -2:, 0] == 255).all()  # shrunk: the right margin stays paper
    with pytest.raises(ocr.TextTooWideError, match="max_line_chars"):
        ocr.render_line("m" * 90, _font(), 18)


def test_a_missing_font_names_its_debian_package(tmp_path):
    with pytest.raises(ocr.FontMissingError, match="apt-get install fonts-liberation"):
        ocr.find_font("LiberationSerif-Regular.ttf", "fonts-liberation", [str(tmp_path)])


def test_lines_wrap_at_words_and_splits_share_no_sentence(tmp_path):
    lines = ocr.wrapped_lines(["Read the header from the archive and return it"], 20)
    assert [line for line, _ in lines] == ["Read the header from", "the archive and", "return it"]
    (tmp_path / "reader.py").write_text(MODULE, encoding="utf-8")
    instance = registry.problem("ocr_rendered_text")
    instance.stdlib = str(tmp_path)
    train, dev = instance.lines("train"), instance.lines("dev")
    assert dev == instance.lines("test") and train and dev
    assert not set(train) & set(dev)
    assert max(len(line) for line in train + dev) <= instance.max_line_chars
    assert "Liberation" in instance.fonts("dev")[0] and "DejaVu" in instance.fonts("test")[0]


def test_datagen_writes_strips_that_read_back_with_their_text(tmp_path):
    (tmp_path / "stdlib").mkdir()
    (tmp_path / "stdlib" / "reader.py").write_text(MODULE, encoding="utf-8")
    instance = registry.problem("ocr_rendered_text_test")
    instance.stdlib = str(tmp_path / "stdlib")
    instance.generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"), progress=False)
    examples = list(instance.dataset(problem.EVAL, str(tmp_path / "data")).take(3))
    encoder = text_encoder.ByteTextEncoder()
    held = set(instance.lines("dev"))
    for example in examples:
        assert example["inputs"].shape == (32, 384, 1) and example["inputs"].dtype.name == "uint8"
        ids = example["targets"].numpy().tolist()
        assert ids[-1] == text_encoder.EOS_ID and encoder.decode(ids[:-1]) in held
    php = instance.hparams(str(tmp_path / "data"))
    assert php.image_shape == [32, 384, 1] and php.vocab_size["targets"] == 258
    assert "cer" in instance.eval_metrics()


def test_a_missing_font_stops_datagen_before_any_shard(tmp_path):
    instance = registry.problem("ocr_rendered_text_test")
    instance.font_dirs = [str(tmp_path / "no_fonts")]
    with pytest.raises(ocr.FontMissingError, match="fonts-dejavu-core"):
        instance.generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"), progress=False)
    assert not list((tmp_path / "data").glob("*-train-*"))
