"""Tests of t2t.usr_dir: importing a user's own problems and hparams sets."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from t2t import registry, usr_dir

USER_MODULE = """
from t2t import registry
from t2t.hparams import basic
from t2t.problems import algorithmic


@registry.register_problem
class {cls}(algorithmic.AlgorithmicReverseBinary40Test):
    train_size = 20
    dev_size = 5


@registry.register_hparams
def {hparams}():
    hp = basic.basic_params1()
    hp.batch_size = 128
    return hp
"""


def _write_package(root, package: str, cls: str, hparams: str) -> str:
    path = root / package
    path.mkdir()
    (path / "__init__.py").write_text(f"from {package} import my_problems  # noqa: F401\n")
    (path / "my_problems.py").write_text(USER_MODULE.format(cls=cls, hparams=hparams))
    return str(path)


@pytest.fixture
def isolated(monkeypatch):
    """Restores sys.path and sys.modules and unregisters what a test's user code adds."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules_before = set(sys.modules)
    names: list[tuple[str, str]] = []
    yield names
    for kind, name in names:
        registry.REGISTRIES[kind].unregister(name)
    for module in set(sys.modules) - modules_before:
        if module.startswith(("zz_t2t_test_usr", "t2t_usr_zz_t2t_test_usr")):
            del sys.modules[module]


def test_package_dir_registrations_become_visible(tmp_path, isolated):
    problem = "zz_t2t_test_usr_pkg_reverse"
    hparams = "zz_t2t_test_usr_pkg_hparams"
    isolated.extend([("problem", problem), ("hparams", hparams)])
    path = _write_package(tmp_path, "zz_t2t_test_usr_pkg", "ZzT2tTestUsrPkgReverse", hparams)
    assert problem not in registry.list_problems()

    module = usr_dir.import_usr_dir(path + "/")  # a trailing slash is fine
    assert module.__name__ == "zz_t2t_test_usr_pkg"
    assert problem in registry.list_problems()
    assert hparams in registry.list_hparams()
    instance = registry.problem(problem)
    assert type(instance).__name__ == "ZzT2tTestUsrPkgReverse"
    assert instance.name == problem and instance.dataset_filename() == problem
    assert registry.problem(problem + "_rev").was_reversed
    assert registry.hparams(hparams)().batch_size == 128
    # A second import is a no-op, not a duplicate registration.
    assert usr_dir.import_usr_dir(path) is module


def test_single_py_file(tmp_path, isolated):
    problem = "zz_t2t_test_usr_file_reverse"
    hparams = "zz_t2t_test_usr_file_hparams"
    isolated.extend([("problem", problem), ("hparams", hparams)])
    path = tmp_path / "zz_t2t_test_usr_file.py"
    path.write_text(USER_MODULE.format(cls="ZzT2tTestUsrFileReverse", hparams=hparams))

    module = usr_dir.import_usr_dir(str(path))
    assert module.__name__ == "t2t_usr_zz_t2t_test_usr_file"
    assert sys.modules[module.__name__] is module
    assert registry.problem_class(problem) is module.ZzT2tTestUsrFileReverse
    assert registry.hparams(hparams) is getattr(module, hparams)
    assert usr_dir.import_usr_dir(str(path)) is module


def test_missing_path_error_names_the_path(tmp_path):
    missing = tmp_path / "no_such_dir"
    with pytest.raises(FileNotFoundError) as info:
        usr_dir.import_usr_dir(str(missing))
    message = str(info.value)
    assert f"--t2t_usr_dir={str(missing)!r}" in message
    assert "no such directory or .py file" in message


def test_missing_py_file_is_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory or .py file"):
        usr_dir.import_usr_dir(str(tmp_path / "absent.py"))


def test_dir_without_init_error_names_the_path_and_the_fix(tmp_path):
    plain = tmp_path / "not_a_package"
    plain.mkdir()
    (plain / "module.py").write_text("raise AssertionError('must not be imported')\n")
    with pytest.raises(FileNotFoundError) as info:
        usr_dir.import_usr_dir(str(plain))
    message = str(info.value)
    assert str(plain) in message
    assert "has no __init__.py" in message
    assert "imports your problem/model modules" in message
    assert "point at one .py file" in message


def test_t2t_datagen_with_a_user_dir(tmp_path):
    """End to end: the binary imports the user dir, generates its problem, lists it."""
    if shutil.which("t2t-datagen") is None:
        pytest.skip("t2t-datagen is not installed")
    problem = "zz_t2t_test_usr_cli_reverse"
    hparams = "zz_t2t_test_usr_cli_hparams"
    path = _write_package(tmp_path, "zz_t2t_test_usr_cli", "ZzT2tTestUsrCliReverse", hparams)
    data_dir = tmp_path / "data"

    result = subprocess.run(
        ["t2t-datagen", f"--t2t_usr_dir={path}", f"--problem={problem}",
         f"--data_dir={data_dir}", "--progress=false"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Generating {problem} into {data_dir}" in result.stdout
    shards = sorted(os.path.basename(p) for p in glob.glob(str(data_dir / f"{problem}-*")))
    assert shards == [f"{problem}-dev-00000-of-00001", f"{problem}-train-00000-of-00001"]
    assert all(os.path.getsize(data_dir / s) > 0 for s in shards)
    train_line = next(line.split() for line in result.stdout.splitlines()
                      if line.split()[:1] == ["train"])
    assert train_line[1:4] == ["20", "1", "0"]  # the user class's train_size, 1 shard

    result = subprocess.run(
        ["t2t-datagen", f"--t2t_usr_dir={path}", "--registry_help"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert f"  {problem}" in lines
    assert f"  {hparams}" in lines
    assert "  algorithmic_reverse_binary40_test" in lines
