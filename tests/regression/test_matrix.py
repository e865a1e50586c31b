"""Tests of regression/matrix.py (`python -m regression matrix`) with fake Pythons: no
real venv is built, no TensorFlow is installed; the subprocesses, git snapshot and
files are real."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest

from regression import matrix, runner
from regression.case_spec import Case
from regression.report import CaseResult, RegressionError, write_report

SETUP_PY = os.path.join(matrix.REPO_ROOT, "setup.py")
REQUIREMENTS_CI = os.path.join(matrix.REPO_ROOT, "requirements-ci.txt")


def _distribution(requirement: str) -> str:
    name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_matrix_installs_the_extras_ci_installs():
    # CI installs requirements-ci.txt; a venv of the matrix that lacked one of its extras
    # failed every test of t2t-serve and the speech metrics (2026-11-30, TF 2.19)
    extras = matrix.setup_extras(SETUP_PY).split(",")
    assert {"dev", "serve", "speech", "import", "tuning"} <= set(extras)
    with open(REQUIREMENTS_CI, encoding="utf-8") as f:
        pinned = {_distribution(line) for line in f if "==" in line}
    namespace: dict = {}
    setup_text = open(SETUP_PY, encoding="utf-8").read()
    block = setup_text.split("extras_require=", 1)[1].split("    entry_points=", 1)[0]
    exec("extras_require = " + block.strip().rstrip(","), namespace)
    for extra, requirements in namespace["extras_require"].items():
        in_ci = {_distribution(r) for r in requirements} <= pinned
        assert in_ci == (extra in extras), (extra, requirements)


def test_each_version_pins_torch_as_ci_does():
    # requirements-ci.txt's CPU build; unpinned, pip took PyPI's CUDA build, which
    # segfaulted beside TensorFlow 2.20 in one process
    with open(REQUIREMENTS_CI, encoding="utf-8") as f:
        ci_torch = [line.strip() for line in f if line.startswith("torch==")]
    assert ci_torch and ci_torch[0].endswith("+cpu")
    for name in sorted(os.listdir(os.path.join(matrix.REPO_ROOT, "regression", "constraints"))):
        with open(os.path.join(matrix.REPO_ROOT, "regression", "constraints", name)) as f:
            assert ci_torch[0] in f.read().splitlines(), name


def test_extras_are_read_from_setup_py(tmp_path):
    setup = tmp_path / "setup.py"
    setup.write_text('setup(\n    extras_require={\n        "dev": ["pytest"],  # tests\n'
                     '        "profile": ["tensorboard-plugin-profile"],\n'
                     '        "serve-x": [\n            "aiohttp",\n        ],\n    },\n)\n')
    assert matrix.setup_extras(str(setup)) == "dev,serve-x"
    setup.write_text("setup(name='x')\n")
    with pytest.raises(RegressionError, match="no extras_require in"):
        matrix.setup_extras(str(setup))
SUPPORTED = ((2, 16), (2, 22))

PYTEST_OUTPUT = """\
........F..s.E
=========================== short test summary info ============================
SKIPPED [1] tests/test_a.py:3: needs a GPU
FAILED tests/models/test_x.py::test_loss_falls[mirrored] - AssertionError: 0.9 > 0.5
ERROR tests/bin/test_y.py::test_bin - RuntimeError: no checkpoint
ERROR tests/bin/test_y.py::test_bin - RuntimeError: no checkpoint
FAILED tests/test_z.py::test_plain
2 failed, 1234 passed, 7 skipped, 3 warnings, 1 error in 912.34s (0:15:12)
"""

# A stand-in for `python3` (creates venvs) and for each venv's python: pip, the package
# versions script, pytest, `regression run` and the t2t binaries, as the matrix calls them.
FAKE_PYTHON = textwrap.dedent("""\
    #!{python}
    import json, os, shutil, sys
    args = sys.argv[1:]
    log = os.environ.get("FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(args) + "\\n")
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    if args[:2] == ["-m", "venv"]:
        os.makedirs(os.path.join(args[2], "bin"))
        shutil.copy(__file__, os.path.join(args[2], "bin", "python"))
    elif args[:2] == ["-m", "pip"]:
        if os.environ.get("FAKE_PIP_FAIL"):
            print("Looking in indexes: ...")
            print("ERROR: Could not find a version that satisfies the requirement "
                  "tensorflow==2.19.* (from versions: 2.20.0)")
            print("ERROR: No matching distribution found for tensorflow==2.19.*")
            sys.exit(1)
    elif args[0] == "-c":
        print(json.dumps({{p: "9.9" for p in args[2:]}}))
    elif args[:2] == ["-m", "pytest"]:
        print(open(os.environ["FAKE_PYTEST_OUTPUT"]).read())
        sys.exit(1)
    elif args[:3] == ["-m", "regression", "run"]:
        os.makedirs(flags["output"])
        shutil.copy(os.environ["FAKE_REPORT"], os.path.join(flags["output"], "report.json"))
    elif args[1] == "t2t.bin.t2t_datagen":
        os.makedirs(flags["data_dir"])
    elif args[1] == "t2t.bin.t2t_trainer":
        os.makedirs(flags["output_dir"], exist_ok=True)
        with open(os.path.join(flags["output_dir"], "eval_results.jsonl"), "a") as f:
            f.write(json.dumps({{"step": 20, "loss": 1.25}}) + "\\n")
    """)


def _executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def fake_python(tmp_path, monkeypatch):
    """A fake `python3`, with FAKE_LOG recording every call of it and of its venvs."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    python = _executable(tmp_path / "python3", FAKE_PYTHON.format(python=sys.executable))
    return python, log


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


# ------------------------------------------------------------------- versions
def test_supported_range_is_read_from_setup_py(tmp_path):
    assert matrix.supported_range(matrix.committed_setup_py(matrix.REPO_ROOT))[0] >= (2, 16)
    assert matrix.supported_range('DEPS = ["tensorflow>=2.18.0,<3.1"]') == ((2, 18), (3, 1))
    with pytest.raises(RegressionError, match="no requirement"):
        matrix.supported_range('DEPS = ["tensorflow"]\n')
    with pytest.raises(RegressionError, match="cannot read setup.py at HEAD"):
        matrix.committed_setup_py(str(tmp_path))


def test_versions_are_parsed_deduplicated_and_checked_against_the_range():
    assert matrix.parse_versions(" 2.19, 2.20,2.19,2.21", SUPPORTED) == ["2.19", "2.20", "2.21"]
    with pytest.raises(RegressionError, match=r"bad TensorFlow version '2\.x'.*>=2\.16,<2\.22"):
        matrix.parse_versions("2.19,2.x", SUPPORTED)
    with pytest.raises(RegressionError, match=r"bad TensorFlow version '2\.19\.1'"):
        matrix.parse_versions("2.19.1", SUPPORTED)
    with pytest.raises(RegressionError, match=r"1\.15 is outside the supported range "
                                              r">=2\.16,<2\.22 \(setup\.py\)"):
        matrix.parse_versions("1.15", SUPPORTED)
    with pytest.raises(RegressionError, match="2.22 is outside"):
        matrix.parse_versions("2.21,2.22", SUPPORTED)


def test_the_command_line_names_a_bad_version_and_the_range(capsys):
    assert runner.main(["matrix", "--tf", "2.x"]) == 2
    err = capsys.readouterr().err
    assert "'2.x'" in err and ">=2.16,<2.22" in err
    assert runner.main(["matrix"]) == 2
    assert "--tf is required" in capsys.readouterr().err


def test_each_version_needs_its_constraints_file(tmp_path):
    assert matrix.constraints_file("2.19").endswith("regression/constraints/tf-2.19.txt")
    with pytest.raises(RegressionError, match="no constraints file .*tf-2.17.txt"):
        matrix.constraints_file("2.17", str(tmp_path))
    for version in ("2.19", "2.20", "2.21"):
        pins = matrix.pins(matrix.constraints_file(version))
        assert pins[:2] == [f"tensorflow=={version}.*", f"tensorflow-text=={version}.*"]
    assert "tensorflow-metadata<1.18" in matrix.pins(matrix.constraints_file("2.19"))


# ------------------------------------------------------------------- the cache
def test_a_cached_venv_is_reused_only_for_the_same_spec(tmp_path):
    constraints = tmp_path / "tf-2.19.txt"
    constraints.write_text("tensorflow==2.19.*\n")
    spec = matrix.install_spec("2.19", str(constraints), SETUP_PY)
    assert "tensorflow>=2.16,<2.22" in spec["setup_dependencies"]
    venv = tmp_path / "venv"
    assert not matrix.cached_venv_matches(str(venv), spec)  # nothing there
    (venv / "bin").mkdir(parents=True)
    (venv / matrix.SPEC_FILE).write_text(json.dumps(spec))
    assert not matrix.cached_venv_matches(str(venv), spec)  # no python in it
    (venv / "bin" / "python").write_text("")
    assert matrix.cached_venv_matches(str(venv), spec)
    assert not matrix.cached_venv_matches(str(venv), matrix.install_spec("2.20", str(constraints),
                                                                         SETUP_PY))
    constraints.write_text("tensorflow==2.19.*\nkeras<3.12\n")
    assert not matrix.cached_venv_matches(
        str(venv), matrix.install_spec("2.19", str(constraints), SETUP_PY))
    setup = tmp_path / "setup.py"
    setup.write_text(open(SETUP_PY).read().replace('"numpy>=1.26"', '"numpy>=2"'))
    assert matrix.install_spec("2.19", str(constraints), str(setup)) != matrix.install_spec(
        "2.19", str(constraints), SETUP_PY)


def test_a_failing_pip_is_reported_as_not_installable(tmp_path, fake_python, monkeypatch):
    python, calls = fake_python
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    constraints = tmp_path / "c.txt"
    constraints.write_text("")
    spec = matrix.install_spec("2.19", str(constraints), SETUP_PY)
    venv, log = tmp_path / "cache" / "tf-2.19", tmp_path / "install.log"
    result = matrix.ensure_venv("2.19", str(venv), str(tmp_path), spec, str(constraints),
                                str(log), python=python)
    assert result["status"] == matrix.NOT_INSTALLABLE
    assert result["error"].startswith("ERROR: Could not find a version")
    assert result["error"].endswith("No matching distribution found for tensorflow==2.19.*")
    assert not matrix.cached_venv_matches(str(venv), spec)  # rebuilt next time
    pip = _calls(calls)[1]
    assert pip[:4] == ["-m", "pip", "install", "-q"] and "tensorflow==2.19.*" in pip
    assert f"{tmp_path}[{spec['extras']}]" in pip


def test_a_venv_is_built_once_then_reused_with_the_new_snapshot(tmp_path, fake_python):
    python, calls = fake_python
    constraints = tmp_path / "c.txt"
    constraints.write_text("")
    spec = matrix.install_spec("2.20", str(constraints), SETUP_PY)
    venv, log = str(tmp_path / "tf-2.20"), str(tmp_path / "install.log")
    snap_a, snap_b = str(tmp_path / "src-a"), str(tmp_path / "src-b")
    os.makedirs(snap_a), os.makedirs(snap_b)
    first = matrix.ensure_venv("2.20", venv, snap_a, spec, str(constraints), log, python)
    second = matrix.ensure_venv("2.20", venv, snap_b, spec, str(constraints), log, python)
    assert (first["status"], second["status"]) == ("installed", "reused")
    venv_calls = [c for c in _calls(calls) if c[:2] == ["-m", "pip"]]
    assert len(venv_calls) == 2 and venv_calls[1][-3:] == ["--no-deps", "-e", snap_b]
    other = {**spec, "constraints_sha256": "0"}
    assert matrix.ensure_venv("2.20", venv, snap_b, other, str(constraints), log,
                              python)["status"] == "installed"


def test_venv_env_activates_the_venv_instead_of_the_callers(monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/outer/venv")
    monkeypatch.setenv("PATH", "/outer/venv/bin:/usr/bin")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = matrix.venv_env("/cache/tf-2.19")
    assert env["PATH"] == "/cache/tf-2.19/bin:/usr/bin" and env["VIRTUAL_ENV"] == "/cache/tf-2.19"
    assert "PYTHONPATH" not in env


# ------------------------------------------------------------------- parsing
def test_pytest_summary_and_failures_are_parsed():
    parsed = matrix.parse_pytest(PYTEST_OUTPUT)
    assert {k: parsed[k] for k in ("passed", "failed", "skipped", "errors")} == {
        "passed": 1234, "failed": 2, "skipped": 7, "errors": 1}
    assert [(f["kind"], f["id"]) for f in parsed["failures"]] == [
        ("FAILED", "tests/models/test_x.py::test_loss_falls[mirrored]"),
        ("ERROR", "tests/bin/test_y.py::test_bin"), ("FAILED", "tests/test_z.py::test_plain")]
    assert parsed["failures"][0]["message"] == "AssertionError: 0.9 > 0.5"
    clean = matrix.parse_pytest("....\n==== 4 passed in 1.50s ====\n")
    assert (clean["passed"], clean["failed"], clean["failures"]) == (4, 0, [])
    crashed = matrix.parse_pytest("ImportError: no module named tensorflow\n")
    assert crashed["summary"] == "" and crashed["passed"] == 0


def write_regression_report(path):
    case = Case(name="transformer_tiny_reverse_quick", problem="p", model="transformer",
                hparams_set="transformer_tiny", train_steps=600, metric="accuracy",
                band=(0.8, 1.0))
    passed = CaseResult.for_case(case)
    passed.status, passed.value, passed.minutes = "PASS", 0.9512, 3.21
    failed = CaseResult.for_case(Case(**{**case.__dict__, "name": "docstrings_quick",
                                         "metric": "loss", "band": (0.0, 2.5)}))
    failed.status, failed.value, failed.reason = "FAIL", 2.7, "loss 2.7000 outside [0, 2.50]"
    write_report(str(path), [passed, failed], {"date": "2026-11-26T10:00:00"})
    return str(path)


def test_regression_report_cases_are_read_into_cells(tmp_path):
    cases = matrix.regression_cases(write_regression_report(tmp_path / "report.json"))
    assert cases[0] == {"name": "transformer_tiny_reverse_quick", "metric": "accuracy",
                        "value": 0.9512, "band": [0.8, 1.0], "status": "PASS", "ok": True,
                        "reason": "", "minutes": 3.21}
    assert matrix.case_cell(cases[0]) == "0.9512 [0.80, 1.00] PASS"
    assert matrix.case_cell(cases[1]) == "2.7000 [0.00, 2.50] FAIL"


# ------------------------------------------------------------------- a whole run
def _git_repo(path):
    path.mkdir()
    (path / "setup.py").write_text('DEPS = ["tensorflow>=2.16,<2.22", "numpy"]\n'
                                   "CORE_DEPENDENCIES = [\"numpy\"]\n"
                                   'setup(\n    extras_require={\n        "dev": ["pytest"],\n'
                                   "    },\n)\n")
    for args in (["init", "-q"], ["add", "setup.py"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


def _matrix_args(tmp_path, python, monkeypatch):
    """`matrix` arguments for a fake run of 2.19 and 2.20 on a small git repository."""
    repo = _git_repo(tmp_path / "repo")
    constraints = tmp_path / "constraints"
    constraints.mkdir()
    for version in ("2.19", "2.20"):
        (constraints / f"tf-{version}.txt").write_text(f"tensorflow=={version}.*\n")
    out = tmp_path / "pytest.txt"
    out.write_text(PYTEST_OUTPUT)
    monkeypatch.setenv("FAKE_PYTEST_OUTPUT", str(out))
    monkeypatch.setenv("FAKE_REPORT", write_regression_report(tmp_path / "r.json"))
    (repo / "setup.py").write_text("edited after the commit")  # not what is tested
    return ["matrix", "--tf", "2.19,2.20", "--cache", str(tmp_path / "cache"),
            "--output", str(tmp_path / "out"), "--results", str(tmp_path / "res"),
            "--python", python, "--repo", str(repo), "--constraints", str(constraints)]


def test_an_interrupted_run_keeps_the_phases_that_finished(tmp_path, fake_python, monkeypatch):
    def stop(self, entry):
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix.Matrix, "regression", stop)
    assert runner.main(_matrix_args(tmp_path, fake_python[0], monkeypatch)) == 130
    report = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert report["interrupted"] and len(report["portability"]) == 2
    assert report["versions"][0]["tests"]["passed"] == 1234
    assert "tests" not in report["versions"][1]
    assert list((tmp_path / "res").iterdir())  # the results file is written all the same


def test_a_whole_matrix_run_with_fake_pythons(tmp_path, fake_python, monkeypatch, capsys):
    python, calls = fake_python
    repo = tmp_path / "repo"
    status = runner.main([*_matrix_args(tmp_path, python, monkeypatch), "--note", "one note"])
    assert status == 1  # failing tests and a failing case
    report = json.loads((tmp_path / "out" / "matrix.json").read_text())
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    assert report["commit"] == commit and report["uncommitted_changes_ignored"]
    snapshot = tmp_path / "cache" / f"src-{commit[:10]}"
    assert "tensorflow>=2.16" in (snapshot / "setup.py").read_text()
    assert [v["version"] for v in report["versions"]] == ["2.19", "2.20"]
    first = report["versions"][0]
    assert first["resolved"]["keras"] == "9.9" and first["tests"]["failed"] == 2
    assert first["install"]["pins"] == ["tensorflow==2.19.*"] and report["note"] == "one note"
    assert first["regression"]["cases"][0]["value"] == 0.9512
    assert set(first["minutes"]) == {"install", "tests", "regression"}
    assert [(x["writer"], x["reader"], x["ok"]) for x in report["portability"]] == [
        ("2.19", "2.20", True), ("2.20", "2.19", True)]
    pytest_calls = [c for c in _calls(calls) if c[:2] == ["-m", "pytest"]]
    assert pytest_calls == [list(matrix.TEST_COMMAND[:])] * 2
    assert (tmp_path / "res" / f"{report['date'][:10]}{matrix.RESULTS_SUFFIX}").exists()
    printed = capsys.readouterr().out
    assert "1234 passed, 2 failed, 1 errors, 7 skipped" in printed and "2/2" not in printed

