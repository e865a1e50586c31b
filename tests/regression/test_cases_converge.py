"""Every case this machine can run reaches its band, through the real runner.

Marked `slow`: each case trains for real (minutes to an hour on 2 cores), so CI's
`-m "not slow"` run leaves them out; CI runs one quick case, CI_CASE, in
test_ci_case_passes (the rest of the quick subset, `python -m regression run --quick`,
runs with `-m slow`). Run one with
`python -m pytest -m slow tests/regression/test_cases_converge.py -k multi_worker`.
The strategy cases (mirrored_cpu_2, multi_worker_2, ps_1_worker_1) are how the
distributed strategies are shown to train to the single-device accuracy.
"""

import os
import subprocess
import sys

import pytest

from regression import selection
from regression.cases import CASES

# The quick case CI runs: the seq2seq path end to end (train, beam decode, BLEU) in about
# 2 minutes on 2 cores; exports with their parity gate are CI's tests/serving.
CI_CASE = "transformer_tiny_reverse_quick"
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _runnable_here():
    registered = selection.load_registered()
    hardware = selection.parse_hardware(None)
    return [c for c in CASES if not selection.skip_reasons(c, hardware, registered)]


def _run(args, output):
    proc = subprocess.run([sys.executable, "-m", "regression", "run", *args, "--output",
                           str(output)], cwd=_ROOT, capture_output=True, text=True)
    # The runner's final table: shown by pytest when the assertion fails (or with -s).
    table = proc.stdout[proc.stdout.rfind("\ncase ") + 1:]
    return proc.returncode, table


@pytest.mark.parametrize("case", [c.name for c in _runnable_here() if c.name != CI_CASE])
@pytest.mark.slow
def test_case_reaches_its_band(case, tmp_path):
    status, table = _run(["--case", case], tmp_path)
    assert status == 0, table


def test_ci_case_passes(tmp_path, capsys):
    """`python -m regression run --case CI_CASE`: trains, decodes, passes; its
    table is printed in the test run's output."""
    status, table = _run(["--case", CI_CASE], tmp_path)
    with capsys.disabled():
        print(f"\n`python -m regression run --case {CI_CASE}`:\n" + table)
    assert status == 0, table
    assert "PASS" in table
