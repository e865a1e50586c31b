"""Smoke test of benchmarks/decoding.py at tiny sizes."""

from __future__ import annotations

import pathlib
import sys

import pytest

try:
    from benchmarks import decoding
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import decoding


def test_benchmark_runs_to_full_length_and_reports():
    # Beam search only (each traced configuration costs seconds); greedy differs in
    # beam_size alone. measure() raises unless each output has the full length, no EOS.
    figures = decoding.benchmark(
        hparams_set="transformer_test", lengths=(2, 4), batch_size=2, beam_size=2,
        input_length=4, vocab_size=12, repeats=2, budget_s=0.0, decoders=("beam",),
        max_uncached_length=2,
    )
    by_mode = figures["results"]["beam2"]
    assert set(figures["results"]) == {"beam2"} and set(by_mode) == {"cached", "uncached"}
    assert set(by_mode["cached"]) == {2, 4} and set(by_mode["uncached"]) == {2}
    for by_length in by_mode.values():
        for length, r in by_length.items():
            assert r["runs"] == 1  # budget 0: a single run
            assert r["tokens_per_s"] == pytest.approx(2 * length / r["seconds"])
            assert r["ms_per_token"] == pytest.approx(r["seconds"] / length * 1000)
    assert set(figures["speedup"]["beam2"]) == {2}
    assert figures["cached_flatness"]["beam2"] == pytest.approx(
        by_mode["cached"][4]["ms_per_token"] / by_mode["cached"][2]["ms_per_token"]
    )
    table = decoding.format_table(figures)
    assert "beam2" in table and "(not run)" in table and "speed-up" in table


def test_eos_never_wins():
    import tensorflow as tf

    model = decoding.build_model("transformer_test", vocab_size=5)
    inputs = {"inputs": tf.constant([[2, 3, 1]])}
    state = model.decode_init_cached(inputs, tf.constant(4))
    logits, _ = model.decode_step_cached(tf.constant([0]), tf.constant(0), state)
    assert float(logits[0, decoding.EOS_ID]) < -1e8
    logits, _ = model.decode_step(tf.constant([0]), tf.constant(0), model.decode_init(inputs, 4))
    assert float(logits[0, decoding.EOS_ID]) < -1e8


def test_decoder_only_rows_run_to_full_length_and_merge():
    figures = decoding.benchmark(
        hparams_set="transformer_test", lengths=(2, 4), batch_size=2, beam_size=2,
        input_length=4, vocab_size=12, repeats=1, budget_s=0.0, decoders=("greedy",),
        max_uncached_length=2, decoder_only=True,
    )
    assert figures["config"]["decoder_only"] is True
    assert set(figures["results"]["greedy"]["cached"]) == {2, 4}
    merged = decoding.merge_shapes({}, figures, "")
    merged = decoding.merge_shapes(merged, figures, "lm_")
    assert set(merged["results"]) == {"greedy", "lm_greedy"}
    assert set(merged["cached_flatness"]) == {"greedy", "lm_greedy"}
