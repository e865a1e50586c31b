"""benchmarks/history.py: the code identity (commit + diff hash), load and machine keys."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

try:
    from benchmarks import history
except ImportError:  # pytest's importlib mode does not put the repository root on sys.path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from benchmarks import history


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                   check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_hashes_the_uncommitted_diff(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    clean = history.git_commit(str(tmp_path))
    assert re.fullmatch(r"[0-9a-f]{7,}", clean["commit"])
    assert clean["dirty"] is False and clean["diff"] is None
    (tmp_path / "a.py").write_text("x = 2\n")
    first = history.git_commit(str(tmp_path))
    assert first["dirty"] is True and re.fullmatch(r"[0-9a-f]{12}", first["diff"])
    assert history.git_commit(str(tmp_path)) == first  # the same code, the same identity
    (tmp_path / "a.py").write_text("x = 3\n")
    assert history.git_commit(str(tmp_path))["diff"] != first["diff"]
    (tmp_path / "new.py").write_text("untracked\n")  # untracked files do not count
    (tmp_path / "a.py").write_text("x = 2\n")
    assert history.git_commit(str(tmp_path)) == first


def test_git_commit_outside_a_repository(tmp_path):
    assert history.git_commit(str(tmp_path)) == {"commit": None, "dirty": None, "diff": None}


def test_load_average_is_three_rounded_figures():
    load = history.load_average()
    assert len(load) == 3 and all(x >= 0 and round(x, 2) == x for x in load)


def test_code_and_host_keys():
    def entry(**git):
        return {"git": git, "host": {"cpu_model": "EPYC", "cpus": 2, "hostname": "h1"}}

    assert history.code_key(entry(commit="abc", dirty=False, diff=None)) == ("abc", None)
    assert history.code_key(entry(commit="abc", dirty=True, diff="d1")) == ("abc", "d1")
    # A dirty tree recorded without a diff hash (older entries): the code is unknown.
    assert history.code_key(entry(commit="abc", dirty=True)) is None
    assert history.code_key(entry(commit=None, dirty=None)) is None
    assert history.code_key({}) is None
    assert history.host_key(entry()) == ("EPYC", 2)  # the hostname is not part of it
    assert history.host_key({}) == (None, None)
