"""t2t.pretrained.vocab: Hugging Face tokenizers (Marian, T5) as t2t SentencePiece models,
checked against the tokenizers themselves on real text (gettext catalogs)."""

import json
import os
import shutil

import pytest

pytest.importorskip("transformers")
import sentencepiece as spm  # noqa: E402

from t2t.data.encoders.sentencepiece_encoder import SentencePieceEncoder  # noqa: E402
from t2t.pretrained.vocab import (  # noqa: E402
    PretrainedTokenizerError,
    read_marian_vocab,
    read_t5_vocab,
    write_vocab,
)
from tests.helpers import hf_fixtures  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
T5_ROWS = 640  # embedding rows of the imagined checkpoint: 610 tokenizer ids + 30 filler
SENTINEL_TEXTS = ["The <extra_id_0> walks in <extra_id_1> park",
                  "<extra_id_0> Datei <extra_id_1> nicht gefunden <extra_id_2>"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Marian (English -> German) and T5 tokenizer folders trained on apt/dpkg/coreutils/grep."""
    root = tmp_path_factory.mktemp("hf")
    pairs = hf_fixtures.gettext_pairs("de")
    marian = hf_fixtures.write_marian_tokenizer(str(root / "marian"), pairs)
    t5 = hf_fixtures.write_t5_tokenizer(str(root / "t5"), [x for p in pairs for x in p])
    return {"root": root, "marian": marian, "t5": t5}


@pytest.fixture(scope="module")
def sample():
    """~850 (English, German) messages of catalogs the models never saw."""
    return hf_fixtures.gettext_pairs("de", hf_fixtures.UNSEEN_CATALOGS)[::10]


@pytest.fixture(scope="module")
def marian(folders):
    from transformers import MarianTokenizer

    return MarianTokenizer.from_pretrained(folders["marian"]), read_marian_vocab(folders["marian"])


@pytest.fixture(scope="module")
def t5(folders):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folders["t5"]), read_t5_vocab(folders["t5"], T5_ROWS)


def _mixed_unknown_run(spm_file, vocab, text):
    """Whether SentencePiece makes an unknown piece of 2+ characters of `text`, one of
    them a vocab.json entry: the documented case where ids differ from MarianTokenizer's."""
    sp = spm.SentencePieceProcessor(model_file=spm_file)
    return any(sp.piece_to_id(p) == sp.unk_id() and len(p) > 1 and any(c in vocab for c in p)
               for p in sp.encode(text, out_type=str))


def _check_marian_side(tokenizer, vocab, folder, texts, side):
    encoder = SentencePieceEncoder(model_proto=getattr(vocab, f"{side}_model"))
    joint = tokenizer.get_vocab()
    spm_file = os.path.join(folder, "source.spm" if side == "inputs" else "target.spm")
    differing, checked = [], 0
    for text in texts:
        ids = [vocab.checkpoint_ids[i] for i in encoder.encode(text)] + [tokenizer.eos_token_id]
        theirs = tokenizer(text).input_ids if side == "inputs" else \
            tokenizer(text_target=text).input_ids
        if _mixed_unknown_run(spm_file, joint, text):
            differing.append(text)
            continue
        checked += 1
        assert ids == theirs, text
    return differing, checked


def test_marian_ids_equal_the_tokenizer_on_real_text(marian, folders, sample):
    tokenizer, vocab = marian
    assert vocab.kind == "marian" and vocab.vocab_size == len(tokenizer.get_vocab())
    assert vocab.checkpoint_ids[:3] == [tokenizer.pad_token_id, tokenizer.eos_token_id,
                                        tokenizer.unk_token_id]
    assert sorted(vocab.checkpoint_ids) == list(range(vocab.vocab_size))
    for side, texts in (("inputs", [s for s, _ in sample]), ("targets", [t for _, t in sample])):
        differing, checked = _check_marian_side(tokenizer, vocab, folders["marian"], texts, side)
        assert checked >= 0.98 * len(texts), (side, differing)


def test_marian_characters_one_side_lacks_keep_their_joint_ids(marian):
    tokenizer, vocab = marian
    inputs = SentencePieceEncoder(model_proto=vocab.inputs_model)
    # "ß" and "ä" are German pieces (target.spm) that the English source.spm cannot segment:
    # MarianTokenizer finds the unknown piece's text in vocab.json; so does the inputs model.
    for text in ("Straße", "Dateiname enthält"):
        ids = [vocab.checkpoint_ids[i] for i in inputs.encode(text)] + [tokenizer.eos_token_id]
        assert ids == tokenizer(text).input_ids
        assert tokenizer.unk_token_id not in ids
    # The documented difference: a run of 2+ unknown characters is one <unk> for Marian
    # unless the run is an entry; here each character that is an entry keeps its id.
    unknown_then_known = "\u2603ß"
    ours = [vocab.checkpoint_ids[i] for i in inputs.encode(unknown_then_known)]
    assert tokenizer(unknown_then_known).input_ids[-2] == tokenizer.unk_token_id
    assert ours[-2:] == [tokenizer.unk_token_id, tokenizer.get_vocab()["ß"]]


def test_marian_decode_equals_the_tokenizer(marian, sample):
    tokenizer, vocab = marian
    targets = SentencePieceEncoder(model_proto=vocab.targets_model)
    with_unk = 0
    for _, text in sample:
        ids = targets.encode(text)
        theirs = tokenizer.decode([vocab.checkpoint_ids[i] for i in ids], skip_special_tokens=True)
        ours = targets.decode(ids)
        if 2 in ids:  # unk decodes as "": equal up to the spaces MarianTokenizer strips
            with_unk += 1
            assert ours.strip() == theirs, text
        else:
            assert ours == theirs, text
    assert with_unk > 0


def test_t5_ids_and_decode_equal_the_tokenizer_on_real_text(t5, sample):
    tokenizer, vocab = t5
    assert vocab.inputs_model == vocab.targets_model and vocab.vocab_size == T5_ROWS
    assert vocab.checkpoint_ids == list(range(T5_ROWS))
    encoder = SentencePieceEncoder(model_proto=vocab.inputs_model)
    for text in [x for pair in sample for x in pair] + SENTINEL_TEXTS:
        ids = encoder.encode(text) + [1]
        assert ids == tokenizer(text).input_ids, text
        theirs = tokenizer.decode(ids, skip_special_tokens=True)
        if "<extra_id_" in text:
            continue  # T5Tokenizer's skip_special_tokens drops sentinels; t2t writes them
        if 2 in ids:  # unk decodes as "": equal up to spaces at the ends
            assert encoder.decode(ids).strip() == theirs.strip(), text
        else:
            assert encoder.decode(ids) == theirs, text


def test_t5_sentinels_and_filler_rows(t5):
    tokenizer, vocab = t5
    encoder = SentencePieceEncoder(model_proto=vocab.inputs_model)
    sentinel_0 = tokenizer.convert_tokens_to_ids("<extra_id_0>")
    assert sentinel_0 == len(tokenizer) - 1
    assert encoder.encode("<extra_id_0>") == [sentinel_0]
    assert encoder.decode([sentinel_0]) == "<extra_id_0>"
    sp = spm.SentencePieceProcessor(model_proto=vocab.inputs_model)
    assert sp.get_piece_size() == T5_ROWS
    assert all(sp.is_unused(i) for i in range(len(tokenizer), T5_ROWS))
    # The documented limit: a sentinel glued to a word is text, not the sentinel.
    assert sentinel_0 not in encoder.encode("dog<extra_id_0>.")


def test_in_graph_tokenizer_gives_the_same_ids(marian, t5, sample):
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("tensorflow_text")
    from t2t.serving.tokenizers import SentencePieceTokenizer

    texts = [x for pair in sample[:300] for x in pair] + SENTINEL_TEXTS
    for model in (marian[1].inputs_model, marian[1].targets_model, t5[1].inputs_model):
        encoder = SentencePieceEncoder(model_proto=model)
        tokenizer = SentencePieceTokenizer(model)
        assert tokenizer.encode(tf.constant(texts)).to_list() == [encoder.encode(t) for t in texts]
        ids = tokenizer.encode_for_model(tf.constant(texts[:50]))
        decoded = [t.decode("utf-8") for t in tokenizer.decode(ids).numpy()]
        assert decoded == [encoder.decode(encoder.encode(t)) for t in texts[:50]]


def test_write_vocab_round_trips(marian, tmp_path, folders):
    from t2t.data.encoders.pretrained_vocab import load_pretrained_encoders

    vocab = marian[1]
    record = write_vocab(vocab, str(tmp_path), source=folders["marian"])
    assert json.load(open(record))["kind"] == "marian"
    encoders = load_pretrained_encoders(str(tmp_path))
    assert encoders["inputs"].model_proto == vocab.inputs_model
    assert encoders["targets"].model_proto == vocab.targets_model


# ------------------------------------------------------------------------- refusals
def _copy(folders, kind, name):
    target = folders["root"] / name
    if not target.exists():
        shutil.copytree(folders[kind], target)
    return target


def _edit_json(path, edit):
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_refuses_folders_without_the_files(folders, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(PretrainedTokenizerError, match=r"lacks source\.spm.*found config\.json"):
        read_marian_vocab(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(PretrainedTokenizerError, match=r"tokenizer\.json only.*spiece\.model"):
        read_t5_vocab(str(tmp_path), 100)
    with pytest.raises(PretrainedTokenizerError, match="is not a folder"):
        read_t5_vocab(str(tmp_path / "absent"), 100)


def test_refuses_unreadable_and_non_unigram_models(folders):
    broken = _copy(folders, "t5", "t5_broken")
    (broken / "spiece.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(PretrainedTokenizerError, match="not a readable SentencePiece model"):
        read_t5_vocab(str(broken), T5_ROWS)
    bpe = _copy(folders, "t5", "t5_bpe")
    texts = [s for s, _ in hf_fixtures.gettext_pairs("de", limit=300)]
    (bpe / "spiece.model").write_bytes(hf_fixtures.train_sentencepiece(
        texts, 200, model_type="bpe", pad_id=0, eos_id=1, unk_id=2, bos_id=-1))
    with pytest.raises(PretrainedTokenizerError, match="BPE SentencePiece model.*unigram"):
        read_t5_vocab(str(bpe), T5_ROWS)


def test_refuses_too_few_rows_and_another_sentinel_layout(folders):
    with pytest.raises(PretrainedTokenizerError, match="vocab_size 600 is smaller than.*610"):
        read_t5_vocab(folders["t5"], 600)
    moved = _copy(folders, "t5", "t5_sentinels_first")
    _edit_json(moved / "tokenizer_config.json",
               lambda c: c.update(added_tokens_decoder={"3": {"content": "<extra_id_0>"}}))
    with pytest.raises(PretrainedTokenizerError, match="<extra_id_0> has id 3.*gives 609"):
        read_t5_vocab(str(moved), T5_ROWS)


def test_refuses_language_codes(folders):
    multi = _copy(folders, "marian", "marian_codes")
    _edit_json(multi / "vocab.json", lambda v: v.update({">>fr<<": len(v)}))
    with pytest.raises(PretrainedTokenizerError, match=r"language-code tokens \(>>fr<<\)"):
        read_marian_vocab(str(multi))


def test_refuses_separate_vocabs_and_added_tokens(folders):
    separate = _copy(folders, "marian", "marian_separate")
    _edit_json(separate / "tokenizer_config.json", lambda c: c.update(separate_vocabs=True))
    with pytest.raises(PretrainedTokenizerError, match="separate_vocabs"):
        read_marian_vocab(str(separate))
    added = _copy(folders, "marian", "marian_added")
    _edit_json(added / "tokenizer_config.json",
               lambda c: c["added_tokens_decoder"].update({"5": {"content": "<sep>"}}))
    with pytest.raises(PretrainedTokenizerError, match=r"adds tokens \['<sep>'\]"):
        read_marian_vocab(str(added))


def test_refuses_spm_pieces_missing_from_vocab_json(folders):
    lacking = _copy(folders, "marian", "marian_lacking")
    source = spm.SentencePieceProcessor(model_file=str(lacking / "source.spm"))
    dropped = source.id_to_piece(source.get_piece_size() - 1)

    def drop(vocab):
        del vocab[dropped]
        for i, piece in enumerate(sorted(vocab, key=vocab.get)):
            vocab[piece] = i

    _edit_json(lacking / "vocab.json", drop)
    with pytest.raises(PretrainedTokenizerError, match=r"source\.spm: 1 pieces are not in vocab"):
        read_marian_vocab(str(lacking))


def test_refuses_vocab_json_with_gaps(folders):
    gaps = _copy(folders, "marian", "marian_gaps")
    _edit_json(gaps / "vocab.json", lambda v: v.update({"<pad>": len(v) + 5}))
    with pytest.raises(PretrainedTokenizerError, match="each once"):
        read_marian_vocab(str(gaps))
