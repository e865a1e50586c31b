"""`python -m docsite.screenshots [--only NAME] [--out DIR]`: the docs' screenshots, made
by code rather than by hand (issue #53).

Each shot trains what it needs with the project's own binaries in a scratch folder (short
runs: --reverse_steps, --image_steps; --work keeps them, and a later call reuses them),
starts the server it shows on a free 127.0.0.1 port, and photographs it in
headless Chromium (Selenium and chromedriver, as tests/serving/test_page.py drives the
try-it page), at 1200 x 800:

  try-it-page          t2t-serve's try-it page after decoding a binary string with the
                       quick start model (output, score, attention heat map)
  tensorboard-scalars  TensorBoard's Scalars dashboard of that run: loss, accuracy and
                       accuracy_per_sequence
  image-samples        t2t-decoder's samples of an imagetransformer on
                       image_fashion_mnist_rev, one row per class

Written to docs/assets/screenshots/NAME.png (--out), which the tutorials show.
tests/docsite/test_screenshots.py runs it (slow set)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from docsite.runner import REPO
from tests.helpers.browser import CHROMEDRIVER, CHROMIUM, MISSING, choose_model, chrome, wait_text

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

WIDTH, HEIGHT = 1200, 800
OUT = REPO / "docs" / "assets" / "screenshots"
SHOTS = ("try-it-page", "tensorboard-scalars", "image-samples")
REVERSE_PROBLEM = "algorithmic_reverse_binary40_test"
REVERSE_INPUT = "1 0 1 1 0"
TENSORBOARD_TAGS = "^(loss|accuracy|accuracy_per_sequence)$"
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
SERVER_START_SECONDS = 300
PAGE_SECONDS = 180


class ScreenshotError(RuntimeError):
    """A step of a screenshot failed: the message names it and ends with its output."""


@dataclasses.dataclass(frozen=True)
class Options:
    """Where the scratch runs go and how long they train."""

    work: pathlib.Path
    reverse_steps: int = 800
    image_steps: int = 400
    samples: int = 8


# ------------------------------------------------------------------ processes
def binary(name: str) -> str:
    """The path of the project's console script (or TensorBoard's) `name`."""
    beside = pathlib.Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise ScreenshotError(f"{name} is not installed: pip install -r requirements-ci.txt -e .")
    return found


def _tail(path: pathlib.Path, lines: int = 30) -> str:
    """The last `lines` lines of a log."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_tool(args: list[str], log: pathlib.Path, cwd: pathlib.Path) -> None:
    """Runs a binary to the end, its output in `log`; a non-zero exit is a ScreenshotError."""
    started = time.monotonic()
    print(f"  $ {' '.join(pathlib.Path(a).name if i == 0 else a for i, a in enumerate(args))}",
          flush=True)
    with log.open("w") as f:
        code = subprocess.run(args, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    if code:
        raise ScreenshotError(f"{' '.join(args)} exited {code}; the end of {log}:\n{_tail(log)}")
    print(f"    done in {time.monotonic() - started:.0f} s", flush=True)


@contextlib.contextmanager
def background(args: list[str], ready: str, log: pathlib.Path,
               cwd: pathlib.Path) -> Iterator[re.Match[str]]:
    """Starts a server, yields the match of `ready` in its output, then stops it (SIGTERM
    to its process group, SIGKILL after 20 s)."""
    print(f"  $ {pathlib.Path(args[0]).name} {' '.join(args[1:])} &", flush=True)
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    found: list[re.Match[str]] = []
    seen = threading.Event()

    def read() -> None:
        with log.open("w") as f:
            for line in process.stdout:  # type: ignore[union-attr]
                f.write(line)
                f.flush()
                if not found and (match := re.search(ready, line)):
                    found.append(match)
                    seen.set()
        seen.set()  # the server ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not seen.wait(SERVER_START_SECONDS) or not found:
            raise ScreenshotError(f"{args[0]} never printed /{ready}/; the end of {log}:\n"
                                  f"{_tail(log)}")
        yield found[0]
    finally:
        _stop(process)
        reader.join(10)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the process group of `process`, SIGKILL if it is still there after 20 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


# ------------------------------------------------------------------ the browser
@contextlib.contextmanager
def window() -> Iterator[WebDriver]:
    """Headless Chromium whose page area is exactly WIDTH x HEIGHT."""
    driver = chrome(WIDTH, HEIGHT)
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


def wait_until(driver: WebDriver, condition: Callable[[WebDriver], object],
               seconds: float, what: str) -> object:
    """WebDriverWait(driver, seconds).until(condition), naming `what` when it times out."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.5).until(condition)
    except TimeoutException as e:
        raise ScreenshotError(f"{what}: not seen within {seconds:.0f} s") from e


def save_png(driver: WebDriver, path: pathlib.Path) -> None:
    """The page as PNG at `path`, re-encoded with PNG's optimizer."""
    from PIL import Image

    raw = path.with_suffix(".raw.png")
    if not driver.save_screenshot(str(raw)):
        raise ScreenshotError(f"Chromium wrote no screenshot for {path.name}")
    with Image.open(raw) as image:
        image.convert("RGB").save(path, optimize=True)
    raw.unlink()


def png_facts(path: pathlib.Path) -> tuple[int, int, int]:
    """(width, height, number of distinct colours, capped at 10,000) of a PNG."""
    from PIL import Image

    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(10_000)
        return image.width, image.height, 10_000 if colours is None else len(colours)


# ------------------------------------------------------------------ the runs
def quickstart_run(options: Options) -> pathlib.Path:
    """The quick start's command with `reverse_steps` steps (once per scratch folder)."""
    run = options.work / "t2t_train" / "reverse"
    if (run / "eval_results.jsonl").exists():
        return run
    every = max(1, options.reverse_steps // 8)
    run_tool([binary("t2t-trainer"), "--generate_data", f"--problem={REVERSE_PROBLEM}",
              "--model=transformer", "--hparams_set=transformer_tiny",
              "--hparams=learning_rate_warmup_steps=400",
              f"--train_steps={options.reverse_steps}", f"--local_eval_frequency={every}",
              "--eval_steps=0", "--data_dir=t2t_data", "--output_dir=t2t_train/reverse"],
             options.work / "logs" / "train_reverse.log", options.work)
    return run


def exported_run(options: Options) -> pathlib.Path:
    """The quick start run with a t2t-exporter export (beam search, as docs/how-to/export.md)."""
    run = quickstart_run(options)
    if not (run / "export").is_dir():
        run_tool([binary("t2t-exporter"), f"--output_dir={run}",
                  "--decode_hparams=beam_size=4,alpha=0.6"],
                 options.work / "logs" / "export_reverse.log", options.work)
    return run


# ------------------------------------------------------------------ the shots
def shoot_try_it_page(options: Options, out: pathlib.Path) -> None:
    """t2t-serve's try-it page once it decoded REVERSE_INPUT: output, score, heat map."""
    from selenium.webdriver.common.by import By

    run = exported_run(options)
    serve = [binary("t2t-serve"), f"--output_dir={run}", "--model_name=reverse", "--port=0",
             "--rest_api_port=0"]
    with background(serve, r"Serving on (http://\S+)", options.work / "logs" / "serve.log",
                    options.work) as ready, window() as driver:
        driver.get(ready.group(1) + "/")
        wait_text(driver, "details", lambda t: "version" in t, PAGE_SECONDS)
        choose_model(driver, "reverse")
        driver.find_element(By.ID, "input").send_keys(REVERSE_INPUT)
        driver.find_element(By.ID, "run").click()
        wait_until(driver, lambda d: d.find_element(By.ID, "error").text
                   or not d.find_element(By.ID, "attention").get_attribute("hidden"),
                   PAGE_SECONDS, "the decode's attention heat map")
        error = driver.find_element(By.ID, "error").text
        if error:
            raise ScreenshotError(f"the try-it page shows an error: {error}")
        save_png(driver, out)


# Counts the drawn line paths of the scalar charts, through the shadow roots of
# TensorBoard's Polymer elements.
_COUNT_LINES = """
const count = (root) => {
  let n = [...root.querySelectorAll("path.line")]
      .filter((p) => (p.getAttribute("d") || "").length > 40).length;
  for (const e of root.querySelectorAll("*")) if (e.shadowRoot) n += count(e.shadowRoot);
  return n;
};
return count(document);
"""


def shoot_tensorboard_scalars(options: Options, out: pathlib.Path) -> None:
    """TensorBoard's Scalars dashboard of the quick start run, unsmoothed and unclipped:
    loss (train and eval), accuracy and accuracy_per_sequence (eval)."""
    run = quickstart_run(options)
    board = [binary("tensorboard"), f"--logdir={run.relative_to(options.work)}",
             "--host=127.0.0.1", "--port=0"]
    with background(board, r"TensorBoard \S+ at (http://\S+?)/? ",
                    options.work / "logs" / "tensorboard.log", options.work) as ready, \
            window() as driver:
        query = urllib.parse.urlencode({"_smoothingWeight": 0, "tagFilter": TENSORBOARD_TAGS},
                                       quote_via=urllib.parse.quote)
        driver.get(f"{ready.group(1)}/")  # "Ignore outliers" off: a setting kept in storage
        driver.execute_script("localStorage.setItem('_ignoreYOutliers', 'false');")
        driver.get(f"{ready.group(1)}/#scalars&{query}")
        driver.refresh()
        # accuracy and accuracy_per_sequence: eval; loss: train and eval.
        wait_until(driver, lambda d: d.execute_script(_COUNT_LINES) >= 4, PAGE_SECONDS,
                   "TensorBoard's loss and accuracy charts")
        time.sleep(2)  # the charts' transitions
        save_png(driver, out)


def image_commands(options: Options) -> list[list[str]]:
    """docs/how-to/images.md's commands, `image_steps` steps, from Debian's Fashion-MNIST:
    train imagetransformer_tiny_cpu on image_fashion_mnist_rev, then sample it."""
    return [["t2t-trainer", "--generate_data", f"--data_mirror={FASHION_MNIST}",
             "--problem=image_fashion_mnist_rev", "--model=imagetransformer",
             "--hparams_set=imagetransformer_tiny_cpu", "--data_dir=t2t_data",
             "--output_dir=gen", f"--train_steps={options.image_steps}",
             f"--local_eval_frequency={options.image_steps}", "--eval_steps=5"],
            ["t2t-decoder", "--problem=image_fashion_mnist_rev", "--data_dir=t2t_data",
             "--output_dir=gen",
             f"--decode_hparams=num_samples={options.samples},temperature=1.0,seed=1",
             "--decode_to_file=gen/samples.png"]]


def image_run(options: Options) -> pathlib.Path:
    """The run folder of image_commands, run unless their outputs are there."""
    run = options.work / "gen"
    train, decode = image_commands(options)
    if not (run / "eval_results.jsonl").exists():
        run_tool([binary(train[0]), *train[1:]], options.work / "logs" / "train_gen.log",
                 options.work)
    if not (run / "samples" / "paths.txt").exists():
        run_tool([binary(decode[0]), *decode[1:]], options.work / "logs" / "decode_gen.log",
                 options.work)
    return run


def samples_page(run: pathlib.Path, commands: list[list[str]]) -> str:
    """An HTML page of the decoder's sample PNGs (run/samples/paths.txt), one row per
    class, each image scaled up without smoothing, beside the commands that made them."""
    rows: dict[str, list[pathlib.Path]] = {}
    for line in (run / "samples" / "paths.txt").read_text().split():
        path = run / "samples" / pathlib.Path(line).name
        row = re.fullmatch(r"\d+_(.+)_\d+\.png", path.name)
        rows.setdefault(row.group(1) if row else "", []).append(path)
    table = "\n".join(
        f"<tr><th>{html.escape(name.replace('_', ' '))}</th>"
        + "".join(f'<td><img src="{p.as_uri()}"></td>' for p in paths) + "</tr>"
        for name, paths in rows.items())
    results = (run / "eval_results.jsonl").read_text().splitlines()
    last = json.loads(results[-1]) if results else {}
    facts = (f"dev {last['bits_per_dim']:.2f} bits/dim at step {last['step']}"
             if "bits_per_dim" in last else "")
    shown = "\n".join(html.escape(" \\\n    ".join(c)) for c in commands)
    return f"""<!doctype html><meta charset="utf-8"><style>
body {{ margin: 24px; font: 15px "DejaVu Sans", sans-serif; color: #222; display: flex;
       gap: 28px; }}
th {{ text-align: right; font-weight: normal; padding-right: 10px; white-space: nowrap; }}
td {{ padding: 2px; }}
img {{ width: 64px; height: 64px; image-rendering: pixelated; display: block; }}
pre {{ background: #f2f2f4; padding: 10px; border-radius: 4px; font-size: 11.5px; }}
h1 {{ font-size: 19px; margin: 0 0 12px; }} p {{ line-height: 1.45; margin: 0 0 10px; }}
</style><table>{table}</table><div>
<h1>t2t-decoder samples of image_fashion_mnist_rev</h1>
<p>One row per class asked for, each image one PNG the decoder wrote (28 x 28, drawn at
64 x 64). imagetransformer_tiny_cpu, {facts}:</p>
<pre>{shown}</pre></div>"""


def shoot_image_samples(options: Options, out: pathlib.Path) -> None:
    """The decoder's samples of a short imagetransformer run, as samples_page lays them
    out, photographed by `chromium --headless --screenshot`."""
    run = image_run(options)
    page = run / "samples.html"
    page.write_text(samples_page(run, image_commands(options)))
    raw = out.with_suffix(".raw.png")
    run_tool([CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
              "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
              f"--screenshot={raw}", page.as_uri()],
             options.work / "logs" / "chromium_samples.log", options.work)
    from PIL import Image

    with Image.open(raw) as image:
        image.convert("RGB").save(out, optimize=True)
    raw.unlink()


SHOOTERS: dict[str, Callable[[Options, pathlib.Path], None]] = {
    "try-it-page": shoot_try_it_page,
    "tensorboard-scalars": shoot_tensorboard_scalars,
    "image-samples": shoot_image_samples,
}


# ------------------------------------------------------------------ the command
def _positive(text: str) -> int:
    """argparse's type for step and sample counts."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; argparse exits 2 on a bad one."""
    parser = argparse.ArgumentParser(prog="python -m docsite.screenshots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=SHOTS, metavar="NAME",
                        help=f"one shot (repeatable): {', '.join(SHOTS)}; default: all")
    parser.add_argument("--out", type=pathlib.Path, default=OUT,
                        help="the folder of the PNGs (default: docs/assets/screenshots)")
    parser.add_argument("--work", type=pathlib.Path,
                        help="keep the scratch runs and logs here (default: a temporary "
                             "folder, removed at the end); runs found there are reused")
    parser.add_argument("--reverse_steps", type=_positive, default=Options.reverse_steps,
                        help="training steps of the quick start model")
    parser.add_argument("--image_steps", type=_positive, default=Options.image_steps,
                        help="training steps of the imagetransformer")
    parser.add_argument("--samples", type=_positive, default=Options.samples,
                        help="samples per class in image-samples")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file, not a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    """Makes the shots asked for; 0 when all were written, 1 when one failed, 2 without
    Chromium (argparse exits 2 on a bad command line)."""
    args = parse_args(argv)
    if not (CHROMIUM and CHROMEDRIVER):
        print(f"error: docsite.screenshots {MISSING}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        work = args.work or pathlib.Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="t2t_screenshots_")))
        (work / "logs").mkdir(parents=True, exist_ok=True)
        options = Options(work.resolve(), args.reverse_steps, args.image_steps, args.samples)
        for name in args.only or SHOTS:
            started, out = time.monotonic(), args.out.resolve() / f"{name}.png"
            print(f"{name}:", flush=True)
            try:
                SHOOTERS[name](options, out)
            except ScreenshotError as e:
                print(f"error: {name}: {e}", file=sys.stderr)
                return 1
            width, height, _ = png_facts(out)
            print(f"wrote {out} ({width}x{height}, {out.stat().st_size // 1024} KB) in "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
