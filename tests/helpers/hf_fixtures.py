"""Tiny Hugging Face tokenizer folders trained on real text (gettext catalogs), for tests.

    pairs = gettext_pairs("de")                                   # [(English, German)]
    write_marian_tokenizer(folder, pairs)   # source.spm target.spm vocab.json tokenizer_config.json
    write_t5_tokenizer(folder, texts)       # spiece.model tokenizer_config.json tokenizer.json

The SentencePiece models train in well under a second. The Marian folder is laid out as
OPUS-MT's: separately trained source and target unigram models (SentencePiece's default
ids: <unk> 0, <s> 1, </s> 2) and one joint vocab.json ("</s>" 0, "<unk>" 1, the pieces of
both models, "<pad>" last); tokenizer_config.json is what MarianTokenizer.save_pretrained
writes. The T5 folder has T5's ids (pad 0, eos 1, unk 2) and `extra_ids` sentinels;
tokenizer_config.json and tokenizer.json are what T5Tokenizer.save_pretrained writes.
Writing the tokenizer files needs transformers (tests importorskip it).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Sequence

from t2t.problems.translation.translate_gettext import read_catalog

LOCALE_DIR = "/usr/share/locale"
TRAIN_CATALOGS = ("apt.mo", "dpkg.mo", "coreutils.mo", "grep.mo")
UNSEEN_CATALOGS = ("gtk30.mo", "glib20.mo", "git.mo", "gnupg2.mo")


def gettext_pairs(language: str, catalogs: Sequence[str] = TRAIN_CATALOGS,
                  limit: int = 0) -> list[tuple[str, str]]:
    """(English, translation) pairs of the system's catalogs of `language` (both sides
    non-empty, one line each), at most `limit` of them when limit > 0."""
    pairs = []
    for name in catalogs:
        path = os.path.join(LOCALE_DIR, language, "LC_MESSAGES", name)
        if os.path.isfile(path):
            pairs += [(s, t) for s, t in read_catalog(path)
                      if s.strip() and t.strip() and "\n" not in s + t]
    if not pairs:
        raise FileNotFoundError(f"no gettext catalogs {list(catalogs)} for {language!r} under "
                                f"{LOCALE_DIR}")
    return pairs[:limit] if limit > 0 else pairs


def train_sentencepiece(texts: Iterable[str], vocab_size: int, **options) -> bytes:
    """A unigram SentencePiece model trained on `texts` (deterministic, one thread)."""
    import sentencepiece as spm

    writer = io.BytesIO()
    settings = {"vocab_size": vocab_size, "hard_vocab_limit": False, "minloglevel": 2,
                "num_threads": 1, "character_coverage": 0.9995, **options}
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=writer,
                                   **settings)
    return writer.getvalue()


def _normal_pieces(model: bytes) -> list[str]:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    return [p.piece for p in proto.pieces if p.type == proto.SentencePiece.NORMAL]


def write_marian_tokenizer(folder: str, pairs: Sequence[tuple[str, str]],
                           source_vocab_size: int = 400, target_vocab_size: int = 500,
                           source_lang: str = "en", target_lang: str = "de") -> str:
    """A MarianTokenizer folder in `folder`: source.spm trained on the pairs' first side,
    target.spm on the second, the joint vocab.json, tokenizer_config.json. Returns folder."""
    from transformers import MarianTokenizer

    os.makedirs(folder, exist_ok=True)
    source = train_sentencepiece([s for s, _ in pairs], source_vocab_size)
    target = train_sentencepiece([t for _, t in pairs], target_vocab_size)
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in _normal_pieces(source) + _normal_pieces(target):
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    paths = {}
    for name, data in (("source.spm", source), ("target.spm", target)):
        paths[name] = os.path.join(folder, name)
        with open(paths[name], "wb") as f:
            f.write(data)
    paths["vocab.json"] = os.path.join(folder, "vocab.json")
    with open(paths["vocab.json"], "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
    tokenizer = MarianTokenizer(paths["source.spm"], paths["target.spm"], paths["vocab.json"],
                                source_lang=source_lang, target_lang=target_lang)
    tokenizer.save_pretrained(folder)
    return folder


def write_t5_tokenizer(folder: str, texts: Sequence[str], vocab_size: int = 600,
                       extra_ids: int = 10) -> str:
    """A T5 tokenizer folder in `folder`: spiece.model trained on `texts` with T5's ids,
    tokenizer_config.json and tokenizer.json from T5Tokenizer. Returns folder."""
    from transformers import T5Tokenizer

    os.makedirs(folder, exist_ok=True)
    model = train_sentencepiece(texts, vocab_size, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(model)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"extra_ids": extra_ids, "model_max_length": 512,
                   "tokenizer_class": "T5Tokenizer"}, f, indent=2)
    T5Tokenizer.from_pretrained(folder).save_pretrained(folder)
    return folder
