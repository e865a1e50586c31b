"""Tensor2Tensor's other text problem bases and its text-file iterators, on t2t's classes.

`text_problems` gathers these with text_core's (T2T had them all in its text_problems):

- Text2textTmpdir: inputs/targets from inputs.train.txt, targets.train.txt,
  inputs.eval.txt and targets.eval.txt in tmp_dir, one record per line.
- Text2TextRemotedir: the same four files in `SRC_REMOTE_DIR` (gs://..., file://... or a
  local directory; read with tf.io.gfile).
- Text2textTmpdirTokens: Text2textTmpdir with a token vocabulary (VocabType.TOKEN,
  `oov_token` "<UNK>") written to data_dir as vocab.NAME.tokens.
- TextConcat2ClassProblem: classification of several texts (e.g. a premise and a
  hypothesis), concatenated with a separator token.
- QuestionAndContext2TextProblem: inputs, targets and a third text feature "context".
- ChoppedTextProblem: language modelling over long text files, chopped into examples of
  exactly `sequence_length` tokens.

Each keeps Tensor2Tensor's method names and signatures (generate_samples(data_dir,
tmp_dir, dataset_split), generate_data(data_dir, tmp_dir, task_id=-1), ...), so a
problem written against T2T runs unchanged with t2t-datagen, t2t-trainer and t2t-decoder.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from absl import logging

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_core as text_problems
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

# SentencePiece skips training sentences over 4192 bytes: text handed to it for a
# vocabulary is cut into lines of at most this many characters.
_SENTENCEPIECE_CHUNK_CHARS = 1000


# ------------------------------------------------------------------ iterators
def txt_line_iterator(txt_path: str) -> Iterator[str]:
    """The lines of a text file (local, file://, gs://: tf.io.gfile), stripped."""
    with tf.io.gfile.GFile(txt_path, "r") as f:
        for line in f:
            yield line.strip()


def _zip_lines(*paths: str) -> Iterator[tuple[str, ...]]:
    """Line i of every file, until the shortest ends (as T2T's zip did); a warning
    names the files when some have more lines than others."""
    for lines in itertools.zip_longest(*(txt_line_iterator(p) for p in paths)):
        if None in lines:
            longer = [p for p, line in zip(paths, lines, strict=True) if line is not None]
            logging.warning("%s: more lines than %s; the extra lines are ignored.",
                            ", ".join(longer), ", ".join(p for p in paths if p not in longer))
            return
        yield lines


def text2text_txt_iterator(source_txt_path: str, target_txt_path: str) -> Iterator[dict[str, str]]:
    """{"inputs": line, "targets": line} from two files read side by side."""
    for inputs, targets in _zip_lines(source_txt_path, target_txt_path):
        yield {"inputs": inputs, "targets": targets}


def text2text_distill_iterator(source_txt_path: str, target_txt_path: str,
                               distill_txt_path: str) -> Iterator[dict[str, str]]:
    """{"inputs", "targets", "dist_targets"} from three files read side by side."""
    for inputs, targets, dist_targets in _zip_lines(
            source_txt_path, target_txt_path, distill_txt_path):
        yield {"inputs": inputs, "targets": targets, "dist_targets": dist_targets}


def text2self_txt_iterator(txt_path: str) -> Iterator[dict[str, str]]:
    """{"targets": line} for each line of a file (language modelling)."""
    for line in txt_line_iterator(txt_path):
        yield {"targets": line}


def text2class_txt_iterator(source_txt_path: str, label_txt_path: str,
                            class_strs: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    """{"inputs": line, "label": int} from a text file and a label file, one per line.

    Labels are ints, or with `class_strs` (names in id order: ["neg", "pos"] gives
    "neg" id 0) class names.
    """
    ids = {name: i for i, name in enumerate(class_strs)} if class_strs else None
    for inputs, label in _zip_lines(source_txt_path, label_txt_path):
        label = label.strip()
        if ids is None:
            yield {"inputs": inputs, "label": int(label)}
        elif label in ids:
            yield {"inputs": inputs, "label": ids[label]}
        else:
            raise ValueError(f"{label_txt_path}: label {label!r} is not one of class_strs "
                             f"{list(ids)}.")


def text2text_txt_tab_iterator(txt_path: str) -> Iterator[dict[str, str]]:
    """{"inputs", "targets"} from lines "SOURCE<tab>TARGET"; lines without a tab are
    skipped, the target is everything after the first tab."""
    for line in txt_line_iterator(txt_path):
        if line and "\t" in line:
            inputs, targets = line.split("\t", 1)
            yield {"inputs": inputs.strip(), "targets": targets.strip()}


def text2text_generate_encoded(sample_generator: Iterable[dict[str, Any]],
                               vocab: text_encoder.TextEncoder,
                               targets_vocab: text_encoder.TextEncoder | None = None,
                               has_inputs: bool = True, inputs_prefix: str = "",
                               targets_prefix: str = "") -> Iterator[dict[str, Any]]:
    """The samples with "inputs" (if has_inputs) and "targets" encoded, each prefixed
    with its prefix first and ending in EOS; other keys of a sample pass unchanged."""
    targets_vocab = targets_vocab or vocab
    for sample in sample_generator:
        if has_inputs:
            sample["inputs"] = vocab.encode(inputs_prefix + sample["inputs"]) + [text_encoder.EOS_ID]
        sample["targets"] = (targets_vocab.encode(targets_prefix + sample["targets"])
                             + [text_encoder.EOS_ID])
        yield sample


def _check_label(problem_name: str, label: Any, num_classes: int) -> int:
    label = int(label)
    if not 0 <= label < num_classes:
        raise ValueError(f"{problem_name}: label {label} is outside [0, {num_classes}).")
    return label


# ------------------------------------------------------------- text to text
class _PrefixedText2Text(text_problems.Text2TextProblem):
    """Text2TextProblem encoded the way T2T's was: text2text_generate_encoded with
    `inputs_prefix` / `targets_prefix` (strings put before each text)."""

    inputs_prefix: str = ""
    targets_prefix: str = ""

    @property
    def has_inputs(self) -> bool:
        return True

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        vocabs = self.generation_vocabs(data_dir, tmp_dir)  # an imported model's: two
        return text2text_generate_encoded(
            self._samples(data_dir, tmp_dir, dataset_split), vocabs["inputs"],
            targets_vocab=vocabs["targets"],
            has_inputs=self.has_inputs, inputs_prefix=self.inputs_prefix,
            targets_prefix=self.targets_prefix)


@registry.register_problem
class Text2textTmpdir(_PrefixedText2Text):
    """A Text2TextProblem without code: put the data into tmp_dir, one record a line.

    * inputs.train.txt, targets.train.txt: the train split
    * inputs.eval.txt, targets.eval.txt: the dev split (T2T's "eval")

    Line i of an inputs file goes with line i of its targets file.
    """

    TRAIN_FILES = ("inputs.train.txt", "targets.train.txt")
    EVAL_FILES = ("inputs.eval.txt", "targets.eval.txt")
    is_generate_per_split = True  # the files are the splits

    @property
    def _tmp_dir_override(self) -> str | None:
        """The directory to read instead of tmp_dir (Text2TextRemotedir's)."""
        return None

    def source_files(self, tmp_dir: str, dataset_split: str) -> list[str]:
        """[inputs file, targets file] of `dataset_split` (every split but train reads
        the eval files, as in T2T)."""
        names = self.TRAIN_FILES if dataset_split == problem.DatasetSplit.TRAIN else self.EVAL_FILES
        directory = self._tmp_dir_override or tmp_dir
        paths = [os.path.join(directory, name) for name in names]
        missing = [p for p in paths if not tf.io.gfile.exists(p)]
        if missing:
            raise problem.DataMissingError(
                f"{self.name} reads its {dataset_split} split from {', '.join(names)} in "
                f"{directory!r} (one record a line); missing: {', '.join(missing)}. Put "
                f"{', '.join(self.TRAIN_FILES + self.EVAL_FILES)} there.")
        return paths

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        del data_dir
        inputs_file, targets_file = self.source_files(tmp_dir, dataset_split)
        return text2text_txt_iterator(inputs_file, targets_file)


class Text2TextRemotedir(Text2textTmpdir):
    """Text2textTmpdir reading its four files from `SRC_REMOTE_DIR` (set it in a
    subclass): a gs:// bucket directory, a file:// URL or a local directory."""

    SRC_REMOTE_DIR: str | None = None  # override in a subclass

    @property
    def _tmp_dir_override(self) -> str:
        if not self.SRC_REMOTE_DIR:
            raise ValueError(f"{type(self).__name__} must set SRC_REMOTE_DIR to the "
                             f"directory that holds {', '.join(self.TRAIN_FILES + self.EVAL_FILES)}.")
        return self.SRC_REMOTE_DIR


@registry.register_problem
class Text2textTmpdirTokens(Text2textTmpdir):
    """Text2textTmpdir with whitespace tokens as the vocabulary (VocabType.TOKEN).

    The token list is tmp_dir/vocab.txt, one token a line (PAD, EOS and "<UNK>" are
    added), as in T2T; without that file, t2t takes the tokens of the train files, most
    frequent first. It is written to data_dir as vocab.NAME.tokens on the first
    generation and read from there afterwards; unknown tokens become "<UNK>".
    """

    USER_VOCAB_FILE = "vocab.txt"
    vocab_type = text_problems.VocabType.TOKEN

    @property
    def oov_token(self) -> str:
        return "<UNK>"

    def _vocab_tokens_from_data(self, tmp_dir: str) -> list[str]:
        counts: collections.Counter[str] = collections.Counter()
        samples = Text2textTmpdir.generate_samples(self, None, tmp_dir, problem.DatasetSplit.TRAIN)
        for sample in itertools.islice(samples, self.max_samples_for_vocab):
            counts.update(sample["inputs"].split())
            counts.update(sample["targets"].split())
        return [token for token, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    def _generate_vocab(self, tmp_dir: str) -> text_encoder.TokenTextEncoder:
        """The token encoder: oov_token, then vocab.txt's tokens (or the data's)."""
        user_vocab = os.path.join(tmp_dir, self.USER_VOCAB_FILE)
        if tf.io.gfile.exists(user_vocab):
            tokens = list(txt_line_iterator(user_vocab))
        else:
            logging.info("%s: no %s; building the token list from the train files.",
                         self.name, user_vocab)
            tokens = self._vocab_tokens_from_data(tmp_dir)
        vocab = list(dict.fromkeys(t for t in [self.oov_token, *tokens] if t))
        return text_encoder.TokenTextEncoder(vocab_list=vocab, replace_oov=self.oov_token)

    def _write_vocab_if_missing(self, data_dir: str, tmp_dir: str) -> None:
        path = os.path.join(data_dir, self.vocab_filename)
        if not tf.io.gfile.exists(path):
            tf.io.gfile.makedirs(data_dir)
            self._generate_vocab(tmp_dir).store_to_file(path)

    def get_or_create_vocab(self, data_dir, tmp_dir, force_get=False, mirror=None):
        if not force_get and tmp_dir is not None:
            self._write_vocab_if_missing(data_dir, tmp_dir)
        return super().get_or_create_vocab(data_dir, tmp_dir, force_get=force_get, mirror=mirror)

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        self._write_vocab_if_missing(data_dir, tmp_dir)
        return super().generate_samples(data_dir, tmp_dir, dataset_split)


class QuestionAndContext2TextProblem(_PrefixedText2Text):
    """Text to text with a third text feature: `generate_samples` yields
    {"inputs": question, "context": text, "targets": answer}.

    "context" is encoded with the inputs' vocabulary (ending in EOS), stored, read
    back and batched like inputs, and has a symbol modality in the problem's hparams.
    t2t's transformer (like T2T's) reads only inputs and targets: a model of your own
    uses features["context"]. The vocabulary is T2T's SubwordTextEncoder
    (VocabType.SUBWORD) so that QUESTION_SEPARATOR "<EOQ>" has id 2, as in T2T.
    """

    QUESTION_SEPARATOR = "<EOQ>"
    QUESTION_SEPARATOR_ID = 2
    vocab_type = text_problems.VocabType.SUBWORD
    sequence_features = ("inputs", "targets", "context")

    @property
    def additional_reserved_tokens(self) -> list[str]:
        return [self.QUESTION_SEPARATOR]

    def text_fields(self):
        return ("inputs", "context", "targets")

    def build_encoders(self, data_dir):
        encoders = super().build_encoders(data_dir)
        encoders["context"] = encoders["inputs"]
        return encoders

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        encoder = self._vocab(data_dir, tmp_dir)
        for sample in super().generate_encoded_samples(data_dir, tmp_dir, dataset_split):
            sample["context"] = encoder.encode(sample["context"]) + [text_encoder.EOS_ID]
            yield sample

    def problem_hparams(self, data_dir):
        hp = super().problem_hparams(data_dir)
        size = self.feature_encoders(data_dir)["context"].vocab_size
        return dataclasses.replace(
            hp, modality={**hp.modality, "context": problem.Modality.SYMBOL},
            vocab_size={**hp.vocab_size, "context": size})

    def example_reading_spec(self):
        data_fields, data_items_to_decoders = super().example_reading_spec()
        data_fields["context"] = tf.io.RaggedFeature(tf.int64)
        return data_fields, data_items_to_decoders


# ------------------------------------------------------------ classification
class TextConcat2ClassProblem(text_problems.Text2ClassProblem):
    """Classification of several texts: `generate_samples` yields {"inputs": [text,
    text, ...], "label": int}. The inputs are the texts' ids joined by the id of
    CONCAT_TOKEN ("$"), then EOS: [text 1, $, text 2, EOS] (T2T's order)."""

    CONCAT_TOKEN = "$"

    def generate_text_for_vocab(self, data_dir, tmp_dir):
        samples = self._samples(data_dir, tmp_dir, problem.DatasetSplit.TRAIN)
        for sample in itertools.islice(samples, self.max_samples_for_vocab):
            yield from self._texts(sample)
        yield self.CONCAT_TOKEN  # the separator is in the vocabulary even if the text lacks it

    def _texts(self, sample: dict[str, Any]) -> list[str]:
        texts = sample["inputs"]
        if isinstance(texts, str | bytes):
            raise TypeError(f"{self.name}: a TextConcat2ClassProblem sample's \"inputs\" "
                            f"is a list of texts, got one string {texts[:40]!r}.")
        return list(texts)

    def concat_token_id(self, encoder: text_encoder.TextEncoder) -> int:
        """The separator's id: the first id of CONCAT_TOKEN encoded (T2T's rule), past
        a SentencePiece word-start piece "▁" that would stand for any word."""
        ids = encoder.encode(self.CONCAT_TOKEN)
        if not ids:
            raise ValueError(f"{self.name}: CONCAT_TOKEN {self.CONCAT_TOKEN!r} encodes to no ids.")
        if len(ids) > 1 and isinstance(encoder, text_encoder.SentencePieceEncoder):
            if encoder.decode_list(ids[:1])[0] == "\u2581":
                return ids[1]
        return ids[0]

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        encoder = self._vocab(data_dir, tmp_dir)
        separator = self.concat_token_id(encoder)
        num_classes = self.num_classes
        for sample in self._samples(data_dir, tmp_dir, dataset_split):
            inputs: list[int] = []
            for i, text in enumerate(self._texts(sample)):
                if i:
                    inputs.append(separator)
                inputs += encoder.encode(text)
            inputs.append(text_encoder.EOS_ID)
            yield {"inputs": inputs,
                   "targets": [_check_label(self.name, sample["label"], num_classes)]}


# ----------------------------------------------------------- chopped text LM
class ChoppedTextProblem(text_problems.Text2SelfProblem):
    """Language modelling over long text files, chopped into examples of exactly
    `sequence_length` tokens ("targets"; no EOS, the last piece 0-padded or dropped:
    `remainder_policy`).

    Subclasses give `train_text_filepaths(tmp_dir)`, `dev_text_filepaths(tmp_dir)` and
    `sequence_length`. Train file i goes to train shard i % num_train_shards, dev files
    likewise; `generate_data(data_dir, tmp_dir, task_id)` writes one shard (task ids:
    train shards, then dev shards), or every shard with task_id -1 (t2t-datagen's call).
    """

    # START: Subclass interface
    def train_text_filepaths(self, tmp_dir: str) -> list[str]:
        """Paths of the training text files (may download them first)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_text_filepaths.")

    def dev_text_filepaths(self, tmp_dir: str) -> list[str]:
        """Paths of the dev text files (may download them first)."""
        raise NotImplementedError(f"{type(self).__name__} must define dev_text_filepaths.")

    @property
    def sequence_length(self) -> int:
        """Tokens per example."""
        raise NotImplementedError(f"{type(self).__name__} must define sequence_length.")

    @property
    def remainder_policy(self) -> str:
        """What becomes of the tokens left after the last full example: "pad" (one
        0-padded example) or "drop"."""
        return "pad"

    @property
    def max_chars_for_vocab(self) -> int:
        """Characters of training text the vocabulary is built from."""
        return 10**7

    @property
    def max_dev_chars(self) -> int:
        """At most this many characters of dev text are used."""
        return 10**7

    # END: Subclass interface
    @property
    def has_inputs(self) -> bool:
        return False

    @property
    def num_train_shards(self) -> int:
        return self.dataset_splits[0]["shards"]

    @property
    def num_dev_shards(self) -> int:
        return self.dataset_splits[1]["shards"]

    @property
    def multiprocess_generate(self) -> bool:
        return True

    @property
    def num_generate_tasks(self) -> int:
        return self.num_train_shards + self.num_dev_shards

    def max_length(self, model_hparams):
        return getattr(model_hparams, "split_to_length", 0) or self.sequence_length

    def eval_metrics(self):
        return ["accuracy", "neg_log_perplexity"]

    def text_filepaths_for_task(self, tmp_dir: str, task_id: int) -> list[str]:
        """The text files of one train or dev shard (task ids: train shards first)."""
        if not 0 <= task_id < self.num_generate_tasks:
            raise ValueError(f"{self.name}: task_id {task_id} is outside "
                             f"[0, {self.num_generate_tasks}).")
        if task_id < self.num_train_shards:
            files, shards, index = self.train_text_filepaths(tmp_dir), self.num_train_shards, task_id
        else:
            files, shards = self.dev_text_filepaths(tmp_dir), self.num_dev_shards
            index = task_id - self.num_train_shards
        return [f for i, f in enumerate(files) if i % shards == index]

    def filepath_to_unicode_strings(self, filepath: str) -> Iterator[str]:
        """The text of one file (one string; override to preprocess or split it)."""
        with tf.io.gfile.GFile(filepath, "rb") as f:
            yield text_encoder.to_unicode_ignore_errors(f.read())

    def file_generator(self, filepaths: Sequence[str], max_chars_per_file: int | None = None,
                       max_chars_total: int | None = None) -> Iterator[str]:
        """The strings of the files, cut to at most `max_chars_per_file` per file and
        `max_chars_total` in all."""
        chars_total = 0
        for path in filepaths:
            chars_this_file = 0
            logging.info("reading file %s", path)
            for text in self.filepath_to_unicode_strings(path):
                if max_chars_per_file:
                    text = text[:max_chars_per_file - chars_this_file]
                if max_chars_total:
                    text = text[:max_chars_total - chars_total]
                chars_total += len(text)
                chars_this_file += len(text)
                if text:
                    yield text
                if max_chars_total and chars_total >= max_chars_total:
                    return
                if max_chars_per_file and chars_this_file >= max_chars_per_file:
                    break

    def example_generator(self, encoder: text_encoder.TextEncoder, tmp_dir: str,
                          task_id: int) -> Iterator[dict[str, list[int]]]:
        """{"targets": sequence_length ids} from the text of task `task_id`'s files."""
        filepaths = self.text_filepaths_for_task(tmp_dir, task_id)
        if not filepaths:
            return
        max_chars_per_file = None
        if task_id >= self.num_train_shards:  # dev data: bounded in total
            max_chars_per_file = self.max_dev_chars // (self.num_dev_shards * len(filepaths))
        length, tokens = self.sequence_length, []
        for text in self.file_generator(filepaths, max_chars_per_file=max_chars_per_file):
            tokens.extend(encoder.encode(text))
            full = len(tokens) // length * length
            for pos in range(0, full, length):
                yield {"targets": tokens[pos:pos + length]}
            tokens = tokens[full:]
        if self.remainder_policy == "pad":
            if tokens:
                yield {"targets": tokens + [text_encoder.PAD_ID] * (length - len(tokens))}
        elif self.remainder_policy != "drop":
            raise ValueError(f"{self.name}: remainder_policy must be 'pad' or 'drop', got "
                             f"{self.remainder_policy!r}.")

    def generate_text_for_vocab(self, data_dir, tmp_dir):
        texts = self.file_generator(self.train_text_filepaths(tmp_dir),
                                    max_chars_total=self.max_chars_for_vocab)
        if self.vocab_type != text_problems.VOCAB_SUBWORD:
            return texts
        return _sentencepiece_chunks(texts)

    def prepare_to_generate(self, data_dir: str, tmp_dir: str) -> None:
        """Builds the vocabulary and fetches the text files."""
        self.get_or_create_vocab(data_dir, tmp_dir)
        self.train_text_filepaths(tmp_dir)
        self.dev_text_filepaths(tmp_dir)

    def _output_file(self, data_dir: str, task_id: int) -> str:
        if task_id < self.num_train_shards:
            return self.training_filepaths(data_dir, self.num_train_shards, shuffled=False)[task_id]
        return self.dev_filepaths(data_dir, self.num_dev_shards,
                                  shuffled=False)[task_id - self.num_train_shards]

    def generate_data(self, data_dir, tmp_dir, task_id=-1):
        """Writes the shard of `task_id`, or with -1 every train and dev shard."""
        encoder = self.get_or_create_vocab(data_dir, tmp_dir)
        tasks = range(self.num_generate_tasks) if task_id == -1 else [task_id]
        for task in tasks:
            logging.info("%s: generate_data task_id=%d", self.name, task)
            out_file = self._output_file(data_dir, task)
            generator_utils.generate_files(self.example_generator(encoder, tmp_dir, task), [out_file])
            generator_utils.shuffle_dataset([out_file])

    def generate_encoded_samples(self, data_dir, tmp_dir, dataset_split):
        """The examples of every shard of `dataset_split` ("train" or "dev")."""
        encoder = self._vocab(data_dir, tmp_dir)
        if dataset_split == problem.DatasetSplit.TRAIN:
            tasks = range(self.num_train_shards)
        else:
            tasks = range(self.num_train_shards, self.num_generate_tasks)
        for task in tasks:
            yield from self.example_generator(encoder, tmp_dir, task)


def _sentencepiece_chunks(texts: Iterable[str]) -> Iterator[str]:
    """The non-empty lines of `texts`, long ones cut at spaces into pieces of at most
    _SENTENCEPIECE_CHUNK_CHARS characters (SentencePiece trains on sentences)."""
    for text in texts:
        for line in text.splitlines():
            while len(line) > _SENTENCEPIECE_CHUNK_CHARS:
                cut = line.rfind(" ", 0, _SENTENCEPIECE_CHUNK_CHARS)
                cut = cut if cut > 0 else _SENTENCEPIECE_CHUNK_CHARS
                yield line[:cut]
                line = line[cut:].lstrip()
            if line.strip():
                yield line
