"""Hugging Face tokenizers (MarianTokenizer, T5Tokenizer) as plain t2t SentencePiece models.

    vocab = read_marian_vocab("opus-mt-en-de")        # or read_t5_vocab("t5-small", 32128)
    write_vocab(vocab, run_dir, source="opus-mt-en-de")  # RUN/vocab.pretrained.json + models

Each side's model is the tokenizer's own SentencePiece model (normalizer, scores, model
type) with its pieces laid out in t2t's id order over the checkpoint's whole id space:
0 pad, 1 EOS, 2 unk, then the rest. `checkpoint_ids[i]` is the checkpoint row of t2t id
i. Pieces a side's model lacks are UNUSED (never produced by segmentation; decoded as
their text), so segmentation, ids and in-graph tokenization (tensorflow_text) equal the
Hugging Face tokenizer's. The unknown piece decodes as "" (the tokenizers' decode with
skip_special_tokens=True drops it). Nothing here imports transformers or torch.

Differences that remain, by design of plain SentencePiece models: text holding the
literal strings of the special tokens ("</s>", "<unk>", "<pad>") is segmented as text
(the Hugging Face tokenizers read them as the special tokens); a run of two or more
adjacent characters unknown to a side's model becomes one unk in Hugging Face's Marian
unless the run itself is a vocabulary entry, here each character that is a vocabulary
entry keeps its id; decode does not strip leading/trailing spaces of ids that start or
end with a bare "▁" (MarianTokenizer strips its output).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
T5_FILE = "spiece.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENIZER_JSON = "tokenizer.json"
LANGUAGE_CODE = re.compile(r"^>>.+<<$")
EXTRA_ID = re.compile(r"^<extra_id_(\d+)>$")
T5_DEFAULT_EXTRA_IDS = 100  # T5Tokenizer's `extra_ids` default
UNK_PENALTY = 10.0  # SentencePiece's unigram score of an unknown character: min score - 10
FILLER_PIECE = "<unused_row_{}>"  # T5 embedding rows past the tokenizer's ids

# SentencePiece ModelProto.SentencePiece.Type values
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SEGMENTING_TYPES = (NORMAL, USER_DEFINED, BYTE)  # types segmentation can produce


class PretrainedTokenizerError(ValueError):
    """A Hugging Face tokenizer folder that cannot be expressed as t2t SentencePiece models."""


@dataclass
class PretrainedVocab:
    """Two serialized SentencePiece models over one id space of `vocab_size` ids (t2t's
    0 pad, 1 EOS, 2 unk); `checkpoint_ids[i]` is the checkpoint's row of t2t id i."""

    kind: str
    inputs_model: bytes
    targets_model: bytes
    checkpoint_ids: list[int]

    @property
    def vocab_size(self) -> int:
        return len(self.checkpoint_ids)


# ------------------------------------------------------------------- reading files
def _model_proto_class() -> Any:
    from sentencepiece import sentencepiece_model_pb2

    return sentencepiece_model_pb2.ModelProto


def _require_files(folder: str, names: Sequence[str], what: str) -> None:
    """Raises naming the missing files, what the folder holds and what is expected."""
    if not os.path.isdir(folder):
        raise PretrainedTokenizerError(f"{folder!r} is not a folder; give the Hugging Face "
                                       f"checkpoint folder holding {what}'s {', '.join(names)}.")
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if not missing:
        return
    found = sorted(os.listdir(folder))
    only_json = os.path.isfile(os.path.join(folder, TOKENIZER_JSON))
    hint = (f" It has {TOKENIZER_JSON} only: t2t needs the SentencePiece file(s) "
            f"{', '.join(missing)} (download them with the checkpoint, e.g. "
            f"`huggingface-cli download REPO {' '.join(missing)}`)." if only_json else "")
    raise PretrainedTokenizerError(
        f"{folder} lacks {', '.join(missing)} for {what} (expected {', '.join(names)}; found "
        f"{', '.join(found[:20]) or 'nothing'}).{hint}")


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise PretrainedTokenizerError(f"{path} is not readable JSON ({e}).") from e


def _read_config(folder: str) -> dict[str, Any]:
    """tokenizer_config.json as a dict ({} when the folder has none)."""
    path = os.path.join(folder, TOKENIZER_CONFIG)
    config = _read_json(path) if os.path.isfile(path) else {}
    if not isinstance(config, dict):
        raise PretrainedTokenizerError(f"{path} must hold a JSON object.")
    return config


def _read_spm(path: str) -> Any:
    """The ModelProto of a SentencePiece model file; a clear error when unreadable."""
    import sentencepiece as spm

    with open(path, "rb") as f:
        data = f.read()
    try:
        spm.SentencePieceProcessor(model_proto=data)
        proto = _model_proto_class()()
        proto.ParseFromString(data)
    except Exception as e:  # noqa: BLE001  (protobuf and sentencepiece raise their own types)
        raise PretrainedTokenizerError(
            f"{path} is not a readable SentencePiece model ({type(e).__name__}: {e}).") from e
    model_type = proto.trainer_spec.model_type
    if model_type != 1:  # TrainerSpec.UNIGRAM
        name = {2: "BPE", 3: "WORD", 4: "CHAR"}.get(model_type, str(model_type))
        raise PretrainedTokenizerError(
            f"{path} is a {name} SentencePiece model; t2t imports unigram models only (the "
            f"type of Marian/OPUS-MT and T5 tokenizers).")
    return proto


def _token(config: dict[str, Any], key: str, default: str) -> str:
    """A special token's text from tokenizer_config.json (str or AddedToken dict)."""
    value = config.get(key) or default
    return str(value.get("content", default)) if isinstance(value, dict) else str(value)


# ------------------------------------------------------------------ model building
def _unk_score(proto: Any) -> float:
    """The score SentencePiece's unigram gives an unknown character."""
    scores = [p.score for p in proto.pieces if p.type == NORMAL]
    return (min(scores) if scores else 0.0) - UNK_PENALTY


def _laid_out_model(proto: Any, pieces: Sequence[tuple[str, int, float]]) -> bytes:
    """`proto` (normalizer, trainer spec, model type kept) with `pieces` (piece, type,
    score) as its pieces, t2t's reserved ids and an empty unknown-piece surface."""
    model = _model_proto_class()()
    model.CopyFrom(proto)
    del model.pieces[:]
    for piece, piece_type, score in pieces:
        model.pieces.add(piece=piece, type=piece_type, score=score)
    spec = model.trainer_spec
    spec.pad_id, spec.eos_id, spec.unk_id, spec.bos_id = 0, 1, 2, -1
    spec.pad_piece, spec.eos_piece, spec.unk_piece = pieces[0][0], pieces[1][0], pieces[2][0]
    spec.unk_surface = ""  # decode drops unk, as decode(skip_special_tokens=True) does
    spec.vocab_size = len(pieces)
    data = model.SerializeToString()
    import sentencepiece as spm

    try:
        spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError as e:  # e.g. a piece of the vocabulary twice
        raise PretrainedTokenizerError(f"the t2t model built from this tokenizer does not "
                                       f"load in SentencePiece ({e}).") from e
    return data


def _reserved(pad: str, eos: str, unk: str) -> list[tuple[str, int, float]]:
    return [(pad, CONTROL, 0.0), (eos, CONTROL, 0.0), (unk, UNKNOWN, 0.0)]


# ------------------------------------------------------------------------ Marian
def _marian_vocab(folder: str, config: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """vocab.json checked ({piece: Marian id}) and its pieces in Marian id order."""
    path = os.path.join(folder, "vocab.json")
    vocab = _read_json(path)
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise PretrainedTokenizerError(f"{path} must map pieces to integer ids.")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise PretrainedTokenizerError(
            f"{path}: ids must be 0..{len(vocab) - 1}, each once (Marian's joint vocabulary); "
            f"found {len(set(vocab.values()))} distinct ids from {min(vocab.values(), default=0)} "
            f"to {max(vocab.values(), default=0)}.")
    codes = [p for p in vocab if LANGUAGE_CODE.match(p)]
    if codes:
        raise PretrainedTokenizerError(
            f"{path} has {len(codes)} language-code tokens ({', '.join(codes[:5])}): "
            f"multilingual Marian models take a >>xx<< prefix that MarianTokenizer splits off "
            f"before SentencePiece, which plain SentencePiece models cannot reproduce; t2t "
            f"imports Marian models with one target language (no >>xx<< tokens).")
    specials = [_token(config, k, d) for k, d in
                (("pad_token", "<pad>"), ("eos_token", "</s>"), ("unk_token", "<unk>"))]
    missing = [s for s in specials if s not in vocab]
    if missing:
        raise PretrainedTokenizerError(f"{path} lacks the special token(s) {missing} "
                                       f"(pad, eos, unk {specials} must be vocabulary entries).")
    return vocab, specials


def _check_marian_config(folder: str, config: dict[str, Any], specials: Sequence[str]) -> None:
    """Refuses tokenizer_config.json options plain SentencePiece models cannot reproduce."""
    path = os.path.join(folder, TOKENIZER_CONFIG)
    target_vocab = os.path.join(folder, "target_vocab.json")
    if config.get("separate_vocabs") or os.path.isfile(target_vocab):
        raise PretrainedTokenizerError(
            f"{path if config.get('separate_vocabs') else target_vocab}: separate source/"
            f"target vocabularies (separate_vocabs) give the encoder and "
            f"decoder different id spaces; t2t imports Marian models with one joint vocabulary "
            f"(vocab.json, separate_vocabs false).")
    added = config.get("added_tokens_decoder") or {}
    extra = sorted({str(t.get("content", t)) if isinstance(t, dict) else str(t)
                    for t in added.values()} - set(specials))
    if extra:
        raise PretrainedTokenizerError(
            f"{path} adds tokens {extra[:5]} that MarianTokenizer splits off before "
            f"SentencePiece; t2t supports only the pad, eos and unk tokens {list(specials)}.")


def _marian_side(path: str, proto: Any, t2t_pieces: Sequence[str], vocab: dict[str, int],
                 specials: Sequence[str]) -> bytes:
    """One side's model over the joint vocabulary in t2t order (see read_marian_vocab)."""
    own = {p.piece: p for p in proto.pieces}
    lacking = [p.piece for p in proto.pieces if p.type in SEGMENTING_TYPES and p.piece not in vocab]
    if lacking:
        raise PretrainedTokenizerError(
            f"{path}: {len(lacking)} pieces are not in vocab.json ({', '.join(lacking[:5])}); "
            f"MarianTokenizer maps them to <unk>, which a SentencePiece model cannot do; t2t "
            f"imports Marian tokenizers whose pieces are all vocabulary entries.")
    known_chars = {p.piece for p in proto.pieces if p.type in SEGMENTING_TYPES and len(p.piece) == 1}
    byte_fallback = proto.trainer_spec.byte_fallback
    unk_score = _unk_score(proto)
    pieces = _reserved(*specials)
    for piece in t2t_pieces[3:]:
        mine = own.get(piece)
        if mine is not None and mine.type in SEGMENTING_TYPES:
            pieces.append((piece, mine.type, mine.score))
        elif len(piece) == 1 and piece not in known_chars and not byte_fallback:
            # A character this side cannot segment: SentencePiece makes it an unknown
            # piece whose text MarianTokenizer finds in vocab.json. As a piece with the
            # unknown character's score it takes the same place in the best segmentation.
            pieces.append((piece, NORMAL, unk_score))
        else:
            pieces.append((piece, UNUSED, 0.0))
    return _laid_out_model(proto, pieces)


def read_marian_vocab(folder: str) -> PretrainedVocab:
    """MarianTokenizer's files (source.spm, target.spm, vocab.json; tokenizer_config.json
    when present) as t2t models: t2t id 0 <- Marian's pad, 1 <- eos ("</s>"), 2 <- unk,
    then the other vocab.json entries in Marian id order (`checkpoint_ids`).

    Inputs segment with source.spm, targets with target.spm; joint-vocabulary pieces a
    side's model lacks are UNUSED there, except single characters that side cannot
    segment at all (MarianTokenizer looks their text up in vocab.json). Refused: language
    codes (>>xx<<), separate_vocabs, added tokens, pieces missing from vocab.json,
    non-unigram models."""
    _require_files(folder, MARIAN_FILES, "a MarianTokenizer")
    config = _read_config(folder)
    vocab, specials = _marian_vocab(folder, config)
    _check_marian_config(folder, config, specials)
    t2t_pieces = list(specials) + [p for p in sorted(vocab, key=vocab.__getitem__)
                                   if p not in specials]
    models = []
    for name in MARIAN_FILES[:2]:
        path = os.path.join(folder, name)
        models.append(_marian_side(path, _read_spm(path), t2t_pieces, vocab, specials))
    return PretrainedVocab("marian", models[0], models[1], [vocab[p] for p in t2t_pieces])


# ---------------------------------------------------------------------------- T5
def _added_extra_ids(folder: str, config: dict[str, Any]) -> dict[int, int]:
    """{k: id of <extra_id_k>} recorded in tokenizer.json / tokenizer_config.json."""
    ids: dict[int, int] = {}
    path = os.path.join(folder, TOKENIZER_JSON)
    entries = []
    if os.path.isfile(path):
        entries = [(t.get("content"), t.get("id")) for t in _read_json(path).get("added_tokens", [])]
    entries += [(t.get("content") if isinstance(t, dict) else t, int(i))
                for i, t in (config.get("added_tokens_decoder") or {}).items()]
    for content, token_id in entries:
        match = EXTRA_ID.match(str(content))
        if match and token_id is not None:
            ids[int(match.group(1))] = int(token_id)
    return ids


def _t5_extra_ids(folder: str, config: dict[str, Any], spm_size: int) -> int:
    """The number of sentinels <extra_id_k> (T5Tokenizer's `extra_ids`), checked against
    the ids the folder records (<extra_id_k> = spm_size + extra_ids - 1 - k)."""
    recorded = _added_extra_ids(folder, config)
    if "extra_ids" in config:
        count = int(config["extra_ids"])
    else:
        count = len(recorded) if recorded else T5_DEFAULT_EXTRA_IDS
    wrong = {k: i for k, i in recorded.items() if i != spm_size + count - 1 - k}
    if wrong:
        k, i = sorted(wrong.items())[0]
        raise PretrainedTokenizerError(
            f"{folder}: <extra_id_{k}> has id {i}, T5Tokenizer's layout gives "
            f"{spm_size + count - 1 - k} ({count} extra ids after {spm_size} SentencePiece "
            f"pieces, <extra_id_0> last); t2t imports T5 tokenizers with that layout.")
    return count


def _check_t5_spm(path: str, proto: Any) -> None:
    spec = proto.trainer_spec
    ids = (spec.pad_id, spec.eos_id, spec.unk_id, spec.bos_id)
    types = tuple(p.type for p in proto.pieces[:3])
    if ids != (0, 1, 2, -1) or types != (CONTROL, CONTROL, UNKNOWN):
        raise PretrainedTokenizerError(
            f"{path}: pad/eos/unk/bos ids are {ids} with piece types {types}; T5's layout "
            f"(pad 0, eos 1, unk 2, no bos) is what t2t imports.")


def read_t5_vocab(folder: str, vocab_size: int) -> PretrainedVocab:
    """spiece.model (pad 0, eos 1, unk 2) plus T5's sentinels as one model for inputs and
    targets; `vocab_size` is the checkpoint's embedding rows.

    <extra_id_k> has id pieces + extra_ids - 1 - k (<extra_id_0> last, as T5Tokenizer
    lays them out) and is the USER_DEFINED piece "▁<extra_id_k>": a sentinel written
    between spaces (or at the text's start or end) encodes as T5Tokenizer encodes it; one
    glued to a neighbouring word does not. Rows past the tokenizer's ids (t5 v1.1: 32128
    rows for 32100 ids) get UNUSED filler pieces "<unused_row_i>", never produced, so
    ids and rows line up; `checkpoint_ids` is the identity."""
    _require_files(folder, (T5_FILE,), "a T5Tokenizer")
    config = _read_config(folder)
    path = os.path.join(folder, T5_FILE)
    proto = _read_spm(path)
    _check_t5_spm(path, proto)
    spm_size = len(proto.pieces)
    count = _t5_extra_ids(folder, config, spm_size)
    size = spm_size + count
    if vocab_size < size:
        raise PretrainedTokenizerError(
            f"vocab_size {vocab_size} is smaller than the tokenizer's {size} ids ({spm_size} "
            f"pieces of {path} + {count} extra ids): give the checkpoint's embedding rows "
            f"(config.json vocab_size).")
    pieces = [(p.piece, p.type, p.score) for p in proto.pieces]
    pieces += [(f"\u2581<extra_id_{k}>", USER_DEFINED, 0.0) for k in range(count - 1, -1, -1)]
    pieces += [(FILLER_PIECE.format(i), UNUSED, 0.0) for i in range(size, vocab_size)]
    model = _laid_out_model(proto, pieces)
    return PretrainedVocab("t5", model, model, list(range(vocab_size)))


# ---------------------------------------------------------------------------- write
def write_vocab(vocab: PretrainedVocab, folder: str, source: str) -> str:
    """Writes `vocab` as folder/vocab.pretrained.json + models (the pretrained-vocabulary
    format); `source` is the Hugging Face folder it came from. Returns the record path."""
    from t2t.data.encoders.pretrained_vocab import write_pretrained_vocab

    return write_pretrained_vocab(folder, vocab.inputs_model, vocab.targets_model,
                                  kind=vocab.kind, source=source)
