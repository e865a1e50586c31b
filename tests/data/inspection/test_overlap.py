"""Tests of the dev/train overlap report."""

import pytest

from t2t.data import problem
from t2t.data.generation import generator_utils
from t2t.data.inspection import overlap


class _Pairs(problem.Problem):
    splits = (problem.SplitSpec("train", 2), problem.SplitSpec("dev", 1))


def _write(data_dir, split, values, shards=1):
    paths = generator_utils.shard_paths(str(data_dir), "pairs", split, shards)
    examples = [{"inputs": [v, 1], "targets": [v + 1, 1]} for v in values]
    generator_utils.write_shards(lambda: iter(examples), paths, progress=False)


def _prob():
    prob = _Pairs()
    prob.dataset_filename = lambda: "pairs"
    return prob


def test_a_dev_split_copied_from_train_warns(tmp_path):
    _write(tmp_path, "train", range(10_000), shards=2)
    _write(tmp_path, "dev", range(40, 60))
    report = overlap.check_overlap(_prob(), str(tmp_path))
    assert (report.examples, report.overlapping) == (20, 20) and report.above_threshold
    # Reading train (in batches of 4,096) stopped once every dev example was found.
    assert report.reference_read == 8192 and not report.reference_truncated
    text = report.format()
    assert text.startswith("WARNING: 20 of 20 dev examples (100.0%) also occur in train, "
                           "above the 1% threshold")
    assert "would be measured on training data" in text and "is_generate_per_split = False" in text


def test_an_overlap_by_construction_is_stated_with_its_reason(tmp_path):
    _write(tmp_path, "train", range(100))
    _write(tmp_path, "dev", range(50, 60))
    prob = _prob()
    prob.dev_overlap_by_construction = "short random sequences repeat"
    text = overlap.check_overlap(prob, str(tmp_path)).format()
    assert text == ("dev/train overlap: 10 of 10 dev examples (100.0%) also occur in train "
                    "(exact match of the stored features), expected for __pairs: short random "
                    "sequences repeat.")
    assert registry_reason("algorithmic_reverse_binary40_test")  # the algorithmic family's


def registry_reason(name):
    from t2t import registry

    return registry.problem(name).dev_overlap_by_construction


def test_a_small_honest_overlap_is_reported_without_warning(tmp_path):
    _write(tmp_path, "train", range(1000), shards=2)
    # 400 dev examples, 3 of them (one repeated) also in train: 0.75%.
    _write(tmp_path, "dev", [5, 5, 999, *range(2000, 2397)])
    report = overlap.check_overlap(_prob(), str(tmp_path))
    assert (report.examples, report.overlapping, report.reference_read) == (400, 3, 1000)
    assert not report.above_threshold
    assert report.format() == ("dev/train overlap: 3 of 400 dev examples (0.8%) also occur in "
                               "train (exact match of the stored features).")
    stricter = overlap.check_overlap(_prob(), str(tmp_path), threshold=0.005)
    assert stricter.above_threshold
    assert stricter.format().startswith("WARNING: 3 of 400 dev examples (0.8%) also occur in "
                                        "train, above the 0.5% threshold")


def test_inputs_and_targets_must_both_match(tmp_path):
    _write(tmp_path, "train", range(10))
    paths = generator_utils.shard_paths(str(tmp_path), "pairs", "dev", 1)
    # Same inputs as train example 3, other targets; same targets as 4, other inputs.
    dev = [{"inputs": [3, 1], "targets": [9, 9, 1]}, {"targets": [5, 1], "inputs": [7, 7, 1]},
           {"targets": [4, 1], "inputs": [3, 1]}]  # an exact copy, features in another order
    generator_utils.write_shards(lambda: iter(dev), paths, progress=False)
    report = overlap.check_overlap(_prob(), str(tmp_path))
    assert (report.examples, report.overlapping) == (3, 1)


def test_reads_stop_at_the_caps_and_say_so(tmp_path):
    _write(tmp_path, "train", range(5000), shards=2)
    _write(tmp_path, "dev", [*range(5000, 5050), 4999])
    report = overlap.check_overlap(_prob(), str(tmp_path), max_records=20,
                                   max_reference_records=4100)
    assert report.split_truncated and report.examples == 20
    assert report.reference_truncated and report.reference_read == 4100
    assert "read the first 20 dev examples and the first 4,100 train examples only" \
        in report.format()
    full = overlap.check_overlap(_prob(), str(tmp_path))
    assert (full.examples, full.overlapping, full.reference_read) == (51, 1, 5000)


def test_no_report_without_both_splits(tmp_path):
    assert overlap.check_overlap(_prob(), str(tmp_path)) is None  # no data
    _write(tmp_path, "train", range(3), shards=2)
    assert overlap.check_overlap(_prob(), str(tmp_path)) is None  # no dev data
    _write(tmp_path, "dev", range(3))
    assert overlap.check_overlap(_prob(), str(tmp_path), split="test") is None  # no such split
    with pytest.raises(ValueError, match=r"threshold must be a fraction in \[0, 1\), got 5"):
        overlap.check_overlap(_prob(), str(tmp_path), threshold=5)


def test_example_key_ignores_feature_order():
    a = generator_utils.to_example({"inputs": [2, 3], "targets": [4]}).SerializeToString()
    b = generator_utils.to_example({"targets": [4], "inputs": [2, 3]}).SerializeToString()
    c = generator_utils.to_example({"inputs": [2], "targets": [3, 4]}).SerializeToString()
    assert overlap.example_key(a) == overlap.example_key(b) != overlap.example_key(c)
