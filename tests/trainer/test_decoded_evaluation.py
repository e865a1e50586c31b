"""Decoded evaluation of a real training run: a tiny sequence-to-sequence problem naming
BLEU and ROUGE gets them at each evaluation (eval_results.jsonl, TensorBoard, the log),
equal to t2t-decoder's scoring of the same greedy decodes; hparams
eval_run_autoregressive adds decoded/accuracy and decoded/accuracy_per_sequence of every
example read, equal to what t2t-decoder's dev-set decodes give; a missing scorer stops the
run before its first step."""

from __future__ import annotations

import collections
import contextlib
import glob
import io
import json
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import DecodeHParams, RuntimeConfig, TrainerConfig
from t2t.decoding import decoder
from t2t.hparams.basic import create_hparams
from t2t.problems.algorithmic_tasks import algorithmic
from t2t.trainer import run_dir
from t2t.trainer.trainer import Trainer
from t2t.utils import optional_deps

PROBLEM = "algorithmic_reverse_binary40_test"  # 100 dev examples
HPARAMS = "batch_size=256,learning_rate_warmup_steps=10"
SCORES = ("bleu", "chrf", "rouge_1", "rouge_2", "rouge_l")


class ScoredReverse(algorithmic.AlgorithmicReverseBinary40Test):
    """The reverse problem scored like a summarization or translation problem."""

    registered_name = PROBLEM  # reads the module's data

    def eval_metrics(self):
        return ["accuracy", "accuracy_per_sequence", "neg_log_perplexity", "bleu", "rouge_2",
                "rouge_l"]


def _trainer(data_dir, output_dir, hparams=HPARAMS, **config):
    settings = dict(train_steps=10, local_eval_frequency=10, eval_steps=1, decode_summaries=0,
                    log_every_steps=10)
    settings.update(config)
    return Trainer(ScoredReverse(), "transformer", create_hparams("transformer_test", hparams),
                   data_dir, str(output_dir), TrainerConfig(**settings))


def _printed(function):
    """(what `function()` returned, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        value = function()
    return value, out.getvalue()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    """(data_dir, run dir, trainer, results, printed) of 10 steps with the default
    (AUTO) decoded evaluation."""
    output_dir = tmp_path_factory.mktemp("run")

    def run():
        trainer = _trainer(data_dir, output_dir)
        return trainer, trainer.train_and_evaluate()

    (trainer, results), printed = _printed(run)
    return data_dir, output_dir, trainer, results, printed


def _dev_decodes(trainer, data_dir, batches):
    """(references, outputs) of t2t-decoder's greedy decodes of the dev split."""
    dev_decoder = decoder.Decoder(trainer.task.problem, trainer.model, data_dir,
                                  DecodeHParams(beam_size=1, batch_size=16))
    triples = dev_decoder.decode_dev_set(batches)
    return [t[1] for t in triples], [t[2] for t in triples]


def test_each_evaluation_reports_bleu_and_rouge_of_greedy_decodes(trained):
    data_dir, output_dir, trainer, results, printed = trained
    line = ("Decoded evaluation: BLEU/chrF, ROUGE-1/2/L on the first 100 dev examples each "
            "evaluation (--eval_decode_examples=0 turns it off)")
    assert printed.count(line) == 1, printed
    [last] = run_dir.read_eval_results(str(output_dir))
    for key in SCORES:
        assert 0.0 <= results[key] <= 100.0 and last[key] == pytest.approx(results[key])
    shown = next(s for s in printed.splitlines() if s.startswith("eval step 10:"))
    assert f"rouge_l {results['rouge_l']:.4f}" in shown and f"bleu {results['bleu']:.4f}" in shown
    tags = {value.tag for path in glob.glob(str(output_dir / "eval" / "events.*"))
            for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value}
    assert set(SCORES) <= tags

    # The same 100 examples as t2t-decoder decodes them, scored here without t2t.
    import sacrebleu

    references, outputs = _dev_decodes(trainer, data_dir, 7)
    references, outputs = references[:100], outputs[:100]
    assert results["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(outputs, [references]).score, abs=1e-9)

    def unigram_f(output, reference):  # ROUGE-1 F of binary digits (nothing to stem)
        common = sum((collections.Counter(output.split())
                      & collections.Counter(reference.split())).values())
        if not common:
            return 0.0
        precision, recall = common / len(output.split()), common / len(reference.split())
        return 2 * precision * recall / (precision + recall)

    expected = 100 * np.mean([unigram_f(o, r) for o, r in zip(outputs, references, strict=True)])
    assert results["rouge_1"] == pytest.approx(expected, abs=1e-9)


def _one_by_one_accuracy(model, data_dir):
    """(decoded accuracy, accuracy per sequence) of the dev examples decoded one at a time
    (no padding, no batch), each just long enough to judge: a greedy decode's first
    tokens do not depend on how many more it is allowed."""
    from t2t.decoding import infer

    decode = tf.function(lambda inputs, length: infer.infer(
        model, {"inputs": inputs}, decode_length=length)["outputs"],
        input_signature=[tf.TensorSpec([1, None], tf.int32), tf.TensorSpec([], tf.int32)])
    correct = tokens = exact = count = 0
    dev = registry.problem(PROBLEM).dataset("eval", data_dir, deterministic=True)
    for example in dev.as_numpy_iterator():
        target = [int(i) for i in example["targets"] if i]  # the tokens and EOS
        output = decode(example["inputs"][None].astype(np.int32), len(target))[0].numpy()
        right = sum(int(o) == t for o, t in zip(output, target, strict=True))
        correct, tokens = correct + right, tokens + len(target)
        exact, count = exact + (right == len(target)), count + 1
    assert count == 100
    return correct / tokens, exact / count


def test_eval_run_autoregressive_scores_every_example_read(trained):
    data_dir, output_dir = trained[:2]
    trainer, printed = _printed(lambda: _trainer(
        data_dir, output_dir, HPARAMS + ",eval_run_autoregressive=true", eval_steps=0))
    assert trainer.step == 10  # resumed: this evaluates the same weights
    assert ("Decoded evaluation: BLEU/chrF, ROUGE-1/2/L, decoded/accuracy, "
            "decoded/accuracy_per_sequence of greedy decodes of every dev example each "
            "evaluation reads (the whole split;") in printed
    results = trainer.evaluate()
    assert 0.0 <= results["accuracy"] <= 1.0  # teacher-forced, still there
    for key in SCORES:
        assert 0.0 <= results[key] <= 100.0
    accuracy, per_sequence = _one_by_one_accuracy(trainer.model, data_dir)
    assert results["decoded/accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert results["decoded/accuracy_per_sequence"] == pytest.approx(per_sequence, abs=1e-12)
    with open(output_dir / "eval_results.jsonl", encoding="utf-8") as f:
        recorded = json.loads(f.read().splitlines()[-1])
    assert recorded["decoded/accuracy"] == pytest.approx(accuracy)


def test_a_missing_scorer_stops_the_run_before_its_first_step(trained, tmp_path, monkeypatch):
    data_dir = trained[0]
    for name in ("rouge_score", "rouge_score.rouge_scorer"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(optional_deps.MissingDependencyError, match=re.escape(
            "ROUGE needs rouge_score, which is not installed: pip install "
            "'t2t[summarization]'")):
        _trainer(data_dir, tmp_path / "run")
    assert not glob.glob(str(tmp_path / "run" / "ckpt-*"))
    _trainer(data_dir, tmp_path / "run", eval_decode_examples=0)  # nothing to score: runs


@pytest.mark.slow
def test_a_trained_model_decodes_worse_than_teacher_forcing_says(data_dir, tmp_path):
    """800 steps of the quick reverse run (~75 CPU-s): greedy decoding compounds its
    errors, so decoded/accuracy is below the teacher-forced accuracy, while a sequence
    right under teacher forcing is exactly what greedy decoding outputs (the per-sequence
    accuracies agree)."""
    hparams = ("learning_rate_warmup_steps=400,batch_size=1024,hidden_size=64,"
               "filter_size=256,eval_run_autoregressive=true")
    trainer = Trainer(ScoredReverse(), "transformer", create_hparams("transformer_tiny", hparams),
                      data_dir, str(tmp_path / "run"),
                      TrainerConfig(train_steps=800, local_eval_frequency=800, eval_steps=0,
                                    decode_summaries=0, log_every_steps=400),
                      RuntimeConfig(random_seed=1))
    results = trainer.train_and_evaluate()
    assert results["accuracy"] > 0.85 and results["accuracy_per_sequence"] > 0.5, results
    assert results["decoded/accuracy"] < results["accuracy"] - 0.02, results
    assert results["decoded/accuracy_per_sequence"] == pytest.approx(
        results["accuracy_per_sequence"], abs=0.02)
    assert results["bleu"] > 50.0 and results["rouge_l"] > results["rouge_2"] > 50.0, results
