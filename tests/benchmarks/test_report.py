"""`python -m benchmarks report` (benchmarks/report.py): the history as the results page's
markdown, each benchmark from its latest full run, written only between the markers."""

from __future__ import annotations

import pathlib
import sys

import pytest

try:
    from benchmarks import history, report, suite
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import history, report, suite


def _race_row(model, precision, path, speed, mfu, **extra):
    return {"model": model, "precision": precision, "path": path, "tokens_per_s": speed,
            "examples_per_s": speed, "mfu": mfu, "cores": 1.9, **extra}


TRAINING = {"rows": [
    _race_row("transformer_tiny", "float32", "t2t Trainer", 17305.0, 0.492, vocab=8192),
    _race_row("transformer_tiny", "float32", "bare tf.function", 18531.0, 0.52, vocab=8192),
    _race_row("transformer_tiny", "float32", "torch nn.Transformer", 9064.0, 0.258, vocab=8192),
    _race_row("transformer_tiny", "float32", "torch compiled", 8917.0, 0.25, vocab=8192),
    _race_row("transformer_tiny", "bfloat16", "t2t Trainer", 9814.0, 0.379, vocab=32768),
    _race_row("transformer_tiny", "bfloat16", "bare tf.function", 9927.0, 0.38, vocab=32768),
    _race_row("transformer_base", "float32", "t2t Trainer", 901.0, 0.78, vocab=32768),
    _race_row("transformer_base", "float32", "bare tf.function", 884.0, 0.77, vocab=32768),
], "matmul_flops": {"float32": 212.5e9, "bfloat16": 400.2e9},
    "peak_flops": {"float32": 212.5e9, "bfloat16": 400.2e9},
    "data": ["vocab 8192: docstring sentences", "vocab 32768: docstring sentences"]}
RESNET = {"rows": [
    _race_row("resnet_cifar_15", "float32", "t2t Trainer", 280.6, 0.807, batch=64, image_size=32),
    _race_row("resnet_cifar_15", "float32", "bare tf.function", 285.1, 0.82, batch=64,
              image_size=32),
    _race_row("resnet_cifar_15", "float32", "torch ResNet", 235.2, 0.676, batch=64,
              image_size=32),
], "matmul_flops": {"float32": 215.1e9}}


def _stage(examples_per_s, tokens_per_s):
    return {"examples_per_s": examples_per_s, "tokens_per_s": tokens_per_s,
            "padded_tokens_per_s": tokens_per_s * 1.02, "efficiency": 0.978,
            "first_batch_s": 3.5}


PIPELINE = {"bucketing: input_dataset (training path)": _stage(32209.0, 1409419.0),
            "real text 32k: input_dataset, max_length 256": _stage(35918.0, 1528339.0)}
DECODING = {  # int lengths, as main returns them: the history stores them as strings
    "results": {"greedy": {
        "cached": {32: {"seconds": 0.06, "tokens_per_s": 3879.0, "ms_per_token": 2.06},
                   128: {"seconds": 0.25, "tokens_per_s": 4145.0, "ms_per_token": 1.93}},
        "uncached": {32: {"seconds": 0.3, "tokens_per_s": 844.0, "ms_per_token": 9.5}}}},
    "speedup": {"greedy": {32: 4.6}}, "cached_flatness": {"greedy": 0.94},
    "config": {"hparams_set": "transformer_tiny", "lengths": [32, 128], "batch_size": 8,
               "beam_size": 4, "input_length": 32, "vocab_size": 1000},
}
DATAGEN = {"problem": "algorithmic_reverse_binary40", "scale": 10, "peak_ratio": 1.01,
           "added_ratio": 1.2, "runs": [
               {"train_examples": 1000, "examples": 1100, "seconds": 1.0, "examples_per_s": 1100.0,
                "mib_per_s": 0.5, "peak_mib": 500.0, "base_mib": 450.0, "added_mib": 50.0},
               {"train_examples": 10000, "examples": 11000, "seconds": 9.0,
                "examples_per_s": 1222.0, "mib_per_s": 0.6, "peak_mib": 505.0, "base_mib": 450.0,
                "added_mib": 55.0}]}
DISTRIBUTED = {"configs": {
    "one_device": {"steps_per_s": 5.22, "step_ms": 191.5, "examples_per_s": 2048.0, "wall_s": 20},
    "mirrored_2": {"steps_per_s": 2.85, "step_ms": 351.1, "examples_per_s": 2209.0, "wall_s": 30},
}}
REVNET_MEMORY = {"rows": [
    {"model": "revnet", "depth": 38, "params": 563978, "step_peak_mib": 125.1,
     "resident_mib": 20.0, "seconds": 0.59, "device": "CPU:0"},
    {"model": "revnet", "depth": 110, "params": 1733258, "step_peak_mib": 120.9,
     "resident_mib": 40.0, "seconds": 1.84, "device": "CPU:0"},
], "ratios": {"revnet": 0.966}, "image": 32, "batch": 64, "device": "CPU:0"}
DROPOUT = [{"dtype": "float32", "keras_ms": 40.0, "t2t_ms": 29.0, "speedup": 40 / 29},
           {"dtype": "bfloat16", "keras_ms": 39.0, "t2t_ms": 31.0, "speedup": 39 / 31}]
MESH_LAYOUTS = {"rows": [
    {"layout": "one device", "params": 2_000_000, "optimizer": 4_000_000,
     "split_weights": 1_200_000, "step_s": 0.1},
    {"layout": "1x4 mesh", "params": 1_100_000, "optimizer": 2_200_000,
     "split_weights": 300_000, "step_s": 0.2},
], "hparams_set": "transformer_tiny", "steps": 20}
IMAGE_SAMPLING = [
    {"config": "mnist", "hparams_set": "imagetransformer_tiny_cpu", "image_shape": [28, 28, 1],
     "batch_size": 8, "sub_pixels": 784, "cached_first_ms": 2.48, "cached_last_ms": 2.49,
     "uncached_first_ms": 122.8, "uncached_last_ms": 118.6, "images_per_s": 3.14}]
SERVING = {
    "rows": [{"api": api, "batching": on, "clients": 32, "requests": 1500, "seconds": 3.0,
              "requests_per_s": speed, "p50_ms": 61.6, "p99_ms": 92.4, "mean_batch": batch,
              "errors": 0, "wrong": 0}
             for api, on, speed, batch in (("rest", "on", 488.8, 10.34),
                                           ("grpc", "on", 434.4, 9.68),
                                           ("rest", "off", 89.8, 1.0))],
    "soak": {"clients": 32, "requests": 3000, "seconds": 9.5, "errors": 0, "wrong": 0,
             "requests_per_s": 315.0, "p50_ms": 60.0, "p99_ms": 90.0, "mean_batch": 10.0,
             "exit_status_after_sigterm": 0},
    "speedup_32_clients": 5.44, "config": {"requests": 1500, "seconds": 60.0}}
RESULTS = {"training": TRAINING, "resnet": RESNET, "input_pipeline": PIPELINE,
           "decoding": DECODING, "datagen": DATAGEN, "distributed": DISTRIBUTED,
           "revnet_memory": REVNET_MEMORY, "dropout": DROPOUT, "mesh_layouts": MESH_LAYOUTS,
           "image_sampling": IMAGE_SAMPLING, "serving": SERVING}


def make_entry(stamp, commit, quick, results, errors=(), dirty=False):
    """A history entry as the suite writes it: key figures from the suite's own readers."""
    sections = suite.key_figures(results)
    figures = [f for found, _ in sections.values() for f in found]
    runs = {name: {"argv": ["--quick"] if quick else [], "figures": result, "seconds": 90.0}
            for name, result in results.items()}
    runs.update({name: {"argv": [], "error": "RuntimeError: boom", "seconds": 5.0}
                 for name in errors})
    return history.to_jsonable({
        "timestamp": stamp, "git": {"commit": commit, "dirty": dirty, "diff": None},
        "host": {"cpu_model": "AMD EPYC", "cpus": 2},
        "versions": {"tensorflow": "2.21.0", "torch": "2.13.0+cpu"}, "quick": quick,
        "argv": (["--quick"] if quick else []) + ["--only", ",".join(runs)],
        "selected": list(runs), "failed": list(errors), "total_seconds": 600.0,
        "load": {"start": [2.29, 2.1, 1.9], "end": [2.48, 2.2, 2.0]}, "results": runs,
        "key_figures": {f.key: f.value for f in figures},
        "key_figure_info": {f.key: {"unit": f.unit, "better": f.better} for f in figures}})


@pytest.fixture
def history_file(tmp_path):
    """A full run of every benchmark written and read back as the suite's history is."""
    path = tmp_path / "history.jsonl"
    history.append(str(path), make_entry("2026-11-28T18:17:39+00:00", "9ea48ee", False,
                                         RESULTS))
    return path


def _section(text, name):
    start = text.index(f"### {name} (")
    end = text.find("\n### ", start + 1)
    return text[start:end if end > 0 else None]


def test_every_benchmark_table_from_its_result(history_file):
    text = report.render(history.read(str(history_file)))
    expected = {
        "training": ["| model | vocab | precision | t2t Trainer tokens/s | bare tf.function | "
                     "PyTorch | torch compiled | trainer / bare | trainer / PyTorch | "
                     "trainer / compiled | MFU (t2t) | MFU (torch) | t2t cores |",
                     "| transformer_tiny | 8,192 | float32 | 17,305 | 18,531 | 9,064 | 8,917 | "
                     "0.93x | 1.91x | 1.94x | 49.2% | 25.8% | 1.90 |",
                     "| transformer_tiny | 32,768 | bfloat16 | 9,814 | 9,927 | - | - | 0.99x | "
                     "- | - | 37.9% | - | 1.90 |", "float32 212.5, bfloat16 400.2",
                     "- vocab 8192: docstring sentences"],
        "resnet": ["| resnet_cifar_15 | 32x32, 64 | float32 | 280.6 | 285.1 | 235.2 | 0.98x | "
                   "1.19x | 80.7% | 67.6% | 1.90 |"],
        "input_pipeline": ["| real text 32k: input_dataset, max_length 256 | 35,918 | "
                           "1,528,339 | 0.978 | 3.50 |"],
        "decoding": ["| greedy | 32 | 3,879 | 2.06 | 844 | 4.6x |",
                     "| greedy | 128 | 4,145 | 1.93 | - | - |", "vocabulary 1000, batch 8"],
        "datagen": ["| 10,000 | 11,000 | 9.0 | 1,222 | 0.60 | 505.0 | 450.0 | 55.0 |"],
        "distributed": ["| mirrored_2 | 351.1 | 2.85 | 2,209 | 1.08x |"],
        "revnet_memory": ["| revnet | 110 | 1,733,258 | 120.9 | 40.0 | 1.84 |",
                          "32x32x3 images, batch 64, on CPU:0."],
        "dropout": ["| float32 | 40.00 | 29.00 | 1.38x |"],
        "mesh_layouts": ["| 1x4 mesh | 1.100 | 2.200 | 0.300 | 0.25 | 200 | 2.00 |",
                         "transformer_tiny, 20 timed steps"],
        "image_sampling": ["| mnist (imagetransformer_tiny_cpu, 28x28x1) | 8 | 784 | 2.48 | "
                           "2.49 | 1.00 | 122.8 | 118.6 | 47.6 | 3.140 |"],
        "serving": ["| grpc | on | 32 | 434.4 | 61.6 | 92.4 | 9.68 | 0 | 0 |",
                    "Soak: 3,000 requests from 32 clients in 9.5 s, 0 errors, 0 wrong answers; "
                    "t2t-serve exited with status 0 after SIGTERM."],
    }
    assert list(expected) == list(suite.BENCHMARKS)
    for name, cells in expected.items():
        section = _section(text, name)
        assert ("Run ended 2026-11-28 18:17 UTC, commit 9ea48ee, AMD EPYC x 2 CPUs, "
                "TensorFlow 2.21.0, torch 2.13.0+cpu, load average 2.29 -> 2.48: "
                "`python -m benchmarks --only ") in section, name
        assert f"which ran `python -m benchmarks.{name}` in 1.5 min." in section, name
        if name in report.KEY_FIGURES_IN_TABLE:
            assert "key figures (what `python -m benchmarks compare` compares) are the " \
                   "table's" in section, name
        else:
            assert "| key figure | value |" in section, name
        for cell in cells:
            assert cell in section, (name, cell)
    # The key figures as the suite recorded them, in their units.
    assert "| 1x4 mesh: split weights/one device (lower is better) | 0.250x |" in text
    assert "| batching on/off at 32 clients req/s | 5.440x |" in text
    assert "| 49.2% |" in _section(text, "training")  # its MFU, in the table only
    assert "| real text 32k (bucketing) tokens/s / training consumption | 155.730x |" in text


def test_latest_full_entry_of_each_benchmark(tmp_path):
    path = str(tmp_path / "history.jsonl")
    slower = {**DROPOUT[0], "t2t_ms": 80.0, "speedup": 0.5}
    for entry in [
        make_entry("2026-11-01T10:00:00+00:00", "aaaa111", False,
                   {"dropout": DROPOUT, "datagen": DATAGEN}),
        make_entry("2026-11-02T10:00:00+00:00", "bbbb222", False,
                   {"datagen": DATAGEN}, errors=["dropout"], dirty=True),
        make_entry("2026-11-03T10:00:00+00:00", "cccc333", True, {"dropout": [slower]}),
    ]:
        history.append(path, entry)
    text = report.render(history.read(path))
    dropout = _section(text, "dropout")
    assert "commit aaaa111," in dropout and "| float32 | 40.00 | 29.00 | 1.38x |" in dropout
    assert "80.00" not in dropout  # the later quick run is not shown
    assert "commit bbbb222 + uncommitted changes," in _section(text, "datagen")
    assert ("Not measured in a full run yet (`python -m benchmarks --only serving`)."
            in _section(text, "serving"))
    history_rows = text[text.index("## History"):].splitlines()
    assert ("| 2026-11-02 10:00 UTC | bbbb222 + uncommitted changes | full | datagen, dropout "
            "| 10.0 | 2.29 -> 2.48 | dropout |") in history_rows
    assert ("| 2026-11-03 10:00 UTC | cccc333 | quick | dropout | 10.0 | 2.29 -> 2.48 | - |"
            in history_rows)


def test_targets_from_the_key_figures(history_file):
    text = report.render(history.read(str(history_file)))
    targets = text[text.index("## Issue #28's targets"):text.index("## History")]
    assert "| trainer / bare loop >= 0.95x, every row | 2 of 3 rows (0.93x-1.02x) | no |" in targets
    assert "| 78.0% (v32768) | yes |" in targets
    assert "| ResNet vs PyTorch >= 1.0x, both precisions | 1.19x | yes |" in targets
    assert "on real text | 155.73x | yes |" in targets
    empty = report.render([])
    assert "| trainer / PyTorch >= 1.0x, both precisions | not in the latest full runs | - |" \
        in empty
    assert "No entries yet." in empty


def test_write_replaces_only_the_block_and_is_deterministic(history_file, tmp_path, capsys):
    page = tmp_path / "benchmarks.md"
    head, tail = "# Benchmarks\n\nIntro.\n\n", "\n## Run the benchmarks\n\n<!-- ci: run -->\n"
    page.write_text(f"{head}{report.BEGIN}\nold text\n{report.END}\n{tail}", encoding="utf-8")
    argv = ["report", "--history", str(history_file), "--write", str(page)]
    assert suite.main(argv) == 0
    first = page.read_bytes()
    text = first.decode()
    assert text.startswith(f"{head}{report.BEGIN}\nGenerated from `")
    assert text.endswith(f"\n{report.END}\n{tail}") and "old text" not in text
    assert suite.main(argv) == 0
    assert page.read_bytes() == first
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"Unchanged: the benchmarks block of {page}.")
    assert suite.main(["report", "--history", str(history_file)]) == 0
    printed = capsys.readouterr().out
    assert printed == report.render(history.read(str(history_file)), str(history_file))
    assert printed == report.render(history.read(str(history_file)), str(history_file))


@pytest.mark.parametrize("missing", ["begin", "end"])
def test_write_names_the_page_and_the_missing_marker(history_file, tmp_path, capsys, missing):
    page = tmp_path / "page.md"
    kept = report.END if missing == "begin" else report.BEGIN
    page.write_text(f"# Page\n\n{kept}\n", encoding="utf-8")
    before = page.read_bytes()
    assert report.main(["--history", str(history_file), "--write", str(page)]) == 1
    err = capsys.readouterr().err
    absent = report.BEGIN if missing == "begin" else report.END
    assert f"{page} has no line {absent}: add {report.BEGIN} and, below it, {report.END}" in err
    assert f"has no line {kept}" not in err
    assert page.read_bytes() == before


def test_no_history_and_results_of_another_shape(tmp_path, capsys):
    assert report.main(["--history", str(tmp_path / "none.jsonl")]) == 2
    assert "no history at" in capsys.readouterr().err
    path = str(tmp_path / "history.jsonl")
    entry = make_entry("2026-11-01T10:00:00+00:00", "aaaa111", False, {"dropout": DROPOUT})
    entry["results"]["dropout"]["figures"] = {"rows": "unexpected"}
    history.append(path, entry)
    assert report.main(["--history", path]) == 1
    err = capsys.readouterr().err
    assert "the dropout figures of the history entry 2026-11-01T10:00:00+00:00" in err
    assert "benchmarks/report_tables.py" in err
