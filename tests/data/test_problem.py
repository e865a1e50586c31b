"""Tests of the Problem base: writing, reading back, _rev, missing and partial data."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.generation import generator_utils

NAME = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    registry.problem(NAME).generate_data(path, os.path.join(path, "tmp"), progress=False)
    return path


def _as_lists(dataset):
    return [{k: v.tolist() for k, v in ex.items()} for ex in dataset.as_numpy_iterator()]


def test_dataset_yields_exactly_the_generated_examples(data_dir):
    prob = registry.problem(NAME)
    written = list(prob.generate_examples("", "", problem.DEV_SPLIT))
    read = _as_lists(prob.dataset(problem.EVAL, data_dir, deterministic=True))
    assert read == written
    assert len(_as_lists(prob.dataset(problem.TRAIN, data_dir))) == 1000


def test_reversed_problem_swaps_data_encoders_and_hparams(data_dir):
    prob = registry.problem(NAME + "_rev")
    assert prob.name == NAME + "_rev" and prob.dataset_filename() == NAME
    forward = _as_lists(registry.problem(NAME).dataset(problem.EVAL, data_dir, deterministic=True))
    backward = _as_lists(prob.dataset(problem.EVAL, data_dir, deterministic=True))
    assert [b["inputs"] for b in backward] == [f["targets"] for f in forward]
    hp = prob.hparams()
    assert hp.was_reversed
    assert (hp.input_space_id, hp.target_space_id) == (problem.SpaceID.DIGIT_1, problem.SpaceID.DIGIT_0)


def test_generate_data_twice_skips(data_dir):
    summary = registry.problem(NAME).generate_data(data_dir, os.path.join(data_dir, "tmp"), progress=False)
    assert summary["train"].shards_skipped == 1 and summary["train"].examples == 0


def test_missing_data_dir_error_names_the_fix(tmp_path):
    with pytest.raises(problem.DataMissingError, match="t2t-datagen --problem=") as e:
        registry.problem(NAME).dataset(problem.TRAIN, str(tmp_path / "empty"))
    assert "No train data" in str(e.value)


def test_partial_split_is_refused(tmp_path):
    prob = registry.problem("algorithmic_reverse_binary40")
    paths = generator_utils.shard_paths(str(tmp_path), prob.dataset_filename(), "train", 10)
    generator_utils.write_shards(lambda: iter([{"inputs": [2, 1], "targets": [2, 1]}]), paths[:3],
                                 progress=False)
    with pytest.raises(problem.DataMissingError, match="incomplete"):
        prob.dataset(problem.TRAIN, str(tmp_path))


def test_unknown_mode():
    with pytest.raises(ValueError, match="Unknown mode 'training'"):
        registry.problem(NAME).split_for_mode("training")


def test_sharded_reading_covers_everything_once(data_dir):
    prob = registry.problem(NAME)
    everything = _as_lists(prob.dataset(problem.EVAL, data_dir, deterministic=True))
    parts = [_as_lists(prob.dataset(problem.EVAL, data_dir, num_shards=2, shard_index=i,
                                    deterministic=True)) for i in range(2)]
    assert len(parts[0]) + len(parts[1]) == len(everything)
    key = lambda ex: (tuple(ex["inputs"]), tuple(ex["targets"]))  # noqa: E731
    assert sorted(map(key, parts[0] + parts[1])) == sorted(map(key, everything))


# ~40 s on 2 cores; CI covers the same fault (and more: two kills, shards kept byte for
# byte) in tests/robustness/test_faults.py::test_datagen_sigkill_mid_shard_then_rerun.
@pytest.mark.slow
def test_sigkill_mid_generation_then_rerun_completes(tmp_path):
    """A datagen killed mid-shard leaves no shard that reads as complete; a re-run finishes."""
    data_dir = str(tmp_path / "data")
    script = textwrap.dedent(f"""
        import sys, time
        from t2t import registry
        from t2t.problems import algorithmic
        prob = registry.problem("algorithmic_reverse_binary40")
        original = algorithmic.AlgorithmicReverseBinary40.generator
        def slow(self, *args):
            for i, case in enumerate(original(self, *args)):
                if i == 25_000:
                    print("HALFWAY", flush=True)
                    time.sleep(60)
                yield case
        algorithmic.AlgorithmicReverseBinary40.generator = slow
        prob.generate_data({data_dir!r}, {str(tmp_path / 'tmp')!r}, progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while proc.stdout.readline().strip() != "HALFWAY":
            assert time.monotonic() < deadline and proc.poll() is None, "child did not start"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    prob = registry.problem("algorithmic_reverse_binary40")
    files = os.listdir(data_dir)
    finished = [f for f in files if generator_utils.is_shard_name(f)]
    # 25,000 of 100,000 examples in 10 sequential shards: exactly 2 complete shards.
    assert sorted(finished) == [f"{prob.dataset_filename()}-train-0000{i}-of-00010" for i in range(2)]
    assert any(f.endswith(generator_utils.INCOMPLETE_SUFFIX) for f in files)
    with pytest.raises(problem.DataMissingError, match="incomplete"):
        prob.dataset(problem.TRAIN, data_dir)
    summary = prob.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    assert summary["train"].shards_skipped == 2 and summary["train"].shards_written == 8
    assert summary["train"].examples == 80_000
    count = prob.dataset(problem.TRAIN, data_dir).reduce(0, lambda n, _: n + 1)
    assert int(count) == 100_000
    assert not [f for f in os.listdir(data_dir) if f.endswith(generator_utils.INCOMPLETE_SUFFIX)]


# ------------------------------------------------- Tensor2Tensor's Problem API

class _T2TSplits(problem.Problem):
    """dataset_splits as Tensor2Tensor defined it (a property returning dicts)."""

    @property
    def dataset_splits(self):
        return [{"split": problem.DatasetSplit.TRAIN, "shards": 9},
                {"split": problem.DatasetSplit.EVAL, "shards": 1}]


def test_dataset_splits_define_splits():
    assert list(_T2TSplits().splits) == [problem.SplitSpec("train", 9), problem.SplitSpec("dev", 1)]
    assert problem.Problem().dataset_splits == [{"split": "train", "shards": 10},
                                                {"split": "dev", "shards": 1}]
    assert problem.Problem().is_generate_per_split is True
    # T2T's DatasetSplit.EVAL value was "eval": it names the dev files.
    specs = problem.split_specs([{"split": "train", "shards": 2}, {"split": "eval", "shards": 1},
                                 {"split": "test", "shards": 1}], "p")
    assert [(s.name, s.shards) for s in specs] == [("train", 2), ("dev", 1), ("test", 1)]


@pytest.mark.parametrize("bad, message", [
    ([], r"dataset_splits \[\] is not a non-empty list"),
    ({"split": "train", "shards": 1}, "is not a non-empty list"),
    ([{"split": "train"}], "must be a dict with the keys 'split' and 'shards'"),
    ([{"split": "train", "shards": 0}], r"split 'train' has shards=0; give an int >= 1"),
    ([{"split": "train", "shards": "9"}], r"shards='9'"),
    ([{"split": "my-train", "shards": 1}], r"split name 'my-train' must be .* without '-'"),
    ([{"split": "dev", "shards": 1}, {"split": "eval", "shards": 1}], "'dev' is listed twice"),
])
def test_bad_dataset_splits_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        problem.split_specs(bad, "my_problem")


def test_mirror_goes_only_to_methods_that_declare_it():
    def t2t_style(data_dir, tmp_dir, dataset_split):
        return (data_dir, tmp_dir, dataset_split)

    def t2t_kwargs(data_dir, tmp_dir, dataset_split, **kwargs):
        return kwargs

    def declared(data_dir, *, mirror=None):
        return mirror

    assert problem.call_with_mirror(t2t_style, "d", "t", "train", mirror="m") == ("d", "t", "train")
    assert problem.call_with_mirror(t2t_kwargs, "d", "t", "dev", mirror="m") == {"mirror": "m"}
    assert problem.call_with_mirror(declared, "d", mirror="m") == "m"
    assert not problem.accepts_keyword(len, "mirror")


def test_using_mirror_sets_and_restores_data_mirror():
    prob = problem.Problem()
    with prob.using_mirror("/mirror"):
        assert prob.data_mirror == "/mirror"
        with prob.using_mirror(None):  # None keeps the mirror in force
            assert prob.data_mirror == "/mirror"
    assert prob.data_mirror is None and "data_mirror" not in vars(prob)


class _T2TGenerateData(problem.Problem):
    """A Problem written against T2T: its own generate_data(data_dir, tmp_dir, task_id)."""

    seen: list = []

    def generate_data(self, data_dir, tmp_dir, task_id=-1):
        self.seen.append((task_id, self.data_mirror))
        generator_utils.generate_dataset_and_shuffle(
            ({"inputs": [i + 2, 1], "targets": [i + 3, 1]} for i in range(12)),
            self.training_filepaths(data_dir, 3, shuffled=False),
            ({"inputs": [i + 50, 1], "targets": [i + 51, 1]} for i in range(4)),
            self.dev_filepaths(data_dir, 1, shuffled=False))


def test_t2t_generate_data_override_is_called_by_t2t(tmp_path):
    prob = _T2TGenerateData()
    summaries = prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), mirror="/m",
                                   max_cases=5, progress=False)
    assert _T2TGenerateData.seen == [(-1, "/m")] and prob.data_mirror is None
    assert {k: (s.examples, s.shards_written) for k, s in summaries.items()} == {
        "train": (12, 3), "dev": (4, 1)}
    dev = _as_lists(prob.dataset(problem.EVAL, str(tmp_path), deterministic=True))
    assert [ex["inputs"] for ex in dev] == [[50, 1], [51, 1], [52, 1], [53, 1]]
