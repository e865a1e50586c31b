"""benchmarks/profile_step.py reads a real profiler trace of a real training step."""

import os
import sys

import pytest

try:
    from benchmarks import profile_step
except ImportError:  # pytest run from elsewhere than the repository root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks import profile_step


def test_a_profiled_step_is_summed_by_op_type(capsys):
    result = profile_step.main(["--model", "transformer_test", "--vocab", "12", "--batch", "4",
                                "--length", "8", "--steps", "1", "--top", "5"])
    assert result["wall_ms"] > 0 and result["op_ms"] > 0
    kinds = result["by_type"]
    assert any("MatMul" in kind for kind in kinds), kinds  # the model's matmuls are seen
    assert "dropout RNG" in kinds  # transformer_test trains with dropout
    assert sum(kinds.values()) == pytest.approx(result["op_ms"])
    assert "ms of op time a step" in capsys.readouterr().out


def test_categories():
    assert profile_step.category("layer/dropout/stateless_random_uniform/X",
                                 "StatelessRandomUniformV2") == "dropout RNG"
    assert profile_step.category("layer/ffn/MatMul", "_MklMatMul") == "_MklMatMul"
