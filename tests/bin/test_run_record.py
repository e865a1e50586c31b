"""A user's own problem, end to end through the binaries as a new user runs them: the
run remembers its data and code (run.json), so t2t-decoder and t2t-exporter need only
--output_dir; a resume says one line; no TensorFlow start-up chatter, restore warnings
or SavedModel rename lines reach the terminal unless -v 1 asks for them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)
PROBLEM = "zz_t2t_test_run_record_reverse"
PACKAGE = "zz_t2t_test_run_record"
USER_MODULE = """
from t2t import registry
from t2t.problems import algorithmic


@registry.register_problem
class ZzT2tTestRunRecordReverse(algorithmic.AlgorithmicReverseBinary40Test):
    \"\"\"The reverse demo, smaller: a user's own problem.\"\"\"
    train_size = 200
    dev_size = 8
"""
# What TensorFlow prints at start-up (twice) and what a resume or an export used to add.
NOISE = ("absl::InitializeLog", "port.cc", "cudart_stub.cc", "cuInit",
         "could not be found in the restored object", "unrestored values",
         "renamed to unknown_", "Sharding callback duration")


def _run(binary: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, binary), *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def _assert_quiet(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    for noise in NOISE:
        assert noise not in result.stderr + result.stdout, (noise, result.stderr[-3000:])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(root, usr_dir, data_dir, output_dir, first training's result) of a 2-step run of
    the user's problem, trained from a working directory elsewhere with relative paths."""
    root = tmp_path_factory.mktemp("run_record")
    usr_dir = root / "code" / PACKAGE
    usr_dir.mkdir(parents=True)
    (usr_dir / "__init__.py").write_text(f"from {PACKAGE} import my_problems  # noqa: F401\n")
    (usr_dir / "my_problems.py").write_text(USER_MODULE)
    (root / "work").mkdir()
    result = _run("t2t-trainer", "--generate_data", f"--t2t_usr_dir=../code/{PACKAGE}",
                  f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_test",
                  "--hparams=batch_size=128", "--train_steps=2", "--schedule=train",
                  "--data_dir=data", "--output_dir=run", cwd=root / "work")
    return root, usr_dir, root / "work" / "data", root / "work" / "run", result


def test_a_run_records_where_its_data_and_code_are(trained):
    root, usr_dir, data_dir, output_dir, result = trained
    _assert_quiet(result)
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Data:   {data_dir}", f"Output: {output_dir}"]
    run = json.loads((output_dir / "run.json").read_text())
    assert run["data_dir"] == str(data_dir) and run["t2t_usr_dir"] == str(usr_dir)
    assert run["problem"] == PROBLEM and run["hparams_set"] == "transformer_test"
    assert run["problem_hparams"]["vocab_size"] == {"inputs": 4, "targets": 4}


# slow: a second trainer start for the resume message; resuming is tested in CI in-process
@pytest.mark.slow
def test_a_resume_from_output_dir_alone_says_one_line(trained):
    _, _, data_dir, output_dir, _ = trained
    result = _run("t2t-trainer", f"--output_dir={output_dir}", "--train_steps=3",
                  "--schedule=train")
    _assert_quiet(result)
    assert result.stdout.splitlines()[:3] == [
        f"Data:   {data_dir}", f"Output: {output_dir}", "Resumed from ckpt-2 at step 2."]
    assert "step 3/3 loss" in result.stdout
    run = json.loads((output_dir / "run.json").read_text())  # the resume kept the record
    assert run["data_dir"] == str(data_dir) and run["data_dir_given"] is True


@pytest.mark.slow  # ~40 s; CI decodes with only --output_dir in tests/bin/test_t2t_import.py
def test_decoder_and_exporter_need_only_output_dir(trained):
    root, _, _, output_dir, _ = trained
    inputs = root / "inputs.txt"
    inputs.write_text("1 0 1\n0 1\n")
    decoded = _run("t2t-decoder", f"--output_dir={output_dir}", f"--decode_from_file={inputs}",
                   f"--decode_to_file={root / 'decodes.txt'}", "--decode_hparams=beam_size=1")
    _assert_quiet(decoded)
    assert len((root / "decodes.txt").read_text().splitlines()) == 2
    usr_dir = root / "code" / PACKAGE
    assert f"Code:   {usr_dir} (the t2t_usr_dir in {output_dir}/run.json)" in decoded.stderr

    # The problem, model, hparams, data and code all come from the run's run.json /
    # hparams.json.
    exported = _run("t2t-exporter", f"--output_dir={output_dir}",
                    "--decode_hparams=beam_size=1,extra_length=3")
    _assert_quiet(exported)
    lines = exported.stdout.splitlines()
    version_dirs = [line.removeprefix("Exported: ") for line in lines if line.startswith("Exported: ")]
    assert len(version_dirs) == 1, exported.stdout
    assert os.path.dirname(version_dirs[0]) == os.path.join(output_dir, "export")
    assert os.path.basename(version_dirs[0]).isdigit()
    assert os.path.exists(os.path.join(version_dirs[0], "saved_model.pb"))
    assert "  serve_tf_example: (examples: string[None]) -> (outputs: int64[None, None], " \
           "scores: float32[None])" in lines
    assert "  serving_default: (inputs: string[None]) -> (outputs: string[None], " \
           "scores: float32[None])" in lines
    assert any(line.startswith("Parity check passed on ") for line in lines)


def test_a_recorded_path_that_moved_is_named_and_verbose_brings_the_chatter_back(trained):
    root, usr_dir, data_dir, output_dir, _ = trained
    moved = root / "moved_code"
    shutil.move(str(usr_dir.parent), str(moved))
    try:
        result = _run("t2t-decoder", f"--output_dir={output_dir}", "-v", "1")
        assert result.returncode == 1
        assert (f"{output_dir}/run.json records t2t_usr_dir='{usr_dir}', which no longer "
                f"exists: give --t2t_usr_dir=DIR") in result.stderr
        assert "Traceback" not in result.stderr
        # -v 1: TensorFlow's start-up lines are shown as TensorFlow prints them.
        assert any(line in result.stderr for line in ("absl::InitializeLog", "port.cc"))
    finally:
        shutil.move(str(moved), str(usr_dir.parent))
