"""Tensor2Tensor's other text bases (t2t.data.bases.text_problem_bases) and its text-file
iterators: each base subclassed the way T2T code did (imports from
tensor2tensor.data_generators, @registry.register_problem), generated from real English
text (the Zen of Python, the Apache license where the system has it) and read back."""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import os
import shutil
import subprocess

import pytest

import t2t  # noqa: F401  (installs the hook that answers tensor2tensor imports)
from t2t.data.pipeline import input_pipeline
from t2t.hparams.basic import create_hparams

# isort: split
from tensor2tensor.data_generators import problem, text_encoder, text_problems
from tensor2tensor.utils import registry

APACHE = "/usr/share/common-licenses/Apache-2.0"


def _zen_lines() -> list[str]:
    with contextlib.redirect_stdout(io.StringIO()):  # `import this` prints the Zen
        import this
    text = codecs.decode(this.s, "rot13")
    return [line.strip() for line in text.splitlines()[2:] if line.strip()]


ZEN = _zen_lines()


def _license_lines() -> list[str]:
    """The Apache license's non-empty lines (the Zen again where the file is absent)."""
    if not os.path.exists(APACHE):
        return ZEN * 6
    with open(APACHE, encoding="utf-8") as f:
        return [" ".join(line.split()) for line in f if line.strip()]


def _write(path, lines) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def registered():
    """Unregisters the problems a test registers (their names)."""
    names: list[str] = []
    yield names
    for name in names:
        registry.REGISTRIES["problem"].unregister(name)


def _register(names, cls):
    registry.register_problem(cls)
    names.append(registry.default_name(cls))
    return registry.problem(names[-1])


def _read(prob, data_dir, split="train"):
    mode = "train" if split == "train" else "eval"
    return [{k: v.numpy().tolist() for k, v in ex.items()}
            for ex in prob.dataset(mode, data_dir, shuffle_files=False)]


# ------------------------------------------------------------------ iterators
def test_txt_line_iterator_strips_and_reads_file_urls(tmp_path):
    path = _write(tmp_path / "zen.txt", ["  " + ZEN[0] + "\t", ZEN[1]])
    assert list(text_problems.txt_line_iterator(path)) == ZEN[:2]
    assert list(text_problems.txt_line_iterator("file://" + path)) == ZEN[:2]


def test_text2text_txt_iterator_pairs_lines_and_warns_on_extra_lines(tmp_path, caplog):
    src = _write(tmp_path / "src.txt", ZEN[:3])
    tgt = _write(tmp_path / "tgt.txt", ZEN[1:3])
    with caplog.at_level(logging.WARNING):
        pairs = list(text_problems.text2text_txt_iterator(src, tgt))
    assert pairs == [{"inputs": ZEN[0], "targets": ZEN[1]}, {"inputs": ZEN[1], "targets": ZEN[2]}]
    assert f"{src}: more lines than {tgt}" in caplog.text


def test_distill_self_and_tab_iterators(tmp_path):
    a, b, c = (_write(tmp_path / f"{n}.txt", ZEN[i:i + 2]) for i, n in enumerate("abc"))
    assert list(text_problems.text2text_distill_iterator(a, b, c))[1] == {
        "inputs": ZEN[1], "targets": ZEN[2], "dist_targets": ZEN[3]}
    assert list(text_problems.text2self_txt_iterator(a)) == [{"targets": ZEN[0]}, {"targets": ZEN[1]}]
    tab = _write(tmp_path / "tab.txt", [f"{ZEN[0]}\t{ZEN[1]}", ZEN[2], f"{ZEN[3]} \t {ZEN[4]}\textra"])
    assert list(text_problems.text2text_txt_tab_iterator(tab)) == [
        {"inputs": ZEN[0], "targets": ZEN[1]}, {"inputs": ZEN[3], "targets": f"{ZEN[4]}\textra"}]


def test_text2class_txt_iterator_ints_and_class_names(tmp_path):
    src = _write(tmp_path / "src.txt", ZEN[:3])
    ints = _write(tmp_path / "ints.txt", ["1", " 0 ", "1"])
    names = _write(tmp_path / "names.txt", ["neg", "pos", "neg"])
    assert [s["label"] for s in text_problems.text2class_txt_iterator(src, ints)] == [1, 0, 1]
    samples = list(text_problems.text2class_txt_iterator(src, names, class_strs=["neg", "pos"]))
    assert samples[1] == {"inputs": ZEN[1], "label": 1}
    with pytest.raises(ValueError, match="label 'neg' is not one of class_strs"):
        list(text_problems.text2class_txt_iterator(src, names, class_strs=["pos"]))


def test_text2text_generate_encoded():
    vocab, targets_vocab = text_encoder.ByteTextEncoder(), text_encoder.TokenTextEncoder(
        vocab_list=ZEN[0].split())
    samples = [{"inputs": "Hi", "targets": ZEN[0], "idx": [7]}]
    out = list(text_problems.text2text_generate_encoded(
        iter(samples), vocab, targets_vocab, inputs_prefix="> "))
    assert out == [{"inputs": vocab.encode("> Hi") + [1],
                    "targets": targets_vocab.encode(ZEN[0]) + [1], "idx": [7]}]
    lm = list(text_problems.text2text_generate_encoded(
        iter([{"targets": "ab"}]), vocab, has_inputs=False, targets_prefix="z"))
    assert lm == [{"targets": vocab.encode("zab") + [1]}]


def test_text_problems_forwards_the_names():
    from t2t.data.bases import text_problem_bases

    for name in text_problems.T2T_BASES:
        assert getattr(text_problems, name) is getattr(text_problem_bases, name)


# ------------------------------------------------------------- Text2textTmpdir
def _tmpdir_files(tmp_dir, lines, extra_dev=()):
    """Train: a line -> the line after it. Eval: a line -> the one two lines on (from
    the first lines, so that every character of eval is in train), then `extra_dev`."""
    train = [(lines[i], lines[i + 1]) for i in range(len(lines) - 1)]
    dev = [(lines[i], lines[i + 2]) for i in range(4)] + list(extra_dev)
    for split, pairs in (("train", train), ("eval", dev)):
        _write(tmp_dir / f"inputs.{split}.txt", [a for a, _ in pairs])
        _write(tmp_dir / f"targets.{split}.txt", [b for _, b in pairs])
    return train, dev


def test_text2text_tmpdir(tmp_path, registered):
    class ZzTextBasesTmpdir(text_problems.Text2textTmpdir):
        @property
        def approx_vocab_size(self):
            return 250

        @property
        def dataset_splits(self):
            return [{"split": problem.DatasetSplit.TRAIN, "shards": 2},
                    {"split": problem.DatasetSplit.EVAL, "shards": 1}]

    prob = _register(registered, ZzTextBasesTmpdir)
    assert prob.TRAIN_FILES == ("inputs.train.txt", "targets.train.txt")
    assert prob.EVAL_FILES == ("inputs.eval.txt", "targets.eval.txt")
    assert prob.is_generate_per_split
    data_dir, tmp_dir = str(tmp_path / "data"), tmp_path / "tmp"
    with pytest.raises(problem.DataMissingError, match="inputs.train.txt, targets.train.txt"):
        prob.generate_data(data_dir, str(tmp_dir), progress=False)
    train, dev = _tmpdir_files(tmp_dir, _license_lines()[:60])
    prob.generate_data(data_dir, str(tmp_dir), progress=False)

    encoders = prob.feature_encoders(data_dir)
    for split, pairs in (("train", train), ("dev", dev)):
        examples = _read(prob, data_dir, split)
        assert all(ex["inputs"][-1] == ex["targets"][-1] == text_encoder.EOS_ID for ex in examples)
        decoded = sorted((encoders["inputs"].decode(ex["inputs"][:-1]),
                          encoders["targets"].decode(ex["targets"][:-1])) for ex in examples)
        assert decoded == sorted((_squash(a), _squash(b)) for a, b in pairs)


@pytest.mark.parametrize("scheme", ["", "file://"], ids=["local_dir", "file_url"])
def test_text2text_remotedir(tmp_path, registered, scheme):
    remote = tmp_path / "bucket"
    train, dev = _tmpdir_files(remote, ZEN)

    class ZzTextBasesRemotedir(text_problems.Text2TextRemotedir):
        SRC_REMOTE_DIR = scheme + str(remote)

        @property
        def vocab_type(self):
            return text_problems.VocabType.CHARACTER

    prob = _register(registered, ZzTextBasesRemotedir)
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "empty_tmp"), progress=False)
    encoder = prob.feature_encoders(data_dir)["inputs"]
    assert type(encoder).__name__ == "ByteTextEncoder"
    examples = _read(prob, data_dir, "dev")
    assert sorted((encoder.decode(ex["inputs"][:-1]), encoder.decode(ex["targets"][:-1]))
                  for ex in examples) == sorted(dev)
    with pytest.raises(ValueError, match="must set SRC_REMOTE_DIR"):
        text_problems.Text2TextRemotedir().generate_samples(data_dir, str(tmp_path), "train")


@pytest.mark.parametrize("user_vocab", [True, False], ids=["vocab_txt", "from_data"])
def test_text2text_tmpdir_tokens(tmp_path, registered, user_vocab):
    class ZzTextBasesTmpdirTokens(text_problems.Text2textTmpdirTokens):
        pass

    prob = _register(registered, ZzTextBasesTmpdirTokens)
    data_dir, tmp_dir = tmp_path / "data", tmp_path / "tmp"
    title = "The Zen of Python, by Tim Peters"  # words that are not in train
    train, dev = _tmpdir_files(tmp_dir, ZEN, extra_dev=[(title, ZEN[0])])
    train_words = {w for pair in train for text in pair for w in text.split()}
    known = sorted(train_words)[::2] if user_vocab else sorted(train_words)
    if user_vocab:
        _write(tmp_dir / "vocab.txt", known)
    prob.generate_data(str(data_dir), str(tmp_dir), progress=False)

    vocab_file = data_dir / "vocab.zz_text_bases_tmpdir_tokens.tokens"
    assert prob.vocab_filename == vocab_file.name
    tokens = vocab_file.read_text(encoding="utf-8").splitlines()
    assert tokens[:3] == ["<pad>", "<EOS>", "<UNK>"] and set(tokens[3:]) == set(known)
    encoder = prob.feature_encoders(str(data_dir))["inputs"]
    examples = _read(prob, str(data_dir), "dev")
    assert len(examples) == len(dev)
    expected = sorted(" ".join(w if w in known else "<UNK>" for w in text.split())
                      for pair in dev for text in pair)
    decoded = sorted(encoder.decode(ex[f][:-1]) for ex in examples for f in ("inputs", "targets"))
    assert decoded == expected and any(2 in ex["inputs"] for ex in examples)


# ------------------------------------------------------ TextConcat2ClassProblem
def _next_line_pairs(lines):
    """Two lines and whether the second follows the first in the text (1) or not (0)."""
    for i in range(len(lines) - 2):
        follows = i % 2 == 0
        yield {"inputs": [lines[i], lines[i + 1 if follows else i + 2]], "label": int(follows)}


@pytest.mark.parametrize("vocab_type", [None, text_problems.VocabType.CHARACTER],
                         ids=["sentencepiece", "bytes"])
def test_text_concat2class(tmp_path, registered, vocab_type):
    lines = _license_lines()[:80]

    class ZzTextBasesNextLine(text_problems.TextConcat2ClassProblem):
        @property
        def is_generate_per_split(self):
            return False

        @property
        def num_classes(self):
            return 2

        @property
        def approx_vocab_size(self):
            return 300

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            del data_dir, tmp_dir, dataset_split
            return _next_line_pairs(lines)

    if vocab_type:
        ZzTextBasesNextLine.vocab_type = vocab_type
    prob = _register(registered, ZzTextBasesNextLine)
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    encoder = prob.feature_encoders(data_dir)["inputs"]
    separator = prob.concat_token_id(encoder)
    assert encoder.decode_list([separator])[0].lstrip("\u2581") == "$"
    if vocab_type:
        assert separator == ord("$") + 2  # bytes are ids 2..257
    expected = {tuple(encoder.encode(s["inputs"][0]) + [separator] + encoder.encode(s["inputs"][1])
                      + [text_encoder.EOS_ID]): s["label"] for s in _next_line_pairs(lines)}
    examples = _read(prob, data_dir, "train") + _read(prob, data_dir, "dev")
    assert len(examples) == len(expected) == len(lines) - 2
    assert {tuple(ex["inputs"]): ex["targets"] for ex in examples} == {
        k: [v] for k, v in expected.items()}
    assert prob.feature_encoders(data_dir)["targets"].class_labels == ["ID_0", "ID_1"]
    assert prob.hparams(data_dir).modality == {"inputs": "symbol", "targets": "class_label"}


def test_text_concat2class_refuses_one_string(tmp_path):
    class OneString(text_problems.TextConcat2ClassProblem):
        vocab_type = text_problems.VocabType.CHARACTER
        num_classes = 2

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            yield {"inputs": ZEN[0], "label": 0}

    with pytest.raises(TypeError, match="is a list of texts"):
        list(OneString().generate_encoded_samples(str(tmp_path), str(tmp_path), "train"))


# ------------------------------------------------ QuestionAndContext2TextProblem
def test_question_and_context2text(tmp_path, registered):
    class ZzTextBasesContext(text_problems.QuestionAndContext2TextProblem):
        @property
        def approx_vocab_size(self):
            return 200

        @property
        def dataset_splits(self):
            return [{"split": problem.DatasetSplit.TRAIN, "shards": 1},
                    {"split": problem.DatasetSplit.EVAL, "shards": 1}]

        @property
        def is_generate_per_split(self):
            return False

        def generate_samples(self, data_dir, tmp_dir, dataset_split):
            for i in range(len(ZEN) - 3):
                yield {"inputs": ZEN[i], "context": " ".join(ZEN[i:i + 3]), "targets": ZEN[i + 1]}

    prob = _register(registered, ZzTextBasesContext)
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    encoders = prob.feature_encoders(data_dir)
    assert encoders["context"] is encoders["inputs"]
    assert encoders["inputs"].all_subtoken_strings[prob.QUESTION_SEPARATOR_ID].startswith("<EOQ>")
    hp = prob.hparams(data_dir)
    assert hp.modality["context"] == "symbol"
    assert hp.vocab_size["context"] == encoders["inputs"].vocab_size
    examples = _read(prob, data_dir, "train") + _read(prob, data_dir, "dev")
    assert len(examples) == len(ZEN) - 3
    for ex in examples:
        assert ex["context"][-1] == text_encoder.EOS_ID
        question, context = (encoders["inputs"].decode(ex[f][:-1]) for f in ("inputs", "context"))
        i = ZEN.index(question)
        assert context == " ".join(ZEN[i:i + 3])
        assert encoders["targets"].decode(ex["targets"][:-1]) == ZEN[i + 1]
    # The trainer's input pipeline pads and batches "context" with the other sequences.
    hparams = create_hparams("transformer_tiny", "batch_size=256")
    batch = next(iter(input_pipeline.input_dataset(prob, "eval", data_dir, hparams)))
    assert batch["context"].shape[0] == batch["inputs"].shape[0] > 1
    for inputs, context in zip(batch["inputs"].numpy().tolist(), batch["context"].numpy().tolist(),
                               strict=True):
        i = ZEN.index(encoders["inputs"].decode(inputs, strip_extraneous=True))
        assert encoders["context"].decode(context, strip_extraneous=True) == " ".join(ZEN[i:i + 3])


# ------------------------------------------------------------ ChoppedTextProblem
def _chopped_class(train_files, dev_files, *, vocab_type=None, max_dev_chars=10**7):
    class ZzTextBasesChopped(text_problems.ChoppedTextProblem):
        @property
        def dataset_splits(self):
            return [{"split": problem.DatasetSplit.TRAIN, "shards": 2},
                    {"split": problem.DatasetSplit.EVAL, "shards": 1}]

        def train_text_filepaths(self, tmp_dir):
            return train_files

        def dev_text_filepaths(self, tmp_dir):
            return dev_files

        @property
        def sequence_length(self):
            return 16

        @property
        def approx_vocab_size(self):
            return 300

        @property
        def max_dev_chars(self):
            return max_dev_chars

    if vocab_type:
        ZzTextBasesChopped.vocab_type = vocab_type
    return ZzTextBasesChopped


def test_chopped_text_bytes(tmp_path, registered):
    lines = _license_lines()
    texts = ["\n".join(lines[:40]) + "\n", "\n".join(lines[40:70]) + "\n", "\n".join(ZEN) + "\n"]
    paths = [_write(tmp_path / "tmp" / f"text{i}.txt", t.splitlines()) for i, t in enumerate(texts)]
    cls = _chopped_class(paths[:2], paths[2:], vocab_type=text_problems.VocabType.CHARACTER,
                         max_dev_chars=200)
    prob = _register(registered, cls)
    assert not prob.has_inputs
    assert (prob.num_train_shards, prob.num_dev_shards, prob.num_generate_tasks) == (2, 1, 3)
    assert prob.text_filepaths_for_task("unused", 1) == paths[1:2]
    data_dir = tmp_path / "data"
    prob.generate_data(str(data_dir), str(tmp_path / "tmp"), task_id=1)  # one shard
    assert sorted(os.listdir(data_dir)) == ["zz_text_bases_chopped-train-00001-of-00002"]
    prob.generate_data(str(data_dir), str(tmp_path / "tmp"))  # task_id -1: every shard

    encoder = text_encoder.ByteTextEncoder()
    for shard, text in enumerate(texts[:2]):
        shard_file = str(data_dir / f"zz_text_bases_chopped-train-0000{shard}-of-00002")
        ids = _shard_targets(prob, shard_file)  # this shard's records, in order
        assert all(len(t) == 16 for t in ids)
        flat = [i for t in ids for i in t]
        expected = encoder.encode(text)
        assert flat == expected + [0] * (-len(expected) % 16)  # remainder_policy "pad"
    dev = _read(prob, str(data_dir), "dev")
    assert len(dev) == 13 and all(len(ex["targets"]) == 16 for ex in dev)  # 200 chars
    assert prob.max_length(None) == 16
    assert prob.eval_metrics() == ["accuracy", "neg_log_perplexity"]


def _shard_targets(prob, path):
    import tensorflow as tf

    parsed = prob.decode_examples(tf.stack(list(tf.data.TFRecordDataset(path))))
    return parsed["targets"].to_list()


def test_chopped_text_sentencepiece_vocab_from_long_files(tmp_path, registered):
    text = " ".join(_license_lines())  # one line of several thousand characters
    path = _write(tmp_path / "tmp" / "one_line.txt", [text])
    prob = _register(registered, _chopped_class([path], [path]))
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(tmp_path / "tmp"))
    encoder = prob.feature_encoders(data_dir)["targets"]
    assert type(encoder).__name__ == "SentencePieceEncoder" and encoder.vocab_size > 100
    examples = _read(prob, data_dir, "train")
    assert examples and all(len(ex["targets"]) == 16 for ex in examples)
    assert "License" in encoder.decode([i for ex in examples for i in ex["targets"]])


# ------------------------------------------------- t2t-trainer and t2t-decoder
USR_PROBLEM = '''
import os

from tensor2tensor.data_generators import problem
from tensor2tensor.data_generators import text_problems
from tensor2tensor.utils import registry


@registry.register_problem
class ZzTextBasesUsrNextLine(text_problems.TextConcat2ClassProblem):
    """Does the second line follow the first one in the text?"""

    @property
    def is_generate_per_split(self):
        return False

    @property
    def dataset_splits(self):
        return [{"split": problem.DatasetSplit.TRAIN, "shards": 1},
                {"split": problem.DatasetSplit.EVAL, "shards": 1}]

    @property
    def approx_vocab_size(self):
        return 200

    def class_labels(self, data_dir):
        return ["apart", "follows"]

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        with open(os.path.join(tmp_dir, "zen.txt")) as f:
            lines = [line.strip() for line in f if line.strip()]
        for i in range(len(lines) - 2):
            follows = i % 2 == 0
            yield {"inputs": [lines[i], lines[i + 1 if follows else i + 2]],
                   "label": int(follows)}
'''


def test_trainer_and_decoder_with_a_usr_dir(tmp_path):
    """End to end in processes of their own: t2t-trainer --generate_data trains a
    TextConcat2ClassProblem from --t2t_usr_dir, t2t-decoder labels pairs from a file."""
    if shutil.which("t2t-trainer") is None or shutil.which("t2t-decoder") is None:
        pytest.skip("the t2t binaries are not installed")
    usr = tmp_path / "zz_text_bases_usr"
    usr.mkdir()
    (usr / "__init__.py").write_text("from . import next_line  # noqa: F401\n")
    (usr / "next_line.py").write_text(USR_PROBLEM)
    data_dir, output_dir = tmp_path / "data", tmp_path / "run"
    _write(data_dir / "tmp" / "zen.txt", ZEN)
    common = [f"--t2t_usr_dir={usr}", "--problem=zz_text_bases_usr_next_line",
              "--model=transformer", "--hparams_set=transformer_tiny", f"--data_dir={data_dir}",
              f"--output_dir={output_dir}"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run(
        ["t2t-trainer", *common, "--generate_data", f"--tmp_dir={data_dir / 'tmp'}",
         "--hparams=batch_size=64", "--train_steps=2", "--schedule=train"],
        capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert any(name.startswith("ckpt-2") for name in os.listdir(output_dir)), os.listdir(output_dir)

    pairs = tmp_path / "pairs.txt"
    _write(pairs, [f"{ZEN[0]} $ {ZEN[1]}", f"{ZEN[2]} $ {ZEN[5]}"])
    decodes = tmp_path / "decodes.txt"
    run = subprocess.run(
        ["t2t-decoder", *common, f"--decode_from_file={pairs}", f"--decode_to_file={decodes}",
         "--decode_hparams=beam_size=1,batch_size=2"],
        capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    labels = decodes.read_text(encoding="utf-8").splitlines()
    assert len(labels) == 2 and set(labels) <= {"apart", "follows"}, labels
