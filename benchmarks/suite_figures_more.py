"""Key-figure readers of the standalone benchmarks the suite also runs: dropout,
mesh_layouts, image_sampling and serving (benchmarks/suite.py's `section` dispatches to
them). Each takes the value its module's main returns and gives (figures, notes), as the
readers in suite.py do."""

from __future__ import annotations

from typing import Any

from benchmarks.figure import Figure

MESH_BASE = "one device"  # mesh_layouts.LAYOUTS' first layout: the ratios' denominator
SERVING_CLIENTS = 32  # serving.CONCURRENCY's largest level: the goal is set there


def dropout_figures(result: list[dict[str, Any]]) -> tuple[list[Figure], list[str]]:
    """Per dtype (dropout's rows): Keras' ms over t2t's 16-bit kernel's ("speedup")."""
    figures = [Figure("dropout", f"{row['dtype']}: t2t 16-bit/keras speed-up", row["speedup"])
               for row in result]
    return figures, ["speed-up: keras.layers.Dropout ms / t2t common.Dropout ms, forward + "
                     "backward of one dropout."]


def mesh_layouts_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """Per layout but one device (mesh_layouts' "rows"): bytes per device of the weights
    the layout splits, and the median step time, each over one device's."""
    rows = result["rows"]
    base = next((r for r in rows if r["layout"] == MESH_BASE), None)
    figures: list[Figure] = []
    if base:
        for row in rows:
            if row is base:
                continue
            figures.append(Figure("mesh_layouts", f"{row['layout']}: split weights/one device",
                                  row["split_weights"] / base["split_weights"], better="lower"))
            figures.append(Figure("mesh_layouts", f"{row['layout']}: step/one device",
                                  row["step_s"] / base["step_s"], better="lower"))
    notes = [f"{result.get('hparams_set')}, {result.get('steps')} timed steps; the logical "
             "devices share the cores: step ratios show each layout's overhead."]
    if not base:
        notes.append(f"no '{MESH_BASE}' row: no ratios.")
    return figures, notes


def image_sampling_figures(result: list[dict[str, Any]]) -> tuple[list[Figure], list[str]]:
    """Per config (image_sampling's rows): cached ms/sub-pixel at the last row over the
    first, uncached over cached ms at the last row, and whole images/s where timed."""
    figures: list[Figure] = []
    for r in result:
        name = r["config"]
        figures.append(Figure("image_sampling", f"{name}: cached last/first row",
                              r["cached_last_ms"] / r["cached_first_ms"], better="lower"))
        figures.append(Figure("image_sampling", f"{name}: uncached/cached",
                              r["uncached_last_ms"] / r["cached_last_ms"]))
        if "images_per_s" in r:
            figures.append(Figure("image_sampling", f"{name}: images/s", r["images_per_s"],
                                  "images/s"))
    return figures, ["last/first ~1: a cached sub-pixel costs the same anywhere in the "
                     "image; uncached/cached: the cache's speed-up at the last row."]


def serving_figures(result: dict[str, Any]) -> tuple[list[Figure], list[str]]:
    """serving's batching on/off requests/s at 32 clients ("speedup_32_clients"), the
    requests/s of each API and batching setting at 32 clients ("rows"), and the soak's
    errors plus wrong answers ("soak")."""
    if "rows" not in result:
        return [], ["no load rows (--skip_load): no figures."]
    figures = [Figure("serving", f"batching on/off at {SERVING_CLIENTS} clients req/s",
                      result["speedup_32_clients"])]
    for row in result["rows"]:
        if row["clients"] == SERVING_CLIENTS:
            figures.append(Figure(
                "serving", f"{row.get('api', 'rest')} batching {row['batching']}, "
                f"{SERVING_CLIENTS} clients", row["requests_per_s"], "req/s"))
    soak = result.get("soak")
    notes = ["clients and server share the CPU; the on/off ratio is the figure to compare "
             "(goal >= 3x)."]
    if soak:
        figures.append(Figure("serving", "soak errors + wrong answers",
                              soak["errors"] + soak["wrong"], "errors", "lower"))
    else:
        notes.append("no soak in the result.")
    return figures, notes
