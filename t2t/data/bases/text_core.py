"""The core text problems: subclasses that turn a generator of strings into a Problem.

Import them as Tensor2Tensor did, from `text_problems` (with T2T's other text bases).

- Text2TextProblem: `generate_samples` yields {"inputs": str, "targets": str}.
- Text2SelfProblem: language modelling, yields {"targets": str}.
- Text2ClassProblem: yields {"inputs": str, "label": int}.

The vocabulary (SentencePiece "subword", "character", "byte" or a fixed "token" list)
is built once from a bounded sample of the training text, saved in data_dir and
reused when present. Every encoded sequence ends with EOS.

An imported model's vocabulary replaces it, whatever vocab_type says, when
`use_vocab_from` names an imported run (t2t-datagen --use_vocab_from=RUN) or data_dir
already holds the problem's copy (`vocab.NAME.pretrained.json`, with its "inputs" and
"targets" SentencePiece models; t2t.data.encoders.pretrained_vocab).
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Iterator
from typing import Any

from absl import logging

from t2t.data import problem
from t2t.data.encoders import pretrained_vocab, text_encoder
from t2t.data.generation import generator_utils
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

VOCAB_SUBWORD = "subword"  # SentencePiece
VOCAB_CHARACTER = "character"  # the characters of the training text
VOCAB_BYTE = "byte"  # UTF-8 bytes (ids = byte + 2)
VOCAB_TOKEN = "token"  # a fixed list of whitespace-separated tokens (vocab_tokens())
# Tensor2Tensor's vocabularies: its SubwordTextEncoder (vocab.NAME.SIZE.subwords) and a
# token file the problem writes to data_dir (vocab.NAME.tokens).
VOCAB_T2T_SUBWORDS = "subwords"
VOCAB_T2T_TOKENS = "tokens"
VOCAB_TYPES = (VOCAB_SUBWORD, VOCAB_CHARACTER, VOCAB_BYTE, VOCAB_TOKEN, VOCAB_T2T_SUBWORDS,
               VOCAB_T2T_TOKENS)


class VocabType:
    """Tensor2Tensor's vocabulary types, with its meanings: SUBWORD is its
    SubwordTextEncoder, CHARACTER its byte-level encoder (t2t's "byte"), TOKEN a
    token file in data_dir. t2t's own "subword" (SentencePiece) and "character" (the
    text's characters) are other strings, so the two never mix up."""

    SUBWORD = VOCAB_T2T_SUBWORDS
    CHARACTER = VOCAB_BYTE
    TOKEN = VOCAB_T2T_TOKENS


class TextProblem(problem.Problem):
    """Shared vocabulary handling of the text problems."""

    vocab_type: str = VOCAB_SUBWORD
    approx_vocab_size: int = 2**15  # SentencePiece pieces (an upper bound on tiny data)
    max_samples_for_vocab: int = 100_000  # texts read to build the vocabulary
    sentencepiece_model_type: str = "unigram"
    # An imported run's folder (it holds vocab.pretrained.json, t2t-import's record): the
    # texts are encoded with that model's vocabulary, copied into data_dir, whatever
    # vocab_type says (t2t-datagen --use_vocab_from=RUN sets it). None: data_dir's copy
    # if it holds one, else vocab_type's vocabulary.
    use_vocab_from: str | None = None

    def generate_samples(self, data_dir: str, tmp_dir: str, dataset_split: str) -> Iterator[dict[str, Any]]:
        """Yields raw samples (strings, and a label for classification) of `dataset_split`
        ("train", "dev", "test"; problem.DatasetSplit names them). Tensor2Tensor's
        signature; an override may add a keyword `mirror` to get --data_mirror (else it
        is in `self.data_mirror`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_samples.")

    def generate_encoded_samples(self, data_dir: str, tmp_dir: str, dataset_split: str) -> Iterator[dict[str, Any]]:
        """Yields the examples of `dataset_split` encoded (token ids ending in EOS)."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_encoded_samples.")

    def generate_examples(self, data_dir, tmp_dir, split, *, mirror=None):
        with self.using_mirror(mirror):
            yield from self.generate_encoded_samples(data_dir, tmp_dir, split)

    def _samples(self, data_dir: str, tmp_dir: str, split: str) -> Iterator[dict[str, Any]]:
        """generate_samples, given `mirror` only if it declares it."""
        return problem.call_with_mirror(self.generate_samples, data_dir, tmp_dir, split,
                                        mirror=self.data_mirror)

    def _vocab(self, data_dir: str, tmp_dir: str) -> text_encoder.TextEncoder:
        """get_or_create_vocab, given `mirror` only if it declares it (T2T's override
        takes (data_dir, tmp_dir, force_get=False)); an imported vocabulary first, past
        overrides that know nothing of it."""
        if self.uses_pretrained_vocab(data_dir):
            return self._pretrained_text_encoder(self.pretrained_encoders(data_dir, create=True))
        return problem.call_with_mirror(self.get_or_create_vocab, data_dir, tmp_dir,
                                        mirror=self.data_mirror)

    # ------------------------------------------------- an imported model's vocabulary
    @property
    def pretrained_vocab_prefix(self) -> str:
        """The name of data_dir's copy of an imported vocabulary, without ".json"."""
        return f"vocab.{self.dataset_filename()}.pretrained"

    def uses_pretrained_vocab(self, data_dir: str | None) -> bool:
        """Whether the vocabulary is an imported model's: `use_vocab_from` is set, or
        data_dir holds this problem's copy."""
        return bool(self.use_vocab_from) or (data_dir is not None and (
            pretrained_vocab.has_pretrained_vocab(data_dir, self.pretrained_vocab_prefix)))

    def pretrained_encoders(self, data_dir: str | None, *,
                            create: bool = False) -> dict[str, text_encoder.SentencePieceEncoder]:
        """{"inputs", "targets"}: the imported vocabulary's encoders, read from data_dir.
        `create`: first copy `use_vocab_from`'s vocabulary there, refusing a data_dir
        whose data another vocabulary encoded."""
        if data_dir is None:
            raise problem.DataMissingError(f"{self.name} reads its imported vocabulary from "
                                           f"data_dir; pass data_dir.")
        prefix = self.pretrained_vocab_prefix
        if create and self.use_vocab_from:
            self.check_pretrained_vocab_target(data_dir)
            pretrained_vocab.copy_pretrained_vocab(os.path.expanduser(self.use_vocab_from),
                                                   data_dir, prefix)
        run = self.use_vocab_from or "RUN"
        hint = (f"run `t2t-datagen --problem={self.name} --use_vocab_from={run} "
                f"--data_dir={data_dir}` first")
        try:
            return pretrained_vocab.load_pretrained_encoders(data_dir, prefix, hint=hint)
        except FileNotFoundError as e:
            raise problem.DataMissingError(str(e)) from e

    def check_pretrained_vocab_target(self, data_dir: str) -> None:
        """Refuses (PretrainedVocabError, nothing changed) to put `use_vocab_from`'s
        vocabulary into a data_dir whose shards of this problem another vocabulary
        encoded: a different imported one, or vocab_type's (files listed)."""
        source = os.path.expanduser(self.use_vocab_from or "")
        prefix = self.pretrained_vocab_prefix
        fix = "give a new --data_dir for the data encoded with the imported vocabulary"
        if pretrained_vocab.has_pretrained_vocab(data_dir, prefix):
            if not pretrained_vocab.same_pretrained_vocab(source, pretrained_vocab.RECORD_PREFIX,
                                                          data_dir, prefix):
                record = pretrained_vocab.record_path(data_dir, prefix)
                raise pretrained_vocab.PretrainedVocabError(
                    f"{self.name}: {record} is another imported vocabulary than "
                    f"--use_vocab_from={self.use_vocab_from}'s and the data in {data_dir} "
                    f"is encoded with it; {fix} (nothing was changed).")
            return
        name = self.dataset_filename()

        def names(pattern: str) -> list[str]:
            return sorted(os.path.basename(p) for p in glob.glob(os.path.join(data_dir, pattern)))

        shards = [n for n in names(f"{name}-*") if generator_utils.is_shard_name(n)]
        if not shards:
            return
        vocabs = names(f"vocab.{name}.*")
        encoded_by = ", ".join(vocabs) or f"its {self.vocab_type} vocabulary"
        more = f" and {len(shards) - 3} more" if len(shards) > 3 else ""
        raise pretrained_vocab.PretrainedVocabError(
            f"{self.name}: {data_dir} already holds its data ({', '.join(shards[:3])}{more}) "
            f"encoded with another vocabulary ({encoded_by}); the imported vocabulary of "
            f"--use_vocab_from={self.use_vocab_from} gives its ids other meanings: {fix} "
            f"(nothing was changed).")

    def _pretrained_text_encoder(self, encoders: dict[str, Any]) -> text_encoder.TextEncoder:
        """The one encoder of a single-vocabulary caller (get_or_create_vocab): "inputs"
        for problems with inputs text, else "targets" (language models, speech)."""
        return encoders["inputs" if "inputs" in self.text_fields() else "targets"]

    def generation_vocabs(self, data_dir: str, tmp_dir: str) -> dict[str, text_encoder.TextEncoder]:
        """{"inputs", "targets"} to encode samples with while generating: an imported
        model's two encoders (copied into data_dir first), or the problem's one
        vocabulary (get_or_create_vocab) for both."""
        if self.uses_pretrained_vocab(data_dir):
            return self.pretrained_encoders(data_dir, create=True)
        encoder = self._vocab(data_dir, tmp_dir)
        return {"inputs": encoder, "targets": encoder}

    def _loaded_vocabs(self, data_dir: str | None) -> dict[str, text_encoder.TextEncoder]:
        """{"inputs", "targets"} from data_dir: an imported model's encoders, or the
        problem's one vocabulary for both."""
        if self.uses_pretrained_vocab(data_dir):
            return self.pretrained_encoders(data_dir)
        encoder = self._load_vocab(data_dir)
        return {"inputs": encoder, "targets": encoder}

    def vocab_tokens(self) -> list[str]:
        """The fixed token list of a VOCAB_TOKEN problem."""
        raise NotImplementedError(f"{type(self).__name__} must list its vocab_tokens().")

    def text_fields(self) -> tuple[str, ...]:
        """The sample keys holding text (the vocabulary is built from these)."""
        return ("inputs", "targets")

    # Tensor2Tensor's knobs of its vocabularies (VocabType.SUBWORD and TOKEN).
    max_subtoken_length: int | None = None
    # Extra reserved tokens, after <pad> and <EOS> (SentencePiece: user-defined symbols,
    # after its <unk>).
    additional_reserved_tokens: tuple[str, ...] = ()
    oov_token: str | None = None
    # Tensor2Tensor's prefixes, prepended to every text2text input / target text.
    inputs_prefix: str = ""
    targets_prefix: str = ""

    @property
    def vocab_filename(self) -> str:
        """The vocabulary's file name in data_dir (Tensor2Tensor's names for its types)."""
        if self.vocab_type == VOCAB_SUBWORD:
            return f"vocab.{self.dataset_filename()}.{self.approx_vocab_size}.model"
        if self.vocab_type == VOCAB_T2T_SUBWORDS:
            return f"vocab.{self.dataset_filename()}.{self.approx_vocab_size}.subwords"
        return f"vocab.{self.dataset_filename()}.{self.vocab_type}"

    def _t2t_subwords_path(self, data_dir: str | None) -> str | None:
        """A Tensor2Tensor-written `vocab.NAME.SIZE.subwords` in data_dir that stands in
        for a missing SentencePiece model (a data dir T2T wrote), else None."""
        if data_dir is None or self.vocab_type != VOCAB_SUBWORD:
            return None
        if os.path.exists(os.path.join(data_dir, self.vocab_filename)):
            return None
        path = os.path.join(
            data_dir, f"vocab.{self.dataset_filename()}.{self.approx_vocab_size}.subwords")
        return path if os.path.exists(path) else None

    def _datagen_hint(self, data_dir: str | None) -> str:
        return f"run `t2t-datagen --problem={self.name} --data_dir={data_dir}` first"

    def generate_text_for_vocab(self, data_dir: str, tmp_dir: str) -> Iterator[str]:
        """The text the vocabulary is built from (Tensor2Tensor's name and signature)."""
        return self.text_for_vocab(data_dir, tmp_dir, self.data_mirror)

    def text_for_vocab(self, data_dir: str, tmp_dir: str, mirror: str | None) -> Iterator[str]:
        """A bounded stream of training text to build the vocabulary from."""
        with self.using_mirror(mirror):
            samples = self._samples(data_dir, tmp_dir, problem.TRAIN_SPLIT)
            for sample in itertools.islice(samples, self.max_samples_for_vocab):  # None: all
                for field in self.text_fields():
                    if sample.get(field):
                        yield sample[field]

    def get_or_create_vocab(self, data_dir: str, tmp_dir: str, force_get: bool = False, mirror: str | None = None) -> text_encoder.TextEncoder:
        """Loads the vocabulary from data_dir, building and saving it first if absent
        (`force_get`: only load, as in Tensor2Tensor). An imported vocabulary (see
        `use_vocab_from`) is copied into data_dir instead; its "inputs" encoder is returned
        (its "targets" one for problems without inputs text)."""
        if self.uses_pretrained_vocab(data_dir):
            encoders = self.pretrained_encoders(data_dir, create=not force_get)
            return self._pretrained_text_encoder(encoders)
        if self.vocab_type not in VOCAB_TYPES:
            raise ValueError(f"{self.name}: unknown vocab_type {self.vocab_type!r}; use one of "
                             f"{VOCAB_TYPES} (or text_problems.VocabType.SUBWORD/CHARACTER/TOKEN).")
        path = os.path.join(data_dir, self.vocab_filename)
        if self.vocab_type in (VOCAB_BYTE, VOCAB_TOKEN, VOCAB_T2T_TOKENS) or force_get:
            return self._load_vocab(data_dir)
        if os.path.exists(path) or self._t2t_subwords_path(data_dir):
            return self._load_vocab(data_dir)
        logging.info("Building the %s vocabulary of %s at %s", self.vocab_type, self.name, path)
        with self.using_mirror(mirror):  # the texts are read inside (a generator)
            texts = self.generate_text_for_vocab(data_dir, tmp_dir)
            if self.vocab_type == VOCAB_CHARACTER:
                encoder = text_encoder.CharacterTextEncoder.build_from_generator(texts)
                encoder.save(path)
                return encoder
            if self.vocab_type == VOCAB_T2T_SUBWORDS:
                encoder = text_encoder.SubwordTextEncoder.build_from_generator(
                    texts, self.approx_vocab_size, max_subtoken_length=self.max_subtoken_length,
                    reserved_tokens=[*text_encoder.RESERVED_TOKENS,
                                     *self.additional_reserved_tokens])
                encoder.store_to_file(path)
                return encoder
            return text_encoder.SentencePieceEncoder.train(
                texts,
                path[: -len(".model")],
                self.approx_vocab_size,
                model_type=self.sentencepiece_model_type,
                max_samples=(self.max_samples_for_vocab or 100_000) * len(self.text_fields()),
                user_defined_symbols=list(self.additional_reserved_tokens),
            )

    def _load_vocab(self, data_dir: str | None) -> text_encoder.TextEncoder:
        if self.uses_pretrained_vocab(data_dir):
            return self._pretrained_text_encoder(self.pretrained_encoders(data_dir))
        if self.vocab_type == VOCAB_BYTE:
            return text_encoder.ByteTextEncoder()
        if self.vocab_type == VOCAB_TOKEN:
            return text_encoder.TokenTextEncoder(self.vocab_tokens())
        if data_dir is None:
            raise problem.DataMissingError(
                f"{self.name} needs its {self.vocab_type} vocabulary from data_dir; pass data_dir."
            )
        path = os.path.join(data_dir, self.vocab_filename)
        hint = self._datagen_hint(data_dir)
        if self.vocab_type == VOCAB_CHARACTER:
            return text_encoder.CharacterTextEncoder.load(path, hint=hint)
        if self.vocab_type == VOCAB_T2T_TOKENS:
            return text_encoder.TokenTextEncoder(path, replace_oov=self.oov_token, hint=(
                f"a VocabType.TOKEN problem reads its token list from {self.vocab_filename} "
                f"in data_dir (one token per line, {text_encoder.RESERVED_TOKENS} first): "
                f"write it there, or {hint}"))
        t2t_subwords = self._t2t_subwords_path(data_dir)
        if self.vocab_type == VOCAB_T2T_SUBWORDS or t2t_subwords:
            path = t2t_subwords or path
            if not os.path.exists(path):
                raise problem.DataMissingError(
                    f"{self.name}: no subword vocabulary {path!r}; {hint}.")
            return text_encoder.SubwordTextEncoder(path)
        return text_encoder.SentencePieceEncoder.load(path, hint=hint)

    def prepare(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None) -> None:
        with self.using_mirror(mirror):
            if self.vocab_type == VOCAB_T2T_TOKENS:
                # T2T called generate_samples before loading a token vocabulary: a
                # generate_samples that is a plain function may write the file first.
                self._samples(data_dir, tmp_dir, problem.TRAIN_SPLIT)
            self._vocab(data_dir, tmp_dir)

    def _encode_text(self, encoder: text_encoder.TextEncoder, text: str) -> list[int]:
        return encoder.encode(text) + [text_encoder.EOS_ID]


def set_use_vocab_from(text_problem: problem.Problem, folder: str) -> None:
    """Sets `text_problem.use_vocab_from` to the imported run `folder` (made absolute),
    after reading its vocabulary (t2t-datagen and t2t-trainer --use_vocab_from).
    ValueError for a problem that is not a TextProblem; FileNotFoundError or
    PretrainedVocabError for a folder without a readable imported vocabulary."""
    if not isinstance(text_problem, TextProblem):
        raise ValueError(
            f"--use_vocab_from={folder}: {text_problem.name} "
            f"({type(text_problem).__name__}) is not a text problem; an imported vocabulary "
            f"encodes the texts of Text2TextProblem, Text2SelfProblem and Text2ClassProblem "
            f"problems.")
    folder = os.path.abspath(os.path.expanduser(folder))
    pretrained_vocab.load_pretrained_encoders(folder, hint=pretrained_vocab.IMPORTED_RUN_HINT)
    text_problem.use_vocab_from = folder


class Text2TextProblem(TextProblem):
    """Sequence to sequence text; inputs and targets share one vocabulary (an imported
    one has a SentencePiece model for each, over one id space)."""

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        samples = self._samples(data_dir, tmp_dir, dataset_split)  # T2T's order (see prepare)
        encoders = self.generation_vocabs(data_dir, tmp_dir)
        for sample in samples:
            yield {
                "inputs": self._encode_text(encoders["inputs"],
                                            self.inputs_prefix + sample["inputs"]),
                "targets": self._encode_text(encoders["targets"],
                                             self.targets_prefix + sample["targets"]),
            }

    def build_encoders(self, data_dir):
        return self._loaded_vocabs(data_dir)

    def problem_hparams(self, data_dir):
        encoders = self.feature_encoders(data_dir)
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.SYMBOL, "targets": problem.Modality.SYMBOL},
            vocab_size={f: encoders[f].vocab_size for f in ("inputs", "targets")},
        )


class Text2SelfProblem(TextProblem):
    """Language modelling: the model predicts `targets` from its own prefix."""

    sequence_features = ("targets",)

    def text_fields(self):
        return ("targets",)

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        encoder = self._vocab(data_dir, tmp_dir)
        for sample in self._samples(data_dir, tmp_dir, dataset_split):
            yield {"targets": self._encode_text(encoder, sample["targets"])}

    def build_encoders(self, data_dir):
        return {"targets": self._loaded_vocabs(data_dir)["targets"]}

    def example_reading_spec(self):
        return {"targets": tf.io.RaggedFeature(tf.int64)}, None  # T2T's (fields, decoders)

    def eval_metrics(self):
        # perplexity = exp(-neg_log_perplexity); bits_per_byte from the encoder's
        # token_byte_lengths() (see t2t.trainer.metrics).
        return ["accuracy", "neg_log_perplexity", "perplexity", "bits_per_byte"]

    def problem_hparams(self, data_dir):
        size = self.feature_encoders(data_dir)["targets"].vocab_size
        return problem.ProblemHParams(
            modality={"targets": problem.Modality.SYMBOL},
            vocab_size={"targets": size},
        )


class Text2ClassProblem(TextProblem):
    """Text classification: `generate_samples` yields {"inputs": str, "label": int}."""

    sequence_features = ("inputs",)

    def class_labels(self, data_dir: str | None) -> list[str]:
        """Human-readable class names, index = label id. Without an override, a class
        that defines `num_classes` (Tensor2Tensor's way) gets "ID_0", "ID_1", ..."""
        if type(self).num_classes is not Text2ClassProblem.num_classes:
            return [f"ID_{i}" for i in range(self.num_classes)]
        raise NotImplementedError(f"{type(self).__name__} must define class_labels() "
                                  f"(or num_classes).")

    @property
    def num_classes(self) -> int:
        return len(self.class_labels(None))

    def text_fields(self):
        return ("inputs",)

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        encoder = self._vocab(data_dir, tmp_dir)
        num_classes = self.num_classes
        for sample in self._samples(data_dir, tmp_dir, dataset_split):
            label = int(sample["label"])
            if not 0 <= label < num_classes:
                raise ValueError(f"{self.name}: label {label} is outside [0, {num_classes}).")
            yield {"inputs": self._encode_text(encoder, sample["inputs"]), "targets": [label]}

    def build_encoders(self, data_dir):
        return {
            "inputs": self._loaded_vocabs(data_dir)["inputs"],
            "targets": text_encoder.ClassLabelEncoder(self.class_labels(data_dir)),
        }

    def eval_metrics(self):
        metrics = ["accuracy", "neg_log_perplexity"]
        return metrics + (["accuracy_top5"] if self.num_classes > 5 else [])

    def problem_hparams(self, data_dir):
        return problem.ProblemHParams(
            modality={"inputs": problem.Modality.SYMBOL, "targets": problem.Modality.CLASS_LABEL},
            vocab_size={
                "inputs": self.feature_encoders(data_dir)["inputs"].vocab_size,
                "targets": self.num_classes,
            },
        )
