"""Which cases a run takes (--case, --full, the quick subset) and which of them can run
on this machine: its hardware, t2t's registered names, the data mirrors and programs
a case needs."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence

from regression.case_spec import (
    CPU_2CORE,
    MIRROR_SOURCES,
    PROGRAM_SOURCES,
    STRATEGIES,
    Case,
)
from regression.report import RegressionError, band_text, format_table

HARDWARE_ENV = "T2T_REGRESSION_HARDWARE"


@dataclasses.dataclass(frozen=True)
class Registered:
    """The registered names of t2t (or a fake one in tests)."""

    problems: frozenset[str]
    models: frozenset[str]
    hparams_sets: frozenset[str]

    def has_problem(self, name: str) -> bool:
        return name in self.problems or (name.endswith("_rev") and name[:-4] in self.problems)


_LIST_REGISTERED = (
    "import json; from t2t import registry; print(json.dumps([registry.list_problems(), "
    "registry.list_models(), registry.list_hparams()]))"
)


def load_registered() -> Registered:
    """t2t's registered names, read in a subprocess (TensorFlow's import takes a few
    seconds and logs to stderr; this process stays free of it)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    out = subprocess.run([sys.executable, "-c", _LIST_REGISTERED], capture_output=True,
                         text=True, env=env, timeout=600)
    try:
        problems, models, hparams_sets = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as e:
        tail = "\n".join(out.stderr.strip().splitlines()[-10:])
        raise RegressionError(f"cannot read t2t's registry (status {out.returncode}):\n{tail}"
                              ) from e
    return Registered(frozenset(problems), frozenset(models), frozenset(hparams_sets))


def parse_hardware(spec: str | None) -> frozenset[str]:
    """The hardware this machine offers: --hardware, else $T2T_REGRESSION_HARDWARE, else
    cpu-2core."""
    if spec is None:
        spec = os.environ.get(HARDWARE_ENV) or CPU_2CORE
    return frozenset(h.strip() for h in spec.split(",") if h.strip())


def skip_reasons(case: Case, hardware: Iterable[str], registered: Registered,
                 mirror_exists: Callable[[str], bool] = os.path.isdir,
                 program_exists: Callable[[str], object] = shutil.which) -> list[str]:
    """Why `case` cannot run here; empty when it can."""
    hardware = frozenset(hardware)
    reasons = []
    if case.hardware not in hardware:
        reasons.append(f"needs {case.hardware} (available: {', '.join(sorted(hardware)) or '-'};"
                       f" pass --hardware={case.hardware} where it is)")
    if STRATEGIES.get(case.strategy, ()) is None:
        reasons.append(f"strategy {case.strategy} not supported by t2t-trainer yet")
    elif case.strategy not in STRATEGIES:
        reasons.append(f"unknown strategy {case.strategy!r}")
    if not registered.has_problem(case.problem):
        reasons.append(f"problem {case.problem!r} not registered")
    if case.model not in registered.models:
        reasons.append(f"model {case.model!r} not registered")
    if case.hparams_set not in registered.hparams_sets:
        reasons.append(f"hparams set {case.hparams_set!r} not registered")
    mirror = case.data_mirror
    if mirror and "://" not in mirror and not mirror_exists(mirror):
        source = MIRROR_SOURCES.get(mirror)
        reasons.append(f"data mirror {mirror} missing" + (f" ({source})" if source else ""))
    for program in case.programs:
        if not program_exists(program):
            source = PROGRAM_SOURCES.get(program)
            reasons.append(f"program {program} not found" + (f" ({source})" if source else ""))
    return reasons


def select_cases(cases: Sequence[Case], *, full: bool = False,
                 names: Sequence[str] | None = None) -> list[Case]:
    """--case NAME... (in the order given), --full (all) or the quick subset."""
    if names:
        table = {case.name: case for case in cases}
        unknown = [n for n in names if n not in table]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, table, n=3)
                hints.append(name + (f" (did you mean {', '.join(close)}?)" if close else ""))
            raise RegressionError(f"unknown case {'; '.join(hints)}; "
                                  f"`python -m regression list` shows them all")
        return [table[n] for n in dict.fromkeys(names)]
    return list(cases) if full else [case for case in cases if case.quick]


def list_table(cases: Sequence[Case], hardware: Iterable[str], registered: Registered,
               mirror_exists: Callable[[str], bool] = os.path.isdir) -> str:
    rows = []
    for case in cases:
        reasons = skip_reasons(case, hardware, registered, mirror_exists)
        rows.append([
            case.name + (" *" if case.quick else ""), case.problem,
            f"{case.model}/{case.hparams_set}", case.train_steps, case.metric, band_text(case.band),
            case.hardware, f"{case.expected_minutes:g}",
            "yes" if not reasons else "no: " + "; ".join(reasons),
        ])
    header = ["case", "problem", "model/hparams_set", "steps", "metric", "band", "hardware",
              "minutes", "runnable here?"]
    return format_table(header, rows) + "\n(* quick: in CI's quick subset)"
