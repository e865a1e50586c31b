"""The robustness suite: bad inputs and injected faults, each with a clear outcome.

Every test here is marked `robustness` (CI's quick run, `-m "not slow"`, includes
them) and files what it tried into a session tally through the `robustness` fixture:

    robustness.bad_input("t2t-trainer --hparams=hiden_size=3")
    robustness.fault("SIGKILL t2t-trainer at step 5")
    robustness.run_completed("t2t-trainer resumed to step 12")
    robustness.data_lost(support.lost_files(root, before))   # nothing, or a failure

At the end of the session the counts are printed:
"robustness: N bad inputs tried, M faults injected (F kinds), K runs completed, data lost = 0".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_ROOT = str(_HERE.parent.parent)
if _ROOT not in sys.path:  # `tests.robustness.support` is imported from the repo root
    sys.path.insert(0, _ROOT)

from tests.robustness import support  # noqa: E402


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.robustness)


def pytest_runtest_logreport(report):
    """A strict xfail here marks a known library bug: listed in the summary."""
    if report.when == "call" and report.skipped and hasattr(report, "wasxfail"):
        path = Path(_ROOT, report.nodeid.split("::", 1)[0]).resolve()
        if _HERE in path.parents:
            support.TALLY.known_bugs.append(report.nodeid.split("::", 1)[1])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not support.TALLY.tests_run:
        return
    terminalreporter.write_sep("-", "robustness")
    for line in support.TALLY.summary_lines():
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _count_robustness_test():
    support.TALLY.tests_run += 1


@pytest.fixture
def robustness(request) -> support.Recorder:
    """The session's tally, filed under this test module's theme (test_bad_names ->
    bad_names)."""
    category = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    return support.Recorder(support.TALLY, category)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> str:
    """Prepared data of support.PROBLEM (1,000 training, 100 dev examples). Read only:
    tests that damage data work on a copy."""
    from t2t import registry

    path = str(tmp_path_factory.mktemp("robustness_data"))
    registry.problem(support.PROBLEM).generate_data(path, os.path.join(path, "tmp"),
                                                    progress=False)
    os.rmdir(os.path.join(path, "tmp"))
    return path


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, data_dir) -> str:
    """A run directory as t2t-trainer leaves it (run.json, hparams.json, flags.txt and
    checkpoint ckpt-0 of model, optimizer and input position) of the tiny transformer.
    Read only: tests that run the trainer in it work on a copy."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    output_dir = str(tmp_path_factory.mktemp("robustness_run"))
    trainer = Trainer(
        registry.problem(support.PROBLEM), support.MODEL,
        create_hparams(support.HPARAMS_SET, support.HPARAMS), data_dir, output_dir,
        TrainerConfig(train_steps=0), RuntimeConfig(random_seed=1),
        run_info={"hparams_set": support.HPARAMS_SET, "hparams": support.HPARAMS},
    )
    assert trainer.save().endswith("ckpt-0")
    with open(os.path.join(output_dir, "flags.txt"), "w", encoding="utf-8") as f:
        f.write(f"--problem={support.PROBLEM}\n--model={support.MODEL}\n"
                f"--hparams_set={support.HPARAMS_SET}\n--hparams={support.HPARAMS}\n")
    return output_dir


@pytest.fixture(scope="session")
def usr_dir(tmp_path_factory) -> str:
    """The --t2t_usr_dir package of the suite's own problems (see support.USR_INIT)."""
    return support.write_usr_dir(str(tmp_path_factory.mktemp("robustness_usr")))
