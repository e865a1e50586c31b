"""docsite.screenshots: the docs' screenshots, made by code. The slow test makes all three
from short real runs (t2t-trainer, t2t-exporter, t2t-serve, TensorBoard, t2t-decoder,
headless Chromium); the others check what is cheap: the command line, the server and
tool handling, the samples page, and that the PNGs the tutorials show are there."""

import json
import sys

import pytest

from docsite import screenshots
from tests.helpers.browser import CHROMEDRIVER, CHROMIUM, MISSING


def _image(path, width, height, pattern):
    from PIL import Image

    image = Image.new("RGB", (width, height), "white")
    if pattern:
        image.putdata([((x * 7) % 256, (y * 3) % 256, 90) for y in range(height)
                       for x in range(width)])
    image.save(path)
    return path


@pytest.mark.parametrize("argv, message", [
    (["--only", "the-moon"], "invalid choice: 'the-moon'"),
    (["--reverse_steps", "0"], "must be at least 1, not 0"),
    (["--samples", "-3"], "must be at least 1, not -3"),
])
def test_bad_arguments_exit_2_naming_the_problem(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        screenshots.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_out_must_be_a_folder(tmp_path, capsys):
    afile = tmp_path / "a.png"
    afile.write_bytes(b"")
    with pytest.raises(SystemExit) as exit_:
        screenshots.main(["--out", str(afile)])
    assert exit_.value.code == 2 and "is a file, not a folder" in capsys.readouterr().err


def test_without_chromium_it_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(screenshots, "CHROMIUM", None)
    assert screenshots.main(["--out", str(tmp_path / "shots")]) == 2
    assert MISSING in capsys.readouterr().err
    assert not (tmp_path / "shots").exists()


def test_background_yields_the_ready_match_then_stops_the_server(tmp_path):
    server = [sys.executable, "-c",
              "import time; print('warming up'); print('Serving on http://127.0.0.1:1234', "
              "flush=True); time.sleep(600)"]
    with screenshots.background(server, r"Serving on (http://\S+)", tmp_path / "log",
                                tmp_path) as ready:
        assert ready.group(1) == "http://127.0.0.1:1234"
    assert "warming up" in (tmp_path / "log").read_text()


def test_a_server_that_ends_without_the_ready_line_is_an_error(tmp_path):
    server = [sys.executable, "-c", "print('error: no models in /nowhere'); raise SystemExit(1)"]
    with pytest.raises(screenshots.ScreenshotError, match="no models in /nowhere"):
        with screenshots.background(server, "Serving on", tmp_path / "log", tmp_path):
            pass


def test_a_failing_tool_is_an_error_with_the_end_of_its_output(tmp_path):
    with pytest.raises(screenshots.ScreenshotError, match=r"exited 3(.|\n)*disk full"):
        screenshots.run_tool([sys.executable, "-c", "print('disk full'); raise SystemExit(3)"],
                             tmp_path / "log", tmp_path)


def test_samples_page_has_a_row_per_class_and_the_commands(tmp_path):
    samples = tmp_path / "gen" / "samples"
    samples.mkdir(parents=True)
    names = [f"{r:03d}_{c}_{k}.png" for r, c in enumerate(["T-shirt_top", "Trouser"])
             for k in range(3)]
    for name in names:
        _image(samples / name, 28, 28, pattern=True)
    (samples / "paths.txt").write_text("".join(f"gen/samples/{n}\n" for n in names))
    (tmp_path / "gen" / "eval_results.jsonl").write_text(
        json.dumps({"step": 7, "bits_per_dim": 4.123}) + "\n")
    options = screenshots.Options(tmp_path, image_steps=7, samples=3)
    page = screenshots.samples_page(tmp_path / "gen", screenshots.image_commands(options))
    assert page.count("<tr>") == 2 and page.count("<img") == 6
    assert page.index("T-shirt top") < page.index("Trouser")
    assert "dev 4.12 bits/dim at step 7" in page
    assert "--train_steps=7" in page and "num_samples=3" in page


def test_png_facts(tmp_path):
    assert screenshots.png_facts(_image(tmp_path / "flat.png", 30, 20, False)) == (30, 20, 1)
    width, height, colours = screenshots.png_facts(_image(tmp_path / "p.png", 40, 10, True))
    assert (width, height) == (40, 10) and colours > 30


@pytest.mark.parametrize("name", screenshots.SHOTS)
def test_the_docs_screenshots_are_there(name):
    """The PNGs the tutorials show, as `python -m docsite.screenshots` wrote them."""
    width, height, colours = screenshots.png_facts(screenshots.OUT / f"{name}.png")
    assert (width, height) == (screenshots.WIDTH, screenshots.HEIGHT) and colours > 50


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)
def test_all_three_shots_from_short_real_runs(tmp_path, capsys):
    out = tmp_path / "shots"
    argv = ["--out", str(out), "--work", str(tmp_path / "work"), "--reverse_steps", "200",
            "--image_steps", "20", "--samples", "2"]
    assert screenshots.main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    for name in screenshots.SHOTS:
        png = out / f"{name}.png"
        width, height, colours = screenshots.png_facts(png)
        assert (width, height) == (screenshots.WIDTH, screenshots.HEIGHT), name
        assert colours > 50 and png.stat().st_size > 10_000, (name, colours)
        assert f"wrote {png.resolve()} (1200x800, " in printed
    logs = tmp_path / "work" / "logs"
    assert {"train_reverse.log", "serve.log", "tensorboard.log", "decode_gen.log"} <= {
        p.name for p in logs.iterdir()}
