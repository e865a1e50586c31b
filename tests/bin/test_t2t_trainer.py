"""End-to-end tests of the t2t-trainer binary: flags, determinism, SIGKILL and resume,
two mirrored replicas."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.binaries import run_binary
from tests.helpers.runs import NO_DECODE_SUMMARIES, assert_one_trace

PROBLEM = "algorithmic_reverse_binary40_test"
TRAINER = os.path.join(os.path.dirname(sys.executable), "t2t-trainer")


def _args(data_dir, output_dir, *extra):
    return [TRAINER, f"--problem={PROBLEM}", "--model=transformer",
            "--hparams_set=transformer_test", "--hparams=batch_size=256,learning_rate_warmup_steps=10",
            f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--eval_steps=2",
            "--log_every_steps=1", *extra]


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)


def _losses(stdout):
    """{step: loss} from the progress lines."""
    return {int(m[1]): float(m[2]) for m in re.finditer(r"step (\d+)/\d+ loss ([0-9.]+)", stdout)}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    from t2t import registry

    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


def test_dry_run_and_flag_errors(data_dir, tmp_path):
    result = _run(_args(data_dir, tmp_path / "out", "--dry_run"))
    assert result.returncode == 0, result.stderr
    assert "model:       transformer (t2t.models.transformer.Transformer)" in result.stdout
    assert "hidden_size = 16" in result.stdout and "batch_size = 256" in result.stdout
    assert "strategy:    default (one device), 1 replica(s)" in result.stdout
    assert not (tmp_path / "out").exists()

    # The flag errors in this process: each is refused before any TensorFlow work.
    missing = run_binary("t2t-trainer", f"--problem={PROBLEM}")
    assert missing.code == 1 and "--model, --hparams_set required" in missing.err
    unknown = run_binary("t2t-trainer", *_args(data_dir, tmp_path / "o2", "--dry_run")[1:],
                         "--model=transfomer")
    assert unknown.code == 1 and "Did you mean: transformer" in unknown.err
    bad = run_binary("t2t-trainer", *_args(data_dir, tmp_path / "o3", "--dry_run")[1:],
                     "--hparams=hiden_size=3")
    assert bad.code == 1 and "Unknown hparam 'hiden_size'" in bad.err
    assert not (missing.traceback or unknown.traceback or bad.traceback)


# ~100 s on 2 cores. CI covers the same (and more: kills at random steps, a reference
# run beside, equal final weights) in tests/robustness/test_faults.py.
@pytest.mark.slow
def test_deterministic_runs_repeat_and_survive_sigkill(data_dir, tmp_path):
    """Two --deterministic runs give identical losses; a run SIGKILLed mid-way and
    restarted (twice) ends at the same step with the same final loss."""
    steps = ["--train_steps=30", "--save_checkpoints_steps=5", "--local_eval_frequency=100",
             "--deterministic", "--random_seed=7"]
    first = _run(_args(data_dir, tmp_path / "a", *steps))
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(_args(data_dir, tmp_path / "b", *steps))
    assert second.returncode == 0, second.stderr[-3000:]
    reference = _losses(first.stdout)
    assert len(reference) == 30 and reference == _losses(second.stdout)

    killed_dir = tmp_path / "killed"
    for kill_after_step in (8, 19):
        proc = subprocess.Popen(_args(data_dir, killed_dir, *steps), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 300
        for line in proc.stdout:
            match = re.match(r"step (\d+)/", line)
            if match and int(match[1]) >= kill_after_step:
                proc.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() < deadline
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
    final = _run(_args(data_dir, killed_dir, *steps))
    assert final.returncode == 0, final.stderr[-3000:]
    resumed = _losses(final.stdout)
    assert max(resumed) == 30 and min(resumed) == 16  # resumed from the step-15 checkpoint
    for step, loss in resumed.items():
        assert loss == pytest.approx(reference[step], abs=1e-6), step
    results = [json.loads(line) for line in open(killed_dir / "eval_results.jsonl")]
    assert results[-1]["step"] == 30


@pytest.mark.slow  # ~37 s; CI keeps MirroredStrategy in tests/trainer/test_accumulation.py
def test_two_mirrored_cpu_replicas(data_dir, tmp_path):
    """Training, checkpoints, evaluation, the profiler and --overfit_batches under
    MirroredStrategy (one run: each start costs ~40 s on 2 cores)."""
    # One eval, at the end: each costs ~15 s under MirroredStrategy on 2 cores.
    result = _run(_args(data_dir, tmp_path / "mirrored", "--train_steps=20",
                        "--save_checkpoints_steps=10", "--local_eval_frequency=20",
                        "--cpu_devices=2", "--profile_steps=2,3", "--overfit_batches=2",
                        NO_DECODE_SUMMARIES))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MirroredStrategy, 2 replica(s)" in result.stdout
    assert "global batch 256 x 2 replica(s)" in result.stdout
    losses = _losses(result.stdout)
    assert max(losses) == 20 and sum(list(losses.values())[-5:]) < sum(list(losses.values())[:5])
    assert os.path.exists(tmp_path / "mirrored" / "ckpt-20.index")
    assert "eval step 20: accuracy" in result.stdout
    output = result.stdout + result.stderr
    assert "Profiled steps 2-3" in output and "Overfit check (2 batches repeated)" in output
    assert_one_trace(str(tmp_path / "mirrored"), b"train_step")


# slow: XLA's compile of a train step on a CPU (~75 s of CPU); the models' XLA-vs-eager
#   checks (tests/helpers/model_checks.py) stay in CI
@pytest.mark.slow
def test_xla_and_bfloat16(data_dir, tmp_path):
    # One layer: XLA's compile time on a CPU grows with the graph, and one shows the path.
    result = _run(_args(data_dir, tmp_path / "fast", "--train_steps=6", "--save_checkpoints_steps=6",
                        "--local_eval_frequency=6", "--xla_compile", "--mixed_precision=bfloat16",
                        "--hparams=batch_size=256,learning_rate_warmup_steps=10,"
                        "num_hidden_layers=1"))
    assert result.returncode == 0, result.stderr[-3000:]
    losses = _losses(result.stdout)
    assert max(losses) == 6 and all(0 < loss < 10 for loss in losses.values())
    assert "eval step 6: accuracy" in result.stdout


def test_an_evaluation_takes_the_run_from_its_run_json(tmp_path):
    from t2t import config
    from t2t.bin import t2t_trainer

    (tmp_path / "run.json").write_text(json.dumps(
        {"problem": "p", "model": "m", "hparams_set": "hs", "hparams": "a=1"}))

    def experiment(schedule, **task):
        return config.ExperimentConfig(task=config.TaskConfig(output_dir=str(tmp_path), **task),
                                       trainer=config.TrainerConfig(schedule=schedule))

    filled = t2t_trainer._from_run_record(experiment("evaluate", hparams="b=2")).task
    assert (filled.problem, filled.model, filled.hparams_set, filled.hparams) == (
        "p", "m", "hs", "a=1,b=2")
    given = t2t_trainer._from_run_record(experiment("evaluate", hparams_set="other")).task
    assert (given.problem, given.hparams_set, given.hparams) == ("p", "other", "")
    resumed = t2t_trainer._from_run_record(experiment("train")).task  # a resume, too
    assert (resumed.problem, resumed.model, resumed.hparams_set) == ("p", "m", "hs")
    (tmp_path / "run.json").unlink()
    new = t2t_trainer._from_run_record(experiment("train")).task
    assert new.problem is None  # a new run names its problem itself
