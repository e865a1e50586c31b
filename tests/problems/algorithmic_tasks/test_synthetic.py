"""Tests of the synthetic problems: the decoder-only LM with its ideal metrics, and the
template-grammar sentiment classifier."""

from __future__ import annotations

import collections
import itertools
import math
import random
import re

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.encoders import text_encoder
from t2t.data.inspection import inspect_data
from t2t.problems.algorithmic_tasks import synthetic

LM = "algorithmic_lm_reverse_binary10"
CLASSIFIER = "sentiment_synthetic"


def _symbols(ids: list[int]) -> list[int]:
    assert ids[-1] == text_encoder.EOS_ID
    return [i - text_encoder.NUM_RESERVED_TOKENS for i in ids[:-1]]


# ---------------------------------------------------------------- language model


def test_lm_is_decoder_only_with_lm_metrics():
    prob = registry.problem(LM)
    assert isinstance(prob, text_problems.Text2SelfProblem)
    hp = prob.hparams(None)
    assert not hp.has_inputs
    assert hp.modality == {"targets": "symbol"} and hp.vocab_size == {"targets": 5}
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"]
    assert tuple(prob.sequence_features) == ("targets",)
    assert set(prob.example_reading_spec()[0]) == {"targets"}
    assert [(s.name, s.shards) for s in prob.splits] == [("train", 2), ("dev", 1)]
    assert (prob.num_examples("train"), prob.num_examples("dev")) == (50_000, 2_000)


def test_lm_examples_are_bits_separator_reversed_bits():
    prob = registry.problem(LM)
    sep = prob.num_symbols
    dev = list(prob.generate_examples("", "", problem.DEV_SPLIT))
    assert len(dev) == 2_000
    lengths = collections.Counter()
    for example in dev:
        assert set(example) == {"targets"}
        symbols = _symbols(example["targets"])
        assert symbols.count(sep) == 1
        i = symbols.index(sep)
        bits, rest = symbols[:i], symbols[i + 1:]
        assert 1 <= len(bits) <= 10 and set(bits) <= {0, 1} and rest == bits[::-1]
        lengths[len(bits)] += 1
    assert sorted(lengths) == list(range(1, 11))  # dev lengths are train's: 1..10


def test_lm_generation_is_deterministic_per_split():
    prob = registry.problem(LM)
    first = list(itertools.islice(prob.generate_examples("", "", problem.TRAIN_SPLIT), 300))
    again = list(itertools.islice(prob.generate_examples("", "", problem.TRAIN_SPLIT), 300))
    dev = list(itertools.islice(prob.generate_examples("", "", problem.DEV_SPLIT), 300))
    assert first == again and first != dev


def test_lm_text_form_round_trips():
    encoder = registry.problem(LM).feature_encoders(None)["targets"]
    assert encoder.encode("1 0 | 0 1") == [3, 2, 4, 2, 3]
    assert encoder.decode([3, 2, 4, 2, 3, 1, 0], strip_extraneous=True) == "1 0 | 0 1"


def _brute_force_ideal(max_length: int, num_symbols: int) -> dict[str, float]:
    """Enumerates every sequence with its probability and scores the Bayes-optimal
    next-token distribution (the true conditional) at every prefix."""
    sep, eos = num_symbols, "eos"
    sequences = {}
    for length in range(1, max_length + 1):
        for x in itertools.product(range(num_symbols), repeat=length):
            p = 1 / max_length / num_symbols**length
            sequences[(*x, sep, *x[::-1], eos)] = p
    next_mass: dict[tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    for seq, p in sequences.items():
        for t in range(len(seq)):
            next_mass[seq[:t]][seq[t]] += p
    nll = correct = tokens = 0.0
    for seq, p in sequences.items():
        for t in range(len(seq)):
            mass = next_mass[seq[:t]]
            total = sum(mass.values())
            nll -= p * math.log(mass[seq[t]] / total)
            correct += p * max(mass.values()) / total  # the best guess's chance
            tokens += p
    return {"neg_log_perplexity": -nll / tokens, "accuracy": correct / tokens}


@pytest.mark.parametrize("max_length,num_symbols", [(10, 2), (4, 3), (1, 2), (3, 1)])
def test_ideal_metrics_match_brute_force(max_length, num_symbols):
    closed = synthetic.ideal_lm_metrics(max_length, num_symbols)
    brute = _brute_force_ideal(max_length, num_symbols)
    assert closed == pytest.approx(brute, rel=1e-12)


def test_ideal_metrics_of_the_problem():
    ideal = registry.problem(LM).ideal_metrics()
    assert ideal["neg_log_perplexity"] == pytest.approx(-(math.log(10) + 5.5 * math.log(2)) / 13)
    assert ideal["neg_log_perplexity"] == pytest.approx(-0.47038, abs=1e-5)
    assert ideal["accuracy"] == pytest.approx(9.4 / 13)
    with pytest.raises(ValueError):
        synthetic.ideal_lm_metrics(0)


# ---------------------------------------------------------------- classification


def test_labels_follow_the_rule_and_are_balanced():
    prob = registry.problem(CLASSIFIER)
    samples = list(prob.generate_samples("", "", problem.DEV_SPLIT))
    assert len(samples) == 2_000 and prob.num_examples("train") == 40_000
    for sample in samples:
        score = synthetic.review_score(sample["inputs"])
        assert score != 0 and sample["label"] == int(score > 0), sample
    share = sum(s["label"] for s in samples) / len(samples)
    assert 0.45 < share < 0.55
    # Not a bag of adjectives: negation and mixed opinions are common.
    texts = [s["inputs"] for s in samples]
    assert sum(" not " in f" {t}" or " never " in t for t in texts) > 0.3 * len(texts)
    assert sum(_polarity_signs(t) == {1, -1} for t in texts) > 0.2 * len(texts)


def _polarity_signs(text: str) -> set[int]:
    return {synthetic._POLARITY[w] for w in re.findall(r"[a-z]+", text) if w in synthetic._POLARITY}


def test_review_score_reads_negation_intensity_and_mixed_opinions():
    assert synthetic.review_score("the plot was good.") == 1
    assert synthetic.review_score("the plot was not very good.") == -2
    assert synthetic.review_score("i really hated it, but the cast was great.") == -1
    assert synthetic.review_score("honestly, i did not dislike the ending; it runs about two hours.") == 1
    assert synthetic.review_score("it came out last year.") == 0


def test_grammar_words_are_unambiguous():
    # Only polarity words carry polarity, and each clause of a review has at most one.
    marked = set(synthetic._POLARITY) | set(synthetic.INTENSIFIERS) | set(synthetic.NEGATORS)
    neutral = " ".join((*synthetic._SUBJECTS, *synthetic._NOUNS, *synthetic._FILLERS,
                        *synthetic._OPENERS, *(c for pair in synthetic._COPULAS for c in pair)))
    assert not marked & set(neutral.split()) - set(synthetic.NEGATORS)
    rng = random.Random(0)
    for _ in range(2_000):
        text, _ = synthetic.generate_review(rng)
        for clause in re.split(r"[,.;]", text):
            assert sum(w in synthetic._POLARITY for w in clause.split()) <= 1, text


def test_classifier_generation_is_deterministic_per_split():
    prob = registry.problem(CLASSIFIER)
    first = list(itertools.islice(prob.generate_samples("", "", problem.TRAIN_SPLIT), 300))
    assert first == list(itertools.islice(prob.generate_samples("", "", problem.TRAIN_SPLIT), 300))
    assert first != list(itertools.islice(prob.generate_samples("", "", problem.DEV_SPLIT), 300))
    with pytest.raises(ValueError, match="no 'test' split"):
        next(prob.generate_samples("", "", problem.TEST_SPLIT))


# ------------------------------------------------------- generated data, inspected


def _small(name: str, monkeypatch):
    """The registered problem with fewer examples, so generation takes a second."""
    prob = registry.problem(name)
    if name == LM:
        monkeypatch.setattr(prob, "train_size", 1_000, raising=False)
        monkeypatch.setattr(prob, "dev_size", 200, raising=False)
    else:
        monkeypatch.setattr(prob, "sizes", {problem.TRAIN_SPLIT: 3_000, problem.DEV_SPLIT: 200},
                            raising=False)
        monkeypatch.setattr(prob, "max_samples_for_vocab", 3_000, raising=False)
    return prob


def test_generated_lm_data_inspects(tmp_path, monkeypatch):
    prob = _small(LM, monkeypatch)
    summary = prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), progress=False)
    assert {k: v.examples for k, v in summary.items()} == {"train": 1_000, "dev": 200}
    report = inspect_data.inspect_problem(prob, str(tmp_path), "dev", num_examples=2)
    assert report.examples_read == 200 and set(report.lengths) == {"targets"}
    assert re.match(r"'[01 ]+ \| [01 ]+ <EOS>'", report.examples[0]["targets"])
    assert 4 <= report.lengths["targets"].min and report.lengths["targets"].max <= 22


def test_generated_classifier_data_inspects(tmp_path, monkeypatch):
    prob = _small(CLASSIFIER, monkeypatch)
    summary = prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), progress=False)
    assert {k: v.examples for k, v in summary.items()} == {"train": 3_000, "dev": 200}
    hp = prob.hparams(str(tmp_path))
    assert hp.modality == {"inputs": "symbol", "targets": "class_label"}
    assert hp.vocab_size["targets"] == 2 and hp.vocab_size["inputs"] <= 256
    report = inspect_data.inspect_problem(prob, str(tmp_path), "dev")
    assert report.examples_read == 200 and sum(report.label_counts.values()) == 200
    assert set(report.label_counts) == {"neg", "pos"}
    # The stored ids decode back to the generated text, and the label follows it.
    encoder = prob.feature_encoders(str(tmp_path))["inputs"]
    samples = prob.generate_samples("", "", problem.DEV_SPLIT)
    dataset = prob.dataset(problem.EVAL, str(tmp_path), shuffle_files=False, deterministic=True)
    for example, sample in zip(dataset.take(50).as_numpy_iterator(), samples, strict=False):
        text = encoder.decode(example["inputs"].tolist(), strip_extraneous=True)
        assert text == sample["inputs"] and example["targets"].tolist() == [sample["label"]]
