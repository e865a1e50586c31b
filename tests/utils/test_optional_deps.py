"""Tests of t2t.utils.optional_deps: a missing optional dependency is one clear line
naming setup.py's extra (in the library, and as a binary's `error:` line and exit
status 1), and every require() names an extra setup.py has, holding that package."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import re
import subprocess
import sys

import pytest

from t2t.utils import optional_deps

ROOT = pathlib.Path(__file__).resolve().parents[2]
HIDE_AND_RUN = ("import sys\n"
                "for name in {hidden!r}:\n"
                "    sys.modules[name] = None  # as if not installed\n"
                "sys.argv = [{binary!r}, *sys.argv[1:]]\n"
                "from t2t.bin.{module} import run\n"
                "run()\n")


def _run_without(hidden: list[str], binary: str, *args: str) -> subprocess.CompletedProcess:
    """`binary` (its console-script entry point) run with the `hidden` modules missing."""
    code = HIDE_AND_RUN.format(hidden=hidden, binary=binary,
                               module=binary.replace("-", "_"))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_require_returns_the_module():
    assert optional_deps.require("json", "tuning", "t2t-tuner") is json
    decoder = optional_deps.require("json.decoder", "tuning", "t2t-tuner")
    assert decoder is sys.modules["json.decoder"]


def test_missing_module_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(optional_deps.MissingDependencyError) as raised:
        optional_deps.require("optuna", "tuning", "t2t-tuner")
    assert isinstance(raised.value, ImportError) and raised.value.name == "optuna"
    assert str(raised.value) == ("t2t-tuner needs optuna, which is not installed: "
                                 "pip install 't2t[tuning]'")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(optional_deps.MissingDependencyError, match=re.escape(
            "plots needs matplotlib, which is not installed: pip install 't2t[regression]'")):
        optional_deps.require("matplotlib.figure", "regression", "plots")


def test_installed_but_broken_module_says_why(tmp_path, monkeypatch):
    (tmp_path / "t2t_broken_extra").mkdir()
    (tmp_path / "t2t_broken_extra" / "__init__.py").write_text("import t2t_no_such_dep_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(optional_deps.MissingDependencyError) as raised:
        optional_deps.require("t2t_broken_extra", "tuning", "t2t-tuner")
    assert str(raised.value) == (
        "t2t-tuner needs t2t_broken_extra, which cannot be imported (ModuleNotFoundError: "
        "No module named 't2t_no_such_dep_xyz'): pip install 't2t[tuning]'")


def test_library_call_sites_name_their_extra(monkeypatch):
    from t2t.decoding import text_metrics
    from t2t.tuning import report, study

    for name in ("rouge_score", "rouge_score.rouge_scorer"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=re.escape(
            "ROUGE needs rouge_score, which is not installed: pip install "
            "'t2t[summarization]'")):
        text_metrics.rouge_scores(["a b"], ["a b"])
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(optional_deps.MissingDependencyError, match=re.escape(
            "t2t-tuner's plots needs matplotlib, which is not installed")):
        report._figure(4, 3)
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(optional_deps.MissingDependencyError, match="t2t-tuner needs optuna"):
        study.make_sampler(study.TunerConfig(sampler="random"), None, 0)


def test_tuner_without_optuna_ends_in_one_error_line():
    result = _run_without(["optuna"], "t2t-tuner", "--problem=p", "--model=m",
                          "--hparams_set=h", "--hparams_range=r", "--objective=accuracy")
    assert result.returncode == 1
    assert result.stderr == ("error: t2t-tuner needs optuna, which is not installed: "
                             "pip install 't2t[tuning]'\n")


def test_tuner_cmaes_sampler_without_cmaes(tmp_path):
    ranges = tmp_path / "ranges.py"
    ranges.write_text("from t2t import registry\n\n\n@registry.register_ranged_hparams\n"
                      "def optional_deps_test_range(rhp):\n"
                      "    rhp.set_float('learning_rate_constant', 0.1, 1.0)\n")
    result = _run_without(["cmaes"], "t2t-tuner", f"--t2t_usr_dir={ranges}", "--problem=p",
                          "--model=transformer", "--hparams_set=transformer_test",
                          "--hparams_range=optional_deps_test_range", "--objective=accuracy",
                          "--sampler=cmaes", f"--output_dir={tmp_path / 'study'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: --sampler=cmaes needs cmaes, which is not installed: pip install "
        "'t2t[tuning]' (or use --sampler=tpe).")


def _extras() -> dict[str, list[str]]:
    """setup.py's extras_require (read, not run: setup.py installs when run)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no extras_require")


def _require_calls() -> list[tuple[str, str, str]]:
    """(file, module, extra) of every optional_deps.require(...) call in the project."""
    calls = []
    for folder in ("t2t", "regression", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "require"
                        and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "optional_deps"):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    assert all(isinstance(arg, ast.Constant) for arg in node.args[:2]), (
                        f"{where}: give require() the module and extra as literals")
                    module, extra = (arg.value for arg in node.args[:2])
                    calls.append((str(path.relative_to(ROOT)), module, extra))
    return calls


def test_every_require_names_an_extra_of_setup_py_holding_the_package():
    extras = _extras()
    assert extras["profile"] == ["tensorboard-plugin-profile"]
    calls = _require_calls()
    files = {file for file, _, _ in calls}
    assert {"t2t/bin/t2t_tuner.py", "t2t/tuning/study.py", "t2t/tuning/report.py",
            "t2t/decoding/text_metrics.py"} <= files
    for file, module, extra in calls:
        assert extra in extras, f"{file}: require({module!r}, {extra!r}): no such extra"
        packages = {re.split(r"[<>=!~\[;\s]", requirement)[0].replace("-", "_").lower()
                    for requirement in extras[extra]}
        # The import name may differ from the distribution's (grpc: grpcio).
        top = module.split(".")[0]
        names = {top, *(d.replace("-", "_").lower()
                        for d in importlib.metadata.packages_distributions().get(top, []))}
        assert names & packages, (file, module, extra, packages)


def test_no_bare_import_of_the_tuning_extra():
    """`import optuna` and the like go through require(); the `from optuna.trial import
    ...` that remain run only once a study (hence optuna) exists."""
    for folder in ("t2t/tuning", "t2t/bin", "t2t/decoding"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            bare = r"^\s*(import (optuna|matplotlib|cmaes|rouge_score)\b|from rouge_score )"
            assert not re.search(bare, text, re.M), path
