"""`python -m regression matrix`: the fast tests and the regression subset under several
TensorFlow releases (regression/README.md, "TensorFlow versions").

For each version a venv CACHE/tf-X.Y, reused while its install spec (version,
constraints file, setup.py's dependencies) is unchanged, gets `tensorflow==X.Y.*` and a
snapshot of the current commit (a clone in CACHE/src-COMMIT: edits to the working tree
during the run change nothing) under regression/constraints/tf-X.Y.txt. The report is
OUTPUT/matrix.json, rewritten after each phase, and RESULTS/DATE-tf-matrix.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from regression import checkpoint_portability
from regression.matrix_table import (
    MATRIX_BEGIN,
    MATRIX_END,
    NOT_INSTALLABLE,
    RESULTS_SUFFIX,
    case_cell,
    cmd_readme,
    matrix_rows,
)
from regression.report import RegressionError, format_table, machine_info

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSTRAINTS_DIR = os.path.join(REPO_ROOT, "regression", "constraints")
DEFAULT_CACHE = os.path.join("~", ".cache", "t2t", "matrix")
DEFAULT_OUTPUT = os.path.join("regression_output", "matrix")
DEFAULT_RESULTS = os.path.join(REPO_ROOT, "regression", "results")
# Extras CI does not install (requirements-ci.txt leaves them out); every other extra of
# setup.py is installed, because the fast tests use them (t2t-serve's aiohttp and gRPC,
# speech's soundfile and jiwer, the importer's torch, ...) exactly as CI has them.
EXTRAS_NOT_IN_CI = ("profile",)
SPEC_FILE = "t2t-matrix-spec.json"
PACKAGES = ("tensorflow", "keras", "tensorflow-text", "tensorflow-datasets", "numpy",
            "protobuf", "ml-dtypes")
TEST_COMMAND = ("-m", "pytest", "-n", "2", "-m", "not slow", "-q", "-p", "no:cacheprovider")
_VERSION = re.compile(r"^(\d+)\.(\d+)$")


# --------------------------------------------------------------------- versions
def committed_setup_py(repo: str) -> str:
    """setup.py as HEAD of `repo` has it (the commit under test, not the working tree)."""
    out = subprocess.run(["git", "-C", repo, "show", "HEAD:setup.py"], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise RegressionError(f"cannot read setup.py at HEAD of {repo}: {out.stderr.strip()}")
    return out.stdout


def supported_range(text: str, setup_py: str = "setup.py"
                    ) -> tuple[tuple[int, int], tuple[int, int]]:
    """(lowest, first unsupported) TensorFlow MAJOR.MINOR from setup.py's requirement
    "tensorflow>=A.B,<C.D" (`text`: the file's contents)."""
    match = re.search(r'"tensorflow>=(\d+)\.(\d+)[^"]*?,<(\d+)\.(\d+)"', text)
    if not match:
        raise RegressionError(f"{setup_py} has no requirement \"tensorflow>=A.B,<C.D\"")
    a, b, c, d = (int(g) for g in match.groups())
    return (a, b), (c, d)


def parse_versions(spec: str, supported: tuple[tuple[int, int], tuple[int, int]]) -> list[str]:
    """"2.19,2.20" -> ["2.19", "2.20"], each MAJOR.MINOR inside setup.py's range."""
    (la, lb), (ha, hb) = supported
    allowed = f">={la}.{lb},<{ha}.{hb} (setup.py)"
    versions: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        match = _VERSION.match(item)
        if not match:
            raise RegressionError(f"bad TensorFlow version {item!r} in --tf: give MAJOR.MINOR "
                                  f"releases such as 2.19,2.20; supported: {allowed}")
        if not (la, lb) <= (int(match[1]), int(match[2])) < (ha, hb):
            raise RegressionError(f"TensorFlow {item} is outside the supported range "
                                  f"{allowed}: widen setup.py first, or pick versions in it")
        if item not in versions:
            versions.append(item)
    return versions


def constraints_file(version: str, directory: str = CONSTRAINTS_DIR) -> str:
    path = os.path.join(directory, f"tf-{version}.txt")
    if not os.path.exists(path):
        raise RegressionError(f"no constraints file {path} for TensorFlow {version}: add one "
                              f"(see tf-2.19.txt beside it) with the pins this release needs")
    return path


def pins(constraints: str) -> list[str]:
    """The requirement lines of a constraints file (comments and blanks left out)."""
    lines = (line.split("#", 1)[0].strip() for line in open(constraints, encoding="utf-8"))
    return [line for line in lines if line]


# ------------------------------------------------------------------ the venv cache
def setup_block(text: str, start: str, stop: str) -> str | None:
    """The text of setup.py between `start` and the next `stop`; None when no `start`."""
    if start not in text:
        return None
    return text.split(start, 1)[1].split(stop, 1)[0]


EXTRAS_BLOCK = ("extras_require={", "},\n")


def setup_dependencies(setup_py: str) -> list[str]:
    """The quoted strings of setup.py's CORE_DEPENDENCIES and extras_require, sorted."""
    text = open(setup_py, encoding="utf-8").read()
    found: set[str] = set()
    for start, stop in (("CORE_DEPENDENCIES = [", "]"), EXTRAS_BLOCK):
        block = setup_block(text, start, stop)
        if block is not None:
            found.update(re.findall(r'"([^"]+)"', block))
    if not found:
        raise RegressionError(f"no CORE_DEPENDENCIES or extras_require in {setup_py}")
    return sorted(found)


def setup_extras(setup_py: str) -> str:
    """The extras the matrix installs, comma-separated: setup.py's extras_require keys
    but EXTRAS_NOT_IN_CI, in setup.py's order."""
    block = setup_block(open(setup_py, encoding="utf-8").read(), *EXTRAS_BLOCK)
    if block is None:
        raise RegressionError(f"no extras_require in {setup_py}")
    names = re.findall(r'^\s*"([\w-]+)":\s*\[', block, re.MULTILINE)
    return ",".join(name for name in names if name not in EXTRAS_NOT_IN_CI)


def install_spec(version: str, constraints: str, setup_py: str) -> dict[str, Any]:
    """What a venv was built from; a cached venv is reused only while this is unchanged."""
    digest = hashlib.sha256(open(constraints, "rb").read()).hexdigest()
    return {"tensorflow": f"{version}.*", "constraints_sha256": digest,
            "extras": setup_extras(setup_py),
            "setup_dependencies": setup_dependencies(setup_py),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}"}


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def cached_venv_matches(venv: str, spec: Mapping[str, Any]) -> bool:
    """True when `venv` has a python and was completely built from `spec`."""
    try:
        with open(os.path.join(venv, SPEC_FILE), encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return False
    return os.path.exists(venv_python(venv)) and recorded == dict(spec)


def venv_env(venv: str) -> dict[str, str]:
    """This environment with `venv` activated instead of the caller's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    outer = os.environ.get("VIRTUAL_ENV")
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not (outer and p.startswith(outer))]
    # TF_CPP_MIN_LOG_LEVEL stays as the caller has it: the tests run as CI runs them.
    env.update(VIRTUAL_ENV=venv, PATH=os.pathsep.join([os.path.join(venv, "bin"), *path]),
               PYTHONUNBUFFERED="1")
    return env


def run_logged(command: Sequence[str], log_path: str, cwd: str, env: Mapping[str, str],
               timeout: float | None = None) -> int:
    """Runs `command` with its output appended to `log_path`; 124 on timeout."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        try:
            return subprocess.run(list(command), stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                  env=dict(env), timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            log.write(f"\n[matrix] timed out after {timeout:.0f} s\n")
            return 124
        except OSError as e:
            log.write(f"\n[matrix] cannot run {command[0]}: {e}\n")
            return 127


def pip_error(log_path: str, lines: int = 15) -> str:
    """The last lines of a pip log, from its first 'ERROR' line among them on."""
    text = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    tail = text[-lines:]
    first = next((i for i, line in enumerate(tail) if line.startswith("ERROR")), 0)
    return "\n".join(tail[first:]).strip()


def ensure_venv(version: str, venv: str, snapshot: str, spec: Mapping[str, Any],
                constraints: str, log_path: str, python: str = "python3") -> dict[str, Any]:
    """Reuses or (re)builds `venv`; installs the snapshot into it. Returns
    {"status": "installed"|"reused"|NOT_INSTALLABLE, "error": ...}."""
    pip = [venv_python(venv), "-m", "pip", "install", "-q", "-c", constraints]
    env = venv_env(venv)
    reused = cached_venv_matches(venv, spec)
    if not reused:
        shutil.rmtree(venv, ignore_errors=True)
        os.makedirs(os.path.dirname(venv) or ".", exist_ok=True)
        if run_logged([python, "-m", "venv", venv], log_path, snapshot, os.environ) != 0:
            return {"status": NOT_INSTALLABLE, "error": pip_error(log_path)}
        status = run_logged([*pip, f"tensorflow=={version}.*", "-e", f"{snapshot}[{spec['extras']}]"],
                            log_path, snapshot, env)
        if status != 0:
            return {"status": NOT_INSTALLABLE, "error": pip_error(log_path)}
        with open(os.path.join(venv, SPEC_FILE), "w", encoding="utf-8") as f:
            json.dump(dict(spec), f, indent=1)
    else:  # same dependencies: only point t2t at this run's snapshot
        if run_logged([*pip, "--no-deps", "-e", snapshot], log_path, snapshot, env) != 0:
            return {"status": NOT_INSTALLABLE, "error": pip_error(log_path)}
    return {"status": "reused" if reused else "installed", "error": ""}


_VERSIONS_SCRIPT = ("import importlib.metadata as m, json, sys\nout = {}\n"
                    "for p in sys.argv[1:]:\n    try: out[p] = m.version(p)\n"
                    "    except m.PackageNotFoundError: out[p] = None\nprint(json.dumps(out))")


def resolved_versions(python: str, env: Mapping[str, str]) -> dict[str, str | None]:
    out = subprocess.run([python, "-c", _VERSIONS_SCRIPT, *PACKAGES], capture_output=True,
                         text=True, env=dict(env), timeout=120, check=False)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {p: None for p in PACKAGES}


# ------------------------------------------------------------------- the snapshot
def snapshot(repo: str, cache: str) -> tuple[str, str, bool]:
    """(snapshot dir, commit, working tree had uncommitted changes): a clone of `repo`'s
    HEAD under cache/src-SHORT, made once per commit."""
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise RegressionError(f"git {' '.join(args)} failed in {repo}: {out.stderr.strip()}")
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    target = os.path.join(cache, f"src-{commit[:10]}")
    if not os.path.isdir(os.path.join(target, ".git")):
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(cache, exist_ok=True)
        for args in (["clone", "--quiet", "--no-checkout", repo, target],
                     ["-C", target, "checkout", "--quiet", "--detach", commit]):
            out = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise RegressionError(f"cannot snapshot {repo} at {commit}: {out.stderr.strip()}")
    return target, commit, dirty


# --------------------------------------------------------------------- parsing
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b")


def parse_pytest(output: str) -> dict[str, Any]:
    """Counts (passed, failed, skipped, errors, ...) from pytest's last summary line and
    the ids of failing tests from its short summary ("FAILED id - msg", "ERROR id")."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    summary = ""
    for line in output.splitlines():
        stripped = line.strip("= \t")
        if re.search(r"\bin [\d.]+s\b", stripped) and _COUNT.search(stripped):
            summary = stripped
    for number, word in _COUNT.findall(summary):
        counts["errors" if word.startswith("error") else word] = int(number)
    failures = []
    for line in output.splitlines():
        match = re.match(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$", line)
        # Each xdist worker reports a collection error of the same file.
        if match and all(f["id"] != match[2] for f in failures):
            failures.append({"kind": match[1], "id": match[2], "message": (match[3] or "")[:300]})
    return {**counts, "summary": summary, "failures": failures}


def regression_cases(report_path: str) -> list[dict[str, Any]]:
    """Each case of a `regression run` report: name, metric, value, band, status, ..."""
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    cases = []
    for c in report.get("cases", []):
        bands = c.get("bands") or {}
        cases.append({"name": c["name"], "metric": c["metric"], "value": c.get("value"),
                      "band": list(bands.get(c["metric"], c["band"])), "status": c["status"],
                      "ok": c["status"] == "PASS", "reason": c.get("reason", ""),
                      "minutes": round(float(c.get("minutes") or 0.0), 2)})
    return cases


# --------------------------------------------------------------------- running
class Matrix:
    """One matrix run: its options, snapshot and the report it keeps rewriting."""

    def __init__(self, args: argparse.Namespace, versions: Sequence[str],
                 source: tuple[str, str, bool]) -> None:
        self.args = args
        self.cache = os.path.abspath(os.path.expanduser(args.cache))
        self.output = os.path.abspath(args.output)
        os.makedirs(self.output, exist_ok=True)
        self.snapshot, commit, dirty = source  # snapshot(): dir, commit, dirty
        self.started = time.monotonic()
        host = machine_info()
        self.report: dict[str, Any] = {
            "kind": "tf-matrix", "commit": commit, "uncommitted_changes_ignored": dirty,
            "date": host["date"], "selection": "full" if args.full else "quick",
            "machine": {k: host[k] for k in ("cpu", "cores", "usable_cores", "memory_gib",
                                             "gpus", "python", "platform", "date")},
            "versions": [], "portability": [], "total_minutes": 0.0,
        }
        if args.note:
            self.report["note"] = args.note
        self.report["host"] = self.report["machine"]
        self.versions = list(versions)

    def say(self, text: str) -> None:
        print(f"[matrix {(time.monotonic() - self.started) / 60:5.1f} min] {text}", flush=True)

    def save(self) -> str:
        self.report["total_minutes"] = round((time.monotonic() - self.started) / 60, 1)
        path = os.path.join(self.output, "matrix.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.report, f, indent=2)
            f.write("\n")
        os.replace(path + ".tmp", path)
        return path

    def phase(self, entry: dict[str, Any], name: str, started: float) -> None:
        entry["minutes"][name] = round((time.monotonic() - started) / 60, 2)
        self.save()

    def install(self, version: str) -> dict[str, Any]:
        """The venv of `version` (cached or built) and the resolved package versions."""
        entry: dict[str, Any] = {"version": version, "minutes": {}}
        self.report["versions"].append(entry)
        out_dir = os.path.join(self.output, f"tf-{version}")
        os.makedirs(out_dir, exist_ok=True)
        venv = os.path.join(self.cache, f"tf-{version}")
        constraints = constraints_file(version, self.args.constraints)
        spec = install_spec(version, constraints, os.path.join(self.snapshot, "setup.py"))
        log = os.path.join(out_dir, "install.log")
        open(log, "w").close()
        started = time.monotonic()
        self.say(f"tf-{version}: installing into {venv} (log {log})")
        entry["install"] = {**ensure_venv(version, venv, self.snapshot, spec, constraints, log,
                                          self.args.python),
                            "venv": venv, "constraints": os.path.relpath(constraints, REPO_ROOT),
                            "pins": pins(constraints), "log": log}
        if entry["install"]["status"] != NOT_INSTALLABLE:
            entry["resolved"] = resolved_versions(venv_python(venv), venv_env(venv))
        self.say(f"tf-{version}: {entry['install']['status']} {entry.get('resolved', '')}"
                 + (f"\n{entry['install']['error']}" if entry["install"]["error"] else ""))
        self.phase(entry, "install", started)
        return entry

    def tests(self, entry: dict[str, Any]) -> None:
        version = entry["version"]
        log = os.path.join(self.output, f"tf-{version}", "pytest.log")
        open(log, "w").close()
        self.say(f"tf-{version}: fast tests (log {log})")
        started = time.monotonic()
        venv = entry["install"]["venv"]
        status = run_logged([venv_python(venv), *TEST_COMMAND], log, self.snapshot,
                            venv_env(venv), timeout=self.args.test_timeout * 60)
        with open(log, encoding="utf-8", errors="replace") as f:
            entry["tests"] = {**parse_pytest(f.read()), "exit_status": status, "log": log}
        self.say(f"tf-{version}: {entry['tests']['summary'] or 'no summary, status ' + str(status)}")
        self.phase(entry, "tests", started)

    def regression(self, entry: dict[str, Any]) -> None:
        version = entry["version"]
        out_dir = os.path.join(self.output, f"tf-{version}", "regression")
        log = os.path.join(self.output, f"tf-{version}", "regression.log")
        open(log, "w").close()
        self.say(f"tf-{version}: regression {self.report['selection']} subset (log {log})")
        started = time.monotonic()
        venv = entry["install"]["venv"]
        status = run_logged([venv_python(venv), "-m", "regression", "run",
                             f"--{self.report['selection']}", f"--output={out_dir}"],
                            log, self.snapshot, venv_env(venv))
        report = os.path.join(out_dir, "report.json")
        cases = regression_cases(report) if os.path.exists(report) else []
        entry["regression"] = {"exit_status": status, "report": report, "log": log,
                               "cases": cases}
        self.say(f"tf-{version}: " + ("; ".join(f"{c['name']} {case_cell(c)}" for c in cases)
                                       or f"no report (status {status})"))
        self.phase(entry, "regression", started)

    def portability(self, entries: Sequence[dict[str, Any]]) -> None:
        installed = [e for e in entries if e["install"]["status"] != NOT_INSTALLABLE]
        if len(installed) < 2 or self.args.portability == "none":
            return
        pythons = {e["version"]: venv_python(e["install"]["venv"]) for e in installed}
        envs = {e["version"]: venv_env(e["install"]["venv"]) for e in installed}
        writers = list(pythons) if self.args.portability == "all" else list(pythons)[:1]
        started = time.monotonic()
        loads = checkpoint_portability.portability(
            pythons, writers, os.path.join(self.output, "portability"), self.snapshot, envs,
            run_logged, say=self.say)
        self.report["portability"] = checkpoint_portability.as_dicts(loads)
        self.report["portability_minutes"] = round((time.monotonic() - started) / 60, 2)
        self.save()

    def run(self) -> dict[str, Any]:
        """Installs every version, checks checkpoints across them, then runs each one's
        tests and regression subset (the report is saved after every phase)."""
        self.say(f"t2t {self.report['commit'][:10]} snapshot {self.snapshot}"
                 + (" (uncommitted changes in the working tree are not tested)"
                    if self.report["uncommitted_changes_ignored"] else ""))
        entries = [self.install(v) for v in self.versions]
        self.portability(entries)
        for entry in entries:
            if entry["install"]["status"] == NOT_INSTALLABLE:
                continue
            if not self.args.skip_tests:
                self.tests(entry)
            if not self.args.skip_regression:
                self.regression(entry)
        self.save()
        return self.report


def write_results(report: Mapping[str, Any], results_dir: str) -> str:
    """RESULTS/DATE-tf-matrix.json (DATE-HHMM-... when a run of that day has one)."""
    os.makedirs(results_dir, exist_ok=True)
    date = str(report["date"])
    path = os.path.join(results_dir, f"{date[:10]}{RESULTS_SUFFIX}")
    if os.path.exists(path):
        path = os.path.join(results_dir, f"{date[:10]}-{date[11:13]}{date[14:16]}{RESULTS_SUFFIX}")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    return path


def cmd_matrix(args: argparse.Namespace) -> int:
    """Runs the matrix (or, with --readme, prints/writes its table); exit 1 when a
    version failed a test or a case, or a checkpoint did not load."""
    if args.readme:
        return cmd_readme(args)
    if not args.tf:
        raise RegressionError("--tf is required, e.g. --tf 2.19,2.20,2.21")
    versions = parse_versions(args.tf, supported_range(committed_setup_py(args.repo)))
    for version in versions:  # every constraints file exists before anything is built
        constraints_file(version, args.constraints)
    cache = os.path.abspath(os.path.expanduser(args.cache))
    matrix = Matrix(args, versions, snapshot(args.repo, cache))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = matrix.run()
    except KeyboardInterrupt:  # keep what finished: the report says where it stopped
        matrix.report["interrupted"] = True
        matrix.say("interrupted: the report keeps the phases that finished")
        report = matrix.report
    finally:
        signal.signal(signal.SIGTERM, previous)
    path = matrix.save()
    header, rows = matrix_rows(report)
    print("\n" + format_table(header, rows))
    print(f"\nReport: {path}")
    if args.results:
        print(f"Results: {write_results(report, args.results)}")
    bad = any((v.get("tests") or {}).get("failed") or (v.get("tests") or {}).get("errors")
              or any(not c["ok"] for c in (v.get("regression") or {}).get("cases", []))
              for v in report["versions"])
    if report.get("interrupted"):
        return 130
    return 1 if bad or any(not x["ok"] for x in report["portability"]) else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def add_parser(sub: Any) -> None:
    """Adds the `matrix` subcommand to `python -m regression`'s subparsers."""
    p = sub.add_parser("matrix", help="tests and regression subset under several TensorFlow "
                                      "releases, each in a cached venv")
    p.add_argument("--tf", help="comma-separated TensorFlow releases, e.g. 2.19,2.20,2.21")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="quick regression subset (default)")
    which.add_argument("--full", action="store_true", help="every regression case")
    p.add_argument("--cache", default=DEFAULT_CACHE,
                   help=f"venvs and snapshots (default: {DEFAULT_CACHE})")
    p.add_argument("--output", default=DEFAULT_OUTPUT,
                   help=f"logs, regression runs, matrix.json (default: {DEFAULT_OUTPUT})")
    p.add_argument("--results", default=DEFAULT_RESULTS,
                   help="folder for DATE-tf-matrix.json at the end ('' for none; default: "
                        "regression/results)")
    p.add_argument("--skip-tests", action="store_true", help="no pytest run")
    p.add_argument("--skip-regression", action="store_true", help="no regression cases")
    p.add_argument("--portability", choices=("all", "first", "none"), default="all",
                   help="checkpoints written under every version (all, default), the first "
                        "only, or none, each loaded under the other versions")
    p.add_argument("--test-timeout", type=float, default=120.0, metavar="MINUTES",
                   help="stop a version's test run after this long (default: 120)")
    p.add_argument("--python", default="python3", help="the Python that creates the venvs")
    p.add_argument("--repo", default=REPO_ROOT, help="git repository to snapshot (default: "
                                                    "this one)")
    p.add_argument("--constraints", default=CONSTRAINTS_DIR,
                   help="folder of tf-X.Y.txt pip constraints files")
    p.add_argument("--note", help="a sentence about this run, kept in the report and table")
    p.add_argument("--readme", action="store_true",
                   help=f"print the table of the latest results (--write: between {MATRIX_BEGIN}"
                        f" and {MATRIX_END} of that file)")
    p.add_argument("--report", action="append",
                   help="with --readme: a *-tf-matrix.json or a folder of them (default: "
                        "regression/results)")
    p.add_argument("--write", metavar="README", help="with --readme: the file to update")
