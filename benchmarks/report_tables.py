"""The markdown table of each benchmark's result, as `python -m benchmarks report` shows
it (benchmarks/report.py). `TABLES[name](figures)` takes what benchmark `name`'s main
returned (as the history stores it: JSON types, mapping keys as strings) and gives the
table, with a context line above it where the result carries one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import image_sampling, mesh_layouts, names

Table = Callable[[Any], str]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """A markdown table; `align` has one letter per column, "l" or "r"."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def _num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _ratio(a: dict | None, b: dict | None, key: str) -> str:
    if not a or not b or not b.get(key):
        return "-"
    return f"{a[key] / b[key]:.2f}x"


def _mfu(row: dict | None) -> str:
    return _num(row.get("mfu") if row else None, ".1%")


def _race(rows: list[dict[str, Any]], measure: str, spec: str, unit: str, torch_path: str,
          extra: dict[str, Callable[[dict], str]]) -> str:
    """Training's or resnet's rows pivoted by path: one line per model (and `extra`
    columns) and precision, the t2t Trainer's `measure` against the bare loop's and
    torch's (and torch compiled's where measured)."""
    groups: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        key = (row["model"], *(f(row) for f in extra.values()), row["precision"])
        groups.setdefault(key, {})[row["path"]] = row
    compiled = any(names.TORCH_COMPILED_PATH in paths for paths in groups.values())
    header = ["model", *extra, "precision", f"t2t Trainer {unit}", "bare tf.function",
              "PyTorch", *(["torch compiled"] if compiled else []), "trainer / bare",
              "trainer / PyTorch", *(["trainer / compiled"] if compiled else []),
              "MFU (t2t)", "MFU (torch)", "t2t cores"]
    lines = []
    for key, paths in groups.items():
        t2t, bare, torch = (paths.get(p) for p in (names.TRAINER_PATH, names.BARE_PATH,
                                                   torch_path))
        both = paths.get(names.TORCH_COMPILED_PATH)
        speeds = [_num(p and p[measure], spec) for p in (t2t, bare, torch)]
        lines.append([*key, *speeds, *([_num(both and both[measure], spec)] if compiled else []),
                      _ratio(t2t, bare, measure), _ratio(t2t, torch, measure),
                      *([_ratio(t2t, both, measure)] if compiled else []),
                      _mfu(t2t), _mfu(torch), _num(t2t and t2t.get("cores"), ".2f")])
    align = "l" * (2 + len(extra)) + "r" * (len(header) - 2 - len(extra))
    return markdown(header, lines, align)


def _peaks(result: dict[str, Any]) -> str:
    peaks = result.get("peak_flops") or result.get("matmul_flops") or {}
    return ", ".join(f"{p} {v / 1e9:,.1f}" for p, v in peaks.items())


def training_table(result: dict[str, Any]) -> str:
    """Per model, vocabulary and precision: tokens/s of each path, ratios and MFU."""
    has_vocab = any(row.get("vocab") for row in result["rows"])
    extra = {"vocab": lambda r: _num(r.get("vocab"), ",")} if has_vocab else {}
    table = _race(result["rows"], "tokens_per_s", ",.0f", "tokens/s", names.TORCH_PATH, extra)
    parts = [table, f"MFU against the dense matmul GFLOP/s measured in the run: "
                    f"{_peaks(result)}."]
    if result.get("data"):
        parts.append("Data:\n\n" + "\n".join(f"- {d}" for d in result["data"]))
    return "\n\n".join(parts)


def resnet_table(result: dict[str, Any]) -> str:
    """Per model and precision: images/s of each path, ratios and MFU."""
    extra = {"image, batch": lambda r: (f"{r['image_size']}x{r['image_size']}, {r['batch']}"
                                        if "image_size" in r else "-")}
    table = _race(result["rows"], "examples_per_s", ",.1f", "images/s",
                  names.TORCH_RESNET_PATH, extra)
    return (f"{table}\n\nMFU against the dense matmul GFLOP/s measured in the run: "
            f"{_peaks(result)}.")


def input_pipeline_table(result: dict[str, Any]) -> str:
    """One line per stage: examples/s, real tokens/s, padding efficiency, first batch."""
    lines = [[name, _num(s.get("examples_per_s"), ",.0f"), _num(s.get("tokens_per_s"), ",.0f"),
              _num(s.get("efficiency"), ".3f"), _num(s.get("first_batch_s"), ".2f")]
             for name, s in result.items()]
    return markdown(["stage", "examples/s", "tokens/s", "efficiency", "first batch s"], lines,
                    "lrrrr")


def _decoding_context(result: dict[str, Any]) -> str:
    config = result.get("config") or {}
    text = (f"{config.get('hparams_set')}, vocabulary {config.get('vocab_size')}, batch "
            f"{config.get('batch_size')}, {config.get('input_length')} input tokens, beam "
            f"{config.get('beam_size')}")
    if result.get("config_lm"):
        text += "; lm_* rows: the same set as a decoder-only language model"
    return text + "; EOS suppressed, every output full length."


def decoding_table(result: dict[str, Any]) -> str:
    """Per decoder and length: cached tokens/s and ms/token, uncached tokens/s, speed-up."""
    lines = []
    for decoder, modes in result["results"].items():
        cached, uncached = modes.get("cached", {}), modes.get("uncached", {})
        speedup = result.get("speedup", {}).get(decoder, {})
        for length in sorted(set(cached) | set(uncached), key=int):
            c, u = cached.get(length) or {}, uncached.get(length) or {}
            lines.append([decoder, str(length), _num(c.get("tokens_per_s"), ",.0f"),
                          _num(c.get("ms_per_token"), ".2f"), _num(u.get("tokens_per_s"), ",.0f"),
                          _num(speedup.get(length), ".1f", "x")])
    table = markdown(["decoder", "length", "cached tokens/s", "cached ms/token",
                      "uncached tokens/s", "speed-up"], lines, "lrrrrr")
    return f"{_decoding_context(result)}\n\n{table}"


def datagen_table(result: dict[str, Any]) -> str:
    """One line per run (N and scale x N training examples)."""
    lines = [[f"{r['train_examples']:,}", _num(r.get("examples"), ","),
              _num(r.get("seconds"), ".1f"), _num(r.get("examples_per_s"), ",.0f"),
              _num(r.get("mib_per_s"), ".2f"), _num(r.get("peak_mib"), ",.1f"),
              _num(r.get("base_mib"), ",.1f"), _num(r.get("added_mib"), ",.1f")]
             for r in result["runs"]]
    table = markdown(["train examples", "examples (all splits)", "seconds", "examples/s",
                      "MiB/s", "peak MiB", "base MiB", "added MiB"], lines, "rrrrrrrr")
    return (f"{result.get('problem')} via Problem.generate_data, each run in a fresh "
            f"process.\n\n{table}")


def distributed_table(result: dict[str, Any]) -> str:
    """One line per strategy: step ms, steps/s, examples/s and examples/s vs one device."""
    configs = result["configs"]
    base = configs.get("one_device")
    lines = [[name, _num(r.get("step_ms"), ".1f"), _num(r.get("steps_per_s"), ".2f"),
              _num(r.get("examples_per_s"), ",.0f"), _ratio(r, base, "examples_per_s")]
             for name, r in configs.items()]
    return markdown(["strategy", "step ms", "steps/s", "examples/s", "vs one device"], lines,
                    "lrrrr")


def revnet_memory_table(result: dict[str, Any]) -> str:
    """One line per model and depth: parameters, a training step's peak memory."""
    lines = [[r["model"], str(r["depth"]), _num(r.get("params"), ","),
              _num(r.get("step_peak_mib"), ",.1f"), _num(r.get("resident_mib"), ",.1f"),
              _num(r.get("seconds"), ".2f")] for r in result["rows"]]
    table = markdown(["model", "depth", "params", "step peak MiB", "resident MiB", "seconds"],
                     lines, "lrrrrr")
    image = result.get("image")
    return (f"{image}x{image}x3 images, batch {result.get('batch')}, on "
            f"{result.get('device')}.\n\n{table}")


def dropout_table(result: list[dict[str, Any]]) -> str:
    """One line per dtype: Keras' and t2t's 16-bit dropout ms, the speed-up."""
    lines = [[r["dtype"], _num(r.get("keras_ms"), ".2f"), _num(r.get("t2t_ms"), ".2f"),
              _num(r.get("speedup"), ".2f", "x")] for r in result]
    return markdown(["dtype", "keras ms", "t2t 16-bit ms", "speed-up"], lines, "lrrr")


def mesh_layouts_table(result: dict[str, Any]) -> str:
    """mesh_layouts' own table of its rows."""
    return (f"{result.get('hparams_set')}, {result.get('steps')} timed steps of one repeated "
            f"batch, 4 logical CPUs.\n\n{mesh_layouts.format_table(result['rows'])}")


def image_sampling_table(result: list[dict[str, Any]]) -> str:
    """image_sampling's own table of its rows."""
    return image_sampling.format_table(result)


def serving_table(result: dict[str, Any]) -> str:
    """One line per API, batching setting and client count, then the soak."""
    if "rows" not in result:
        return "No load rows in this result (run with --skip_load)."
    lines = [[r.get("api", "rest"), r["batching"], str(r["clients"]),
              _num(r.get("requests_per_s"), ",.1f"), _num(r.get("p50_ms"), ".1f"),
              _num(r.get("p99_ms"), ".1f"), _num(r.get("mean_batch"), ".2f"),
              str(r.get("errors", "-")), str(r.get("wrong", "-"))] for r in result["rows"]]
    parts = [markdown(["api", "batching", "clients", "req/s", "p50 ms", "p99 ms", "mean batch",
                       "errors", "wrong"], lines, "llrrrrrrr")]
    soak = result.get("soak")
    if soak:
        parts.append(f"Soak: {soak['requests']:,} requests from {soak['clients']} clients in "
                     f"{soak['seconds']} s, {soak['errors']} errors, {soak['wrong']} wrong "
                     f"answers; t2t-serve exited with status "
                     f"{soak.get('exit_status_after_sigterm', '?')} after SIGTERM.")
    return "\n\n".join(parts)


TABLES: dict[str, Table] = {
    "training": training_table, "resnet": resnet_table,
    "input_pipeline": input_pipeline_table, "decoding": decoding_table,
    "datagen": datagen_table, "distributed": distributed_table,
    "revnet_memory": revnet_memory_table, "dropout": dropout_table,
    "mesh_layouts": mesh_layouts_table, "image_sampling": image_sampling_table,
    "serving": serving_table,
}
