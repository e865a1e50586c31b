"""benchmarks/mesh_layouts.py's main: its fresh processes faked, the figures it returns
to the suite and the table it prints."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

try:
    from benchmarks import mesh_layouts
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import mesh_layouts


class _Problem:
    def generate_data(self, data_dir, tmp_dir, progress=True):
        pass


def test_quick_main_returns_every_layout(monkeypatch, capsys):
    from t2t import registry

    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        layout = command[command.index("--measure") + 1]
        shards = 2 if "mesh" in layout else 1
        row = {"layout": layout, "params": 2_000_000 // shards, "optimizer": 4_000_000 // shards,
               "split_weights": 1_000_000 // shards, "step_s": 0.1 * shards}
        return subprocess.CompletedProcess(command, 0, f"log line\n{json.dumps(row)}\n", "")

    monkeypatch.setattr(mesh_layouts.subprocess, "run", fake_run)
    monkeypatch.setattr(registry, "problem", lambda name: _Problem())
    figures = mesh_layouts.main(["--quick"])
    assert figures["hparams_set"] == "transformer_tiny" and figures["steps"] == 5
    assert [row["layout"] for row in figures["rows"]] == list(mesh_layouts.LAYOUTS)
    assert all(command[command.index("--steps") + 1] == "5" for command in calls)
    out = capsys.readouterr().out
    assert "transformer_tiny, 5 timed steps of one repeated batch" in out
    assert "| 2x2 mesh | 1.000 | 2.000 | 0.500 | 0.50 | 200 | 2.00 |" in out
