"""Problems with an imported model's vocabulary: TextProblem.use_vocab_from, t2t-datagen
and t2t-trainer --use_vocab_from, and the registered `text2text_pretrained`.

An "imported run" here is a folder with vocab.pretrained.json and two different
SentencePiece models trained on real text (tests/data/test_pretrained_vocab.py): the
English "inputs" model and a German BPE "targets" model.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

import pytest

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.bases import text_core as text_problems
from t2t.data.encoders import pretrained_vocab
from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder
from tests.data.test_pretrained_vocab import VOCAB_SIZE, parallel_text, train_model
from tests.helpers.binaries import run_binary

EOS = [1]
USR_PROBLEM = "pretrained_vocab_test_pairs"
# A --t2t_usr_dir problem: the pairs of parallel_text() (gettext messages), 1 dev in 10.
USR_MODULE = f'''
from t2t import registry
from t2t.data.bases import text_core as text_problems
from tests.data.test_pretrained_vocab import parallel_text


@registry.register_problem("{USR_PROBLEM}")
class PretrainedVocabTestPairs(text_problems.Text2TextProblem):
    approx_vocab_size = 400
    dataset_splits = [{{"split": "train", "shards": 1}}, {{"split": "dev", "shards": 1}}]

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for i, (english, german) in enumerate(parallel_text(200)):
            if (i % 10 == 0) == (dataset_split == "dev"):
                yield {{"inputs": english, "targets": german}}
'''


class Pairs(text_problems.Text2TextProblem):
    """English -> German messages; its own vocabulary would be SentencePiece."""

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for english, german in parallel_text(40):
            yield {"inputs": english, "targets": german}


class Sentences(text_problems.Text2SelfProblem):
    vocab_type = text_problems.VOCAB_BYTE  # replaced by the imported vocabulary

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for _, german in parallel_text(10):
            yield {"targets": german}


class Lengths(text_problems.Text2ClassProblem):
    def class_labels(self, data_dir):
        return ["short", "long"]

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        for english, _ in parallel_text(10):
            yield {"inputs": english, "label": int(len(english) > 30)}


def _write_run(folder: Path, inputs: bytes, targets: bytes) -> str:
    pretrained_vocab.write_pretrained_vocab(str(folder), inputs, targets, kind="marian",
                                            source="/hf/opus-mt-en-de")
    return str(folder)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """Two imported runs: "run" (English inputs, German targets) and "other" (swapped)."""
    pairs = parallel_text()
    english = train_model(s for s, _ in pairs)
    german = train_model((t for _, t in pairs), model_type="bpe")
    root = tmp_path_factory.mktemp("imported")
    return {"run": _write_run(root / "run", english, german),
            "other": _write_run(root / "other", german, english)}


def _models(run: str) -> dict[str, SentencePieceEncoder]:
    return {f: SentencePieceEncoder(os.path.join(run, f"vocab.pretrained.{f}.model"))
            for f in ("inputs", "targets")}


def test_text2text_encodes_each_side_with_its_model_and_copies_the_vocabulary(runs, tmp_path):
    data_dir = str(tmp_path)
    pairs = Pairs()
    pairs.use_vocab_from = runs["run"]
    examples = list(pairs.generate_encoded_samples(data_dir, None, "train"))
    own = _models(runs["run"])
    expected = [{"inputs": own["inputs"].encode(s) + EOS, "targets": own["targets"].encode(t) + EOS}
                for s, t in parallel_text(40)]
    assert examples == expected
    assert own["inputs"].encode("directory") != own["targets"].encode("directory")
    prefix = "vocab.pairs.pretrained"
    assert sorted(os.listdir(data_dir)) == [f"{prefix}.inputs.model", f"{prefix}.json",
                                            f"{prefix}.targets.model"]
    # A fresh instance (as the trainer, decoder and exporter make) finds the copy itself.
    fresh = Pairs()
    assert fresh.use_vocab_from is None and fresh.uses_pretrained_vocab(data_dir)
    encoders = fresh.feature_encoders(data_dir)
    assert {f: e.describe()["model_file"] for f, e in encoders.items()} == {
        "inputs": f"{prefix}.inputs.model", "targets": f"{prefix}.targets.model"}
    assert {f: e.model_proto for f, e in encoders.items()} == {
        f: e.model_proto for f, e in own.items()}
    assert fresh.hparams(data_dir).vocab_size == {"inputs": VOCAB_SIZE, "targets": VOCAB_SIZE}
    assert fresh.get_or_create_vocab(data_dir, None).model_proto == own["inputs"].model_proto
    rev = registry.problem("text2text_pretrained_rev")  # the swap of feature_encoders holds
    assert rev.feature_encoders(runs["run"])["inputs"].model_proto == own["targets"].model_proto


def test_language_models_take_targets_and_classifiers_inputs(runs, tmp_path):
    own = _models(runs["run"])
    sentences, lengths = Sentences(), Lengths()
    sentences.use_vocab_from = lengths.use_vocab_from = runs["run"]
    lm = list(sentences.generate_encoded_samples(str(tmp_path), None, "train"))
    assert lm == [{"targets": own["targets"].encode(t) + EOS} for _, t in parallel_text(10)]
    classified = list(lengths.generate_encoded_samples(str(tmp_path), None, "train"))
    assert [c["inputs"] for c in classified] == [own["inputs"].encode(s) + EOS
                                                 for s, _ in parallel_text(10)]
    assert Sentences().feature_encoders(str(tmp_path))["targets"].vocab_size == VOCAB_SIZE
    assert Lengths().feature_encoders(str(tmp_path))["inputs"].model_proto == \
        own["inputs"].model_proto


def test_without_the_copy_a_problem_says_how_to_make_it(runs, tmp_path):
    pairs = Pairs()
    pairs.use_vocab_from = runs["run"]
    with pytest.raises(problem_lib.DataMissingError,
                       match=rf"run `t2t-datagen --problem=pairs --use_vocab_from={runs['run']} "
                             rf"--data_dir={tmp_path}` first"):
        pairs.feature_encoders(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_text2text_pretrained_gives_the_export_parity_gate_inputs(runs):
    from t2t.serving import parity

    imported = registry.problem("text2text_pretrained")
    texts = imported.parity_texts(runs["run"], 3)
    assert len(texts) == 3 and all(len(t.split()) == 6 for t in texts), texts
    encoder = _models(runs["run"])["inputs"]
    examples = parity.dev_examples(imported, runs["run"], 3, is_image=False)
    assert examples == [{"ids": encoder.encode(t) + [1]} for t in texts]
    assert all(encoder.decode(e["ids"][:-1]) == t for e, t in zip(examples, texts, strict=True))


def test_text2text_pretrained_reads_the_run_and_has_no_data(runs, tmp_path):
    imported = registry.problem("text2text_pretrained")
    own = _models(runs["run"])
    encoders = imported.feature_encoders(runs["run"])
    assert {f: e.model_proto for f, e in encoders.items()} == {
        f: e.model_proto for f, e in own.items()}
    assert encoders["inputs"].describe()["model_file"] == "vocab.pretrained.inputs.model"
    assert imported.hparams(runs["run"]).vocab_size == {"inputs": VOCAB_SIZE,
                                                       "targets": VOCAB_SIZE}
    fine_tune = (rf"imported model's vocabulary, with no data of its own.*`t2t-datagen "
                 rf"--problem=P --use_vocab_from={runs['run']} --data_dir=D`, then "
                 rf"`t2t-trainer --problem=P --data_dir=D --output_dir={runs['run']}`")
    with pytest.raises(problem_lib.DataMissingError, match=fine_tune):
        imported.generate_data(runs["run"], str(tmp_path / "tmp"))
    with pytest.raises(problem_lib.DataMissingError, match="--use_vocab_from=RUN"):
        list(imported.generate_samples(str(tmp_path), None, "train"))
    with pytest.raises(problem_lib.DataMissingError,
                       match=r"vocab.pretrained.json'; text2text_pretrained is the problem of "
                             r"a run t2t-import wrote"):
        imported.feature_encoders(str(tmp_path))
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def usr_dir(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("usr") / "pretrained_vocab_usr.py"
    path.write_text(USR_MODULE)
    return str(path)


def _read_ids(data_dir: str, split: str) -> list[dict[str, list[int]]]:
    import tensorflow as tf

    examples = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{USR_PROBLEM}-{split}-*"))):
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            examples.append({k: list(feature[k].int64_list.value) for k in ("inputs", "targets")})
    return examples


def _files(folder: str) -> dict[str, tuple[float, bytes]]:
    """{name: (mtime, bytes)} of the files in `folder`."""
    paths = (p for p in glob.glob(os.path.join(folder, "*")) if os.path.isfile(p))
    return {os.path.basename(p): (os.path.getmtime(p), Path(p).read_bytes()) for p in paths}


def test_datagen_use_vocab_from_end_to_end(runs, usr_dir, tmp_path):
    data_dir = str(tmp_path / "data")
    common = [f"--t2t_usr_dir={usr_dir}", f"--problem={USR_PROBLEM}", f"--data_dir={data_dir}",
              "--progress=false"]
    result = run_binary("t2t-datagen", *common, f"--use_vocab_from={runs['run']}")
    assert result.code == 0, result.err[-3000:]
    own = _models(runs["run"])
    dev = [(s, t) for i, (s, t) in enumerate(parallel_text(200)) if i % 10 == 0]
    assert _read_ids(data_dir, "dev") == [
        {"inputs": own["inputs"].encode(s) + EOS, "targets": own["targets"].encode(t) + EOS}
        for s, t in dev]
    assert pretrained_vocab.same_pretrained_vocab(
        runs["run"], "vocab.pretrained", data_dir, f"vocab.{USR_PROBLEM}.pretrained")
    # Again with the same run: the shards are kept, nothing is refused.
    again = run_binary("t2t-datagen", *common, f"--use_vocab_from={runs['run']}")
    assert again.code == 0, again.err[-3000:]
    # Another imported vocabulary for the same data_dir: refused, nothing changed.
    before = _files(data_dir)
    other = run_binary("t2t-datagen", *common, f"--use_vocab_from={runs['other']}")
    assert other.code == 1 and not other.traceback
    assert (f"vocab.{USR_PROBLEM}.pretrained.json is another imported vocabulary than "
            f"--use_vocab_from={runs['other']}'s") in other.err
    assert "give a new --data_dir" in other.err
    assert _files(data_dir) == before


def test_data_of_the_problem_s_own_vocabulary_is_refused(runs, usr_dir, tmp_path):
    data_dir = str(tmp_path / "data")
    common = [f"--t2t_usr_dir={usr_dir}", f"--problem={USR_PROBLEM}", f"--data_dir={data_dir}",
              "--progress=false"]
    built = run_binary("t2t-datagen", *common)  # SentencePiece built from the data
    assert built.code == 0, built.err[-3000:]
    before = _files(data_dir)
    refused = run_binary("t2t-datagen", *common, f"--use_vocab_from={runs['run']}")
    assert refused.code == 1 and not refused.traceback
    assert (f"already holds its data ({USR_PROBLEM}-dev-00000-of-00001, "
            f"{USR_PROBLEM}-train-00000-of-00001) encoded with another vocabulary "
            f"(vocab.{USR_PROBLEM}.400.model, vocab.{USR_PROBLEM}.400.vocab)") in refused.err
    assert "give a new --data_dir" in refused.err
    assert _files(data_dir) == before
    trainer = run_binary("t2t-trainer", *common[:3], "--model=transformer",
                         "--hparams_set=transformer_tiny", f"--output_dir={tmp_path / 'out'}",
                         "--generate_data", f"--use_vocab_from={runs['run']}")
    assert trainer.code == 1 and not trainer.traceback
    assert "encoded with another vocabulary" in trainer.err


@pytest.mark.parametrize("args, message", [
    (["--problem=algorithmic_reverse_binary40_test", "--use_vocab_from={run}"],
     r"algorithmic_reverse_binary40_test \(AlgorithmicReverseBinary40Test\) is not a text "
     r"problem; an imported vocabulary encodes the texts of Text2TextProblem"),
    (["--problem=text2text_pretrained", "--use_vocab_from={run}"],
     "imported model's vocabulary, with no data of its own"),
    (["--problem=text2text_pretrained", "--use_vocab_from={empty}"],
     "vocab.pretrained.json'; give the folder t2t-import wrote"),
    (["--problem=text2text_pretrained", "--use_vocab_from={run}", "--inspect"],
     "--use_vocab_from applies when generating"),
])
def test_datagen_flag_errors(runs, tmp_path, args, message):
    args = [a.format(run=runs["run"], empty=tmp_path) for a in args]
    result = run_binary("t2t-datagen", *args, f"--data_dir={tmp_path / 'data'}")
    assert result.code == 1 and not result.traceback, result.err[-2000:]
    assert re.search(message, result.err), result.err[-2000:]


def test_trainer_use_vocab_from_without_generate_data_says_what_to_run(runs, tmp_path):
    result = run_binary("t2t-trainer", "--problem=languagemodel_ptb10k", "--model=transformer",
                        "--hparams_set=transformer_tiny", f"--data_dir={tmp_path}",
                        f"--output_dir={tmp_path / 'out'}", f"--use_vocab_from={runs['run']}")
    assert result.code == 1 and not result.traceback, result.err[-2000:]
    assert (f"--use_vocab_from={runs['run']} sets the vocabulary data is generated with: add "
            f"--generate_data, or run t2t-datagen --problem=languagemodel_ptb10k "
            f"--use_vocab_from={runs['run']} --data_dir={tmp_path} first") in result.err
