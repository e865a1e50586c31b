"""A multi-problem through the binaries: t2t-datagen, t2t-trainer (packed; metrics per
task), t2t-decoder and t2t-exporter with --decode_task, and their errors."""

import json
import os

import pytest

from tests.helpers.binaries import run_binary

REVERSE = "algorithmic_reverse_binary40_test"
IDENTITY = "algorithmic_identity_binary40_test"
MULTI = f"{REVERSE}+{IDENTITY}"
HPARAMS = "batch_size=256,learning_rate_warmup_steps=10,num_hidden_layers=1"
PACKED = HPARAMS + ",pack_dataset=true"  # the module's run: packed examples of both tasks


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi_bin")
    data_dir, output_dir = str(root / "data"), str(root / "run")
    generated = run_binary("t2t-datagen", f"--problem={MULTI}", f"--data_dir={data_dir}",
                           "--progress=false")
    assert generated.code == 0, generated.err[-3000:]
    trained = run_binary("t2t-trainer", f"--problem={MULTI}", "--model=transformer",
                         "--hparams_set=transformer_test", f"--hparams={PACKED}",
                         f"--data_dir={data_dir}", f"--output_dir={output_dir}",
                         "--train_steps=20", "--local_eval_frequency=20", "--eval_steps=2",
                         "--save_checkpoints_steps=20")
    assert trained.code == 0, trained.err[-3000:]
    return data_dir, output_dir, generated, trained


def test_datagen_writes_each_tasks_data(trained):
    data_dir, _, generated, _ = trained
    for task in (REVERSE, IDENTITY):
        assert f"{task}/train" in generated.out and f"{task}/dev" in generated.out
        assert any(name.startswith(f"{task}-train-") for name in os.listdir(data_dir))


def test_a_packed_run_evaluates_each_task_and_the_whole(trained):
    _, output_dir, _, result = trained
    with open(os.path.join(output_dir, "hparams.json")) as f:
        assert json.load(f)["pack_dataset"] is True
    with open(os.path.join(output_dir, "eval_results.jsonl")) as f:
        record = json.loads(f.read().splitlines()[-1])
    assert record["step"] == 20
    for prefix in ("", f"{REVERSE}/", f"{IDENTITY}/"):
        assert 0.0 <= record[prefix + "accuracy"] <= 1.0
    assert f"{REVERSE}/accuracy" in result.out
    # The whole is the two tasks' batches together: between the two.
    low, high = sorted(record[f"{t}/loss"] for t in (REVERSE, IDENTITY))
    assert low - 1e-6 <= record["loss"] <= high + 1e-6
    assert os.listdir(os.path.join(output_dir, "eval"))  # TensorBoard events


def test_decoder_decodes_the_chosen_task(trained, tmp_path):
    data_dir, output_dir, _, _ = trained
    source = tmp_path / "source.txt"
    source.write_text("1 0 1\n0 0 1 1\n")
    scores = {}
    for task in (IDENTITY, REVERSE):
        target = tmp_path / f"{task}.txt"
        result = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                            f"--decode_task={task}", f"--decode_from_file={source}",
                            f"--decode_to_file={target}",
                            "--decode_hparams=beam_size=1,extra_length=3,write_beam_scores=true")
        assert result.code == 0, result.err[-3000:]
        lines = [line.split("\t") for line in target.read_text().splitlines()]
        assert len(lines) == 2 and all(set(text.split()) <= {"0", "1"} for text, _ in lines)
        scores[task] = [float(score) for _, score in lines]
    # The same sources behind the other task's token: the model sees other inputs.
    assert scores[IDENTITY] != scores[REVERSE]


# slow: an export with its parity gate (~40 s of CI's 25 minutes); the chosen task's
#   token reaching the model stays in CI through the decoder test above
@pytest.mark.slow
def test_exporter_exports_the_chosen_task_and_passes_parity(trained, tmp_path):
    data_dir, output_dir, _, _ = trained
    result = run_binary("t2t-exporter", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                        f"--decode_task={REVERSE}", f"--export_dir={tmp_path / 'export'}",
                        "--decode_hparams=beam_size=1,extra_length=3")
    assert result.code == 0, result.err[-3000:]
    assert "Parity check passed on " in result.out


@pytest.mark.parametrize("binary", ["t2t-decoder", "t2t-exporter"])
def test_the_task_must_be_chosen_and_exist(trained, binary):
    data_dir, output_dir, _, _ = trained
    missing = run_binary(binary, f"--output_dir={output_dir}", f"--data_dir={data_dir}")
    assert missing.code == 1 and not missing.traceback
    assert f"choose the task with --decode_task=NAME (one of {REVERSE}, {IDENTITY})" in missing.err
    wrong = run_binary(binary, f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                       "--decode_task=algorithmic_identity_binary40")
    assert wrong.code == 1 and f"Did you mean: {IDENTITY}" in wrong.err


def _train(data_dir, output_dir, *extra):
    return ["--problem=" + MULTI, "--model=transformer", "--hparams_set=transformer_test",
            f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--train_steps=6",
            "--local_eval_frequency=6", "--eval_steps=1", "--save_checkpoints_steps=6", *extra]


# slow: each strategy starts its own processes (a MirroredStrategy on 2 logical CPUs ~60 s;
#   2 workers, or a chief + worker + ps, through t2t-launch on 127.0.0.1 ~2 min)
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker", "parameter_server"])
def test_a_multi_problem_trains_under_each_strategy(trained, tmp_path, strategy):
    import subprocess
    import sys

    command = {"mirrored": ["t2t-trainer", "--cpu_devices=2"],
               "multi_worker": [sys.executable, "-m", "t2t.bin.t2t_launch", "--num_workers=2",
                                "--", "t2t-trainer"],
               "parameter_server": [sys.executable, "-m", "t2t.bin.t2t_launch",
                                    "--num_workers=1", "--num_ps=1", "--", "t2t-trainer",
                                    "--sync=false"]}[strategy]
    if command[0] == "t2t-trainer":
        command[0] = os.path.join(os.path.dirname(sys.executable), "t2t-trainer")
    out = tmp_path / strategy
    result = subprocess.run([*command, *_train(trained[0], out, f"--hparams={HPARAMS}")],
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert {"mirrored": "MirroredStrategy, 2 replica(s)",
            "multi_worker": "cluster of 2 worker; this is worker 0 (chief)",
            "parameter_server": "ParameterServerStrategy"}[strategy] in output
    with open(out / "eval_results.jsonl") as f:
        record = json.loads(f.read().splitlines()[-1])
    assert record["step"] == 6
    assert all(0.0 <= record[f"{task}/accuracy"] <= 1.0 for task in (REVERSE, IDENTITY))
