"""Tests of t2t.layers.local_attention: the 1-D and 2-D patterns, causality, and cached
steps equal to the whole-sequence computation."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t.layers import local_attention


def _seen(pattern: local_attention.LocalPattern, position: int) -> set[int]:
    """The positions `position`'s query sees."""
    flat = pattern.slot[position]
    block, row = divmod(int(flat), pattern.query_index.shape[1])
    return {int(m) for m, v in zip(pattern.memory_index[block], pattern.visible[block, row],
                                   strict=True) if v}


def test_local_1d_sees_its_block_so_far_and_the_block_before():
    pattern = local_attention.local_1d_pattern(10, block_length=4)
    assert _seen(pattern, 0) == {0}
    assert _seen(pattern, 5) == set(range(0, 6))
    assert _seen(pattern, 9) == set(range(4, 10))  # the partial last block
    assert pattern.query_index.shape == (3, 4) and pattern.memory_index.shape == (3, 8)


def test_local_2d_sees_the_rectangle_and_its_flange_before_itself():
    rows, cols = 6, 8
    pattern = local_attention.local_2d_pattern(rows, cols, (2, 4), (2, 2))
    position = 3 * cols + 5  # row 3, column 5: block rows 2-3, columns 4-7
    seen = _seen(pattern, position)
    expected = {r * cols + c for r in range(0, 4) for c in range(2, 8)
                if r * cols + c <= position}
    assert seen == expected
    for p in range(rows * cols):  # causal everywhere, and each position sees itself
        seen = _seen(pattern, p)
        assert p in seen and max(seen) == p


@pytest.mark.parametrize("pattern", [
    local_attention.local_1d_pattern(24, 5),
    local_attention.local_2d_pattern(4, 6, (2, 3), (1, 2)),
])
def test_cached_steps_equal_the_whole_sequence(pattern):
    layer = local_attention.LocalSelfAttention(pattern, hidden_size=8, num_heads=2)
    x = tf.random.stateless_normal([2, 24, 8], seed=[1, 2])
    whole = layer(x).numpy()
    cache = {"k": tf.zeros([2, 2, 24, 4]), "v": tf.zeros([2, 2, 24, 4])}
    steps = []
    for i in range(24):
        out, cache = layer.step(x[:, i:i + 1], tf.constant(i), cache)
        steps.append(out.numpy()[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), whole, atol=1e-5)
    changed = x.numpy().copy()
    changed[:, 20:] += 5.0  # the future never changes the past
    np.testing.assert_allclose(layer(tf.constant(changed)).numpy()[:, :20], whole[:, :20],
                               atol=1e-5)


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="block_length >= 1"):
        local_attention.local_1d_pattern(10, 0)
    with pytest.raises(ValueError, match=r"query_shape >= \(1, 1\)"):
        local_attention.local_2d_pattern(4, 4, (0, 2), (1, 1))
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        local_attention.LocalSelfAttention(local_attention.local_1d_pattern(4, 2), 10, 3)
