"""WMT English -> German translation, as Tensor2Tensor's `translate_ende_wmt*` problems.

Tensor2Tensor's names train on its WMT En-De mix, about 4.6M sentence pairs in three
archives (about 1.7 GB to download):

| corpus                 | archive                           | de-en pairs |
| ---------------------- | --------------------------------- | ----------- |
| News Commentary v13    | training-parallel-nc-v13.tgz      | ~284k       |
| CommonCrawl (WMT13)    | training-parallel-commoncrawl.tgz | ~2.40M      |
| Europarl v7            | training-parallel-europarl-v7.tgz | ~1.92M      |

written to 100 train shards, as Tensor2Tensor wrote them:

- `translate_ende_wmt32k`, `translate_ende_wmt8k`: a shared SentencePiece vocabulary of
  ~32k / ~8k pieces, sampled equally from the three corpora;
- `translate_ende_wmt_characters`: byte-level (Tensor2Tensor's character vocabulary,
  its ByteTextEncoder: t2t's `vocab_type = "byte"`);
- `translate_ende_wmt_clean32k`: the same corpora with Tensor2Tensor's rule-based
  cleaning of the training pairs (`clean_en_xx_pairs`), sharing the vocabulary of
  `translate_ende_wmt32k` (Tensor2Tensor's `use_vocab_from_other_problem`).

Small enough to prepare and train on a CPU, News Commentary v13 alone (one 113 MB
archive, ~284k pairs, 10 train shards):

- `translate_ende_wmt_nc32k`, `translate_ende_wmt_nc8k` (not Tensor2Tensor's names).

The dev split of all of them is newstest2013 (3000 pairs) from WMT19's dev.tgz, which
holds the same newstest2013.en / .de as the WMT17 dev.tgz Tensor2Tensor named. Every
archive is pinned to the size and sha256 that TensorFlow Datasets records for its URL
(`tensorflow_datasets/url_checksums/wmt_t2t_translate.txt`, `wmt19_translate.txt`), so
a mirror copy must be byte-identical to the published file.

Append `_rev` to a name (`translate_ende_wmt32k_rev`) for German -> English.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.problems.translation import wmt

# The archives (wmt.py holds them for every WMT pair), under the names used before.
NEWS_COMMENTARY_V13 = wmt.NEWS_COMMENTARY_V13
WMT19_DEV = wmt.WMT19_DEV
COMMONCRAWL = wmt.COMMONCRAWL
EUROPARL_V7 = wmt.EUROPARL_V7

# News Commentary v13 alone (the *_nc* problems).
ENDE_NC_TRAIN_DATASETS = wmt.corpora("de", "nc_v13")
# Tensor2Tensor's training mix (its _ENDE_TRAIN_DATASETS), in its order.
ENDE_TRAIN_DATASETS = wmt.corpora("de", "nc_v13", "commoncrawl", "europarl_v7")
ENDE_FULL_TRAIN_DATASETS = ENDE_TRAIN_DATASETS  # the name earlier versions gave the mix
ENDE_DEV_DATASETS = wmt.corpora("de", "newstest2013")
# The vocabulary sampling shared by the WMT mixes.
MixedCorporaTranslateProblem = wmt.MixedCorporaTranslateProblem


class TranslateEndeWmt(MixedCorporaTranslateProblem):
    """English -> German on Tensor2Tensor's WMT mix; dev newstest2013 (unregistered base)."""

    train_datasets = ENDE_TRAIN_DATASETS
    dev_datasets = ENDE_DEV_DATASETS
    source_language = "en"
    target_language = "de"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.DE_BPE_TOK
    train_shards = 100  # as Tensor2Tensor wrote the ~4.6M pairs
    dev_shards = 1


@registry.register_problem
class TranslateEndeWmt32k(TranslateEndeWmt):
    """WMT En-De (NC v13 + CommonCrawl + Europarl v7, ~4.6M pairs), ~32k shared vocab."""

    approx_vocab_size = 2**15  # 32768


@registry.register_problem
class TranslateEndeWmt8k(TranslateEndeWmt):
    """WMT En-De (NC v13 + CommonCrawl + Europarl v7, ~4.6M pairs), ~8k shared vocab."""

    approx_vocab_size = 2**13  # 8192


@registry.register_problem
class TranslateEndeWmtCharacters(TranslateEndeWmt):
    """WMT En-De (NC v13 + CommonCrawl + Europarl v7, ~4.6M pairs), byte-level."""

    vocab_type = text_problems.VOCAB_BYTE
    input_space_id = problem.SpaceID.EN_CHR
    target_space_id = problem.SpaceID.DE_CHR


# ---------------------------------------------------------------- cleaning
# Tensor2Tensor's "unsophisticated" En-XX cleaner (cleaner_en_xx.clean_en_xx_pairs):
# a pair is judged by its English side alone. That side must look like one or more
# whole sentences: start with an (optionally quoted) ASCII capital, end with a word
# character and . ? or ! (optionally followed by a closing quote), and show none of the
# noise patterns below.
_EN_MUST_MATCH = (
    re.compile(r'^["“”]?[A-Z]'),  # starts like a sentence
    re.compile(r'\w[.?!]["”]?$'),  # ends like one
)
_EN_MUST_NOT_MATCH = (
    re.compile(r"^\w+\.?( \w+)?: "),  # a label ("Note: ...", "Mr. X: ...")
    re.compile(r"\d +\d"),  # digits split by spaces (tables, phone numbers)
    re.compile(r'^[^"“”]*["“”][^"“”]*$'),  # exactly one double quote
    re.compile(r'^["“”]([^"“”]+)$'),  # a double quote only at the start
    re.compile(r'^[^"“”]+["“”]$'),  # a double quote only at the end
    re.compile(r'^["“”].*["“”]$'),  # wholly quoted
    re.compile(r'(["“”].*){3,}'),  # three or more double quotes
    re.compile(r"(['‘’][^st].*){3,}"),  # three or more single quotes (not 's / 't)
    re.compile(r"[\"“”'‘’]\s*[\"“”'‘’]"),  # two quotes in a row
    re.compile(r"\s[\"“”'‘’,:;]\s"),  # a lone quote or , : ; between spaces
    re.compile(r"©|^Copyright|^\(C\)"),  # boilerplate
    re.compile(r"[(][^)]*$"),  # an opening parenthesis never closed
    re.compile(r"^[^(]*[)]"),  # a closing parenthesis never opened
    re.compile(r"^[A-Z]{2,}(\s+[A-Z]+)*\s+-"),  # a news tagline ("BERLIN -")
    re.compile(r"^[A-Z]+[a-z]*_"),  # an identifier (CONSTANT_NAME, Word_...)
)
# Where a side breaks into sentences: the space between a sentence's final . ! or ?
# and the capital letter that starts the next. English asks a little more of the
# character before the mark (so "U.S. Army" stays whole); the other side only that it
# is not a digit.
_EN_BREAK = re.compile(r"(?:\w[A-Z]|[0-9a-z])[.!?]( )[A-Z]")
_XX_BREAK = re.compile(r"[^0-9][.!?]( )[A-Z]")


def is_noisy_english(sentence: str) -> bool:
    """Whether Tensor2Tensor's cleaner rejects `sentence` (the English side of a pair)."""
    return not all(p.search(sentence) for p in _EN_MUST_MATCH) or any(
        p.search(sentence) for p in _EN_MUST_NOT_MATCH
    )


def _split_at(text: str, breaks: re.Pattern[str]) -> list[str]:
    """`text` cut at each match's group 1 (the space between two sentences), dropped."""
    parts, start = [], 0
    for match in breaks.finditer(text):
        parts.append(text[start : match.start(1)])
        start = match.end(1)
    parts.append(text[start:])
    return parts


def clean_en_xx_pairs(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """Tensor2Tensor's cleaning of (English, other language) pairs, as a stream.

    A pair whose English side `is_noisy_english` is dropped. Otherwise both sides are
    split into sentences (at ". X", "! X", "? X" before a capital); a pair whose sides
    split into different numbers of sentences is dropped, a pair of one sentence each
    is kept as it is, and a pair of several is replaced by its sentence pairs, each kept
    only if its English sentence is not noisy either. (Tensor2Tensor's code meant this
    last case but called Python 2's `itertools.izip`, so under Python 3 it stopped with
    an error at the first such pair.)
    """
    for english, other in pairs:
        if is_noisy_english(english):
            continue
        english_parts = _split_at(english, _EN_BREAK)
        other_parts = _split_at(other, _XX_BREAK)
        if len(english_parts) != len(other_parts):
            continue
        if len(english_parts) == 1:
            yield english, other
            continue
        for english_part, other_part in zip(english_parts, other_parts, strict=True):
            if not is_noisy_english(english_part):
                yield english_part, other_part


@registry.register_problem
class TranslateEndeWmtClean32k(TranslateEndeWmt32k):
    """WMT En-De (T2T's mix) with T2T's cleaning of the training pairs; wmt32k's vocab.

    Only the train split is cleaned (the dev split is newstest2013 as it is), as in
    Tensor2Tensor. The vocabulary is `translate_ende_wmt32k`'s own file in data_dir,
    built from the uncleaned corpora if it is not there yet (Tensor2Tensor's
    `use_vocab_from_other_problem`), so models of the two problems share their ids.
    """

    def vocab_problem(self) -> TranslateEndeWmt32k:
        """The problem whose vocabulary this one uses (translate_ende_wmt32k)."""
        other = TranslateEndeWmt32k()
        other.data_mirror = self.data_mirror
        return other

    @property
    def vocab_filename(self) -> str:
        return self.vocab_problem().vocab_filename

    def get_or_create_vocab(self, data_dir, tmp_dir, *args, **kwargs):
        return self.vocab_problem().get_or_create_vocab(data_dir, tmp_dir, *args, **kwargs)

    def _load_vocab(self, data_dir):
        return self.vocab_problem()._load_vocab(data_dir)

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, str]]:
        samples = super().generate_samples(data_dir, tmp_dir, split, mirror=mirror)
        if split != problem.TRAIN_SPLIT:
            yield from samples
            return
        pairs = ((s["inputs"], s["targets"]) for s in samples)  # inputs: the English side
        for english, german in clean_en_xx_pairs(pairs):
            if english and german:
                yield {"inputs": english, "targets": german}


# ---------------------------------------------------- News Commentary v13 only
class TranslateEndeWmtNc(TranslateEndeWmt):
    """English -> German on News Commentary v13 alone (unregistered base)."""

    train_datasets = ENDE_NC_TRAIN_DATASETS
    train_shards = 10


@registry.register_problem
class TranslateEndeWmtNc32k(TranslateEndeWmtNc):
    """WMT En-De, News Commentary v13 only (~284k pairs, CPU-sized), ~32k shared vocab."""

    approx_vocab_size = 2**15  # 32768


@registry.register_problem
class TranslateEndeWmtNc8k(TranslateEndeWmtNc):
    """WMT En-De, News Commentary v13 only (~284k pairs, CPU-sized), ~8k shared vocab."""

    approx_vocab_size = 2**13  # 8192
