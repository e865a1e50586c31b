"""The site builds with `mkdocs build --strict` (broken links, anchors, pages missing from
the nav and unmarked command blocks all fail it); the generated reference is current; the
README is the two-screen front page."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from docsite import reference, runner

pytest.importorskip("mkdocs")


def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=runner.REPO, env=env, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "flags" / "index.html").exists()
    python_api = (tmp_path / "site" / "reference" / "python-api" / "index.html").read_text()
    assert "register_problem" in python_api  # mkdocstrings rendered the registry


def test_the_generated_reference_is_current():
    stale = reference.stale_pages()
    assert not stale, "; ".join(map(str, stale))


def test_a_stale_generated_page_is_found(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(runner.REPO / "docs", docs)
    page = docs / "reference" / "decode-hparams.md"
    page.write_text(page.read_text(encoding="utf-8").replace("`beam_size`", "`beam_width`"),
                    encoding="utf-8")
    stale = reference.stale_pages(docs, only=("reference/decode-hparams.md",))
    assert [str(s) for s in stale] == [
        "docs/reference/decode-hparams.md is stale: run python -m docsite reference"]


def test_a_stale_regression_curve_is_found(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(runner.REPO / "docs", docs)
    curves = sorted((docs / "results" / "curves").glob("*.svg"))
    assert len(curves) >= 20  # every CPU case of the table has its curve
    curves[0].write_text(curves[0].read_text(encoding="utf-8").replace("PASS", "FAIL"),
                         encoding="utf-8")
    stale = reference.stale_pages(docs, only=("results/regression.md",))
    assert [str(s) for s in stale] == [
        "docs/results/regression.md is stale: run python -m docsite reference"]


def test_readme_is_the_front_page():
    readme = pathlib.Path(runner.REPO, "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert 'python -m pytest -n 2 -m "not slow"' in readme
    assert "pip install -r requirements-ci.txt -e . && t2t-trainer --generate_data" in readme
