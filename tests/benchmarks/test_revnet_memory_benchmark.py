"""benchmarks/revnet_memory.py: its configurations, ratios and table (no TensorFlow run;
`python -m benchmarks.revnet_memory` itself measures)."""

from __future__ import annotations

from benchmarks import revnet_memory


def _row(model: str, depth: int, peak: float) -> dict:
    return {"model": model, "depth": depth, "params": 1000 * depth, "step_peak_mib": peak,
            "resident_mib": 5.0, "seconds": 0.5}


def test_every_model_runs_at_a_shallow_and_a_deep_depth():
    by_model: dict[str, list[int]] = {}
    for label, model, depth, hparams_set, _overrides, recompute in revnet_memory.CONFIGS:
        by_model.setdefault(label, []).append(depth)
        assert (model == "revnet") == hparams_set.startswith("revnet")
        assert recompute or label == "revnet (stored)"
    assert by_model == {"revnet": [38, 110], "revnet (stored)": [38, 110],
                        "resnet": [32, 110]}


def test_ratios_divide_the_deepest_peak_by_the_shallowest():
    rows = [_row("revnet", 110, 121.0), _row("revnet", 38, 125.0),
            _row("resnet", 32, 340.0), _row("resnet", 110, 1088.0), _row("lonely", 38, 1.0)]
    ratios = revnet_memory.ratios(rows)
    assert ratios == {"revnet": 121.0 / 125.0, "resnet": 1088.0 / 340.0}  # one depth: none
    table = revnet_memory.format_table({"rows": rows, "ratios": ratios})
    assert "revnet: step peak at depth 110 / at 38 = 0.97x" in table
    assert "resnet: step peak at depth 110 / at 32 = 3.20x" in table
    assert table.splitlines()[0].split()[:3] == ["model", "depth", "params"]
