"""Synthetic training pairs: distilled:P and backtranslated:P read two line-aligned
files, write their own train shards with P's vocabulary, and read P's dev data."""

import pytest

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data import synthetic_pairs
from t2t.data.synthetic_pairs import SyntheticPairsError, SyntheticPairsProblem

REVERSE = "algorithmic_reverse_binary40_test"


@pytest.mark.parametrize("ratio, expected", [
    (None, ["r0", "s0", "r1", "s1", "r2", "s2", "s3"]),
    (0.5, ["r0", "r1", "s0", "r2"]),
    (2.0, ["r0", "s0", "s1", "r1", "s2", "s3", "r2"]),
])
def test_interleave_spreads_the_synthetic_items_at_the_ratio(ratio, expected):
    real = [f"r{i}" for i in range(3)]
    synthetic = [f"s{i}" for i in range(4)]
    assert list(synthetic_pairs.interleave(real, synthetic, ratio)) == expected


def test_read_pairs_refuses_missing_or_misaligned_files(tmp_path):
    inputs, targets = tmp_path / "a.inputs", tmp_path / "a.targets"
    with pytest.raises(SyntheticPairsError, match="a.inputs does not exist"):
        list(synthetic_pairs.read_pairs(str(inputs), str(targets)))
    inputs.write_text("1 0\n0 0\n1 1\n")
    targets.write_text("0 1\n0 0\n")
    with pytest.raises(SyntheticPairsError, match="has 3 lines and .*a.targets 2"):
        list(synthetic_pairs.read_pairs(str(inputs), str(targets)))
    targets.write_text("0 1\n0 0\n1 1\n")
    assert list(synthetic_pairs.read_pairs(str(inputs), str(targets)))[0] == ("1 0", "0 1")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """P's data, and P's first 30 train inputs with their reversals (what a perfect
    teacher writes) as the pair files of both kinds."""
    root = tmp_path_factory.mktemp("synthetic")
    data_dir, tmp_dir = str(root / "data"), str(root / "tmp")
    base = registry.problem(REVERSE)
    base.generate_data(data_dir, tmp_dir, progress=False)
    encoder = base.feature_encoders(data_dir)["inputs"]
    train = list(base.dataset(problem_lib.TRAIN, data_dir, shuffle_files=False,
                              deterministic=True).take(30).as_numpy_iterator())
    sources = [encoder.decode(ex["inputs"].tolist(), strip_extraneous=True) for ex in train]
    outputs = [" ".join(reversed(s.split())) for s in sources]
    for kind in synthetic_pairs.KINDS:
        inputs_path, targets_path = synthetic_pairs.pair_files(tmp_dir, kind)
        with open(inputs_path, "w") as f:
            f.write("\n".join(sources) + "\n")
        with open(targets_path, "w") as f:
            f.write("\n".join(outputs) + "\n")
    return data_dir, tmp_dir, sources, outputs


def _train(problem, data_dir):
    return list(problem.dataset(problem_lib.TRAIN, data_dir, shuffle_files=False,
                                deterministic=True).as_numpy_iterator())


def test_distilled_pairs_are_the_train_split_and_dev_is_the_base_problems(prepared):
    data_dir, tmp_dir, sources, outputs = prepared
    problem = registry.problem(f"distilled:{REVERSE}")
    assert isinstance(problem, SyntheticPairsProblem) and problem.name == f"distilled:{REVERSE}"
    summary = problem.generate_data(data_dir, tmp_dir, progress=False)
    assert summary["train"].examples == 30
    base = registry.problem(REVERSE)
    assert problem.hparams(data_dir).vocab_size == base.hparams(data_dir).vocab_size
    encoder = base.feature_encoders(data_dir)["targets"]
    pairs = sorted((encoder.decode(ex["inputs"].tolist(), strip_extraneous=True),
                    encoder.decode(ex["targets"].tolist(), strip_extraneous=True))
                   for ex in _train(problem, data_dir))
    assert pairs == sorted(zip(sources, outputs, strict=True))
    dev = list(problem.dataset(problem_lib.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    base_dev = list(base.dataset(problem_lib.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    assert [ex["inputs"].tolist() for ex in dev] == [ex["inputs"].tolist() for ex in base_dev]
    # A re-run finds the shards written and keeps them.
    assert problem.generate_data(data_dir, tmp_dir, progress=False)["train"].examples == 30


def test_backtranslated_pairs_join_the_real_ones_behind_a_tag(prepared):
    data_dir, tmp_dir, sources, _ = prepared
    problem = registry.problem(f"backtranslated:{REVERSE}")
    problem.generate_data(data_dir, tmp_dir, progress=False)
    base = registry.problem(REVERSE)
    size = base.hparams(data_dir).vocab_size["inputs"]
    assert problem.tag_id(data_dir) == size
    assert problem.hparams(data_dir).vocab_size == {"inputs": size + 1, "targets": size + 1}
    examples = _train(problem, data_dir)
    real = _train(base, data_dir)
    tagged = [ex for ex in examples if ex["inputs"][0] == size]
    untagged = [ex for ex in examples if ex["inputs"][0] != size]
    assert len(tagged) == 30 and len(untagged) == len(real)
    assert sorted(ex["inputs"].tolist() for ex in untagged) == sorted(
        ex["inputs"].tolist() for ex in real)
    encoder = base.feature_encoders(data_dir)["inputs"]
    assert sorted(encoder.decode(ex["inputs"][1:].tolist(), strip_extraneous=True)
                  for ex in tagged) == sorted(sources)


def test_a_subclass_sets_the_ratio_and_leaves_the_tag_out(prepared, tmp_path):
    data_dir, tmp_dir, _, _ = prepared

    class HalfBacktranslated(SyntheticPairsProblem):
        kind, keep_real, tag_synthetic, synthetic_ratio = "backtranslated", True, False, 0.25

        def __init__(self, was_reversed=False):
            super().__init__(REVERSE)

    problem = HalfBacktranslated()
    out = str(tmp_path / "data")
    import shutil

    shutil.copytree(data_dir, out)
    for path in tmp_path.joinpath("data").glob(f"{REVERSE}_backtranslated-*"):
        path.unlink()
    real = len(_train(registry.problem(REVERSE), out))
    summary = problem.generate_data(out, tmp_dir, progress=False)
    # A quarter as many synthetic pairs as real ones, at most the 30 in the files.
    assert summary["train"].examples == real + min(30, real // 4)
    assert problem.hparams(out).vocab_size == registry.problem(REVERSE).hparams(out).vocab_size


def test_unfinished_pair_files_are_refused_before_anything_is_written(prepared, tmp_path):
    data_dir, _, sources, _ = prepared
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    inputs_path, targets_path = synthetic_pairs.pair_files(str(tmp_dir), "distilled")
    open(inputs_path, "w").write("\n".join(sources) + "\n")
    open(targets_path, "w").write("\n".join(sources[:10]) + "\n")
    out = tmp_path / "data"
    import shutil

    shutil.copytree(data_dir, out)
    for path in out.glob(f"{REVERSE}_distilled-*"):
        path.unlink()
    with pytest.raises(SyntheticPairsError, match="30 lines and .* 10"):
        registry.problem(f"distilled:{REVERSE}").generate_data(str(out), str(tmp_dir),
                                                              progress=False)
    assert not list(out.glob(f"{REVERSE}_distilled-*"))
