"""Tests of sharded, atomic, resumable TFRecord writing."""

import os

import pytest
import tensorflow as tf

from t2t.data.generation import generator_utils


def _read_all(paths):
    values = []
    for path in paths:
        for record in tf.data.TFRecordDataset(path):
            example = tf.train.Example.FromString(record.numpy())
            values.append(list(example.features.feature["x"].int64_list.value))
    return values


def _examples(n):
    return ({"x": [i, i + 1]} for i in range(n))


def test_shard_paths_names():
    paths = generator_utils.shard_paths("/d", "prob", "train", 3)
    assert [os.path.basename(p) for p in paths] == [
        "prob-train-00000-of-00003", "prob-train-00001-of-00003", "prob-train-00002-of-00003"]
    assert all(generator_utils.is_shard_name(p) for p in paths)
    assert not generator_utils.is_shard_name(generator_utils.incomplete_path(paths[0]))
    with pytest.raises(ValueError, match="num_shards"):
        generator_utils.shard_paths("/d", "prob", "train", 0)


@pytest.mark.parametrize("total", [None, 10])
def test_write_shards_writes_every_example_once(tmp_path, total):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 3)
    summary = generator_utils.write_shards(lambda: _examples(10), paths, total=total, progress=False)
    assert summary.examples == 10 and summary.shards_written == 3
    assert sorted(_read_all(paths)) == sorted([[i, i + 1] for i in range(10)])
    if total:  # sequential fill: shard 0 holds the first block
        assert _read_all(paths[:1]) == [[0, 1], [1, 2], [2, 3], [3, 4]]
    else:  # round robin
        assert _read_all(paths[:1]) == [[0, 1], [3, 4], [6, 7], [9, 10]]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".incomplete")]


def test_max_cases_and_empty_shards(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "dev", 4)
    summary = generator_utils.write_shards(lambda: _examples(100), paths, max_cases=2, progress=False)
    assert summary.examples == 2
    assert all(os.path.exists(p) for p in paths)  # the split is complete even if shards are empty
    assert len(_read_all(paths)) == 2


def test_rerun_skips_finished_shards(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 4)
    generator_utils.write_shards(lambda: _examples(8), paths, total=8, progress=False)
    before = _read_all(paths)
    os.remove(paths[2])
    summary = generator_utils.write_shards(lambda: _examples(8), paths, total=8, progress=False)
    assert summary.shards_skipped == 3 and summary.shards_written == 1 and summary.examples == 2
    assert _read_all(paths) == before
    again = generator_utils.write_shards(lambda: _examples(8), paths, total=8, progress=False)
    assert again.shards_written == 0 and again.shards_skipped == 4


def test_crash_leaves_no_partial_shard(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)

    def failing():
        yield from _examples(5)
        raise RuntimeError("source went away")

    with pytest.raises(RuntimeError, match="source went away"):
        generator_utils.write_shards(failing, paths, total=10, progress=False)
    # Shard 0 (examples 0-4) was not known to be complete when the error hit: nothing
    # under a final name, and no temporary left behind.
    assert not any(os.path.exists(p) for p in paths)
    assert os.listdir(tmp_path) == []


def test_stale_incomplete_file_is_replaced(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 1)
    with open(generator_utils.incomplete_path(paths[0]), "wb") as f:
        f.write(b"garbage from a killed run")
    generator_utils.write_shards(lambda: _examples(3), paths, progress=False)
    assert len(_read_all(paths)) == 3
    assert not os.path.exists(generator_utils.incomplete_path(paths[0]))


def test_missing_shards_detects_gaps_and_mixed_counts(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 3)
    assert generator_utils.missing_shards([paths[0], paths[2]]) == [paths[1]]
    other = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)
    with pytest.raises(ValueError, match="different counts"):
        generator_utils.missing_shards(paths + other)


def test_to_example_types():
    example = generator_utils.to_example({"ints": [1, 2], "floats": [0.5], "text": "hé", "raw": b"\x00"})
    features = example.features.feature
    assert list(features["ints"].int64_list.value) == [1, 2]
    assert list(features["floats"].float_list.value) == [0.5]
    assert features["text"].bytes_list.value == ["hé".encode()]
    assert features["raw"].bytes_list.value == [b"\x00"]
    with pytest.raises(ValueError, match="cannot store"):
        generator_utils.to_example({"bad": [object()]})


def _xs(paths):
    """The first value of "x" of every record, shard by shard."""
    return [[values[0] for values in _read_all([path])] for path in paths]


def test_deal_to_splits_is_t2t_round_robin_over_all_shards(tmp_path):
    """Train 9 : dev 1 shards, one stream: the same files as T2T's generate_files over
    the 10 paths, so every 10th example (9, 19, ...) is in dev and nowhere else."""
    train = generator_utils.shard_paths(str(tmp_path / "a"), "p", "train", 9)
    dev = generator_utils.shard_paths(str(tmp_path / "a"), "p", "dev", 1)
    os.makedirs(tmp_path / "a")
    summaries = generator_utils.deal_to_splits(
        lambda: _examples(100), {"train": train, "dev": dev}, {"train": 9, "dev": 1},
        progress=False)
    assert summaries["dev"].examples == 10 and summaries["train"].examples == 90
    assert summaries["train"].shards_written == 9 and summaries["dev"].shards_written == 1
    assert _xs(dev) == [list(range(9, 100, 10))]
    assert sorted(sum(_xs(train), [])) == [i for i in range(100) if i % 10 != 9]
    os.makedirs(tmp_path / "b")
    t2t_paths = [p.replace(str(tmp_path / "a"), str(tmp_path / "b")) for p in train + dev]
    generator_utils.generate_files(_examples(100), t2t_paths)
    assert _xs(t2t_paths) == _xs(train + dev)


def test_deal_keeps_the_proportions_when_shard_counts_change(tmp_path):
    """--num_shards=2 changes the train files, not which examples go to dev."""
    train = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)
    dev = generator_utils.shard_paths(str(tmp_path), "p", "dev", 1)
    generator_utils.deal_to_splits(lambda: _examples(50), {"train": train, "dev": dev},
                                   {"train": 9, "dev": 1}, progress=False)
    assert _xs(dev) == [[9, 19, 29, 39, 49]]
    assert _xs(train)[0][:5] == [0, 2, 4, 6, 8] and len(sum(_xs(train), [])) == 45


def test_deal_max_cases_caps_each_split(tmp_path):
    train = generator_utils.shard_paths(str(tmp_path), "p", "train", 3)
    dev = generator_utils.shard_paths(str(tmp_path), "p", "dev", 1)
    pulled = []

    def examples():
        for example in _examples(1000):
            pulled.append(example["x"][0])
            yield example

    summaries = generator_utils.deal_to_splits(
        examples, {"train": train, "dev": dev}, {"train": 3, "dev": 1}, max_cases=4,
        progress=False)
    assert summaries["train"].examples == 4 and summaries["dev"].examples == 4
    assert _xs(dev) == [[3, 7, 11, 15]]
    assert sorted(sum(_xs(train), [])) == [0, 1, 2, 4]
    assert len(pulled) == 17  # stops at the first example after every split is full


def test_deal_rerun_writes_only_missing_shards_with_the_same_examples(tmp_path):
    train = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)
    dev = generator_utils.shard_paths(str(tmp_path), "p", "dev", 1)
    deal = lambda: generator_utils.deal_to_splits(  # noqa: E731
        lambda: _examples(30), {"train": train, "dev": dev}, {"train": 2, "dev": 1},
        progress=False)
    deal()
    before = _xs(train + dev)
    os.remove(dev[0])
    summaries = deal()
    assert summaries["dev"].shards_written == 1 and summaries["dev"].examples == 10
    assert summaries["train"].shards_skipped == 2 and summaries["train"].examples == 0
    assert _xs(train + dev) == before
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".incomplete")]


def test_deal_rejects_bad_weights(tmp_path):
    paths = {"train": generator_utils.shard_paths(str(tmp_path), "p", "train", 1)}
    with pytest.raises(ValueError, match=r"Split 'train': weight .* got 0"):
        generator_utils.deal_to_splits(lambda: _examples(1), paths, {"train": 0})
    with pytest.raises(ValueError, match="same splits"):
        generator_utils.deal_to_splits(lambda: _examples(1), paths, {"dev": 1})


def test_t2t_generate_files_cycle_and_none_cases(tmp_path):
    paths = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)
    cases = [{"x": [i]} if i != 2 else None for i in range(7)]
    generator_utils.generate_files(iter(cases), paths, cycle_every_n=2)
    assert _xs(paths) == [[0, 1, 5, 6], [3, 4]]  # None skipped, 2 examples per turn
    generator_utils.generate_files(iter([{"x": [99]}]), paths)  # every file exists: skip
    assert _xs(paths) == [[0, 1, 5, 6], [3, 4]]
    with pytest.raises(ValueError, match="cycle_every_n must be >= 1"):
        generator_utils.generate_files(iter(cases), paths, cycle_every_n=0)


def test_t2t_generate_dataset_and_shuffle_writes_both(tmp_path):
    train = generator_utils.shard_paths(str(tmp_path), "p", "train", 2)
    dev = generator_utils.shard_paths(str(tmp_path), "p", "dev", 1)
    generator_utils.generate_dataset_and_shuffle(_examples(6), train, _examples(2), dev)
    assert _xs(train) == [[0, 2, 4], [1, 3, 5]] and _xs(dev) == [[0, 1]]
    assert generator_utils.count_records(train + dev) == 8
