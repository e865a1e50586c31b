"""t2t.data.encoders.pretrained_vocab: an imported model's vocabulary as two t2t
SentencePiece models and a record, written, checked, loaded and copied.

The models are trained here on real text (English and German gettext messages of the
system's catalogs, else lines of README.md) with t2t's ids; the helpers are shared
with tests/problems/text/test_pretrained_problem.py.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

import pytest

from t2t.data.encoders import pretrained_vocab
from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder
from tests.helpers import docs_text

VOCAB_SIZE = 300
GERMAN_CATALOGS = "/usr/share/locale/de/LC_MESSAGES"


def parallel_text(limit: int = 600) -> list[tuple[str, str]]:
    """(English, German) gettext messages, else consecutive lines of the docs: real text."""
    from t2t.problems.translation import translate_gettext

    try:
        pairs = list(itertools.islice(translate_gettext.catalog_pairs(GERMAN_CATALOGS), limit))
    except FileNotFoundError:
        pairs = []
    if len(pairs) < limit:
        lines = [line.strip() for line in docs_text.docs_text().splitlines()]
        lines = [line for line in lines if len(line.split()) >= 4]
        pairs = list(zip(lines[0::2], lines[1::2], strict=False))[:limit]
    return pairs


def train_model(texts, model_type: str = "unigram", vocab_size: int = VOCAB_SIZE) -> bytes:
    """A SentencePiece model of exactly `vocab_size` pieces with t2t's ids (0 pad, 1 EOS,
    2 unk), trained on `texts`."""
    import sentencepiece as spm

    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=writer, vocab_size=vocab_size,
        model_type=model_type, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, pad_piece="<pad>",
        eos_piece="<EOS>", unk_piece="<UNK>", num_threads=1, minloglevel=2)
    return writer.getvalue()


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    """{"inputs": English model, "targets": German model (BPE)}: two different models."""
    pairs = parallel_text()
    return {"inputs": train_model(s for s, _ in pairs),
            "targets": train_model((t for _, t in pairs), model_type="bpe")}


def _snapshot(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(folder).iterdir()}


def test_write_then_load_gives_the_models_as_t2t_encoders(models, tmp_path):
    path = pretrained_vocab.write_pretrained_vocab(
        str(tmp_path), models["inputs"], models["targets"], kind="marian", source="hf/opus")
    assert path == str(tmp_path / "vocab.pretrained.json")
    record = json.loads(Path(path).read_text())
    assert record == {"format": 1, "kind": "marian", "vocab_size": VOCAB_SIZE,
                      "inputs": "vocab.pretrained.inputs.model",
                      "targets": "vocab.pretrained.targets.model",
                      "source": os.path.abspath("hf/opus")}
    assert (tmp_path / "vocab.pretrained.inputs.model").read_bytes() == models["inputs"]
    assert pretrained_vocab.has_pretrained_vocab(str(tmp_path))
    assert not pretrained_vocab.has_pretrained_vocab(str(tmp_path), "vocab.other.pretrained")
    encoders = pretrained_vocab.load_pretrained_encoders(str(tmp_path))
    text = parallel_text(limit=20)[-1][0]
    for feature in ("inputs", "targets"):
        own = SentencePieceEncoder(model_proto=models[feature])
        assert encoders[feature].encode(text) == own.encode(text)
        assert encoders[feature].describe() == {
            "type": "sentencepiece", "model_file": f"vocab.pretrained.{feature}.model",
            "vocab_size": VOCAB_SIZE}
    assert encoders["inputs"].encode(text) != encoders["targets"].encode(text)
    assert encoders["targets"].decode(encoders["targets"].encode(text)) == text


def test_one_model_for_both_is_one_file_and_one_encoder(models, tmp_path):
    path = pretrained_vocab.write_pretrained_vocab(
        str(tmp_path), models["inputs"], models["inputs"], kind="t5", source="/hf/t5")
    record = json.loads(Path(path).read_text())
    assert record["inputs"] == record["targets"] == "vocab.pretrained.model"
    assert sorted(os.listdir(tmp_path)) == ["vocab.pretrained.json", "vocab.pretrained.model"]
    encoders = pretrained_vocab.load_pretrained_encoders(str(tmp_path))
    assert encoders["inputs"] is encoders["targets"]


def test_an_existing_vocabulary_is_kept_or_refused(models, tmp_path):
    folder = str(tmp_path)
    path = pretrained_vocab.write_pretrained_vocab(folder, models["inputs"], models["targets"],
                                                   kind="marian", source="/a")
    before = _snapshot(tmp_path)
    # The same models again: nothing to do, the record (its source too) is kept.
    assert pretrained_vocab.write_pretrained_vocab(
        folder, models["inputs"], models["targets"], kind="marian", source="/b") == path
    with pytest.raises(pretrained_vocab.PretrainedVocabError,
                       match=r"already holds another vocabulary \(marian, 300 ids.*"
                             r"nothing was overwritten.*new --data_dir"):
        pretrained_vocab.write_pretrained_vocab(folder, models["targets"], models["inputs"],
                                                kind="marian", source="/c")
    assert _snapshot(tmp_path) == before


def test_models_that_are_not_t2t_vocabularies_are_refused(models, tmp_path):
    import sentencepiece as spm

    writer = io.BytesIO()  # SentencePiece's own ids: unk 0, bos 1, eos 2
    spm.SentencePieceTrainer.train(sentence_iterator=iter(s for s, _ in parallel_text()),
                                   model_writer=writer, vocab_size=VOCAB_SIZE, minloglevel=2)
    folder = str(tmp_path)
    cases = [
        ((models["inputs"], writer.getvalue()), {},
         r"the targets model: not laid out as t2t's ids .*pad_id=-1 \(t2t needs 0\)"),
        ((models["inputs"], b"not a model"), {}, "the targets model: not a readable"),
        ((models["inputs"], models["targets"]), {"kind": "bert"},
         r"kind 'bert' is not .* one of \('marian', 't5'\)"),
        ((models["inputs"], train_model((t for _, t in parallel_text()), vocab_size=200)), {},
         "the inputs model has 300 pieces and the targets model 200: both must lay out"),
    ]
    for (inputs, targets), overrides, message in cases:
        options = {"kind": "marian", "source": "/hf", **overrides}
        with pytest.raises(pretrained_vocab.PretrainedVocabError, match=message):
            pretrained_vocab.write_pretrained_vocab(folder, inputs, targets, **options)
    assert os.listdir(folder) == []


def test_a_missing_or_damaged_record_is_explained(models, tmp_path):
    folder = str(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"vocab.pretrained.json'; import it first"):
        pretrained_vocab.load_pretrained_encoders(folder, hint="import it first")
    path = pretrained_vocab.write_pretrained_vocab(folder, models["inputs"], models["targets"],
                                                   kind="marian", source="/hf")
    record = json.loads(Path(path).read_text())
    damaged = [
        ("{not json", "is not a JSON record"),
        (json.dumps({**record, "format": 2}), r"format 2 \(this t2t reads 1\)"),
        (json.dumps({**record, "inputs": "../x.model"}),
         r"inputs '../x.model' \(a file name in the same folder\)"),
        (json.dumps({**record, "vocab_size": 301}), "has 300 pieces; the record says "
                                                    "vocab_size 301"),
        (json.dumps({**record, "targets": "gone.model"}),
         "targets SentencePiece model of .* not found: .*gone.model"),
    ]
    for text, message in damaged:
        Path(path).write_text(text)
        with pytest.raises((pretrained_vocab.PretrainedVocabError, FileNotFoundError),
                           match=message):
            pretrained_vocab.load_pretrained_encoders(folder)


def test_copy_puts_a_run_vocabulary_under_a_problem_prefix(models, tmp_path):
    run, data = str(tmp_path / "run"), str(tmp_path / "data")
    pretrained_vocab.write_pretrained_vocab(run, models["inputs"], models["targets"],
                                            kind="marian", source="/hf/opus-mt-en-de")
    path = pretrained_vocab.copy_pretrained_vocab(run, data, "vocab.my_problem.pretrained")
    assert path == os.path.join(data, "vocab.my_problem.pretrained.json")
    assert json.loads(Path(path).read_text())["source"] == "/hf/opus-mt-en-de"
    assert sorted(os.listdir(data)) == [
        "vocab.my_problem.pretrained.inputs.model", "vocab.my_problem.pretrained.json",
        "vocab.my_problem.pretrained.targets.model"]
    assert pretrained_vocab.same_pretrained_vocab(run, "vocab.pretrained", data,
                                                  "vocab.my_problem.pretrained")
    with pytest.raises(FileNotFoundError, match=r"empty/vocab.pretrained.json'; give the "
                                                r"folder t2t-import wrote"):
        pretrained_vocab.copy_pretrained_vocab(str(tmp_path / "empty"), data, "vocab.x.pretrained")
