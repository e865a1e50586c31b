"""Plots of the regression cases' eval curves: the PNG beside each case's output
(`run`), and the SVG files of the results page with the section that shows them
(`readme --curves DIR`).

The page's SVG files are byte-for-byte deterministic (fixed ids, no date, text as text),
so that the docs' stale check (`python -m docsite reference --check`) can compare them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

from regression.report import CaseResult, RegressionError
from t2t.utils import atomic_files

# Only files of this suffix in the curves folder are the generator's: the stale ones
# (a case that left the table) are removed, anything else is left alone.
SVG_SUFFIX = ".svg"


def plots_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _figure(result: CaseResult, size: tuple[float, float]):
    """A matplotlib figure of `result.curve`: the dev metric over training steps, with
    the band of that metric shaded when the case checks one."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    metric = result.curve_metric or result.metric
    steps, values = zip(*result.curve, strict=True)
    fig, ax = plt.subplots(figsize=size)
    band = result.bands.get(metric) or (result.band if metric == result.metric else None)
    if band:
        ax.axhspan(band[0], band[1], color="tab:green", alpha=0.15,
                   label=f"band [{band[0]:g}, {band[1]:g}]")
    ax.plot(steps, values, marker="o", markersize=3, label=f"dev {metric}")
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    final = "" if result.value is None else f", {result.metric} {result.value:.4f}"
    ax.set_title(f"{result.name}: {result.status}{final}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return plt, fig


def plot_curve(result: CaseResult, path: str) -> str | None:
    """A PNG (or, by the suffix of `path`, SVG) of the case's eval curve; None without a
    curve."""
    if not result.curve:
        return None
    plt, fig = _figure(result, (6, 4))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _write_svg(result: CaseResult, path: str) -> None:
    """The curve as a deterministic SVG at `path` (written only when it changes)."""
    import io

    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": result.name, "svg.fonttype": "none"}):
        plt, fig = _figure(result, (4.4, 2.9))
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
        plt.close(fig)
    text = buffer.getvalue()
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    atomic_files.write_text(path, text)


def write_curve_svgs(cases: Sequence[dict[str, Any]], folder: str) -> list[str]:
    """Writes `folder`/NAME.svg for every case of a (merged) report that has a curve and
    removes the folder's other *.svg files; returns the names plotted, in order."""
    if not plots_available():
        raise RegressionError("plotting the curves needs matplotlib: pip install -e "
                              "'.[regression]' (or leave out --curves)")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise RegressionError(f"cannot make the curves folder {folder}: {e}") from e
    plotted = []
    for data in cases:
        result = CaseResult.from_report(data)
        if result.curve:
            _write_svg(result, os.path.join(folder, result.name + SVG_SUFFIX))
            plotted.append(result.name)
    keep = {name + SVG_SUFFIX for name in plotted}
    for stale in sorted(os.listdir(folder)):
        if stale.endswith(SVG_SUFFIX) and stale not in keep:
            os.remove(os.path.join(folder, stale))
    return plotted


def curves_section(names: Sequence[str], folder: str, page: str | None) -> str:
    """Markdown showing each case's curve (image links relative to `page`'s folder)."""
    if not names:
        return ""
    base = os.path.dirname(os.path.abspath(page)) if page else os.getcwd()
    where = os.path.relpath(os.path.abspath(folder), base).replace(os.sep, "/")
    lines = ["Eval curves (the dev metric at each evaluation of the run in the table; "
             "the band shaded where the case checks that metric):", ""]
    # attr_list's width: two curves side by side in the site's text column.
    lines += [f'![{name}]({where}/{name}{SVG_SUFFIX}){{ width="340" }}' for name in names]
    return "\n".join(lines)
