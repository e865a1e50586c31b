"""`SentencePieceEncoder`: a SentencePiece subword model with T2T's reserved ids
(0 `<pad>`, 1 `<EOS>`, 2 `<UNK>`), loaded from a `.model` file or trained on texts.

Imports no TensorFlow; `sentencepiece` is imported only when an encoder is made.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from t2t.data.encoders.encoder_base import UNK, TextEncoder, as_ids
from t2t.data.encoders.vocab_files import PathLike, atomic_write, missing_file_error, write_lines
from t2t.features import EOS, EOS_ID, NUM_RESERVED_TOKENS, PAD, PAD_ID

# The logger of t2t.data.encoders.text_encoder, where this encoder lived before: logging
# configured for that name keeps covering SentencePiece training.
logger = logging.getLogger("t2t.data.encoders.text_encoder")

SENTENCEPIECE_UNK_ID = 2
SPACE_SYMBOL = "\u2581"  # "▁": how SentencePiece pieces write a space


def _trainer_options(
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    seed_sentencepiece_size: int,
    max_sentence_length: int,
    num_threads: int,
    user_defined_symbols: Sequence[str],
    extra_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """SentencePieceTrainer options: T2T's reserved ids and pieces, then the caller's."""
    options: dict[str, Any] = {
        "model_type": model_type,
        "vocab_size": vocab_size,
        "character_coverage": character_coverage,
        "seed_sentencepiece_size": seed_sentencepiece_size,
        "max_sentence_length": max_sentence_length,
        "num_threads": num_threads,
        "pad_id": PAD_ID,
        "eos_id": EOS_ID,
        "unk_id": SENTENCEPIECE_UNK_ID,
        "bos_id": -1,
        "pad_piece": PAD,
        "eos_piece": EOS,
        "unk_piece": UNK,
        "hard_vocab_limit": False,
        "minloglevel": 1,
    }
    if user_defined_symbols:
        options["user_defined_symbols"] = list(user_defined_symbols)
    options.update(extra_options or {})
    return options


class _CountingTexts:
    """Iterates over at most `limit` texts and counts how many were pulled."""

    def __init__(self, texts: Iterable[str], limit: int):
        self._texts = texts
        self._limit = limit
        self.pulled = 0

    def __iter__(self) -> Iterator[str]:
        for text in itertools.islice(self._texts, self._limit):
            self.pulled += 1
            yield text


def _train_proto(texts: _CountingTexts, options: Mapping[str, Any]) -> bytes:
    """The serialized model SentencePiece trains on `texts` with `options`."""
    import sentencepiece as spm

    writer = io.BytesIO()
    # model_writer keeps the output path out of the model proto (it would otherwise
    # be recorded in trainer_spec.model_prefix and make the bytes path-dependent).
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=writer, **options
        )
    except RuntimeError as e:
        if texts.pulled == 0:
            raise ValueError("no texts to train SentencePiece on") from e
        raise
    return writer.getvalue()


class SentencePieceEncoder(TextEncoder):
    """A SentencePiece model; ids 0 PAD, 1 EOS, 2 UNK as trained by `train`."""

    type_name = "sentencepiece"

    def __init__(
        self,
        model_file: PathLike | None = None,
        *,
        model_proto: bytes | None = None,
        hint: str | None = None,
    ):
        """Loads `model_file` (a `.model` file) or a serialized `model_proto`."""
        super().__init__(NUM_RESERVED_TOKENS)
        if (model_file is None) == (model_proto is None):
            raise ValueError("give exactly one of model_file and model_proto")
        if model_file is not None:
            if not os.path.isfile(model_file):
                raise missing_file_error(model_file, "SentencePiece model", hint)
            with open(model_file, "rb") as f:
                model_proto = f.read()
        self.model_file = None if model_file is None else os.fspath(model_file)
        self.model_proto: bytes = model_proto  # type: ignore[assignment]
        import sentencepiece as spm

        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def load(cls, path: PathLike, *, hint: str | None = None) -> SentencePieceEncoder:
        """Loads a `.model` file."""
        return cls(path, hint=hint)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        model_prefix: PathLike,
        vocab_size: int,
        *,
        model_type: str = "unigram",
        max_samples: int = 1_000_000,
        character_coverage: float = 1.0,
        seed_sentencepiece_size: int = 1_000_000,
        max_sentence_length: int = 4192,
        num_threads: int = 1,
        user_defined_symbols: Sequence[str] = (),
        extra_options: Mapping[str, Any] | None = None,
    ) -> SentencePieceEncoder:
        """Trains on at most `max_samples` texts and writes `{model_prefix}.model/.vocab`.

        `vocab_size` is an upper bound: a small corpus gives fewer pieces (logged).
        Same corpus and options (including `num_threads`) give identical model bytes.
        Sentences longer than `max_sentence_length` bytes are skipped by SentencePiece.
        """
        prefix = os.fspath(model_prefix)
        sentences = _CountingTexts(texts, max_samples)
        options = _trainer_options(
            vocab_size,
            model_type,
            character_coverage,
            seed_sentencepiece_size,
            max_sentence_length,
            num_threads,
            user_defined_symbols,
            extra_options,
        )
        encoder = cls(model_proto=_train_proto(sentences, options))
        size = encoder.vocab_size
        if size != vocab_size:
            logger.warning(
                "SentencePiece vocabulary has %d pieces (asked for %d)",
                size,
                vocab_size,
            )
        logger.info(
            "Trained SentencePiece (%d pieces) on %d texts -> %s",
            size,
            sentences.pulled,
            prefix,
        )
        encoder.save(prefix + ".model", vocab_file=prefix + ".vocab")
        return encoder

    @property
    def vocab_size(self) -> int:
        return int(self._sp.get_piece_size())

    def encode(self, s: str) -> list[int]:
        return list(self._sp.encode(s, out_type=int))

    def decode(self, ids: Sequence[int], strip_extraneous: bool = False) -> str:
        seq = self._prepare(ids, strip_extraneous)
        self._check_range(seq)
        return str(self._sp.decode(seq))

    def decode_list(self, ids: Sequence[int]) -> list[str]:
        seq = as_ids(ids)
        self._check_range(seq)
        return [str(self._sp.id_to_piece(i)) for i in seq]

    def token_byte_lengths(self) -> list[int]:
        """UTF-8 bytes of each piece as it appears in the text ("▁" is a space: one
        byte; byte-fallback pieces one; control, unknown and unused pieces 0).

        EOS counts 1 (the line end) for a model without a dummy prefix. SentencePiece's
        default model adds one: every encoded text starts with a "▁" that the text
        lacks, and that "▁" counts the line end instead (EOS 0), so the ids of a text
        and its EOS add up to len(text.encode()) + 1, as the bytes of "text\n" do."""
        sp = self._sp
        lengths = []
        for i in range(self.vocab_size):
            if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
                lengths.append(0)
            elif sp.is_byte(i):
                lengths.append(1)
            else:
                piece = str(sp.id_to_piece(i)).replace(SPACE_SYMBOL, " ")
                lengths.append(len(piece.encode("utf-8")))
        if EOS_ID < len(lengths):
            lengths[EOS_ID] = 0 if self.adds_dummy_prefix() else 1
        return lengths

    def adds_dummy_prefix(self) -> bool:
        """Whether encoding puts a "▁" (a space) before every text (the model's
        normalizer_spec.add_dummy_prefix; SentencePiece's default)."""
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(self.model_proto)
        return bool(proto.normalizer_spec.add_dummy_prefix)

    def _check_range(self, ids: list[int]) -> None:
        n = self.vocab_size
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"ids {bad[:5]} are out of range [0, {n})")

    def save(self, path: PathLike, *, vocab_file: PathLike | None = None) -> None:
        """Writes the model (and optionally a `piece<TAB>score` vocab file) atomically."""
        if vocab_file is not None:
            lines = (
                f"{self._sp.id_to_piece(i)}\t{self._sp.get_score(i):g}"
                for i in range(self.vocab_size)
            )
            write_lines(vocab_file, lines)
        atomic_write(path, self.model_proto)
        self.model_file = os.fspath(path)

    def describe(self) -> dict[str, Any]:
        """Names the model file by base name; `build_encoder` finds it in data_dir."""
        if self.model_file is None:
            raise ValueError(
                "save() the SentencePiece model to a file before describe()"
            )
        return {
            "type": self.type_name,
            "model_file": os.path.basename(self.model_file),
            "vocab_size": self.vocab_size,
        }
