"""Tests of t2t.decoding.scoring: per-line log-probabilities checked against a manual
forward pass (batching, padding and sorting change nothing), corpus figures, the scores
file, truncation, float32 log-softmax of low-precision logits, seq2seq lines and the
errors; a byte-level LM trained for a few steps prefers a sentence it saw."""

import json
import logging
import math
import random
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.bases import text_problems
from t2t.decoding import scoring
from t2t.decoding.decoder import DecodeError
from t2t.decoding.scoring import CorpusScore, LineScore, ScoreError, Scorer
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model

SENTENCE = "the quick brown fox jumps over the lazy dog"
SEQ2SEQ = "algorithmic_reverse_binary40_test"


@registry.register_problem(name="zz_test_scoring_bytes_lm")
class _BytesLM(text_problems.Text2SelfProblem):
    vocab_type = text_problems.VOCAB_BYTE


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _model(problem, seed):
    keras.utils.set_random_seed(seed)
    model = t2t_model.create_model("transformer", create_hparams("transformer_test"),
                                   problem_lib.PREDICT, problem.hparams(None))
    model.build_weights()
    return model


def _train(model, text, steps):
    """`steps` Adam steps on a batch of copies of `text` (bytes + EOS)."""
    ids = [b + 2 for b in text.encode("utf-8")] + [1]
    targets = tf.constant([ids] * 4, tf.int32)
    optimizer = keras.optimizers.Adam(0.01)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            _, losses = model({"targets": targets}, training=False)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    for _ in range(steps):
        loss = step()
    return float(loss)


@pytest.fixture(scope="module")
def lm():
    """A byte-level transformer_test LM trained 100 steps on SENTENCE."""
    problem = registry.problem("zz_test_scoring_bytes_lm")
    model = _model(problem, seed=5)
    loss = _train(model, SENTENCE, 100)
    assert loss < 1.0
    return problem, model


def _manual_log_prob(model, ids, inputs=None):
    """Sum of log-softmax at each target id: one unbatched, unpadded forward pass."""
    features = {"targets": tf.constant([ids], tf.int32)}
    if inputs is not None:
        features["inputs"] = tf.constant([inputs], tf.int32)
    logits, _ = model(features, training=False)
    logits = np.asarray(logits, np.float64)[0]
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    return float(sum(log_probs[t, i] for t, i in enumerate(ids)))


def _byte_ids(text):
    return [b + 2 for b in text.encode("utf-8")] + [1]


LINES = [SENTENCE, "", "a", "héllo wörld ✓", "the lazy dog", "x" * 70, SENTENCE[::-1]]


def test_batched_scores_equal_one_unbatched_pass_per_line(lm):
    problem, model = lm
    scorer = Scorer(problem, model, None, batch_size=3)
    scores = scorer.score_texts(LINES)
    for line, score in zip(LINES, scores, strict=True):
        ids = _byte_ids(line)
        assert score.log_prob == pytest.approx(_manual_log_prob(model, ids), abs=1e-4)
        assert score.tokens == len(ids) == score.bytes == len(line.encode()) + 1
        assert score.log_prob < 0 and not score.truncated
    # Three batches of different lengths and sizes, one trace.
    assert scorer.traces == 1
    assert [s.log_prob for s in Scorer(problem, model, None, batch_size=1).score_texts(LINES)] \
        == pytest.approx([s.log_prob for s in scores], abs=1e-4)


def test_byte_lm_bits_per_byte_is_nll_per_token_over_ln2(lm):
    problem, model = lm
    scores = Scorer(problem, model, None).score_texts(LINES)
    corpus = CorpusScore.of(scores)
    assert corpus.lines == len(LINES) and corpus.tokens == corpus.bytes
    assert corpus.total_log_prob == pytest.approx(sum(s.log_prob for s in scores))
    assert corpus.bits_per_byte == pytest.approx(corpus.nll_per_token / math.log(2), rel=1e-12)
    assert corpus.perplexity == pytest.approx(math.exp(corpus.nll_per_token))
    assert set(corpus.to_dict()) == {"lines", "tokens", "bytes", "total_log_prob",
                                     "nll_per_token", "perplexity", "bits_per_byte"}


def test_a_seen_sentence_scores_higher_than_a_shuffled_one(lm):
    problem, model = lm
    shuffled = "".join(random.Random(0).sample(SENTENCE, len(SENTENCE)))
    seen, other = Scorer(problem, model, None).score_texts([SENTENCE, shuffled])
    assert seen.log_prob > other.log_prob + 20
    assert -seen.log_prob / seen.tokens < 1.0  # nats per token after training


def test_score_file_writes_one_score_per_line_in_order(lm, tmp_path, monkeypatch, caplog):
    problem, model = lm
    monkeypatch.setattr(scoring, "FILE_CHUNK_LINES", 2)  # several chunks
    source = tmp_path / "in.txt"
    source.write_bytes(b"\xef\xbb\xbf" + "\n".join(LINES[:3]).encode() + b"\r\nb\xffd\n"
                       + "\n".join(LINES[3:]).encode() + b"\n")
    scorer = Scorer(problem, model, None, batch_size=2)
    with caplog.at_level(logging.WARNING):
        corpus = scorer.score_file(str(source), str(tmp_path / "out.txt"))
    assert f"line 4 of {source} is not valid UTF-8" in "\n".join(_warnings(caplog))
    lines = [*LINES[:3], "b\ufffdd", *LINES[3:]]
    expected = scorer.score_texts(lines)
    written = (tmp_path / "out.txt").read_text().splitlines()
    # Written "%.6f"; other batches pad differently (float32 sums differ in the 6th digit).
    assert all(len(w.split(".")[1]) == 6 for w in written)
    assert [float(w) for w in written] == pytest.approx([s.log_prob for s in expected], abs=1e-4)
    assert corpus.lines == len(lines) == 8
    assert corpus.tokens == sum(s.tokens for s in expected)
    assert corpus.total_log_prob == pytest.approx(sum(s.log_prob for s in expected), abs=1e-6)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    scoring.write_corpus_score(str(tmp_path / "corpus.json"), corpus)
    saved = json.loads((tmp_path / "corpus.json").read_text())
    assert saved == pytest.approx(corpus.to_dict())


def test_score_text_file_writes_scores_and_summary(lm, tmp_path):
    problem, model = lm
    (tmp_path / "in.txt").write_text("ab\ncd\n")
    corpus = scoring.score_text_file(problem, model, None, str(tmp_path / "in.txt"),
                                     str(tmp_path / "out.txt"), batch_size=4,
                                     summary_path=str(tmp_path / "s.json"))
    assert corpus.lines == 2 and corpus.tokens == 6
    assert json.loads((tmp_path / "s.json").read_text())["bytes"] == 6


def test_lines_longer_than_max_length_are_truncated_with_a_warning(lm, caplog):
    problem, model = lm
    scorer = Scorer(problem, model, None, max_length=5)
    with caplog.at_level(logging.WARNING):
        long, short = scorer.score_texts(["hello world", "hi"], first_line_number=7)
    assert (long.tokens, long.bytes, long.truncated) == (5, 5, True)
    assert long.log_prob == pytest.approx(_manual_log_prob(model, _byte_ids("hello")[:5]),
                                          abs=1e-4)
    assert (short.tokens, short.truncated) == (3, False)
    warnings = "\n".join(_warnings(caplog))
    assert "line 7 has 12 tokens: only the first 5 are scored" in warnings
    assert "line 8" not in warnings
    assert Scorer(problem, model, None).max_length == 256  # transformer_test's max_length


def test_low_precision_logits_get_a_float32_log_softmax():
    """A stand-in model with bfloat16 logits: the scores match a float64 log-softmax of
    those logits (a bfloat16 softmax would be off by ~1e-2)."""
    table = np.random.default_rng(0).normal(0, 8, [6, 6]).astype(np.float32)
    rounded = np.asarray(tf.cast(tf.cast(table, tf.bfloat16), tf.float64))

    class BFloat16Model:
        problem_hparams = problem_lib.ProblemHParams(modality={"targets": "symbol"},
                                                     vocab_size={"targets": 6})
        hparams = None

        def __call__(self, features, training=None):
            logits = tf.gather(tf.cast(table, tf.bfloat16), features["targets"])
            return logits, {}

    problem = registry.problem("zz_test_scoring_bytes_lm")
    ids = [[2, 3, 4, 5, 1], [5, 1]]
    scores = Scorer(problem, BFloat16Model(), None).score_encoded(
        [scoring._Encoded(np.asarray(x, np.int32), None, len(x), False) for x in ids])
    for row, score in zip(ids, scores, strict=True):
        log_probs = rounded - np.log(np.exp(rounded).sum(-1, keepdims=True))
        assert score == pytest.approx(sum(log_probs[i, i] for i in row), abs=1e-5)


# ------------------------------------------------------------------ seq2seq
@pytest.fixture(scope="module")
def seq2seq():
    problem = registry.problem(SEQ2SEQ)
    return problem, _model(problem, seed=3)


def test_seq2seq_scores_target_given_source(seq2seq):
    problem, model = seq2seq
    lines = ["1 0 1\t1 0 1", "0\t0", "1 1 0 0 1\t1 0 0 1 1", "\t1", "1 0\t"]
    scorer = Scorer(problem, model, None, batch_size=2)
    scores = scorer.score_texts(lines)
    assert scorer.traces == 1
    for line, score in zip(lines, scores, strict=True):
        source, target = line.split("\t")
        inputs = [int(w) + 2 for w in source.split()] + [1]
        targets = [int(w) + 2 for w in target.split()] + [1]
        assert score.log_prob == pytest.approx(_manual_log_prob(model, targets, inputs),
                                               abs=1e-4)
        assert score.tokens == len(targets) and score.bytes == len(target) + 1


def test_seq2seq_line_without_a_tab_is_an_error(seq2seq, tmp_path):
    problem, model = seq2seq
    scorer = Scorer(problem, model, None)
    with pytest.raises(ScoreError, match="line 2 has no tab: .* must be source<TAB>target"):
        scorer.score_texts(["1 0\t0 1", "1 0 1"])
    (tmp_path / "in.txt").write_text("1\t1\n0 1\n")
    with pytest.raises(DecodeError, match=f"line 2 of {tmp_path / 'in.txt'} has no tab"):
        scorer.score_file(str(tmp_path / "in.txt"), str(tmp_path / "out.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
    with pytest.raises(ScoreError, match="line 1 cannot be encoded"):
        scorer.score_texts(["1 0\t1 7"])


# ------------------------------------------------------------------- errors
def test_empty_file_is_an_error(lm, tmp_path):
    problem, model = lm
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ScoreError, match="empty.txt has no lines to score"):
        Scorer(problem, model, None).score_file(str(tmp_path / "empty.txt"),
                                                str(tmp_path / "out.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]
    assert Scorer(problem, model, None).score_texts([]) == []


def test_class_label_problems_and_bad_settings_are_refused(lm):
    problem, model = lm
    classifier = types.SimpleNamespace(problem_hparams=problem_lib.ProblemHParams(
        modality={"inputs": "symbol", "targets": "class_label"},
        vocab_size={"inputs": 258, "targets": 3}))
    with pytest.raises(DecodeError, match="class_label targets: scoring computes"):
        Scorer(problem, classifier, None)
    with pytest.raises(ScoreError, match="batch_size must be at least 1"):
        Scorer(problem, model, None, batch_size=0)


def test_corpus_score_of_nothing_and_line_score_fields():
    empty = CorpusScore()
    assert math.isnan(empty.nll_per_token) and math.isnan(empty.bits_per_byte)
    huge = CorpusScore(lines=1, tokens=1, bytes=1, total_log_prob=-1e6)
    assert huge.perplexity == math.inf
    assert LineScore(-1.5, 2, 2).truncated is False
