"""Tests for t2t.data.pipeline.input_pipeline: batching, bucketing, packing, sharding."""

import collections
import itertools
import shutil

import gin
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.data.pipeline import input_pipeline as ip
from t2t.data.pipeline import length_report
from t2t.hparams.hparams import HParams

PROBLEM = "algorithmic_reverse_binary40_test"  # lengths 1..10 (+ EOS), 1000 train, 100 dev


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    problem = registry.problem(PROBLEM)
    problem.generate_data(str(data_dir), str(tmp_path_factory.mktemp("tmp")), progress=False)
    return problem, str(data_dir)


def make_hparams(**overrides):
    values = dict(
        batch_size=64,
        max_length=0,
        min_length_bucket=8,
        length_bucket_step=1.1,
        eval_drop_long_sequences=False,
        pack_dataset=False,
        use_fixed_batch_size=False,
        min_length=0,
        max_input_seq_length=0,
        max_target_seq_length=0,
        batch_shuffle_size=4,
    )
    values.update(overrides)
    return HParams(**values)


def source_examples(problem, data_dir, mode="eval"):
    """The examples as Problem.dataset gives them: Counter of (inputs, targets) tuples."""
    return collections.Counter(
        (tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
        for ex in problem.dataset(mode, data_dir, shuffle_files=False).as_numpy_iterator()
    )


def unpad(row):
    """The tokens of a 0-padded row, checking that padding only trails the sequence."""
    row = np.asarray(row)
    n = int(np.count_nonzero(row))
    assert np.all(row[:n] != 0) and np.all(row[n:] == 0), row
    if n:
        assert row[n - 1] == 1, f"sequence does not end with EOS: {row}"
    return tuple(row[:n].tolist())


def batch_examples_of(batches):
    found = collections.Counter()
    for batch in batches:
        for inputs, targets in zip(batch["inputs"], batch["targets"], strict=True):
            found[(unpad(inputs), unpad(targets))] += 1
    return found


def test_bucket_boundaries_are_tensor2tensors():
    assert ip.bucket_boundaries(20) == list(range(8, 20))
    assert ip.bucket_boundaries(256)[12:] == [
        20, 22, 24, 26, 28, 30, 33, 36, 39, 42, 46, 50, 55, 60, 66, 72, 79, 86, 94, 103,
        113, 124, 136, 149, 163, 179, 196, 215, 236,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="length_bucket_step"):
        ip.bucket_boundaries(20, length_bucket_step=1.0)


def test_batching_scheme_is_tensor2tensors():
    scheme = ip.batching_scheme(64, 16, 8, 1.1)
    assert scheme["boundaries"] == list(range(8, 16))
    # 64 // length, rounded down to divisors of the highly composite window 24.
    assert scheme["batch_sizes"] == [8, 6, 6, 4, 4, 4, 4, 4, 4]
    assert scheme["max_length"] == 10**9 and scheme["shuffle_queue_size"] == 18
    dropping = ip.batching_scheme(64, 16, 8, 1.1, drop_long_sequences=True, shard_multiplier=2)
    assert dropping["max_length"] == 16 and dropping["batch_sizes"][0] == 16
    scheme = ip.batching_scheme(4096, 256, 8, 1.1)
    for size, length in zip(scheme["batch_sizes"], scheme["boundaries"] + [256], strict=True):
        assert size * length <= 4096 and 1260 % size == 0  # window 1260 <= 3 * 512


def test_example_length():
    example = {
        "inputs": tf.ones([3], tf.int32),
        "targets": tf.ones([5], tf.int32),
        "x": tf.ones([9]),
    }
    assert int(ip.example_length(example)) == 5
    assert int(ip.example_length(example, ("inputs",))) == 3


def test_token_batches_hold_the_source_examples_padded_with_zeros(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=64)
    batches = list(ip.input_dataset(problem, "eval", data_dir, hparams).as_numpy_iterator())
    assert batch_examples_of(batches) == source_examples(problem, data_dir)
    for batch in batches:
        assert batch["inputs"].dtype == np.int32 and batch["inputs"].shape == batch["targets"].shape
        assert batch["inputs"].size <= 64  # tokens, padding included


def test_bucket_shapes_are_bounded_and_within_the_token_budget(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=96, max_length=11)
    scheme = ip.batching_scheme(96, 11, 8, 1.1)
    padded_lengths = {b - 1 for b in scheme["boundaries"]} | {11}
    dataset = ip.input_dataset(problem, "train", data_dir, hparams)
    shapes = collections.Counter()
    examples = 0
    for batch in itertools.islice(dataset.as_numpy_iterator(), 200):
        batch_size, length = batch["targets"].shape
        shapes[(batch_size, length)] += 1
        examples += batch_size
        assert length in padded_lengths
        assert batch_size * length <= 96
        for row in batch["targets"]:
            assert 0 < len(unpad(row)) <= length
    assert examples > 1500  # it repeats (1000 training examples)
    assert len(shapes) <= len(scheme["batch_sizes"])
    assert max(shapes.values()) > 10


def test_small_windows_carry_unfilled_buckets_over(data):
    problem, data_dir = data
    examples = problem.dataset("eval", data_dir, shuffle_files=False)
    scheme = ip.batching_scheme(48, 11, 8, 1.1)
    dataset = ip.batch_examples(
        examples,
        batch_size=48,
        batch_size_means_tokens=True,
        max_length=11,
        drop_long_sequences=True,
        window_size=7,
    )
    batches = list(dataset.as_numpy_iterator())
    assert batch_examples_of(batches) == source_examples(problem, data_dir)
    size_of = dict(
        zip([b - 1 for b in scheme["boundaries"]] + [11], scheme["batch_sizes"], strict=True)
    )
    full = collections.Counter(
        b["targets"].shape for b in batches if len(b["targets"]) == size_of[b["targets"].shape[1]]
    )
    assert len(batches) - sum(full.values()) <= len(scheme["batch_sizes"])  # the flushed rest
    assert max(full.values()) >= 3 and len(full) <= len(scheme["batch_sizes"])
    drop = ip.batch_examples(
        examples,
        batch_size=48,
        batch_size_means_tokens=True,
        max_length=11,
        drop_long_sequences=True,
        window_size=7,
        drop_remainder=True,
    )
    assert len(list(drop)) == sum(full.values())


def test_examples_mode_uses_fixed_batch_sizes(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=32, use_fixed_batch_size=True)
    batches = list(ip.input_dataset(problem, "eval", data_dir, hparams).as_numpy_iterator())
    assert [len(b["inputs"]) for b in batches] == [32, 32, 32, 4]
    for batch in batches:  # padded to the longest in the batch
        longest = max(
            len(unpad(row)) for row in np.concatenate([batch["inputs"], batch["targets"]])
        )
        assert batch["inputs"].shape[1] == longest == batch["targets"].shape[1]
    assert batch_examples_of(batches) == source_examples(problem, data_dir)


def test_fixed_shape_features_batch_by_examples():
    images = tf.data.Dataset.from_tensor_slices(
        {"inputs": tf.zeros([10, 4, 4, 3], tf.uint8), "targets": tf.range(10)[:, None]}
    )
    batches = list(
        ip.batch_examples(
            images,
            batch_size=4,
            batch_size_means_tokens=False,
            max_length=0,
            sequence_features=(),
            drop_long_sequences=False,
        )
    )
    assert [tuple(b["inputs"].shape) for b in batches] == [(4, 4, 4, 3)] * 2 + [(2, 4, 4, 3)]
    assert batches[-1]["targets"].numpy().tolist() == [[8], [9]]


def test_max_length_filtering(data):
    problem, data_dir = data
    source = source_examples(problem, data_dir)
    short = collections.Counter({ex: n for ex, n in source.items() if len(ex[0]) <= 6})
    assert 0 < sum(short.values()) < sum(source.values())

    def collect(mode, **overrides):
        hparams = make_hparams(batch_size=64, max_length=6, **overrides)
        dataset = ip.input_dataset(problem, mode, data_dir, hparams, repeat=False)
        return batch_examples_of(dataset.as_numpy_iterator())

    assert collect("eval") == source  # EVAL keeps long sequences by default ...
    assert collect("eval", eval_drop_long_sequences=True) == short  # ... unless asked
    train = collect("train")  # TRAIN always drops them
    assert sum(train.values()) > 0 and max(len(ex[0]) for ex in train) <= 6


def unpack(batches, features=("inputs", "targets")):
    """Splits packed rows back into examples using segmentation and position."""
    found = collections.Counter()
    for batch in batches:
        for r in range(len(batch["inputs"])):
            segments = batch["inputs_segmentation"][r]
            for name in features:
                tokens = batch[name][r]
                seg, pos = batch[f"{name}_segmentation"][r], batch[f"{name}_position"][r]
                assert np.all(tokens[seg == 0] == 0) and np.all(pos[seg == 0] == 0)
                assert np.array_equal(np.unique(seg), np.unique(segments))  # same segments
            for s in np.unique(segments[segments > 0]):
                example = []
                for name in features:
                    mask = batch[f"{name}_segmentation"][r] == s
                    positions = batch[f"{name}_position"][r][mask]
                    assert np.array_equal(positions, np.arange(mask.sum()))
                    example.append(tuple(batch[name][r][mask].tolist()))
                found[tuple(example)] += 1
    return found


def test_packing_preserves_examples(data):
    problem, data_dir = data
    examples = problem.dataset("eval", data_dir, shuffle_files=False)
    batches = list(
        ip.batch_examples(
            examples,
            batch_size=64,
            batch_size_means_tokens=True,
            max_length=32,
            drop_long_sequences=False,
            pack_length=32,
            window_size=64,
        ).as_numpy_iterator()
    )
    assert all(b["inputs"].shape[1] == 32 for b in batches)
    assert all(b["targets_position"].shape == (2, 32) for b in batches[:-1])
    assert unpack(batches) == source_examples(problem, data_dir)
    tokens = sum(int(np.count_nonzero(b["inputs"])) for b in batches)
    assert tokens / sum(b["inputs"].size for b in batches) > 0.8  # packing efficiency


def test_packing_drops_examples_longer_than_the_row():
    examples = tf.data.Dataset.from_generator(
        lambda: ({"targets": np.arange(2, 2 + n, dtype=np.int32)} for n in (3, 9, 2, 4, 4)),
        output_signature={"targets": tf.TensorSpec([None], tf.int32)},
    )
    rows = list(ip.pack_examples(examples, 8, ("targets",)).as_numpy_iterator())
    # Next-fit: 3 + 2 tokens, then 4 does not fit; the 9-token example is dropped.
    assert [r["targets"].tolist() for r in rows] == [[2, 3, 4, 2, 3, 0, 0, 0], [2, 3, 4, 5] * 2]
    assert rows[0]["targets_segmentation"].tolist() == [1, 1, 1, 2, 2, 0, 0, 0]
    assert rows[1]["targets_position"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_packed_training_batches_have_a_fixed_shape(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=128, max_length=32, pack_dataset=True)
    dataset = ip.input_dataset(problem, "train", data_dir, hparams)
    batches = list(itertools.islice(dataset.as_numpy_iterator(), 20))
    assert {tuple(v.shape) for b in batches for v in b.values()} == {(4, 32)}
    source = source_examples(problem, data_dir, "train")
    assert all(n and ex in source for ex, n in unpack(batches).items())


def test_static_shapes(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=64, max_length=8)
    batching = ip.Batching.from_hparams(hparams, static_shapes=True)  # as the TPU hook sets it
    for mode in ("train", "eval"):
        dataset = ip.input_dataset(problem, mode, data_dir, hparams, batching=batching)
        shapes = {
            (name, tuple(value.shape))
            for batch in itertools.islice(dataset.as_numpy_iterator(), 30)
            for name, value in batch.items()
        }
        assert shapes == {("inputs", (8, 8)), ("targets", (8, 8))}, mode


def test_long_eval_examples_get_an_extra_bucket(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=64, max_length=4)
    batches = list(ip.input_dataset(problem, "eval", data_dir, hparams).as_numpy_iterator())
    assert batch_examples_of(batches) == source_examples(problem, data_dir)
    assert max(b["inputs"].shape[1] for b in batches) == 11  # padded to the longest
    assert all(b["inputs"].shape[0] <= 64 // 4 for b in batches)


def test_sharded_pipelines_split_the_data(data):
    problem, data_dir = data
    hparams = make_hparams(batch_size=64)
    shards = []
    for index in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=index)
        dataset = ip.input_dataset(problem, "eval", data_dir, hparams, input_context=context)
        shards.append(batch_examples_of(dataset.as_numpy_iterator()))
    assert all(sum(shard.values()) >= 40 for shard in shards)
    assert shards[0] + shards[1] == source_examples(problem, data_dir)


def first_batches(problem, data_dir, config, count=8):
    hparams = make_hparams(batch_size=64, batch_shuffle_size=8)
    dataset = ip.input_dataset(problem, "train", data_dir, hparams, config=config)
    return [b["targets"].tolist() for b in itertools.islice(dataset.as_numpy_iterator(), count)]


def test_deterministic_with_a_seed(data):
    problem, data_dir = data
    config = ip.InputConfig(deterministic=True, seed=3, shuffle_buffer_size=100)
    first = first_batches(problem, data_dir, config)
    assert first == first_batches(problem, data_dir, config)
    other = ip.InputConfig(deterministic=True, seed=4, shuffle_buffer_size=100)
    assert first != first_batches(problem, data_dir, other)


def test_make_input_fn_with_distribute_datasets_from_function(data):
    problem, data_dir = data
    strategy = tf.distribute.get_strategy()
    input_fn = ip.make_input_fn(problem, "train", data_dir, make_hparams(batch_size=64))
    batch = next(iter(strategy.distribute_datasets_from_function(input_fn)))
    assert batch["inputs"].dtype == tf.int32 and batch["inputs"].shape.rank == 2
    assert 0 < int(tf.size(batch["inputs"])) <= 64


def test_input_config_is_gin_configurable():
    try:
        gin.parse_config(["InputConfig.shuffle_buffer_size = 7", "InputConfig.seed = 5"])
        config = ip.InputConfig()
        assert (config.shuffle_buffer_size, config.seed, config.parse_batch_size) == (7, 5, 256)
    finally:
        gin.clear_config()
    assert ip.InputConfig().shuffle_buffer_size == 1024


def test_iterator_checkpoints_hold_the_position_despite_random_augmentation(
        data, monkeypatch, tmp_path):
    """A stateful random op in preprocess_example (as random crops are) does not stop
    the iterator's checkpoint; the restored iterator resumes at the saved position."""
    problem, data_dir = data
    plain = problem.preprocess_example

    def augmented(example, mode, hparams):
        example = plain(example, mode, hparams)
        jitter = tf.cast(tf.random.uniform([], 0, 2, dtype=tf.int32) * 0, example["targets"].dtype)
        return {**example, "targets": example["targets"] + jitter}

    monkeypatch.setattr(problem, "preprocess_example", augmented)
    config = ip.InputConfig(deterministic=True, seed=3, shuffle_buffer_size=100)
    hparams = make_hparams(batch_size=64)
    iterator = iter(ip.input_dataset(problem, "train", data_dir, hparams, config=config))
    next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "ckpt"))
    expected = [next(iterator)["targets"].numpy().tolist() for _ in range(2)]
    restored = iter(ip.input_dataset(problem, "train", data_dir, hparams, config=config))
    tf.train.Checkpoint(iterator=restored).read(path).assert_consumed()
    assert [next(restored)["targets"].numpy().tolist() for _ in range(2)] == expected


def test_truncation_comes_before_the_length_filter(data):
    """Tensor2Tensor's max_input_seq_length / max_target_seq_length cut each example
    before max_length filters it: with max_length=4 every cut example is kept."""
    problem, data_dir = data
    source = source_examples(problem, data_dir)
    cut = collections.Counter()
    for (inputs, targets), n in source.items():
        cut[(inputs[:4], targets[:3])] += n
    hparams = make_hparams(max_length=4, max_input_seq_length=4, max_target_seq_length=3,
                           eval_drop_long_sequences=True)
    batches = list(ip.input_dataset(problem, "eval", data_dir, hparams).as_numpy_iterator())
    found = collections.Counter()
    for batch in batches:
        for inputs, targets in zip(batch["inputs"], batch["targets"], strict=True):
            found[(tuple(inputs[inputs > 0].tolist()), tuple(targets[targets > 0].tolist()))] += 1
    assert found == cut and max(b["inputs"].shape[1] for b in batches) <= 4
    packed = ip.input_dataset(problem, "eval", data_dir, make_hparams(
        max_length=4, max_input_seq_length=4, max_target_seq_length=3, pack_dataset=True))
    rows = [(b["targets"], b["targets_segmentation"]) for b in packed.as_numpy_iterator()]
    assert sum(int(seg.max(1).sum()) for _, seg in rows) == sum(cut.values())  # all packed
    assert sum(int((t > 0).sum()) for t, _ in rows) == sum(len(t) * n for (_, t), n in cut.items())
    untruncated = make_hparams(max_length=4, eval_drop_long_sequences=True)
    kept = ip.input_dataset(problem, "eval", data_dir, untruncated).as_numpy_iterator()
    assert sum(len(b["inputs"]) for b in kept) < sum(source.values())


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_speech_inputs_are_cut_in_samples_and_targets_in_characters(tmp_path):
    """The speech sets' max_input_seq_length counts the stored 16 kHz samples (real
    espeak-ng speech here), max_target_seq_length the transcript's ids."""
    from t2t.hparams.basic import create_hparams

    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    lines = [f"Read the {noun} from the {place}." for noun in (
        "header", "member", "record", "buffer", "socket", "handle", "table", "queue")
        for place in ("archive", "stream", "cache", "database", "message")]  # 10% held out
    (stdlib / "reader.py").write_text('"""' + "\n\n".join(lines) + '"""\n', encoding="utf-8")
    problem = registry.problem("speech_synthetic_espeak")
    problem.stdlib, problem.num_shards = str(stdlib), 1
    problem.num_train_utterances, problem.num_eval_utterances = 2, 3
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    hparams = create_hparams("transformer_speech_tiny", "max_input_seq_length=8000,"
                             "max_target_seq_length=12,max_length=8000,"
                             "eval_drop_long_sequences=true")
    source = collections.Counter(
        (tuple(ex["targets"][:12].tolist()), ex["inputs"][:8000].tobytes())
        for ex in problem.dataset("eval", data_dir, deterministic=True).as_numpy_iterator())
    assert sum(source.values()) == 3
    assert all(len(samples) == 8000 * 4 for _, samples in source)  # all >= 0.5 s: all cut
    found = collections.Counter()
    for batch in ip.input_dataset(problem, "eval", data_dir, hparams).as_numpy_iterator():
        for inputs, targets in zip(batch["inputs"], batch["targets"], strict=True):
            found[(tuple(targets[targets > 0].tolist()), inputs[inputs > 0].tobytes())] += 1
    assert found == source
    report = length_report.length_report(problem, data_dir, hparams, "dev")
    assert (report.examples_seen, report.examples_dropped, report.longest) == (3, 0, 8000)
    assert report.examples_truncated == 3 and report.truncated_fraction > 0.02
