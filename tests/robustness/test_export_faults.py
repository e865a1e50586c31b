"""Injected faults in t2t-exporter: a disk that fills while it writes the SavedModel.

The run directory (with its export folder) sits on a small tmpfs; after a first good
export the disk is filled but for a few KiB. The next export fails with one clear line
(what failed, why, that the earlier export is kept, what to do), leaves no staging
folder and no version folder, and the good export stays byte for byte; after the space
is freed the same command exports. (SIGKILLed exporters: test_serving_faults.py.)
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.robustness import support
from tests.robustness.support import FAST_DECODE, run_binary


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 16 MiB tmpfs (needs root); skipped, saying why, where mounting is not allowed."""
    with support.mounted_tmpfs(tmp_path / "disk", "16m") as disk:
        yield disk


def _versions(export: str) -> list[str]:
    return sorted(n for n in os.listdir(export) if n.isdigit())


# A tmpfs export filled twice over (~60 s on 2 cores): `python -m pytest -m slow`. The
# export's own write errors are checked fast in tests/serving/test_export.py.
@pytest.mark.slow
def test_disk_full_during_export_then_space_freed(robustness, trained_run, data_dir,
                                                  small_tmpfs):
    run = str(small_tmpfs / "run")
    shutil.copytree(trained_run, run)
    export = os.path.join(run, "export")
    flags = (f"--output_dir={run}", f"--data_dir={data_dir}",
             f"--decode_hparams={FAST_DECODE}", "--skip_parity_check")
    result = run_binary("t2t-exporter", *flags)
    assert result.code == 0, result.err[-3000:]
    (good,) = _versions(export)
    kept = support.snapshot(export)

    ballast = support.fill_disk(small_tmpfs, leave=8 << 10)  # room for a log line, not a SavedModel
    robustness.fault("disk full while t2t-exporter writes the SavedModel (tmpfs)")
    result = run_binary("t2t-exporter", *flags)
    assert result.code == 1 and not result.traceback, result.err[-3000:]
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err[-3000:]
    assert f"error: Could not write the export {export}/" in errors[0], errors[0]
    assert ": the disk is full (" in errors[0], errors[0]
    assert (f"Its staging folder was deleted and the exports already there ({good}) are "
            f"kept as they were. Free space on that disk, then run the same command "
            f"again.") in errors[0], errors[0]
    assert os.listdir(export) == [good]  # no staging folder, no new version
    support.assert_kept(robustness, export, kept)

    os.remove(ballast)  # space freed
    result = run_binary("t2t-exporter", *flags)
    assert result.code == 0, result.err[-3000:]
    versions = _versions(export)
    assert len(versions) == 2 and versions[0] == good, versions
    assert os.path.isfile(os.path.join(export, versions[1], "saved_model.pb"))
    assert sorted(os.listdir(export)) == versions  # nothing else left behind
    support.assert_kept(robustness, export, kept)
    robustness.run_completed("t2t-exporter re-run after the disk filled")
