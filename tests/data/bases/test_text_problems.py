"""Tests of Text2Text / Text2Self / Text2Class problems built from in-memory samples."""

import os

import pytest

from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.encoders import text_encoder

WORDS = "the cat sat on a mat and dog ran to big red house green tree über straße".split()


def _sentences(n, seed):
    return [" ".join(WORDS[(seed + i * j) % len(WORDS)] for j in range(1, 2 + (i % 6)))
            for i in range(n)]


class _Copy(text_problems.Text2TextProblem):
    approx_vocab_size = 60
    max_samples_for_vocab = 50
    splits = (problem.SplitSpec("train", 2), problem.SplitSpec("dev", 1))

    def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
        for s in _sentences(80 if split == "train" else 10, 1 if split == "train" else 2):
            yield {"inputs": s, "targets": s.upper()}


class _CopyChars(_Copy):
    vocab_type = text_problems.VOCAB_CHARACTER


class _Lm(text_problems.Text2SelfProblem):
    vocab_type = text_problems.VOCAB_BYTE
    splits = (problem.SplitSpec("train", 1), problem.SplitSpec("dev", 1))

    def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
        for s in _sentences(20, 3):
            yield {"targets": s}


class _Classify(text_problems.Text2ClassProblem):
    approx_vocab_size = 50
    splits = (problem.SplitSpec("train", 1), problem.SplitSpec("dev", 1))

    def class_labels(self, data_dir):
        return ["short", "long"]

    def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
        for s in _sentences(30, 4):
            yield {"inputs": s, "label": int(len(s.split()) > 3)}


def _generate(prob, tmp_path):
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    return data_dir


@pytest.mark.parametrize("cls", [_Copy, _CopyChars])
def test_text2text_round_trip(cls, tmp_path):
    prob = cls()
    data_dir = _generate(prob, tmp_path)
    assert os.path.exists(os.path.join(data_dir, prob.vocab_filename))
    encoders = prob.feature_encoders(data_dir)
    samples = list(prob.generate_samples(data_dir, "", "dev"))
    read = list(prob.dataset(problem.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    assert len(read) == len(samples)
    for example, sample in zip(read, samples, strict=True):
        assert example["inputs"][-1] == text_encoder.EOS_ID
        assert encoders["inputs"].decode(example["inputs"], strip_extraneous=True) == sample["inputs"]
        assert encoders["targets"].decode(example["targets"], strip_extraneous=True) == sample["targets"]
    hp = prob.hparams(data_dir)
    assert hp.vocab_size["inputs"] == encoders["inputs"].vocab_size
    assert hp.modality["targets"] == problem.Modality.SYMBOL


def test_vocab_is_reused_not_rebuilt(tmp_path):
    prob = _Copy()
    data_dir = _generate(prob, tmp_path)
    path = os.path.join(data_dir, prob.vocab_filename)
    mtime = os.path.getmtime(path)
    prob.get_or_create_vocab(data_dir, str(tmp_path / "tmp"))
    assert os.path.getmtime(path) == mtime


def test_missing_vocab_error_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="t2t-datagen"):
        _Copy().feature_encoders(str(tmp_path))


def test_text2self_has_only_targets(tmp_path):
    prob = _Lm()
    data_dir = _generate(prob, tmp_path)
    example = next(prob.dataset(problem.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    assert set(example) == {"targets"}
    assert prob.hparams(data_dir).has_inputs is False
    assert prob.feature_encoders(data_dir)["targets"].decode(example["targets"], strip_extraneous=True) \
        == _sentences(20, 3)[0]


def test_text2class_labels(tmp_path):
    prob = _Classify()
    data_dir = _generate(prob, tmp_path)
    hp = prob.hparams(data_dir)
    assert hp.modality["targets"] == problem.Modality.CLASS_LABEL and hp.vocab_size["targets"] == 2
    examples = list(prob.dataset(problem.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    samples = list(prob.generate_samples(data_dir, "", "dev"))
    assert [int(e["targets"][0]) for e in examples] == [s["label"] for s in samples]
    assert prob.feature_encoders(data_dir)["targets"].decode(1) == "long"


def test_text2class_rejects_bad_label(tmp_path):
    class Bad(_Classify):
        def generate_samples(self, data_dir, tmp_dir, split, *, mirror=None):
            yield {"inputs": "the cat", "label": 7}

    with pytest.raises(ValueError, match="label 7"):
        _generate(Bad(), tmp_path)


def test_unknown_vocab_type(tmp_path):
    class Odd(_Copy):
        vocab_type = "wordpiece"

    with pytest.raises(ValueError, match="unknown vocab_type 'wordpiece'"):
        _generate(Odd(), tmp_path)


# ------------------------------------ problems written against Tensor2Tensor's API

PAIRS = [(f"line {i} of the {WORDS[i % len(WORDS)]} poem", f"line {i + 1} follows")
         for i in range(95)]


class _T2TPoetry(text_problems.Text2TextProblem):
    """Shaped as T2T's documented PoetryLines: properties, one corpus, 9 : 1 shards."""

    calls: list = []

    @property
    def approx_vocab_size(self):
        return 2**6

    @property
    def is_generate_per_split(self):
        return False

    @property
    def dataset_splits(self):
        return [{"split": problem.DatasetSplit.TRAIN, "shards": 9},
                {"split": problem.DatasetSplit.EVAL, "shards": 1}]

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        self.calls.append((dataset_split, self.data_mirror))
        for inputs, targets in PAIRS:
            yield {"inputs": inputs, "targets": targets}


def _decoded(prob, data_dir, mode):
    encoder = prob.feature_encoders(data_dir)["inputs"]
    return [(encoder.decode(ex["inputs"], strip_extraneous=True),
             encoder.decode(ex["targets"], strip_extraneous=True))
            for ex in prob.dataset(mode, data_dir, deterministic=True).as_numpy_iterator()]


def test_one_corpus_is_dealt_to_train_and_dev_without_overlap(tmp_path):
    _T2TPoetry.calls = []
    prob = _T2TPoetry()
    data_dir = _generate(prob, tmp_path)
    # The vocabulary pass and the one generation pass, both on the train split.
    assert _T2TPoetry.calls == [("train", None), ("train", None)]
    dev = _decoded(prob, data_dir, problem.EVAL)
    train = _decoded(prob, data_dir, problem.TRAIN)
    assert dev == PAIRS[9::10]  # every 10th pair, as T2T's generate_files deals them
    assert sorted(train) == sorted(p for i, p in enumerate(PAIRS) if i % 10 != 9)
    assert not set(dev) & set(train)
    files = sorted(os.listdir(data_dir))
    assert sum(f.startswith(f"{prob.name}-train-") for f in files) == 9
    assert sum(f.startswith(f"{prob.name}-dev-") for f in files) == 1


def test_dealing_is_the_same_on_a_rerun(tmp_path):
    prob = _T2TPoetry()
    data_dir = _generate(prob, tmp_path)
    dev_path = os.path.join(data_dir, f"{prob.name}-dev-00000-of-00001")
    first = open(dev_path, "rb").read()
    os.remove(dev_path)
    summaries = prob.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    assert summaries["dev"].shards_written == 1 and summaries["train"].shards_skipped == 9
    assert open(dev_path, "rb").read() == first


class _T2TPerSplit(_T2TPoetry):
    @property
    def is_generate_per_split(self):
        return True

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        self.calls.append((dataset_split, self.data_mirror))
        start = 0 if dataset_split == problem.DatasetSplit.TRAIN else 90
        for inputs, targets in PAIRS[start:start + 90]:
            yield {"inputs": inputs, "targets": targets}


def test_generate_per_split_calls_each_split_with_the_mirror(tmp_path):
    _T2TPoetry.calls = []
    prob = _T2TPerSplit()
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "tmp"), mirror="/mirror", progress=False)
    assert _T2TPoetry.calls == [("train", "/mirror"), ("train", "/mirror"), ("dev", "/mirror")]
    assert prob.data_mirror is None  # only for the duration of the generation
    assert _decoded(prob, data_dir, problem.EVAL) == PAIRS[90:]


class _T2TOverrides(text_problems.Text2TextProblem):
    """Overrides T2T's generate_text_for_vocab and generate_encoded_samples."""

    vocab_type = text_problems.VOCAB_CHARACTER
    splits = (problem.SplitSpec("train", 1), problem.SplitSpec("dev", 1))

    def generate_text_for_vocab(self, data_dir, tmp_dir):
        yield "abc"

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        encoder = self.get_or_create_vocab(data_dir, tmp_dir)
        for text in ("ab", "cab") if dataset_split == "train" else ("ba",):
            yield {"inputs": encoder.encode(text) + [1], "targets": encoder.encode(text) + [1]}


def test_t2t_vocab_and_encoding_overrides_are_used(tmp_path):
    prob = _T2TOverrides()
    data_dir = _generate(prob, tmp_path)
    encoder = prob.feature_encoders(data_dir)["inputs"]
    assert encoder.decode(encoder.encode("cab")) == "cab"
    assert [pair[0] for pair in _decoded(prob, data_dir, problem.TRAIN)] == ["ab", "cab"]
    assert _decoded(prob, data_dir, problem.EVAL) == [("ba", "ba")]
