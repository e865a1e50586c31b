"""Tests of t2t.decoding.image_inputs: image paths as t2t-decoder input lines."""

from __future__ import annotations

import io

import numpy as np
import pytest
from absl import logging
from PIL import Image

from t2t.decoding import image_inputs


def _write(path, array: np.ndarray, fmt: str = "PNG") -> str:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt)
    path.write_bytes(buffer.getvalue())
    return str(path)


@pytest.fixture()
def warnings(monkeypatch):
    seen: list[str] = []
    monkeypatch.setattr(logging, "warning", lambda msg, *args: seen.append(msg % args))
    return seen


def test_an_image_of_the_problem_shape_is_read_exactly(tmp_path, warnings):
    pixels = np.random.default_rng(0).integers(0, 256, [8, 12, 3]).astype(np.uint8)
    image = image_inputs.read_input(_write(tmp_path / "a.png", pixels), [8, 12, 3], "line 1")
    np.testing.assert_array_equal(image, pixels)
    assert warnings == []


def test_channels_are_converted_both_ways(tmp_path, warnings):
    gray = np.full([8, 12], 100, np.uint8)
    rgb = image_inputs.read_input(_write(tmp_path / "g.png", gray), [8, 12, 3], "line 1")
    assert rgb.shape == (8, 12, 3) and (rgb == 100).all()
    color = np.zeros([8, 12, 3], np.uint8)
    color[..., 1] = 200  # pure green: luminance 0.587 * 200
    luma = image_inputs.read_input(_write(tmp_path / "c.png", color), [8, 12, 1], "line 2")
    assert luma.shape == (8, 12, 1) and abs(int(luma[0, 0, 0]) - 117) <= 1
    assert warnings == []


def test_another_size_is_resized_with_a_warning_naming_both_sizes(tmp_path, warnings):
    pixels = np.full([16, 24, 3], 50, np.uint8)
    path = _write(tmp_path / "big.jpg", pixels, "JPEG")
    image = image_inputs.read_input(path, [8, 12, 3], "line 3")
    assert image.shape == (8, 12, 3) and abs(int(image.mean()) - 50) <= 2
    assert warnings == [f"line 3: {path} is 16x24 pixels: resized to 8x12 (height x width)."]


def test_unusable_lines_are_named_and_decoded_as_white(tmp_path, warnings):
    text = tmp_path / "notes.txt"
    text.write_text("not an image")
    for line in (str(text), str(tmp_path / "missing.png"), ""):
        image = image_inputs.read_input(line, [8, 12, 1], "line 4")
        assert image.shape == (8, 12, 1) and (image == 255).all()
    assert "notes.txt': not a PNG, JPEG, GIF, BMP or WebP image" in warnings[0]
    assert "missing.png' is not a file" in warnings[1]
    assert "an empty line names no image file" in warnings[2]
