"""`python -m benchmarks`'s driver (benchmarks/suite.py) with fake benchmark mains."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

try:
    from benchmarks import distributed, history, suite
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import distributed, history, suite

PIPELINE_KEY = "input_pipeline: training path (bucketing) tokens/s / training consumption"
TRAINER_BARE_KEY = "training: transformer_tiny float32: trainer/bare-loop tokens/s"


def _row(model, precision, path, tokens_per_s, mfu):
    return {"model": model, "precision": precision, "path": path, "tokens_per_s": tokens_per_s,
            "examples_per_s": tokens_per_s / 128, "mfu": mfu, "ratio": None}


def training_result(trainer_tokens_per_s=1000.0):
    rows = [
        _row("transformer_tiny", "float32", "t2t Trainer", trainer_tokens_per_s, 0.2),
        _row("transformer_tiny", "float32", "bare tf.function", 1250.0, 0.25),
        _row("transformer_tiny", "float32", "torch nn.Transformer", 2000.0, 0.4),
        _row("transformer_tiny", "bfloat16", "t2t Trainer", 1500.0, np.float32(0.1)),
        _row("transformer_tiny", "bfloat16", "bare tf.function", 1500.0, 0.1),
        _row("transformer_small", "float32", "t2t Trainer", 500.0, 0.3),
    ]
    return {"rows": rows, "matmul_flops": {"float32": 1e11}, "torch": "2.13.0"}


RESNET = {"rows": [
    {"model": "resnet_cifar_15", "precision": "float32", "path": "t2t Trainer",
     "examples_per_s": 240.0, "mfu": 0.7},
    {"model": "resnet_cifar_15", "precision": "float32", "path": "bare tf.function",
     "examples_per_s": 250.0, "mfu": 0.73},
    {"model": "resnet_cifar_15", "precision": "float32", "path": "torch ResNet",
     "examples_per_s": 200.0, "mfu": 0.58},
], "matmul_flops": {"float32": 2e11}, "torch": "2.13.0"}


def _stage(examples_per_s, tokens_per_s):
    return {"examples_per_s": np.float64(examples_per_s), "tokens_per_s": tokens_per_s,
            "padded_tokens_per_s": 2 * tokens_per_s, "efficiency": 0.5, "first_batch_s": 0.1}


PIPELINE = {
    "parse: records, batched parse_example": _stage(900.0, 40000.0),
    "bucketing: input_dataset (training path)": _stage(500.0, 30000.0),
    "packing: input_dataset, pack_dataset, max_length 256": _stage(400.0, 24000.0),
}
DECODING = {
    "results": {
        name: {mode: {n: {"seconds": 1.0, "tokens_per_s": tps * (2 if mode == "cached" else 1),
                          "ms_per_token": 5.0} for n in (32, 128)}
               for mode in ("cached", "uncached")}
        for name, tps in (("greedy", 800.0), ("beam4", 300.0))
    },
    "speedup": {"greedy": {32: 2.0, 128: 6.0}, "beam4": {32: 1.5, 128: np.float64(4.0)}},
    "cached_flatness": {"greedy": 1.05, "beam4": 1.9},
    "config": {"lengths": [32, 128]},
}
DATAGEN = {
    "problem": "algorithmic_reverse_binary40", "scale": 10, "peak_ratio": 1.01,
    "added_ratio": 1.2,
    "runs": [{"train_examples": 100, "examples_per_s": 100.0, "peak_mib": 500.0},
             {"train_examples": 1000, "examples_per_s": 110.0, "peak_mib": 505.0}],
}
DISTRIBUTED = {"configs": {
    "one_device": {"steps_per_s": 10.0, "step_ms": 100.0, "examples_per_s": 1000.0},
    "mirrored_2": {"steps_per_s": 4.0, "step_ms": 250.0, "examples_per_s": 800.0},
}}

REVNET_MEMORY = {
    "rows": [{"model": "revnet", "depth": 38, "step_peak_mib": 125.0},
             {"model": "revnet", "depth": 110, "step_peak_mib": 121.0},
             {"model": "resnet", "depth": 32, "step_peak_mib": 339.0},
             {"model": "resnet", "depth": 110, "step_peak_mib": 1088.0}],
    "ratios": {"revnet": 0.97, "resnet": 3.21}, "image": 32, "batch": 64, "device": "CPU:0",
}
DROPOUT = [{"dtype": "float32", "keras_ms": 40.0, "t2t_ms": 32.0, "speedup": 1.25},
           {"dtype": "bfloat16", "keras_ms": 39.0, "t2t_ms": 31.2, "speedup": 1.25}]
MESH_LAYOUTS = {"rows": [
    {"layout": "one device", "params": 2_000_000, "optimizer": 4_000_000,
     "split_weights": 1_200_000, "step_s": 0.1},
    {"layout": "4-way DP", "params": 2_000_000, "optimizer": 4_000_000,
     "split_weights": 1_200_000, "step_s": 0.3},
    {"layout": "1x4 mesh", "params": 1_100_000, "optimizer": 2_200_000,
     "split_weights": 300_000, "step_s": 0.2},
], "hparams_set": "transformer_tiny", "steps": 5}
IMAGE_SAMPLING = [
    {"config": "mnist", "hparams_set": "imagetransformer_tiny_cpu", "image_shape": [28, 28, 1],
     "batch_size": 8, "sub_pixels": 784, "cached_first_ms": 2.5, "cached_last_ms": 2.0,
     "uncached_first_ms": 120.0, "uncached_last_ms": 100.0, "images_per_s": 3.1},
    {"config": "cifar10", "hparams_set": "imagetransformer_cifar10_base",
     "image_shape": [32, 32, 3], "batch_size": 1, "sub_pixels": 3072, "cached_first_ms": 17.0,
     "cached_last_ms": 17.0, "uncached_first_ms": 1350.0, "uncached_last_ms": 1530.0},
]


def _serving_row(api, batching, clients, requests_per_s):
    return {"api": api, "batching": batching, "clients": clients, "requests": 300,
            "seconds": 300 / requests_per_s, "requests_per_s": requests_per_s, "p50_ms": 20.0,
            "p99_ms": 30.0, "mean_batch": 1.0, "errors": 0, "wrong": 0}


SERVING = {
    "rows": [_serving_row("rest", "on", 1, 48.0), _serving_row("rest", "on", 32, 480.0),
             _serving_row("grpc", "on", 32, 430.0), _serving_row("rest", "off", 1, 46.0),
             _serving_row("rest", "off", 32, 96.0)],
    "soak": {"clients": 32, "requests": 1000, "seconds": 3.0, "requests_per_s": 333.3,
             "p50_ms": 60.0, "p99_ms": 90.0, "mean_batch": 10.0, "errors": 1, "wrong": 2,
             "exit_status_after_sigterm": 0},
    "speedup_32_clients": 5.0,
    "config": {"requests": 300, "seconds": 20.0, "soak": 1000, "num_batch_threads": 2,
               "cpus": 2},
}


@pytest.fixture
def fakes(monkeypatch):
    """Fake mains for every benchmark; returns the (name, argv) calls in order."""
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)  # the suite sets it
    # Nothing to release between fakes; in a test process that has built many models,
    # keras' clear_session and a full gc.collect cost ~2 s per benchmark.
    monkeypatch.setattr(suite, "_release_memory", lambda: None)
    calls = []
    results = {"training": training_result(), "resnet": RESNET, "input_pipeline": PIPELINE,
               "decoding": DECODING,
               "datagen": DATAGEN, "distributed": DISTRIBUTED, "revnet_memory": REVNET_MEMORY,
               "dropout": DROPOUT, "mesh_layouts": MESH_LAYOUTS,
               "image_sampling": IMAGE_SAMPLING, "serving": SERVING}
    for name, result in results.items():
        def fake(argv, name=name, result=result):
            calls.append((name, argv))
            print(f"{name} table")
            return result
        monkeypatch.setitem(suite.RUNNERS, name, fake)
    return calls


def _entries(path):
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_runs_every_benchmark_prints_ratios_and_appends_history(fakes, tmp_path, capsys):
    path = tmp_path / "history.jsonl"
    assert suite.main(["--quick", "--history", str(path)]) == 0
    assert [name for name, _ in fakes] == list(suite.BENCHMARKS)
    argv = dict(fakes)
    assert argv["training"] == ["--quick"] and argv["datagen"] == ["--quick"]
    assert argv["mesh_layouts"] == ["--quick"] and argv["serving"] == ["--quick"]
    assert argv["decoding"] == ["--quick", "--onednn", "tf-default"]
    out = capsys.readouterr().out
    summary = out[out.index("Summary (--quick)"):]
    for text in [
        "transformer_tiny float32: trainer/bare-loop tokens/s", "0.800x",
        "transformer_tiny float32: trainer/torch tokens/s", "0.500x",
        "transformer_tiny float32: trainer MFU", "20.0%", "torch MFU", "40.0%",
        "resnet_cifar_15 float32: trainer/bare-loop images/s", "0.960x",
        "resnet_cifar_15 float32: trainer/torch images/s", "1.200x",
        "resnet_cifar_15 float32: trainer MFU", "70.0%", "240 images/s",
        # 30,000 pipeline tokens/s over the faster transformer_tiny Trainer's 1,500.
        "training path (bucketing) tokens/s / training consumption", "20.000x",
        "packed path (pack_dataset) tokens/s / training consumption", "16.000x",
        "Ratios computed by the suite", "transformer_tiny bfloat16 t2t Trainer, this run",
        "greedy length 128: cached/uncached speed-up", "6.000x", "beam4: cached ms/token "
        "length 128/32", "peak memory 10N/N", "1.010x", "examples/s 10N/N", "1.100x",
        "mirrored_2: examples/s vs one_device", "0.800x", "mirrored_2: step time vs one_device",
        "2.500x", "revnet: step peak deep/shallow", "0.970x", "resnet: step peak deep/shallow",
        "3.210x", "revnet depth 110: step peak",
        "float32: t2t 16-bit/keras speed-up", "1.250x", "1x4 mesh: split weights/one device",
        "0.250x", "mnist: cached last/first row", "0.800x", "mnist: images/s", "3.1 images/s",
        "batching on/off at 32 clients req/s", "5.000x", "grpc batching on, 32 clients",
        "430 req/s", "soak errors + wrong answers", "3 errors",
    ]:
        assert text in summary, text
    assert "Change vs the previous run" not in out  # there was none
    assert "FAILED" not in out

    [entry] = _entries(path)
    assert entry["quick"] is True and entry["failed"] == []
    assert set(entry["git"]) == {"commit", "dirty", "diff"}
    assert entry["timestamp"].endswith("+00:00")
    assert len(entry["load"]["start"]) == 3 and len(entry["load"]["end"]) == 3
    assert entry["key_figure_info"]["datagen: peak memory 10N/N"] == {"unit": "x",
                                                                      "better": "lower"}
    assert entry["key_figure_info"][TRAINER_BARE_KEY] == {"unit": "x", "better": "higher"}
    assert entry["host"]["cpu_model"] and entry["host"]["cpus"] >= 1
    assert {"python", "tensorflow", "keras", "torch"} <= set(entry["versions"])
    assert entry["results"]["training"]["figures"]["rows"][3]["mfu"] == pytest.approx(0.1)
    assert entry["results"]["decoding"]["figures"]["speedup"]["beam4"] == {"32": 1.5, "128": 4.0}
    assert entry["results"]["decoding"]["argv"] == ["--quick", "--onednn", "tf-default"]
    assert entry["results"]["datagen"]["seconds"] >= 0
    assert entry["key_figures"][PIPELINE_KEY] == pytest.approx(20.0)
    assert entry["key_figures"][TRAINER_BARE_KEY] == pytest.approx(0.8)
    assert entry["key_figures"]["datagen: peak memory 10N/N"] == pytest.approx(1.01)


# slow: two real benchmark runs; compare's logic is tested in test_compare.py
@pytest.mark.slow
def test_compares_with_the_previous_entry_of_the_same_flags(fakes, monkeypatch, tmp_path,
                                                           capsys):
    path = str(tmp_path / "history.jsonl")
    assert suite.main(["--quick", "--history", path]) == 0
    assert suite.main(["--history", path]) == 0  # full run: no earlier full run
    assert "Change vs the previous run" not in capsys.readouterr().out
    slower = training_result(trainer_tokens_per_s=500.0)
    monkeypatch.setitem(suite.RUNNERS, "training", lambda argv: slower)
    assert suite.main(["--quick", "--history", path]) == 0
    out = capsys.readouterr().out
    changes = out[out.index("Change vs the previous run"):]
    first = history.read(path)[0]
    assert history.describe(first) in changes
    line = next(x for x in changes.splitlines() if TRAINER_BARE_KEY in x)
    assert "0.800x" in line and "0.400x" in line and "-50.0%" in line and "WORSE" in line
    line = next(x for x in changes.splitlines() if "datagen: peak memory 10N/N" in x)
    assert "+0.0%" in line and "WORSE" not in line
    assert len(history.read(path)) == 3


def test_other_arguments_are_not_compared(fakes, tmp_path, capsys):
    path = str(tmp_path / "history.jsonl")
    assert suite.main(["--quick", "--history", path, "--only", "datagen,distributed"]) == 0
    assert suite.main(["--quick", "--history", path, "--only", "datagen,distributed",
                       "--args", "datagen=--examples 5"]) == 0
    assert ("datagen", ["--quick", "--examples", "5"]) in fakes
    changes = capsys.readouterr().out.split("Change vs the previous run")[1]
    assert "distributed: mirrored_2" in changes and "datagen: peak" not in changes
    assert "not compared, run with other arguments then: datagen" in changes


def test_failing_benchmark_is_reported_and_the_others_still_run(fakes, monkeypatch, tmp_path,
                                                                capsys):
    def failing(argv):
        raise RuntimeError("decoder exploded")

    monkeypatch.setitem(suite.RUNNERS, "decoding", failing)
    monkeypatch.setitem(suite.RUNNERS, "datagen", lambda argv: sys.exit(3))
    path = tmp_path / "history.jsonl"
    assert suite.main(["--quick", "--history", str(path)]) == 1
    assert [name for name, _ in fakes] == ["training", "resnet", "input_pipeline", "distributed",
                                         "revnet_memory", "dropout", "mesh_layouts",
                                         "image_sampling", "serving"]
    captured = capsys.readouterr()
    summary = captured.out[captured.out.index("Summary"):]
    assert "decoding" in summary and "FAILED: RuntimeError: decoder exploded" in summary
    assert "datagen" in summary and "FAILED: SystemExit: exited with 3" in summary
    assert "trainer/bare-loop tokens/s" in summary and "mirrored_2" in summary
    assert "FAILED: decoding, datagen" in captured.out
    assert "decoder exploded" in captured.err  # the traceback
    [entry] = _entries(path)
    assert entry["failed"] == ["decoding", "datagen"]
    assert "decoder exploded" in entry["results"]["decoding"]["error"]
    assert "Traceback" in entry["results"]["decoding"]["traceback"]
    assert TRAINER_BARE_KEY in entry["key_figures"]


def test_a_result_the_summary_cannot_read_fails_the_run(fakes, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(suite.RUNNERS, "datagen", lambda argv: {"unexpected": 1})
    assert suite.main(["--quick", "--no-history", "--skip", "training"]) == 1
    out = capsys.readouterr().out
    assert "SUMMARY ERROR (figures not read): KeyError" in out
    assert "peak memory" not in out and "cached/uncached speed-up" in out
    # No training figures in this run nor a history: the pipeline has no ratio.
    assert "no supply/consumption ratio" in out and "training consumption" not in out


def test_pipeline_ratio_from_the_history_when_training_is_not_run(fakes, tmp_path, capsys):
    path = str(tmp_path / "history.jsonl")
    assert suite.main(["--history", path, "--only", "training"]) == 0
    assert suite.main(["--quick", "--history", path, "--only", "input_pipeline"]) == 0
    out = capsys.readouterr().out
    assert "training path (bucketing) tokens/s / training consumption" in out
    assert "20.000x" in out and "t2t Trainer, history entry" in out
    assert [name for name, _ in fakes] == ["training", "input_pipeline"]


@pytest.mark.parametrize("argv", [["--only", "training,nope"], ["--skip", "nope"],
                                  ["--args", "nope=--x"]])
def test_unknown_benchmark_name_lists_the_valid_ones(fakes, argv, capsys):
    with pytest.raises(SystemExit) as info:
        suite.main([*argv, "--no-history"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown benchmark name(s)" in err and "nope" in err
    assert "valid names: training, resnet, input_pipeline, decoding, datagen, distributed" in err
    assert fakes == []


def test_only_and_skip_select_and_no_history_writes_nothing(fakes, tmp_path, monkeypatch):
    monkeypatch.setattr(history, "append", lambda *a: pytest.fail("history written"))
    assert suite.main(["--only", "datagen,training,decoding", "--skip", "training",
                       "--no-history", "--args", "decoding=--onednn off --lengths 2"]) == 0
    assert fakes == [("decoding", ["--onednn", "off", "--lengths", "2"]), ("datagen", [])]


def test_distributed_figures_come_from_its_measure_calls(monkeypatch):
    figures = {"one_device": {"step_ms": 100.0, "examples_per_s": 10.0},
               "workers_2": {"step_ms": 300.0, "examples_per_s": 6.0}}
    monkeypatch.setattr(distributed, "measure", lambda name, *args: figures[name])

    def fake_main(argv):
        assert argv == ["--quick"]
        for name in figures:
            distributed.measure(name, "data", "work", "transformer_tiny", 60, 10)
        return 0

    monkeypatch.setattr(distributed, "main", fake_main)
    result = suite.RUNNERS["distributed"](["--quick"])
    assert result == {"configs": figures}
    assert distributed.measure("one_device") is figures["one_device"]  # restored
    keys = {f.label: f.value for f in suite.distributed_figures(result)[0]}
    assert keys["workers_2: examples/s vs one_device"] == pytest.approx(0.6)
    assert keys["workers_2: step time vs one_device"] == pytest.approx(3.0)
    monkeypatch.setattr(distributed, "main", lambda argv: 1)
    with pytest.raises(RuntimeError, match="exited with 1"):
        suite.RUNNERS["distributed"]([])


def test_history_helpers(tmp_path):
    value = {1: np.float32(0.5), "a": (np.int64(2), float("nan")), "b": np.arange(2),
             "c": {np.bool_(True)}}
    assert history.to_jsonable(value) == {"1": 0.5, "a": [2, None], "b": [0, 1], "c": [True]}
    path = tmp_path / "sub" / "h.jsonl"
    history.append(str(path), {"quick": True, "key_figures": {"x": 1.0}})
    with open(path, "a") as f:
        f.write("not json\n")
    history.append(str(path), {"quick": False, "key_figures": {"x": 2.0}})
    entries = history.read(str(path))
    assert [e["key_figures"]["x"] for e in entries] == [1.0, 2.0]
    assert history.previous_entry(entries, quick=True)["key_figures"] == {"x": 1.0}
    assert history.previous_entry(entries[1:], quick=True) is None
    assert history.compare({"x": 3.0, "y": 1.0}, {"x": 2.0}) == [("x", 2.0, 3.0, 0.5)]


def test_readers_of_the_standalone_benchmarks():
    def read(name, result):
        figures, notes = suite.section(name, result)
        assert notes, name
        return {f.label: f for f in figures}

    dropout = read("dropout", DROPOUT)
    assert set(dropout) == {"float32: t2t 16-bit/keras speed-up",
                            "bfloat16: t2t 16-bit/keras speed-up"}
    assert dropout["float32: t2t 16-bit/keras speed-up"].value == pytest.approx(1.25)
    assert dropout["float32: t2t 16-bit/keras speed-up"].better == "higher"

    mesh = read("mesh_layouts", MESH_LAYOUTS)
    assert "one device: step/one device" not in mesh  # the denominator
    assert mesh["1x4 mesh: split weights/one device"].value == pytest.approx(0.25)
    assert mesh["4-way DP: split weights/one device"].value == pytest.approx(1.0)
    assert mesh["4-way DP: step/one device"].value == pytest.approx(3.0)
    assert {f.better for f in mesh.values()} == {"lower"}
    no_base = suite.section("mesh_layouts", {**MESH_LAYOUTS, "rows": MESH_LAYOUTS["rows"][1:]})
    assert no_base[0] == [] and "no 'one device' row" in no_base[1][-1]

    images = read("image_sampling", IMAGE_SAMPLING)
    assert images["mnist: cached last/first row"].value == pytest.approx(0.8)
    assert images["mnist: cached last/first row"].better == "lower"
    assert images["cifar10: uncached/cached"].value == pytest.approx(90.0)
    assert images["mnist: images/s"].unit == "images/s"
    assert "cifar10: images/s" not in images  # not timed (--quick)

    serving = read("serving", SERVING)
    assert serving["batching on/off at 32 clients req/s"].value == 5.0
    assert serving["rest batching off, 32 clients"].value == 96.0
    assert serving["grpc batching on, 32 clients"].unit == "req/s"
    assert not any("1 clients" in label for label in serving)
    soak = serving["soak errors + wrong answers"]
    assert (soak.value, soak.better, soak.format()) == (3, "lower", "3 errors")
    assert suite.section("serving", {"decode": {}})[0] == []  # --skip_load: no load rows
