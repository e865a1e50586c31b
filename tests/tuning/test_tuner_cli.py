"""End-to-end tests of t2t-tuner with the real trainer (transformer_test, a few steps):
the report files, resuming, a crashing trial, two tuner processes sharing one study."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from tests.helpers.binaries import run_binary
from tests.helpers.runs import NO_DECODE_SUMMARIES

PROBLEM = "algorithmic_reverse_binary40_test"
TUNER = os.path.join(os.path.dirname(sys.executable), "t2t-tuner")
RANGES = '''
from t2t import registry


@registry.register_ranged_hparams
def tuner_test_range(rhp):
    rhp.set_float("learning_rate_constant", 0.02, 5.0, scale=rhp.LOG_SCALE)
    rhp.set_discrete("learning_rate_warmup_steps", [2, 50])


@registry.register_ranged_hparams
def tuner_crash_range(rhp):
    rhp.set_categorical("ffn_layer", ["dense_relu_dense", "no_such_layer"])
    rhp.set_float("learning_rate_constant", 0.1, 3.0, scale=rhp.LOG_SCALE)


@registry.register_ranged_hparams
def tuner_misfit_range(rhp):
    rhp.set_float("learning_rate_constnt", 0.1, 1.0)
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tuner")
    from t2t import registry

    registry.problem(PROBLEM).generate_data(str(root / "data"), str(root / "data" / "tmp"),
                                            progress=False)
    (root / "ranges.py").write_text(RANGES)
    return root


def _args(root, output_dir, *extra, hparams_range="tuner_test_range"):
    return [TUNER, f"--t2t_usr_dir={root / 'ranges.py'}", f"--problem={PROBLEM}",
            "--model=transformer", "--hparams_set=transformer_test", "--hparams=batch_size=128",
            f"--hparams_range={hparams_range}", "--objective=accuracy", "--train_steps=4",
            "--local_eval_frequency=2", "--eval_steps=1", f"--data_dir={root / 'data'}",
            NO_DECODE_SUMMARIES,  # forwarded to each trial's trainer
            f"--output_dir={output_dir}", *extra]


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)


def _study(output_dir, hparams_range="tuner_test_range"):
    name = f"{PROBLEM}-transformer-transformer_test-{hparams_range}-accuracy"
    return optuna.load_study(study_name=name, storage=f"sqlite:///{output_dir}/study.db")


@pytest.fixture(scope="module")
def first_run(setup):
    out = setup / "study"
    # Two trials at a time: both of the study's first trials run side by side.
    result = _run(_args(setup, out, "--num_trials=2", "--parallel_trials=2"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result


def test_flag_errors(setup, tmp_path):
    # The tuner's main in this process (tests/helpers/binaries.py): no Python start each.
    def tuner(*args):
        return run_binary("t2t-tuner", *args)

    unknown = tuner(*_args(setup, tmp_path, hparams_range="tuner_test_rnage")[1:])
    assert unknown.code == 1 and "tuner_test_range" in unknown.err
    misfit = tuner(*_args(setup, tmp_path, hparams_range="tuner_misfit_range")[1:])
    assert misfit.code == 1
    assert "'tuner_misfit_range' does not fit 'transformer_test'" in misfit.err
    assert "Did you mean: learning_rate_constant" in misfit.err
    missing = tuner(f"--problem={PROBLEM}", "--model=transformer")
    assert missing.code == 1
    assert "--hparams_set, --hparams_range, --objective required" in missing.err
    both = tuner(*_args(setup, tmp_path, "--maximize", "--minimize")[1:])
    assert both.code == 1 and "not both" in both.err
    bad_model = tuner(*_args(setup, tmp_path)[1:], "--model=transfomer")
    assert bad_model.code == 1 and "Did you mean: transformer" in bad_model.err
    assert not (tmp_path / "study.db").exists()
    assert not (unknown.traceback or misfit.traceback or bad_model.traceback)


@pytest.mark.slow  # ~50 s on 2 cores (a real 2-trial study); test_study.py covers the study with a fake trainer
def test_study_writes_table_best_hparams_and_plots(first_run):
    out, result = first_run
    assert "0 trial(s) already" in result.stdout
    trials = _study(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for t in trials:
        run = out / f"trial_{t.number}"
        lines = (run / "eval_results.jsonl").read_text().splitlines()
        assert [json.loads(line)["step"] for line in lines] == [2, 4]
        assert t.value == json.loads(lines[-1])["accuracy"]
        assert (run / "trial.log").exists() and (run / "checkpoint").exists()
        flags_txt = (run / "flags.txt").read_text()
        assert "--train_steps=4" in flags_txt and "batch_size=128" in flags_txt
    table = (out / "trials.tsv").read_text().splitlines()
    assert table[0].split("\t")[:4] == ["trial", "state", "accuracy", "seconds"]
    assert len(table) == 3 and all("\tCOMPLETE\t" in row for row in table[1:])
    best = json.loads((out / "best_hparams.json").read_text())
    assert best["value"] == max(t.value for t in trials)
    assert (out / "best_hparams.txt").read_text().strip() == best["hparams_override"]
    assert best["hparams_override"].startswith("batch_size=128,learning_rate_constant=")
    assert (out / "objective.png").stat().st_size > 1000
    assert (out / "importance.png").exists() or "importance.png skipped" in result.stdout
    assert "Best: trial" in result.stdout and "trial  state     accuracy" in result.stdout


@pytest.mark.slow  # ~40 s on 2 cores; test_study.py re-runs a SIGKILLed tuner with a fake trainer
def test_rerun_resumes_without_repeating_trials(setup, first_run):
    out, _ = first_run
    before = {t.number: t for t in _study(out).get_trials()}
    logs = {n: (out / f"trial_{n}" / "eval_results.jsonl").read_text() for n in before}
    result = _run(_args(setup, out, "--num_trials=3", "--parallel_trials=2"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 trial(s) already: 2 COMPLETE" in result.stdout
    assert "trial 2: started" in result.stdout and "trial 0: started" not in result.stdout
    trials = _study(out).get_trials()
    assert len(trials) == 3  # trial 2 may be pruned: it reports below the median
    assert trials[2].state in (TrialState.COMPLETE, TrialState.PRUNED)
    for number, t in before.items():  # untouched: same times, same evaluations
        assert trials[number].datetime_complete == t.datetime_complete
        assert (out / f"trial_{number}" / "eval_results.jsonl").read_text() == logs[number]
    assert len((out / "trials.tsv").read_text().splitlines()) == 4


@pytest.mark.slow  # ~100 s on 2 cores; test_study.py covers two tuners with a fake trainer
def test_two_tuners_share_one_study_and_survive_a_crashing_trial(setup, tmp_path):
    """Two tuner processes against one SQLite study stop together at exactly num_trials,
    each trial run once; a trial whose trainer crashes is FAIL and the study goes on."""
    out = tmp_path / "shared"
    out.mkdir()
    name = f"{PROBLEM}-transformer-transformer_test-tuner_crash_range-accuracy"
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{out}/study.db",
                                direction="maximize")
    study.enqueue_trial({"ffn_layer": "no_such_layer", "learning_rate_constant": 1.0})
    study.enqueue_trial({"ffn_layer": "dense_relu_dense", "learning_rate_constant": 1.0})
    args = _args(setup, out, "--num_trials=4", "--parallel_trials=1",
                 hparams_range="tuner_crash_range")
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, stdout[-3000:] + stderr[-3000:]
    trials = _study(out, "tuner_crash_range").get_trials()
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert len({t.user_attrs["pid"] for t in trials}) == 2  # both tuners ran trials
    dirs = sorted(p.name for p in out.iterdir() if p.name.startswith("trial_"))
    assert dirs == ["trial_0", "trial_1", "trial_2", "trial_3"]
    started = sorted(line.split(":")[0] for stdout, _ in outputs
                     for line in stdout.splitlines() if ": started" in line)
    assert started == [f"trial {n}" for n in range(4)]  # no trial ran twice
    for t in trials:  # the bad layer crashes the trainer; the others train
        crashed = t.params["ffn_layer"] == "no_such_layer"
        assert t.state == (TrialState.FAIL if crashed else TrialState.COMPLETE)
    error = trials[0].user_attrs["error"]
    assert "trainer exited with status 1" in error and "no_such_layer" in error
    assert "no_such_layer" in (out / "trial_0" / "trial.log").read_text()
    assert any("trial 0: FAILED (trainer exited with status 1" in o for o, _ in outputs)
    rows = (out / "trials.tsv").read_text().splitlines()
    assert rows[1].split("\t")[1] == "FAIL" and "no_such_layer" in rows[1]
