"""--eval_split and the language-model metrics, on a tiny byte-level LM with a test split:
evaluations of another split are recorded apart, unknown or missing splits fail
clearly, and perplexity / bits_per_byte are exact functions of the token NLL."""

import glob
import math
import os
import shutil
import sys
import textwrap

import pytest

from t2t import registry, usr_dir
from t2t.config import TrainerConfig
from t2t.data import problem as problem_lib
from t2t.hparams.basic import create_hparams
from t2t.trainer import run_dir
from t2t.trainer.trainer import Trainer
from tests.helpers.binaries import run_binary

PROBLEM = "tiny_byte_lm_with_test_split"
USR_MODULE = textwrap.dedent('''
    from t2t import registry
    from t2t.problems import problem, text_problems

    TEXT = {
        "train": ["the cat sat on the mat", "a dog ran to the red house", "the big tree",
                  "green trees and red houses", "on a mat sat a cat"] * 8,
        "dev": ["the red cat sat", "a big dog ran", "the green mat"],
        "test": ["a cat and a dog", "the tree on the house", "red and green", "the mat"],
    }


    @registry.register_problem("PROBLEM_NAME")
    class TinyByteLm(text_problems.Text2SelfProblem):
        vocab_type = text_problems.VOCAB_BYTE
        splits = (problem.SplitSpec("train", 1), problem.SplitSpec("dev", 1),
                  problem.SplitSpec("test", 1))

        def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
            for text in TEXT[split]:
                yield {"targets": text}
''').replace("PROBLEM_NAME", PROBLEM)
HPARAMS = "batch_size=256,learning_rate_warmup_steps=10"


@pytest.fixture(scope="module")
def usr_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("usr") / "tiny_byte_lm.py"
    path.write_text(USR_MODULE)
    module = usr_dir.import_usr_dir(str(path))
    yield str(path)
    registry.REGISTRIES["problem"].unregister(PROBLEM)
    sys.modules.pop(module.__name__, None)


@pytest.fixture(scope="module")
def data_dir(usr_file, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


def _trainer(data_dir, output_dir, steps=10, **config):
    defaults = dict(train_steps=steps, save_checkpoints_steps=10, local_eval_frequency=10,
                    eval_steps=0, log_every_steps=5, decode_summaries=0)
    defaults.update(config)
    return Trainer(registry.problem(PROBLEM), "transformer",
                   create_hparams("transformer_test", HPARAMS), data_dir, str(output_dir),
                   TrainerConfig(**defaults))


def _check_lm_metrics(results):
    """perplexity and bits_per_byte from neg_log_perplexity's mean NLL: exact for bytes."""
    assert {"accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte", "loss"} <= set(results)
    nll = -results["neg_log_perplexity"]
    assert results["perplexity"] == pytest.approx(math.exp(nll), rel=1e-9)
    # Byte-level: one byte per token, EOS included, so bytes == tokens.
    assert results["bits_per_byte"] == pytest.approx(nll / math.log(2), rel=1e-5)


# slow: two in-process runs; the binary's evaluation of the test split (below) stays in CI
@pytest.mark.slow
def test_dev_then_test_evaluations_are_recorded_apart(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    dev = _trainer(data_dir, out).train_and_evaluate()
    _check_lm_metrics(dev)
    assert [r["step"] for r in run_dir.read_eval_results(str(out))] == [10]
    assert glob.glob(str(out / "eval" / "events.*"))
    assert "eval step 10: accuracy" in capsys.readouterr().out  # dev: printed as before

    trainer = _trainer(data_dir, out, eval_split="test")
    assert trainer.task.eval_split == "test" and trainer.step == 10
    test = trainer.run("evaluate")
    _check_lm_metrics(test)
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("eval step"))
    assert line.startswith("eval step 10 on test: accuracy ")
    for name in ("neg_log_perplexity", "perplexity", "bits_per_byte"):
        assert f" {name} " in line
    # Its own results file and TensorBoard folder; the dev record is untouched.
    assert run_dir.read_eval_results(str(out), split="test") == [
        {"step": 10, **{k: pytest.approx(v) for k, v in test.items()}}]
    assert [r["step"] for r in run_dir.read_eval_results(str(out))] == [10]
    assert glob.glob(str(out / "eval_test" / "events.*"))
    assert os.path.exists(out / "eval_results_test.jsonl")
    # Same weights, other text: the test split really was read.
    assert test["neg_log_perplexity"] != pytest.approx(dev["neg_log_perplexity"])
    assert _trainer(data_dir, out).evaluate()["neg_log_perplexity"] == pytest.approx(
        dev["neg_log_perplexity"], rel=1e-5)


def test_an_unknown_split_fails_before_any_work(data_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(problem_lib.UnknownSplitError) as error:
        _trainer(data_dir, out, eval_split="tset")
    message = str(error.value)
    assert "'tset'" in message and PROBLEM in message and "train, dev, test" in message
    assert not out.exists()


def test_a_split_never_generated_gives_the_data_missing_message(data_dir, tmp_path):
    partial = str(tmp_path / "data")
    shutil.copytree(data_dir, partial)
    for path in glob.glob(os.path.join(partial, f"{PROBLEM}-test-*")):
        os.remove(path)
    trainer = _trainer(partial, tmp_path / "run", eval_split="test")
    with pytest.raises(problem_lib.DataMissingError, match=f"No test data for problem '{PROBLEM}'"):
        trainer.evaluate()


def test_the_binary_evaluates_the_test_split_of_a_trained_run(usr_file, data_dir, tmp_path):
    out = tmp_path / "run"
    _trainer(data_dir, out).train()
    # The binary's main in this process (tests/helpers/binaries.py): no TensorFlow start.
    args = [f"--t2t_usr_dir={usr_file}", f"--problem={PROBLEM}", "--model=transformer",
            "--hparams_set=transformer_test", f"--hparams={HPARAMS}", f"--data_dir={data_dir}",
            f"--output_dir={out}", "--schedule=evaluate", "--eval_steps=0", "--train_steps=10"]
    result = run_binary("t2t-trainer", *args, "--eval_split=test")
    assert result.code == 0, result.err[-3000:]
    line = next(line for line in result.out.splitlines() if line.startswith("eval step"))
    assert line.startswith("eval step 10 on test: ")
    values = dict(zip(line.split(": ", 1)[1].split()[0:-2:2],
                      map(float, line.split(": ", 1)[1].split()[1:-2:2]), strict=True))
    assert {"accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"} <= set(values)
    assert values["bits_per_byte"] == pytest.approx(
        -values["neg_log_perplexity"] / math.log(2), abs=2e-4)
    assert run_dir.read_eval_results(str(out), split="test")[0]["step"] == 10
    bad = run_binary("t2t-trainer", *args, "--eval_split=validation")
    assert bad.code == 1 and not bad.traceback
    assert "no split 'validation': its splits are train, dev, test" in bad.err
