"""Tests of the algorithmic problems: sizes, text form, correctness of targets."""

import numpy as np
import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.problems.algorithmic_tasks import algorithmic


def _decode(encoder, ids):
    return encoder.decode(ids, strip_extraneous=True)


def _symbols(ids):
    assert ids[-1] == text_encoder.EOS_ID
    return [i - text_encoder.NUM_RESERVED_TOKENS for i in ids[:-1]]


@pytest.mark.parametrize("name,check", [
    ("algorithmic_identity_binary40", lambda i, t: t == i),
    ("algorithmic_reverse_decimal40", lambda i, t: t == i[::-1]),
    ("algorithmic_shift_decimal40", lambda i, t: t == [s + 10 for s in i]),
    ("algorithmic_sort_problem", lambda i, t: t == sorted(i)),
])
def test_targets_follow_the_rule(name, check):
    prob = registry.problem(name)
    examples = list(prob.generate_examples("", "", problem.TRAIN_SPLIT))
    assert len(examples) == prob.train_size
    for example in examples[:2000]:
        inputs, targets = _symbols(example["inputs"]), _symbols(example["targets"])
        assert 1 <= len(inputs) <= prob.train_length
        assert all(0 <= s < prob.num_symbols for s in inputs + targets)
        assert check(inputs, targets)


@pytest.mark.parametrize("name,op", [
    ("algorithmic_addition_binary40", lambda a, b: a + b),
    ("algorithmic_multiplication_decimal40", lambda a, b: a * b),
])
def test_arithmetic_is_lower_endian(name, op):
    prob = registry.problem(name)
    base = prob.base
    rng = np.random.default_rng(0)
    for case in prob.generator(prob.num_symbols, 40, 500, rng):
        sep = case["inputs"].index(base)
        n1, n2 = case["inputs"][:sep], case["inputs"][sep + 1:]
        value = lambda digits: sum(d * base**i for i, d in enumerate(digits))  # noqa: E731
        assert value(case["targets"]) == op(value(n1), value(n2))
        assert len(case["inputs"]) <= 40
        assert n1[-1] != 0 or len(n1) == 1  # no leading zero
    # The separator is inside the vocabulary.
    assert prob.hparams().vocab_size["inputs"] == base + 1 + text_encoder.NUM_RESERVED_TOKENS


def test_sizes_match_tensor2tensor():
    small = registry.problem("algorithmic_reverse_binary40_test")
    assert (small.train_length, small.dev_length, small.train_size, small.dev_size) == (10, 10, 1000, 100)
    full = registry.problem("algorithmic_reverse_binary40")
    assert (full.train_length, full.dev_length, full.train_size, full.dev_size) == (40, 400, 100000, 10000)
    assert [s.shards for s in full.splits] == [10, 1]
    assert registry.problem("algorithmic_shift_decimal40").dev_length == 80
    assert registry.problem("algorithmic_sort_problem").num_symbols == 20


def test_generation_is_deterministic_per_split():
    prob = registry.problem("algorithmic_reverse_binary40_test")
    first = list(prob.generate_examples("", "", problem.TRAIN_SPLIT))
    assert first == list(prob.generate_examples("", "", problem.TRAIN_SPLIT))
    assert first[:20] != list(prob.generate_examples("", "", problem.DEV_SPLIT))[:20]


def test_text_form_round_trips():
    prob = registry.problem("algorithmic_reverse_binary40_test")
    encoder = prob.feature_encoders(None)["inputs"]
    assert encoder.encode("1 0 1 1") == [3, 2, 3, 3]
    assert _decode(encoder, [3, 2, 3, 3, 1, 0, 0]) == "1 0 1 1"
    hp = prob.hparams()
    assert hp.modality == {"inputs": "symbol", "targets": "symbol"}
    assert hp.vocab_size == {"inputs": 4, "targets": 4}
    assert (hp.input_space_id, hp.target_space_id) == (problem.SpaceID.DIGIT_0, problem.SpaceID.DIGIT_1)


def test_small_arithmetic_variant():
    prob = registry.problem("algorithmic_addition_binary40_test")
    assert isinstance(prob, algorithmic.AlgorithmicAdditionBinary40)
    assert prob.train_length == 10 and prob.train_shards == 1


def test_length_generalization_variant_evaluates_only_at_4x_the_training_length():
    prob = registry.problem("algorithmic_reverse_binary10_dev40")
    train = list(prob.generate_examples("", "", problem.TRAIN_SPLIT))
    dev = list(prob.generate_examples("", "", problem.DEV_SPLIT))
    assert (len(train), len(dev)) == (10_000, 200)
    # Every sequence ends with EOS, which is not a symbol.
    assert max(len(ex["inputs"]) - 1 for ex in train) == 10
    assert {len(ex["inputs"]) - 1 for ex in dev} == {40}
    assert all(ex["targets"][:-1] == ex["inputs"][-2::-1] for ex in dev)
    assert dev == list(prob.generate_examples("", "", problem.DEV_SPLIT))  # deterministic


def test_dev_min_length_above_dev_length_is_refused():
    class Broken(algorithmic.AlgorithmicReverseBinary40):
        dev_min_length = 500

    with pytest.raises(ValueError, match="dev_min_length 500 exceeds dev_length 400"):
        next(Broken().generate_examples("", "", problem.DEV_SPLIT))
