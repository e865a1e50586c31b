"""Unknown problem, model and hparams-set names: each binary fails with one clear line
naming the bad name, the close matches and where the names are listed, and leaves the
run directory and the data as they were."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.robustness import support
from tests.robustness.support import HPARAMS, HPARAMS_SET, MODEL, PROBLEM, run_binary


def _trainer_args(data_dir, output_dir, **overrides):
    flags = {"problem": PROBLEM, "model": MODEL, "hparams_set": HPARAMS_SET,
             "hparams": HPARAMS, "data_dir": data_dir, "output_dir": output_dir,
             "train_steps": "1", "schedule": "train", **overrides}
    return [f"--{k}={v}" for k, v in flags.items()]


def _assert_clear(result, *fragments):
    """Status 1, one `error:` message holding every fragment, and no traceback."""
    assert result.code == 1, (result.out, result.err)
    assert not result.traceback, result.err
    assert result.err.startswith("error: "), result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


@pytest.fixture
def run_copy(trained_run, tmp_path):
    """A copy of the trained run (the trainer would write flags.txt into it)."""
    path = str(tmp_path / "run")
    shutil.copytree(trained_run, path)
    return path


@pytest.mark.parametrize("flag, bad, close", [
    ("problem", "algorithmic_reverse_binary4", "algorithmic_reverse_binary40"),
    ("problem", "algoritmic_reverse_binary40_test", PROBLEM),
    ("model", "transfomer", "transformer"),
    ("model", "Transformer", "transformer"),
    ("hparams_set", "transformer_tset", "transformer_test"),
    ("hparams_set", "transformer_tiny ", "transformer_tiny"),
])
def test_trainer_unknown_name(robustness, data_dir, run_copy, flag, bad, close):
    kind = {"hparams_set": "hparams"}.get(flag, flag)
    robustness.bad_input(f"t2t-trainer --{flag}={bad!r}")
    data_before, run_before = support.snapshot(data_dir), support.snapshot(run_copy)
    result = run_binary("t2t-trainer", *_trainer_args(data_dir, run_copy, **{flag: bad}))
    support.assert_kept(robustness, data_dir, data_before)
    support.assert_kept(robustness, run_copy, run_before)
    assert support.snapshot(run_copy) == run_before  # nothing added either
    _assert_clear(result, f"Unknown {kind} {bad!r}.", "Did you mean: ", close,
                  "--registry_help", "--t2t_usr_dir=PATH")


def test_datagen_unknown_problem_after_a_good_one_keeps_the_good_data(robustness, tmp_path):
    """--problem=GOOD,BAD: GOOD's data is written completely, then BAD fails clearly."""
    bad = "algorithmic_reverse_binary40_tset"
    robustness.bad_input(f"t2t-datagen --problem={PROBLEM},{bad}")
    data = tmp_path / "data"
    result = run_binary("t2t-datagen", f"--problem={PROBLEM},{bad}", f"--data_dir={data}",
                        "--progress=false")
    _assert_clear(result, f"Unknown problem {bad!r}.", f"Did you mean: {PROBLEM}")
    from t2t import registry

    problem = registry.problem(PROBLEM)
    for split in ("train", "dev"):
        assert len(problem.data_files(str(data), split)) == 1  # complete, not partial
    assert not [n for n in os.listdir(data) if n.endswith(".incomplete")]
    robustness.run_completed(f"t2t-datagen {PROBLEM} before the bad name")


def test_decoder_and_exporter_unknown_names(robustness, trained_run, data_dir, tmp_path):
    before = support.snapshot(trained_run)
    cases = [
        ("t2t-decoder", "model", "transfomer", "Unknown model 'transfomer'.", "transformer"),
        ("t2t-decoder", "hparams_set", "transformer_tst", "Unknown hparams 'transformer_tst'.",
         "transformer_test"),
        ("t2t-exporter", "problem", "algorithmic_reverse_binary40_tst",
         "Unknown problem 'algorithmic_reverse_binary40_tst'.", PROBLEM),
        ("t2t-exporter", "model", "lstm_seq2seqq", "Unknown model 'lstm_seq2seqq'.",
         "lstm_seq2seq"),
    ]
    for binary, flag, bad, message, close in cases:
        robustness.bad_input(f"{binary} --{flag}={bad}")
        result = run_binary(binary, f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                            f"--{flag}={bad}", f"--decode_hparams={support.FAST_DECODE}",
                            f"--export_dir={tmp_path / 'export'}" if binary == "t2t-exporter"
                            else f"--decode_to_file={tmp_path / 'decodes'}")
        _assert_clear(result, message, "Did you mean: ", close)
    assert not os.listdir(tmp_path)  # no export, no decodes
    support.assert_kept(robustness, trained_run, before)


@pytest.mark.parametrize("binary", [
    "t2t-datagen",
    "t2t-trainer",
    "t2t-decoder",
    "t2t-exporter",
])
def test_problem_reversed_twice(robustness, binary, data_dir, trained_run, tmp_path):
    bad = f"{PROBLEM}_rev_rev"
    robustness.bad_input(f"{binary} --problem={bad}")
    before = support.snapshot(trained_run)
    if binary == "t2t-datagen":
        args = [f"--data_dir={tmp_path / 'data'}"]
    elif binary == "t2t-trainer":
        args = _trainer_args(data_dir, tmp_path / "run")
    else:
        args = [f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                f"--decode_hparams={support.FAST_DECODE}", f"--export_dir={tmp_path / 'x'}"
                if binary == "t2t-exporter" else f"--decode_to_file={tmp_path / 'x'}"]
    result = run_binary(binary, *args, f"--problem={bad}")
    support.assert_kept(robustness, trained_run, before)
    assert not os.listdir(tmp_path)  # no data, run or export directory was started
    _assert_clear(result, f"Problem name {bad!r} reverses twice", f"use {PROBLEM!r}",
                  f"'{PROBLEM}_rev' for the reversed direction")


def test_missing_usr_dir(robustness, data_dir, tmp_path):
    bad = tmp_path / "no_such_usr_dir"
    robustness.bad_input("t2t-trainer --t2t_usr_dir=<a folder that does not exist>")
    result = run_binary("t2t-trainer", *_trainer_args(data_dir, tmp_path / "run"),
                        f"--t2t_usr_dir={bad}")
    _assert_clear(result, f"--t2t_usr_dir='{bad}': no such directory or .py file")
    assert not os.path.exists(tmp_path / "run")
