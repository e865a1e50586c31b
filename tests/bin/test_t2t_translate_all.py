"""End-to-end tests of t2t-translate-all on a tiny real training run (3 checkpoints):
each checkpoint translated once (in this process, weights restored into one model; or
by t2t-decoder through --decoder_command), a half-written translation redone, new
checkpoints awaited, and t2t-bleu's curve of the result read back from TensorBoard
events. The mains run in this process (tests/helpers/binaries.py)."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import threading
import time

import pytest
from tensorboard.backend.event_processing import event_accumulator

from tests.helpers.binaries import load_binary, run_binary

PROBLEM = "algorithmic_reverse_binary40_test"
HPARAMS = "batch_size=256,learning_rate_warmup_steps=1,learning_rate_constant=0.5"
FAST = "--decode_hparams=beam_size=1,batch_size=4,extra_length=3"
SOURCE = ["1 0 1 1", "0 0 1", "1 1 1 0 0", "0 1", "1 0 0 0 1 1", "1 1 0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(run dir, source, reference): transformer_test trained 6 steps on the reverse
    problem with a checkpoint every 2 (ckpt-2, -4, -6), as t2t-trainer leaves it; the
    source lines and their reversals."""
    from t2t import registry
    from t2t.config import RuntimeConfig, TrainerConfig
    from t2t.hparams.basic import create_hparams
    from t2t.trainer.trainer import Trainer

    root = tmp_path_factory.mktemp("translate_all")
    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    config = TrainerConfig(train_steps=6, save_checkpoints_steps=2, local_eval_frequency=1000,
                           eval_steps=1, log_every_steps=100, decode_summaries=0)
    Trainer(problem, "transformer", create_hparams("transformer_test", HPARAMS), data_dir,
            output_dir, config, RuntimeConfig(random_seed=1, deterministic=True),
            run_info={"hparams_set": "transformer_test", "hparams": HPARAMS}).train()
    source, reference = root / "source.txt", root / "reference.txt"
    source.write_text("\n".join(SOURCE) + "\n")
    reference.write_text("\n".join(" ".join(reversed(s.split())) for s in SOURCE) + "\n")
    return output_dir, str(source), str(reference)


@pytest.fixture(scope="module")
def translated(run):
    """The first t2t-translate-all of the run (into the default RUN/translations)."""
    output_dir, source, _ = run
    result = run_binary("t2t-translate-all", f"--model_dir={output_dir}", f"--source={source}",
                        FAST)
    assert result.code == 0, result.err[-3000:]
    return result, os.path.join(output_dir, "translations")


def _name(step: int) -> str:
    return f"{PROBLEM}-{step}"


def _read(folder, step: int) -> str:
    with open(os.path.join(folder, _name(step)), encoding="utf-8") as f:
        return f.read()


def test_every_checkpoint_is_translated_once(run, translated):
    output_dir, source, _ = run
    result, folder = translated
    assert sorted(os.listdir(folder)) == [_name(2), _name(4), _name(6)]
    for step in (2, 4, 6):
        lines = _read(folder, step).split("\n")
        assert len(lines) == len(SOURCE) + 1 and lines[-1] == ""
        assert all(set(line.split()) <= {"0", "1"} for line in lines)
        # The checkpoint's time (T2T's --keep_timestamp): t2t-bleu's wall times.
        checkpoint = os.path.join(output_dir, f"ckpt-{step}")
        assert os.path.getmtime(os.path.join(folder, _name(step))) == \
            os.path.getmtime(checkpoint + ".index")
        assert f"with {checkpoint} (step {step}) in " in result.out
    # Each checkpoint's own weights (restored into the one model) decode differently.
    assert _read(folder, 2) != _read(folder, 4)
    assert "3 checkpoint(s) translated, 0 already translated" in result.out
    # A second run skips them all, loading no model.
    again = run_binary("t2t-translate-all", f"--output_dir={output_dir}", f"--source={source}",
                       FAST)
    assert again.code == 0, again.err[-3000:]
    assert [line for line in again.out.splitlines() if line.startswith("Skipping")] == [
        f"Skipping step {s}: {os.path.join(folder, _name(s))} exists" for s in (2, 4, 6)]
    assert "0 checkpoint(s) translated, 3 already translated" in again.out
    assert "Loaded transformer" not in again.err


def test_bleu_curve_in_tensorboard_events(run, translated, tmp_path):
    _, _, reference = run
    _, folder = translated
    events = tmp_path / "events"
    result = run_binary("t2t-bleu", f"--translations_dir={folder}", f"--reference={reference}",
                        f"--event_dir={events}")
    assert result.code == 0, result.err[-3000:]
    rows = [line.split() for line in result.out.splitlines()[1:4]]
    assert [row[0] for row in rows] == ["2", "4", "6"] and "best: step " in result.out
    accumulator = event_accumulator.EventAccumulator(str(events))
    accumulator.Reload()
    for column, tag in enumerate(("BLEU_cased", "BLEU_uncased", "chrF"), 1):
        points = accumulator.Scalars(tag)
        assert [p.step for p in points] == [2, 4, 6], tag
        assert [round(p.value, 2) for p in points] == [float(row[column]) for row in rows]


def test_crash_leftover_is_redone_and_new_checkpoints_awaited(run, translated, tmp_path,
                                                              monkeypatch):
    from t2t.utils import step_files

    output_dir, source, _ = run
    _, folder = translated
    copy, translations = tmp_path / "run", tmp_path / "translations"
    shutil.copytree(output_dir, copy, ignore=shutil.ignore_patterns("translations"))
    shutil.copytree(folder, translations)
    # A crash while translating ckpt-4 left a partial file and no translation.
    os.remove(translations / _name(4))
    (translations / (_name(4) + ".partial")).write_text("1 1\n")
    # The run records its last step (t2t-trainer's flags.txt); ckpt-8 (ckpt-2's weights)
    # appears while t2t-translate-all waits.
    (copy / "flags.txt").write_text("--problem=x\n--train_steps=8\n")

    def save_ckpt_8():
        for path in sorted(glob.glob(str(copy / "ckpt-2.*")), key=lambda p: p.endswith(".index")):
            shutil.copy(path, path.replace("ckpt-2.", "ckpt-8."))  # the .index last

    monkeypatch.setattr(step_files, "POLL_SECONDS", 0.1)
    later = threading.Timer(1.0, save_ckpt_8)
    later.start()
    start = time.monotonic()
    try:
        result = run_binary("t2t-translate-all", f"--model_dir={copy}", f"--source={source}",
                            f"--translations_dir={translations}", FAST, "--wait_minutes=1")
    finally:
        later.join()
    assert result.code == 0, result.err[-3000:]
    assert time.monotonic() - start < 45  # stopped at step 8, not after a minute's wait
    assert "2 checkpoint(s) translated, 2 already translated" in result.out
    assert sorted(os.listdir(translations)) == [_name(s) for s in (2, 4, 6, 8)]
    assert _read(translations, 4) == _read(folder, 4)
    assert _read(translations, 8) == _read(folder, 2)  # the same weights, restored again
    # Nothing new for 0.6 s: it stops waiting (the run's last step not reached).
    start = time.monotonic()
    idle = run_binary("t2t-translate-all", f"--model_dir={copy}", f"--source={source}",
                      f"--translations_dir={translations}", "--wait_minutes=0.01",
                      "--train_steps=100")
    assert idle.code == 0 and "0 checkpoint(s) translated, 4 already" in idle.out
    assert 0.5 < time.monotonic() - start < 30


@pytest.mark.slow  # ~15 s: a t2t-decoder process per checkpoint (the in-process path is in CI)
def test_decoder_command_runs_t2t_decoder(run, translated, tmp_path):
    output_dir, source, _ = run
    _, folder = translated
    translations = tmp_path / "translations"
    translations.mkdir()
    shutil.copy(os.path.join(folder, _name(6)), translations)  # done: skipped
    command = f"{sys.executable} -m t2t.bin.t2t_decoder {{params}}"
    result = run_binary("t2t-translate-all", f"--model_dir={output_dir}", f"--source={source}",
                        f"--translations_dir={translations}", f"--decoder_command={command}",
                        "--beam_size=1", "--decode_hparams=batch_size=4,extra_length=3",
                        "--min_steps=3", "--hparams=learning_rate_constant=0.5")
    assert result.code == 0, result.err[-3000:]
    assert f"--checkpoint_path={output_dir}/ckpt-4 " in result.out
    assert "--decode_hparams=batch_size=4,extra_length=3,beam_size=1" in result.out
    assert "--hparams=learning_rate_constant=0.5" in result.out
    # t2t-decoder's fresh load of ckpt-4 decodes as the in-process restore did.
    assert sorted(os.listdir(translations)) == [_name(4), _name(6)]
    assert _read(translations, 4) == _read(folder, 4)


def test_recorded_train_steps(tmp_path):
    module = load_binary("t2t.bin.t2t_translate_all")
    assert module.recorded_train_steps(str(tmp_path)) is None
    (tmp_path / "flags.txt").write_text("--problem=p\n--train_steps=800\n")
    assert module.recorded_train_steps(str(tmp_path)) == 800
    (tmp_path / "operative_config.gin").write_text("TrainerConfig.train_steps = 1200\n")
    assert module.recorded_train_steps(str(tmp_path)) == 1200  # gin set it: no flag given
    assert module.decode_hparams_text("batch_size=4", 2, 0.8) == \
        "batch_size=4,beam_size=2,alpha=0.8"


def test_a_checkpoint_removed_before_its_turn_is_skipped(tmp_path, capsys):
    from t2t.decoding.decoder import DecodeError
    from t2t.utils.step_files import StepFile

    module = load_binary("t2t.bin.t2t_translate_all")

    class Failing:  # what loading a checkpoint whose files are gone raises
        def translate(self, checkpoint, source, output):
            raise DecodeError(f"no checkpoint in {checkpoint}")

    gone = StepFile(str(tmp_path / "ckpt-8"), 8, 0.0)
    assert module._translate_one(Failing(), gone, "src", str(tmp_path / "out")) is False
    assert "ckpt-8 was removed before it was translated" in capsys.readouterr().err
    (tmp_path / "ckpt-8.index").write_text("")  # present: the error is the checkpoint's
    with pytest.raises(DecodeError, match="no checkpoint in"):
        module._translate_one(Failing(), gone, "src", str(tmp_path / "out"))


def test_errors(run, translated, tmp_path):
    output_dir, source, _ = run

    def error(*args):
        result = run_binary("t2t-translate-all", *args)
        assert result.code == 1 and not result.traceback, result.err[-3000:]
        return result.err.strip().splitlines()[-1]

    run_args = (f"--model_dir={output_dir}", f"--source={source}")
    assert "--model_dir required" in error(f"--source={source}")
    assert "--source required" in error(f"--model_dir={output_dir}")
    assert f"--source={tmp_path}/none: no such file" in error(
        f"--model_dir={output_dir}", f"--source={tmp_path}/none")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "is empty: nothing to translate" in error(f"--model_dir={output_dir}",
                                                    f"--source={empty}")
    assert f"--model_dir={tmp_path}/none: no such folder" in error(
        f"--model_dir={tmp_path}/none", f"--source={source}")
    assert f"--translations_dir={source}/t: {source} is a file, not a folder" in error(
        *run_args, f"--translations_dir={source}/t")
    assert "lacks {params}" in error(*run_args, "--decoder_command=t2t-decoder")
    assert "--beam_size=2 and --decode_hparams='beam_size=1' both set beam_size" in error(
        *run_args, "--beam_size=2", "--decode_hparams=beam_size=1")
    assert "return_beams=True: t2t-translate-all writes one translation per source line" in \
        error(*run_args, "--decode_hparams=return_beams=True")
    assert "--min_steps=-1: give a value >= 0" in error(*run_args, "--min_steps=-1")
    assert f"no checkpoint in {output_dir} with at least 7 steps" in error(
        *run_args, f"--translations_dir={tmp_path}/t", "--min_steps=7")
