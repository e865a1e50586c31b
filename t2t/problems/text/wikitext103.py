"""WikiText-103 language modelling with a ~32k subword vocabulary.

Data: `wikitext-103-v1.zip` (the tokenized, word-level release of Merity et al. 2016,
about 180 MB; 28,475 Wikipedia articles, ~103M words), from its current home
wikitext.smerity.com (Tensor2Tensor's s3.amazonaws.com/research.metamind.io URL no
longer serves it). Inside: `wikitext-103/wiki.train.tokens`, `wiki.valid.tokens`,
`wiki.test.tokens` give the train, dev and test splits. No size or sha256 of the zip is
recorded on this machine (TensorFlow Datasets does not ship it), so it is fetched
UNVERIFIED: `download.fetch` logs a warning.

Examples are LINE-level, as Tensor2Tensor's `languagemodel_wikitext103` made them:
every non-blank line (a paragraph, or a heading line such as `= Early life =`) is one
example, its whitespace collapsed to single spaces; the corpus' own `<unk>` tokens are
kept as text. Set `example_unit = "document"` in a subclass for one example per
article instead: the articles are split at the top-level headings (` = Title = `, one
`=` each side) and their lines joined with spaces.

Tensor2Tensor's problem of this data used a word vocabulary of all ~267k training
words; this one (`languagemodel_wikitext103_32k`) is SentencePiece with ~32k pieces,
built from the first `max_samples_for_vocab` training examples.

Metrics: accuracy and neg_log_perplexity, per subword token (EOS included);
perplexity = exp(-neg_log_perplexity). Scale the log-perplexity by (tokens / words) of
the split to compare with published word-level perplexities.
"""

from __future__ import annotations

from collections.abc import Iterator

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.data.bases.translate import archive_members
from t2t.data.generation.download import Resource

# Unpinned: no recorded size or sha256 exists on this machine (see the docstring).
WIKITEXT_103 = Resource(url="https://wikitext.smerity.com/wikitext-103-v1.zip")
SPLIT_FILES = {
    problem.TRAIN_SPLIT: "wikitext-103/wiki.train.tokens",
    problem.DEV_SPLIT: "wikitext-103/wiki.valid.tokens",
    problem.TEST_SPLIT: "wikitext-103/wiki.test.tokens",
}
LINE = "line"
DOCUMENT = "document"


def is_title(line: str) -> bool:
    """Whether a stripped line is an article's top-level heading `= Title =`."""
    return line.startswith("= ") and line.endswith(" =") and not line.startswith("= =")


def line_examples(path: str) -> Iterator[str]:
    """Every non-blank line, whitespace collapsed."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            text = " ".join(line.split())
            if text:
                yield text


def document_examples(path: str) -> Iterator[str]:
    """Every article (from its `= Title =` line to the next one), lines joined by spaces."""
    document: list[str] = []
    for line in line_examples(path):
        if is_title(line) and document:
            yield " ".join(document)
            document = []
        document.append(line)
    if document:
        yield " ".join(document)


@registry.register_problem("languagemodel_wikitext103_32k")
class LanguagemodelWikitext103_32k(text_problems.Text2SelfProblem):
    """WikiText-103, one example per line (paragraph), ~32k SentencePiece pieces."""

    resource: Resource = WIKITEXT_103
    example_unit: str = LINE

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**15  # 32768
    max_samples_for_vocab = 100_000
    splits = (
        problem.SplitSpec(problem.TRAIN_SPLIT, 10),
        problem.SplitSpec(problem.DEV_SPLIT, 1),
        problem.SplitSpec(problem.TEST_SPLIT, 1),
    )

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        if split not in SPLIT_FILES:
            raise ValueError(f"{self.name} has no {split!r} split; use train, dev or test.")
        if self.example_unit not in (LINE, DOCUMENT):
            raise ValueError(f"example_unit must be {LINE!r} or {DOCUMENT!r}.")
        (path,) = archive_members(self.resource, [SPLIT_FILES[split]], tmp_dir, mirror)
        examples = line_examples if self.example_unit == LINE else document_examples
        for text in examples(path):
            yield {"targets": text}
