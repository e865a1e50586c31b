"""Tests of Text2Text / Text2Self / Text2Class problems built from in-memory samples."""

import os

import pytest

from t2t.problems import problem, text_encoder, text_problems

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
    example = next(prob.dataset(problem.EVAL, data_dir).as_numpy_iterator())
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
