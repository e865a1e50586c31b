"""A Tensor2Tensor user directory runs unchanged: datagen, training and decoding.

tests/fixtures/t2t_usr is written in T2T's idioms with its imports untouched
(`from tensor2tensor.data_generators import ...`, `tensorflow.compat.v1`,
`hparams(self, defaults, model_hparams)`, `example_reading_spec` tuples, a 3-argument
algorithmic generator, T2T's metric names and hparams sets built from
`transformer.transformer_base()`). Each problem goes through the three binaries in fresh
processes, as a user runs them. Image problems (image_utils) and concat-to-class
problems have their own such tests in tests/problems/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from t2t.problems.text import sentences

BIN = os.path.dirname(sys.executable)
USR_DIR = str(Path(__file__).parent / "fixtures" / "t2t_usr")

# problem -> (model, hparams set, --hparams, train steps, what the eval must reach)
CASES = {
    "t2t_usr_running_sum_decimal": (
        "transformer", "t2t_usr_transformer_tiny_sums", "", 40, ("accuracy", 0.15, None)),
    "t2t_usr_word_order_subwords": (
        "transformer", "transformer_tiny", "batch_size=512", 4, ("accuracy", 0.0, None)),
    "t2t_usr_question_or_statement": (
        "transformer", "transformer_tiny", "batch_size=512", 30, ("accuracy", 0.6, None)),
    "t2t_usr_sine_next_value": (
        "basic_fc_relu", "t2t_usr_fc_series", "", 300, ("rmse", None, 0.2)),
}


def _run(*args: str, cwd: Path) -> str:
    result = subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True,
                            text=True, timeout=600, cwd=cwd)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stderr[-4000:]}"
    return result.stdout + result.stderr


def _write_sentences(tmp_dir: Path) -> None:
    """Real sentences (the standard library's docstrings): held-out ones for dev."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    text = sentences.docstring_sentences(lowercase=False)
    train = [s for s in text if not sentences.held_out(s)][:1200]
    dev = [s for s in text if sentences.held_out(s)][:100]
    (tmp_dir / "train.txt").write_text("\n".join(train) + "\n")
    (tmp_dir / "dev.txt").write_text("\n".join(dev) + "\n")


# All four cases are in the slow set (each ~60-140 s of training and decoding): in CI a
# T2T-style user dir trains and decodes through t2t-trainer/t2t-decoder in
# tests/data/bases/test_text_problem_bases.py::test_trainer_and_decoder_with_a_usr_dir and
# test_image_utils.py, the 3-argument algorithmic generator and sets built on
# transformer_base() have unit tests (tests/data/test_t2t_style.py, tests/test_compat.py),
# T2T vocabularies are trained and decoded in tests/data/test_t2t_data_dir.py, and the
# time series' 4-D real-valued output is scored against its targets in
# tests/layers/test_modalities.py.
_SLOW = ("t2t_usr_word_order_subwords", "t2t_usr_question_or_statement",
         "t2t_usr_running_sum_decimal", "t2t_usr_sine_next_value")


@pytest.mark.parametrize("problem", [
    pytest.param(name, marks=pytest.mark.slow) if name in _SLOW else name for name in sorted(CASES)])
def test_datagen_train_decode(problem, tmp_path):
    model, hparams_set, overrides, steps, (metric, at_least, at_most) = CASES[problem]
    data_dir, tmp_dir, output_dir = tmp_path / "data", tmp_path / "tmp", tmp_path / "run"
    _write_sentences(tmp_dir)
    common = [f"--t2t_usr_dir={USR_DIR}", f"--problem={problem}", f"--data_dir={data_dir}"]

    out = _run("t2t-datagen", *common, f"--tmp_dir={tmp_dir}", cwd=tmp_path)
    assert "train" in out and list(data_dir.glob(f"{problem}-dev-00000-of-00001"))

    _run("t2t-trainer", *common, f"--model={model}", f"--hparams_set={hparams_set}",
         f"--hparams={overrides}", f"--train_steps={steps}", f"--local_eval_frequency={steps}",
         "--eval_steps=2", f"--output_dir={output_dir}", "--random_seed=1", cwd=tmp_path)
    results = [json.loads(line) for line in
               (output_dir / "eval_results.jsonl").read_text().splitlines()]
    value = results[-1][metric]
    if at_least is not None:
        assert value >= at_least, results[-1]
    if at_most is not None:
        assert value <= at_most, results[-1]

    out = _run("t2t-decoder", *common, f"--model={model}", f"--hparams_set={hparams_set}",
               f"--hparams={overrides}", f"--output_dir={output_dir}", "--eval_steps=1",
               cwd=tmp_path)
    outputs = (output_dir / "decode_dev.outputs.txt").read_text().splitlines()
    targets = (output_dir / "decode_dev.targets.txt").read_text().splitlines()
    assert outputs and len(outputs) == len(targets), out[-2000:]
    if problem == "t2t_usr_question_or_statement":
        assert set(outputs) <= {"statement", "command"}
    if problem == "t2t_usr_sine_next_value":  # numbers, close to the true next values
        errors = [abs(float(o) - float(t)) for o, t in zip(outputs, targets, strict=True)]
        assert sum(errors) / len(errors) < 0.2
    if problem == "t2t_usr_word_order_subwords":  # the T2T subword vocabulary was built
        assert list(data_dir.glob("vocab.t2t_usr_word_order_subwords.512.subwords"))
