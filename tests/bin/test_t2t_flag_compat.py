"""Tests of t2t.bin.t2t_flag_compat: every binary accepts Tensor2Tensor's shared flag set
(each one it ignores noted in one line), T2T's renamed or dropped flags name their
replacement (checked against the binaries' real flags), and the README table writer."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys

import pytest

from t2t.bin import t2t_flag_compat as compat
from tests.helpers.binaries import Result, run_entry
from tests.helpers.runs import untrained_run

BIN = os.path.dirname(sys.executable)
PROBLEM = "algorithmic_reverse_binary40_test"
FAST = "--decode_hparams=beam_size=1,batch_size=4,extra_length=3"
MODULES = {"t2t-datagen": "t2t_datagen", "t2t-trainer": "t2t_trainer",
           "t2t-decoder": "t2t_decoder", "t2t-exporter": "t2t_exporter",
           "t2t-tuner": "t2t_tuner", "t2t-bleu": "t2t_bleu", "t2t-avg-all": "t2t_avg_all",
           "t2t-translate-all": "t2t_translate_all",
           "t2t-launch": "t2t_launch", "t2t-make-tf-configs": "t2t_make_tf_configs"}
LIST_FLAGS = ("import json, sys, importlib\nfrom absl import flags\n"
              "importlib.import_module('t2t.bin.' + sys.argv[1])\n"
              "print(json.dumps(sorted(flags.FLAGS)))")


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def _notes(result: subprocess.CompletedProcess | Result) -> list[str]:
    err = result.err if isinstance(result, Result) else result.stderr
    assert "Unknown command line flag" not in err, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("note: ")]


@pytest.fixture(scope="module")
def binary_flags() -> dict[str, set[str]]:
    """{binary: the flags its module defines} (one process each: absl refuses a flag
    defined twice, and the shared ones are only defined when a binary parses)."""
    def own(module: str) -> set[str]:
        result = _run([sys.executable, "-c", LIST_FLAGS, module])
        assert result.returncode == 0, result.stderr[-2000:]
        return set(json.loads(result.stdout))

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        return dict(zip(MODULES, pool.map(own, MODULES.values()), strict=True))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return untrained_run(PROBLEM, tmp_path_factory.mktemp("flag_compat"))


def test_shared_flags_hold_t2t_flag_set():
    shared = compat.shared_flags()
    for name in ("tmp_dir", "t2t_usr_dir", "data_dir", "worker_gpu", "hparams", "hparams_set",
                 "model", "problem", "random_seed", "output_dir", "train_steps", "eval_steps",
                 "schedule", "worker_replicas", "ps_replicas", "use_tpu", "master",
                 "keep_checkpoint_max", "save_checkpoints_secs", "decode_hparams",
                 "iterations_per_loop", "registry_help"):
        assert name in shared, name
    assert shared["use_tpu"] == (True, "devices") and shared["worker_gpu"] == (False, "devices")
    assert shared["tfdbg"] == (True, "t2t") and shared["tmp_dir"] == (False, "data")
    with pytest.raises(ValueError, match=re.escape("accept_shared_flags('t2t-decoderr'): not a "
                                                   "t2t binary; one of t2t-datagen, ")):
        compat.accept_shared_flags("t2t-decoderr")


def test_table_claims_hold_for_the_real_binaries(binary_flags):
    everywhere = set().union(*binary_flags.values())
    trainer = binary_flags["t2t-trainer"]
    for name, change in compat.T2T_FLAGS.items():
        if change.kept_in:  # kept: the binary has it
            assert name in binary_flags[change.kept_in], (name, change.kept_in)
        else:  # renamed or dropped: no binary has it
            assert name not in everywhere, name
        for target in change.apply:
            assert target in everywhere, (name, target)
        for target in change.unless:
            assert target in everywhere, (name, target)
    for binary, names in compat.cited_flags().items():  # each replacement exists
        assert names <= binary_flags[binary], (binary, names - binary_flags[binary])
    # Every shared flag of t2t-trainer's topics is the trainer's own (none drifted).
    own_topics = {"task", "data", "train", "devices", "general"}
    assert {n for n, (_, topic) in compat.shared_flags().items() if topic in own_topics} <= trainer
    assert {"gin_file", "gin_param"} <= binary_flags["t2t-bleu"]  # defined, hidden: noted


SHARED = ("--worker_gpu=1", "--train_steps=10", "--save_checkpoints_secs=600", "--tmp_dir=/x")
DROPPED = "note: --save_checkpoints_secs is not in t2t; use --save_checkpoints_steps"


def test_decoder_ignores_training_flags_and_decodes(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    source = tmp_path / "source.txt"
    source.write_text("1 0 1\n0 0 1\n")
    result = run_entry("t2t-decoder", f"--output_dir={output_dir}",
                       f"--data_dir={data_dir}", FAST, f"--decode_from_file={source}",
                       f"--decode_to_file={tmp_path / 'out.txt'}", *SHARED, "--random_seed=7",
                       "--eval_use_test_set", "--eval_steps=5", "--nouse_tpu")
    assert result.code == 0, result.err[-3000:]
    assert f"Decoded 2 lines of {source}" in result.out
    assert _notes(result) == [
        "note: t2t-decoder ignores --eval_use_test_set with --decode_from_file (not in t2t; "
        "use t2t-trainer --eval_split=test or t2t-decoder --decode_split=test)",
        "note: t2t-decoder ignores --random_seed (sampling's seed is --decode_hparams=seed=N)",
        DROPPED,
        "note: t2t-decoder ignores --tmp_dir (no data is generated here)",
        "note: t2t-decoder ignores --train_steps (no training here)",
        "note: t2t-decoder ignores --use_tpu (no training here)",
        "note: t2t-decoder ignores --worker_gpu (no training here)",
        "note: t2t-decoder ignores --eval_steps with --decode_from_file (it counts the dev "
        "batches decoded without a file)"]


def test_decoder_applies_eval_use_test_set_to_the_split_it_decodes(run_dir):
    data_dir, output_dir = run_dir
    result = run_entry("t2t-decoder", f"--output_dir={output_dir}",
                       f"--data_dir={data_dir}", FAST, "--eval_use_test_set")
    # The problem has train and dev splits only: the test split it now asks for is missing.
    assert result.code == 1 and result.err.splitlines()[-1] == (
        f"error: Problem '{PROBLEM}' has no split 'test': its splits are train, dev.")
    assert _notes(result) == [
        "note: --eval_use_test_set is not in t2t; applied as --decode_split=test"]


def test_trainer_accepts_shared_flags_through_common_flags(run_dir, tmp_path):
    data_dir, _ = run_dir
    result = run_entry("t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
                       "--hparams_set=transformer_test", f"--data_dir={data_dir}",
                       f"--output_dir={tmp_path / 'run'}", "--dry_run", FAST,
                       "--save_checkpoints_secs=600", "--eval_use_test_set",
                       "--log_step_count_steps=7", "--log_every_steps=3", "--problems=x")
    assert result.code == 0, result.err[-3000:]
    assert _notes(result) == [
        "note: t2t-trainer ignores --decode_hparams (decoding settings are t2t-decoder's)",
        "note: --eval_use_test_set is not in t2t; applied as --eval_split=test",
        "note: --log_step_count_steps is not in t2t; ignored, as --log_every_steps is given",
        "note: --problems is not in t2t; ignored, as --problem is given", DROPPED]
    assert "'eval_split': 'test'" in result.out and "'log_every_steps': 3" in result.out


def test_datagen_generates_and_notes_what_it_ignores(tmp_path):
    result = run_entry("t2t-datagen", f"--problem={PROBLEM}",
                       f"--data_dir={tmp_path / 'data'}", "--max_cases=3", "--noprogress",
                       "--model=transformer", "--random_seed=1", *SHARED[:-1],
                       f"--tmp_dir={tmp_path / 'tmp'}")
    assert result.code == 0, result.err[-3000:]
    assert f"{PROBLEM}: done" in result.out and (tmp_path / "data").is_dir()
    assert _notes(result) == [
        "note: t2t-datagen ignores --model (it only prepares data)",
        "note: t2t-datagen ignores --random_seed (each problem's generator has a fixed seed)",
        DROPPED,
        "note: t2t-datagen ignores --train_steps (no training here)",
        "note: t2t-datagen ignores --worker_gpu (no training here)"]


def test_exporter_fails_for_its_own_reason(tmp_path):
    missing = tmp_path / "no_run"
    result = run_entry("t2t-exporter", f"--output_dir={missing}", *SHARED,
                       "--decode_hparams=beam_size=2", "--data_mirror=/m")
    assert result.code == 1
    assert result.err.splitlines()[-1].startswith(
        f"error: --problem, --model, --hparams_set required ({missing} holds no run.json")
    assert _notes(result) == [
        "note: t2t-exporter ignores --data_mirror (no data is generated here)", DROPPED,
        "note: t2t-exporter ignores --tmp_dir (no data is generated here)",
        "note: t2t-exporter ignores --train_steps (no training here)",
        "note: t2t-exporter ignores --worker_gpu (no training here)"]


def test_tuner_applies_autotune_flags(tmp_path):
    result = run_entry("t2t-tuner", f"--problem={PROBLEM}", "--model=m",
                       "--hparams_set=h", "--hparams_range=no_such_range", "--objective=accuracy",
                       "--autotune_max_trials=3", "--autotune_parallel_trials=2", "--num_trials=4",
                       "--schedule=train", "--use_tpu", *SHARED)
    assert result.code == 1 and "Unknown ranged_hparams 'no_such_range'" in result.err
    assert _notes(result) == [
        "note: --autotune_max_trials is not in t2t; ignored, as --num_trials is given",
        "note: --autotune_parallel_trials is not in t2t; applied as --parallel_trials=2",
        DROPPED,
        "note: t2t-tuner ignores --schedule (every trial runs train_and_evaluate)",
        "note: t2t-tuner ignores --use_tpu (its trials take only the trainer flags its help "
        "lists)"]


def test_bleu_scores_and_notes_its_ignored_flags(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("the cat sat on the mat\n")
    result = run_entry("t2t-bleu", f"--translation={text}",
                       f"--reference={text}", "--gin_param=a.b=1", "--hparams_set=h", *SHARED)
    assert result.code == 0, result.err[-3000:]
    assert result.out.startswith("BLEU") and "100.0" in result.out
    assert _notes(result)[:2] == [
        "note: t2t-bleu ignores --gin_param (no user code or gin config is loaded here)",
        "note: t2t-bleu ignores --hparams_set (no problem or model is loaded here)"]
    assert len(_notes(result)) == 6


def test_avg_all_averages_and_notes_its_ignored_flags(run_dir, tmp_path):
    _, output_dir = run_dir
    result = run_entry("t2t-avg-all", f"--model_dir={output_dir}",
                       f"--output_dir={tmp_path / 'avg'}", "--n=1", "--problem=p", *SHARED)
    assert result.code == 0, result.err[-3000:]
    assert "Averaged 1 checkpoint(s)" in result.out
    assert _notes(result)[0] == "note: t2t-avg-all ignores --problem (no problem or model is " \
                                "loaded here)"


def test_launch_and_make_tf_configs_point_flags_to_the_command():
    launch = _run([sys.executable, "-m", "t2t.bin.t2t_launch", "--num_workers=1", *SHARED,
                   "--", sys.executable, "-c", "print('task ran')"])
    assert launch.returncode == 0, launch.stderr[-3000:]
    assert "task ran" in launch.stdout
    assert "note: t2t-launch ignores --tmp_dir (give it to the command after `--`)" in _notes(
        launch)
    configs = _run([sys.executable, "-m", "t2t.bin.t2t_make_tf_configs", "--masters=a:1",
                    "--t2t_usr_dir=/u", "--worker_gpu=2"])
    assert configs.returncode == 0 and '"chief": ["a:1"]' in configs.stdout
    assert _notes(configs) == [
        "note: t2t-make-tf-configs ignores --t2t_usr_dir (give it to the trainer command)",
        "note: t2t-make-tf-configs ignores --worker_gpu (give it to the trainer command)"]


def test_shared_flags_stay_out_of_help_but_in_helpfull():
    short = _run([os.path.join(BIN, "t2t-decoder"), "--help"])
    full = _run([os.path.join(BIN, "t2t-decoder"), "--helpfull"])  # absl exits 1 after it
    assert short.returncode == 0
    assert "--tmp_dir" not in short.stdout and "--save_checkpoints_secs" not in short.stdout
    assert "t2t.bin.t2t_flag_compat:" in full.stdout
    assert "t2t-decoder ignores it (not in t2t; use --save_checkpoints_steps)" in " ".join(
        full.stdout.split())


def test_readme_writer_round_trips(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\nbefore\n{compat.BEGIN}\nold\n{compat.END}\nafter\n")
    command = [sys.executable, "-m", "t2t.bin.t2t_flag_compat", f"--write={readme}"]
    assert _run(command).returncode == 0
    text = readme.read_text()
    table = compat.markdown_table()
    assert text == f"# t\n\nbefore\n{compat.BEGIN}\n{table}\n{compat.END}\nafter\n"
    assert _run(command).returncode == 0 and readme.read_text() == text  # unchanged
    assert ("| `--save_checkpoints_secs` | not in t2t; use `--save_checkpoints_steps` |"
            in table.splitlines())
    assert ("| `--autotune_max_trials` | not in t2t; use `t2t-tuner --num_trials` (applied "
            "for you) |" in table.splitlines())
    assert "| `--sync` | kept in t2t-trainer: default true (T2T: false); " in table
    assert len(table.splitlines()) == len(compat.T2T_FLAGS) + 2
    printed = _run([sys.executable, "-m", "t2t.bin.t2t_flag_compat"])
    assert printed.returncode == 0 and printed.stdout == table + "\n"


def test_readme_writer_fails_clearly_without_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n{compat.BEGIN}\nno end marker\n")
    result = _run([sys.executable, "-m", "t2t.bin.t2t_flag_compat", f"--write={readme}"])
    assert result.returncode == 1
    assert result.stderr == (
        f"error: {readme}: the README has no t2t-flags block: add a line {compat.BEGIN} and, "
        f"below it, a line {compat.END} where the table goes\n")
    assert readme.read_text() == f"# t\n{compat.BEGIN}\nno end marker\n"
