"""Smoke test of benchmarks/image_sampling.py on a small image."""

from __future__ import annotations

import pathlib
import sys

try:
    from benchmarks import image_sampling
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import image_sampling


def test_rows_are_timed_at_both_ends_and_reported(monkeypatch):
    # 8 x 14 x 1: one 112-sub-pixel block of imagetransformer_tiny_cpu.
    monkeypatch.setitem(image_sampling.CONFIGS, "small",
                        ("imagetransformer_tiny_cpu", [8, 14, 1], 2))
    row = image_sampling.benchmark("small", None, repeats=1, whole_images=True)
    assert row["sub_pixels"] == 112 and row["batch_size"] == 2
    for key in ("cached_first_ms", "cached_last_ms", "uncached_first_ms", "uncached_last_ms",
                "images_per_s"):
        assert row[key] > 0, key
    table = image_sampling.format_table([row])
    assert "| small (imagetransformer_tiny_cpu, 8x14x1) | 2 | 112 |" in table
