"""`python -m benchmarks compare` (benchmarks/compare.py) on synthetic history files."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

try:
    from benchmarks import compare, history, suite
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import compare, history, suite

TPS = "training: transformer_tiny float32: trainer tokens/s"
RATIO = "training: transformer_tiny float32: trainer/bare-loop tokens/s"
FLAT = "decoding: greedy: cached ms/token length 128/32"
INFO = {TPS: {"unit": "tokens/s", "better": "higher"}, RATIO: {"unit": "x", "better": "higher"},
        FLAT: {"unit": "x", "better": "lower"}}


def entry(minute, commit, figures, quick=True, dirty=False, diff=None, cpu="EPYC", info=INFO,
          argv=("--quick",), load=(1.5, 2.5), selected=("training", "decoding")):
    """A history line as suite.run writes it, at 2026-11-25T10:<minute>."""
    return {"timestamp": f"2026-11-25T10:{minute:02d}:00+00:00",
            "git": {"commit": commit, "dirty": dirty, "diff": diff},
            "host": {"cpu_model": cpu, "cpus": 2}, "quick": quick,
            "selected": list(selected),
            "load": {"start": [load[0], 1.0, 1.0], "end": [load[1], 1.0, 1.0]},
            "results": {name: {"argv": list(argv)} for name in ("training", "decoding")},
            "key_figures": figures, "key_figure_info": info}


def figures(tps=1000.0, ratio=0.9, flat=1.1):
    return {TPS: tps, RATIO: ratio, FLAT: flat}


def write(path, entries, junk=False):
    lines = [json.dumps(e) for e in entries]
    if junk:
        lines.insert(1, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


REPEATS = [entry(0, "aaaa111", figures(1000.0, 0.90, 1.10)),
           entry(1, "aaaa111", figures(1040.0, 0.91, 1.10)),
           entry(2, "aaaa111", figures(1020.0, 0.92, 1.10))]


def run(argv, capsys):
    code = compare.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_selectors_index_commit_and_timestamp():
    entries = [*REPEATS, entry(3, "bbbb222", figures()), entry(4, "cccc333", figures())]
    assert compare.select(entries, "-1") == (4, None)
    assert compare.select(entries, "-5") == (0, None)
    assert compare.select(entries, "1") == (1, None)
    assert compare.select(entries, "bbbb") == (3, None)
    index, note = compare.select(entries, "aaaa11")
    assert index == 2 and "matches 3 entries; using the newest, #2 (-3)" in note
    assert compare.select(entries, "2026-11-25T10:01") == (1, None)
    with pytest.raises(compare.UsageError, match=r"entry index -6 is out of range"):
        compare.select(entries, "-6")
    with pytest.raises(compare.UsageError, match=r"no history entry matches 'aa'") as info:
        compare.select(entries, "aa")  # too short for a commit prefix
    assert "#4 (-1)" in str(info.value) and "cccc333" in str(info.value)


def test_defaults_take_the_newest_and_the_previous_of_the_same_flag_and_machine():
    entries = [entry(0, "aaaa111", figures()), entry(1, "bbbb222", figures(), quick=False),
               entry(2, "cccc333", figures(), cpu="Xeon"), entry(3, "dddd444", {}),
               entry(4, "eeee555", figures())]
    assert compare.pick(entries, None, None) == (0, 4, [])
    with pytest.raises(compare.UsageError, match=r"no entry before #1 \(-4\) with the same "
                       r"flag \(full\) and machine \(EPYC x 2\)"):
        compare.pick(entries, None, "1")
    assert compare.pick(entries, "-3", None)[:2] == (2, 4)
    with pytest.raises(compare.UsageError, match="same entry"):
        compare.pick(entries, "-1", None)
    with pytest.raises(compare.UsageError, match=r"#3 \(-2\) has no key figures"):
        compare.pick(entries, "-2", "-1")


def test_noise_is_the_largest_spread_between_repeats_of_the_same_code():
    entries = [*REPEATS,
               # another code state: its own group (spread 10%)
               entry(3, "aaaa111", figures(1000.0), dirty=True, diff="d1"),
               entry(4, "aaaa111", figures(1100.0), dirty=True, diff="d1"),
               # not repeats of anything: other machine, other flag, unknown dirty code,
               # other arguments for the benchmark
               entry(5, "aaaa111", figures(10.0), cpu="Xeon"),
               entry(6, "aaaa111", figures(10.0), quick=False),
               entry(7, "aaaa111", figures(10.0), dirty=True),
               entry(8, "aaaa111", figures(10.0), argv=("--quick", "--steps", "2")),
               # other benchmarks before them in the process: a group of its own
               entry(9, "aaaa111", figures(10.0), selected=("resnet", "training", "decoding")),
               entry(10, "aaaa111", figures(11.0), selected=("resnet", "training", "decoding"))]
    noise = compare.measure_noise(entries, entries[0])
    assert noise[TPS] == (pytest.approx(0.1), 2)  # 1000 -> 1100; 10 -> 11 ties, fewer runs
    assert noise[RATIO] == (pytest.approx(0.92 / 0.90 - 1), 3)
    assert noise[FLAT] == (0.0, 3)
    assert compare.threshold(FLAT, noise) == (compare.NOISE_FLOOR, "floor; 3 runs 0.0%")
    assert compare.threshold(RATIO, noise) == (pytest.approx(0.0222, abs=1e-4), "3 runs")
    assert compare.threshold("decoding: x", noise) == (compare.DEFAULT_NOISE, "default")
    groups = compare.repeat_groups(entries, entries[0])
    both, three = ("training", "decoding"), ("resnet", "training", "decoding")
    assert groups == {("aaaa111", None, both): [0, 1, 2, 8], ("aaaa111", "d1", both): [3, 4],
                      ("aaaa111", None, three): [9, 10]}


def test_direction_recorded_else_from_the_name():
    assert compare.direction("x: tokens/s", {"better": "lower"}) == "lower"
    assert compare.direction("decoding: greedy: cached ms/token length 128/32") == "lower"
    assert compare.direction("training: t MFU") == "higher"
    # The names the suite writes are guessed the way the suite declares them.
    decoding = {"speedup": {"greedy": {"32": 2.0}}, "cached_flatness": {"greedy": 1.1},
                "results": {"greedy": {"cached": {"32": {"tokens_per_s": 5.0}}}},
                "config": {"lengths": [32]}}
    datagen = {"runs": [{"train_examples": 1, "examples_per_s": 1.0, "peak_mib": 1.0}] * 2,
               "peak_ratio": 1.0, "added_ratio": 1.0}
    distributed = {"configs": {"one_device": {"examples_per_s": 1.0, "step_ms": 1.0},
                               "mirrored_2": {"examples_per_s": 1.0, "step_ms": 1.0}}}
    revnet = {"ratios": {"revnet": 1.0}, "rows": [{"model": "revnet", "depth": 38,
                                                   "step_peak_mib": 1.0}]}
    found = [f for reader, result in [(suite.decoding_figures, decoding),
                                      (suite.datagen_figures, datagen),
                                      (suite.distributed_figures, distributed),
                                      (suite.revnet_memory_figures, revnet)]
             for f in reader(result)[0]]
    assert {f.better for f in found} == {"higher", "lower"}
    for figure in found:
        assert compare.direction(figure.key) == figure.better, figure.key


def test_regression_beyond_the_noise_is_flagged_with_exit_status_1(tmp_path, capsys):
    slower = entry(5, "bbbb222", figures(tps=950.0, ratio=0.85, flat=1.3), load=(3.0, 4.0))
    path = write(tmp_path / "h.jsonl", [*REPEATS, slower])
    code, out, _ = run(["--history", path], capsys)
    assert code == 1
    assert "before (A): #2 (-2)" in out and "now    (B): #3 (-1)" in out
    assert "load 3.0->4.0" in out
    assert ("repeats: commit aaaa111, training,decoding: 3 runs #0, #1, #2; load average "
            "(1 min) 1.5-2.5") in out
    lines = {key: next(x for x in out.splitlines() if x.startswith(key))
             for key in (TPS, RATIO, FLAT)}
    # 1020 -> 950: -6.9%, beyond the 4.0% measured between 1000 and 1040.
    assert "1,020 tokens/s" in lines[TPS] and "-6.9%" in lines[TPS]
    assert "4.0% (3 runs)" in lines[TPS] and lines[TPS].endswith("REGRESSION")
    assert "0.920x" in lines[RATIO] and "0.850x" in lines[RATIO]
    assert lines[RATIO].endswith("REGRESSION")
    assert lines[FLAT].endswith("REGRESSION") and "v  2.0% (floor" in lines[FLAT]
    assert "3 regression(s) beyond the noise" in out


def test_changes_within_the_noise_or_for_the_better_are_not_flagged(tmp_path, capsys):
    now = entry(5, "bbbb222", figures(tps=990.0, ratio=0.95, flat=1.0))
    code, out, _ = run(["--history", write(tmp_path / "h.jsonl", [*REPEATS, now])], capsys)
    assert code == 0
    lines = {key: next(x for x in out.splitlines() if x.startswith(key))
             for key in (TPS, RATIO, FLAT)}
    assert "-2.9%" in lines[TPS] and not lines[TPS].endswith(("REGRESSION", "better"))
    assert "A and B ran the same code" not in out and "different benchmarks" not in out
    assert lines[RATIO].endswith("better")  # +3.3% > 2.2% noise, higher is better
    assert lines[FLAT].endswith("better")  # -9.1%, lower is better
    assert "0 regression(s) beyond the noise." in out


def test_without_repeats_the_default_threshold_is_used(tmp_path, capsys):
    entries = [entry(0, "aaaa111", figures(1000.0)), entry(1, "bbbb222", figures(905.0)),
               entry(2, "cccc333", figures(880.0))]
    path = write(tmp_path / "h.jsonl", entries)
    code, out, _ = run(["--history", path, "-3", "-2"], capsys)
    assert code == 0 and "no repeated runs in the history" in out
    assert "-9.5%" in out and "10.0% (default)" in out
    assert run(["--history", path, "0"], capsys)[0] == 1  # -12%
    entries.append(entry(3, "cccc333", figures(880.0), selected=("training",)))
    code, out, _ = run(["--history", write(tmp_path / "h.jsonl", entries)], capsys)
    assert code == 0 and "A and B ran the same code" in out
    assert "(A and B ran different benchmarks in one process" in out


def test_old_entries_without_figure_info_use_the_name(tmp_path, capsys):
    entries = [entry(0, "aaaa111", figures(flat=1.0), info=None),
               entry(1, "bbbb222", figures(flat=0.5), info=None)]
    code, out, _ = run(["--history", write(tmp_path / "h.jsonl", entries)], capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith(FLAT))
    assert "-50.0%" in line and line.endswith("better") and "1" in line


def test_usage_errors_exit_2_and_list_the_entries(tmp_path, capsys):
    path = write(tmp_path / "h.jsonl", REPEATS, junk=True)
    code, out, err = run(["--history", path, "zzzz"], capsys)
    assert code == 2 and out == ""
    assert "error: no history entry matches 'zzzz'" in err
    assert "not JSON, skipped" in err  # the malformed line 2
    assert "#0 (-3)" in err and "2026-11-25T10:02:00+00:00  aaaa111  --quick" in err
    code, _, err = run(["--history", str(tmp_path / "none.jsonl")], capsys)
    assert code == 2 and "no history at" in err and "none.jsonl" in err
    code, out, _ = run(["--history", path, "--list"], capsys)
    assert code == 0 and "3 entries" in out and "#2 (-1)" in out
    with pytest.raises(SystemExit) as info:
        compare.main(["--history", path, "-1", "-2", "-3"])
    assert info.value.code == 2


def test_malformed_line_is_skipped(tmp_path, capsys):
    path = write(tmp_path / "h.jsonl", [*REPEATS, entry(3, "bbbb222", figures())], junk=True)
    code, out, err = run(["--history", path, "-2"], capsys)
    assert code == 0 and "h.jsonl:2: not JSON, skipped" in err
    assert "A and B ran the same code" not in out
    assert "before (A): #2 (-2)" in out and "bbbb222" in out


def test_suite_dispatches_compare_and_keeps_its_own_options(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "h.jsonl", [*REPEATS, entry(3, "bbbb222", figures(tps=500.0))])
    assert suite.main(["compare", "--history", path]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert suite.main(["compare", "--history", path, "nope"]) == 2
    monkeypatch.setattr(suite, "run", lambda *a, **k: {"failed": []})
    assert suite.main(["--only", "training", "--no-history"]) == 0
    with pytest.raises(SystemExit) as info:
        suite.main(["--only", "compare"])  # not a benchmark name
    assert info.value.code == 2


def test_suite_entries_are_compared_as_repeats(tmp_path, capsys, monkeypatch):
    """Two suite runs of the same code form a repeat group; their load is recorded."""
    monkeypatch.setattr(history, "git_commit",
                        lambda: {"commit": "f00dcafe", "dirty": True, "diff": "abc123"})
    datagen = {"problem": "p", "scale": 10, "peak_ratio": 1.0, "added_ratio": 1.0,
               "runs": [{"train_examples": 10, "examples_per_s": 100.0, "peak_mib": 50.0},
                        {"train_examples": 100, "examples_per_s": 110.0, "peak_mib": 50.0}]}
    monkeypatch.setitem(suite.RUNNERS, "datagen", lambda argv: datagen)
    path = str(tmp_path / "h.jsonl")
    for _ in range(2):
        assert suite.main(["--quick", "--only", "datagen", "--history", path]) == 0
    capsys.readouterr()
    code, out, _ = run(["--history", path], capsys)
    assert code == 0 and "(A and B ran the same code: every change between them is noise)" in out
    assert "repeats: commit f00dcafe (diff abc123), datagen: 2 runs #0, #1; load average" in out
    line = next(x for x in out.splitlines() if x.startswith("datagen: peak at 10N"))
    assert "50.0 MiB" in line and "v  2.0% (floor; 2 runs 0.0%)" in line
