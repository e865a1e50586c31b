"""Penn Treebank language modelling (Mikolov's version), as T2T's `languagemodel_ptb10k`.

Data: `simple-examples.tgz` from Tomas Mikolov's RNNLM page (about 34 MB), whose
`simple-examples/data/ptb.train.txt`, `ptb.valid.txt` and `ptb.test.txt` give the
train (42,068 sentences, ~887k words), dev (3,370 sentences) and test (3,761
sentences) splits. The text is already lower-cased, with numbers as `N` and rare
words as `<unk>`. No size or sha256 of the archive is recorded on this machine
(TensorFlow Datasets does not ship it), so it is fetched UNVERIFIED: `download.fetch`
logs a warning.

One example per line (sentence), its words separated by single spaces; the end of
the sentence is the EOS id every example ends with (Tensor2Tensor also wrote an
`<eos>` word before it; here EOS alone marks it, so each sentence counts words + 1
tokens, as the standard PTB perplexity counts them).

Vocabulary, as Tensor2Tensor built it: a word vocabulary (`vocab_type` "token") of the
`num_words` = 10,000 most frequent training words (ties broken alphabetically),
always including `<unk>`, which stands in for any other word. It is built from
ptb.train.txt and saved in data_dir as `vocab.languagemodel_ptb10k.token` (the
reserved `<pad>`, `<EOS>` first, then the words by frequency). The original data has
exactly 10,000 word types, so nothing in it is out of vocabulary.

Metrics: accuracy and neg_log_perplexity per word (EOS included);
perplexity = exp(-neg_log_perplexity). Examples are single sentences, so the
perplexity is higher than that of models that carry state across sentences.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator

from absl import logging

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.translate import archive_members
from t2t.data.encoders import text_encoder
from t2t.data.generation.download import Resource

# Unpinned: no recorded size or sha256 exists on this machine (see the docstring).
PTB = Resource(url="http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz")
SPLIT_FILES = {
    problem.TRAIN_SPLIT: "simple-examples/data/ptb.train.txt",
    problem.DEV_SPLIT: "simple-examples/data/ptb.valid.txt",
    problem.TEST_SPLIT: "simple-examples/data/ptb.test.txt",
}
UNK = "<unk>"


def read_sentences(path: str) -> Iterator[str]:
    """Each non-blank line of `path` with its words separated by single spaces."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            words = line.split()
            if words:
                yield " ".join(words)


def build_word_vocab(path: str, num_words: int) -> list[str]:
    """The `num_words` most frequent words of `path` (ties alphabetical), `<unk>` included."""
    counts = collections.Counter(w for sentence in read_sentences(path) for w in sentence.split())
    counts.pop(UNK, None)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[: num_words - 1]] + [UNK]


@registry.register_problem
class LanguagemodelPtb10k(text_problems.Text2SelfProblem):
    """PTB sentences, a 10k-word vocabulary built from the training text."""

    resource: Resource = PTB
    num_words: int = 10_000

    vocab_type = text_problems.VOCAB_TOKEN
    splits = (
        problem.SplitSpec(problem.TRAIN_SPLIT, 10),
        problem.SplitSpec(problem.DEV_SPLIT, 1),
        problem.SplitSpec(problem.TEST_SPLIT, 1),
    )

    def split_file(self, tmp_dir: str, split: str, mirror: str | None) -> str:
        if split not in SPLIT_FILES:
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        (path,) = archive_members(self.resource, [SPLIT_FILES[split]], tmp_dir, mirror)
        return path

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        for sentence in read_sentences(self.split_file(tmp_dir, split, mirror)):
            yield {"targets": sentence}

    def get_or_create_vocab(
        self, data_dir: str, tmp_dir: str, mirror: str | None = None
    ) -> text_encoder.TextEncoder:
        """Loads the word vocabulary from data_dir, building it from ptb.train.txt first."""
        path = os.path.join(data_dir, self.vocab_filename)
        if os.path.exists(path):
            return self._load_vocab(data_dir)
        train = self.split_file(tmp_dir, problem.TRAIN_SPLIT, mirror)
        words = build_word_vocab(train, self.num_words)
        encoder = text_encoder.TokenTextEncoder(words, replace_oov=UNK)
        encoder.save(path)
        logging.info("Wrote the %d-word vocabulary of %s to %s", len(words), self.name, path)
        return encoder

    def _load_vocab(self, data_dir: str | None) -> text_encoder.TextEncoder:
        if data_dir is None:
            raise problem.DataMissingError(
                f"{self.name} needs its word vocabulary from data_dir; pass data_dir."
            )
        path = os.path.join(data_dir, self.vocab_filename)
        return text_encoder.TokenTextEncoder(
            path, replace_oov=UNK, hint=self._datagen_hint(data_dir)
        )
