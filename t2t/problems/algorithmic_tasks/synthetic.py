"""Small synthetic problems with a known optimum, generated locally in seconds.

They give the regression suite a decoder-only language-modelling case and a text
classification case that need no download, each a real learning task whose ideal
metric value is known, so a result can be judged against the theoretical optimum.

- `algorithmic_lm_reverse_binary10`: language modelling of "bits | reversed bits".
- `sentiment_synthetic`: polarity of template-grammar movie reviews (with negation,
  intensifiers and mixed opinions), through a small SentencePiece vocabulary.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator

from t2t import registry
from t2t.data import problem
from t2t.data.bases import text_problems
from t2t.problems.algorithmic_tasks import algorithmic

# ----------------------------------------------------------------- language model

SEPARATOR = "|"  # text form of the separator symbol of the language-model problems


class AlgorithmicLanguageModel(text_problems.Text2SelfProblem, algorithmic.AlgorithmicProblem):
    """An algorithmic problem as one decoder-only sequence: inputs SEP targets EOS.

    Mix in before an AlgorithmicProblem subclass, whose `generator` makes the cases.
    Text2SelfProblem gives the language-model features (targets only, symbol modality,
    accuracy and neg_log_perplexity); AlgorithmicProblem the seeded generation, sizes
    and symbol ids. The separator is symbol `num_symbols`, written "|" in the text form
    ("1 0 | 0 1").
    """

    vocab_type = text_problems.VOCAB_TOKEN
    # Text2SelfProblem's would encode text samples; the algorithmic cases are symbol ids.
    generate_examples = algorithmic.AlgorithmicProblem.generate_examples

    def vocab_tokens(self) -> list[str]:
        return [str(i) for i in range(self.num_symbols)] + [SEPARATOR]

    def generator(self, nbr_symbols, max_length, nbr_cases, rng):
        for case in super().generator(nbr_symbols, max_length, nbr_cases, rng):
            yield {"targets": case["inputs"] + [nbr_symbols] + case["targets"]}


def ideal_lm_metrics(max_length: int, num_symbols: int = 2) -> dict[str, float]:
    """Bayes-optimal per-token metrics of "x SEP f(x) EOS" sequences, in expectation.

    x is uniformly random: length L uniform in 1..max_length, symbols uniform among
    num_symbols; f(x) (reverse, copy) has L symbols and is determined by x. A sequence
    has 2L + 2 tokens, all scored (EOS included, as the trainer's metrics count them).

    Returns {"neg_log_perplexity": nats per token (<= 0), "accuracy": fraction of
    tokens}: the expected sums over a large eval set divided by its expected tokens.
    """
    if max_length < 1 or num_symbols < 1:
        raise ValueError(f"need max_length >= 1 and num_symbols >= 1, got {max_length}, {num_symbols}")
    n, b = max_length, num_symbols
    mean_length = (n + 1) / 2
    tokens = 2 * mean_length + 2
    # The optimal model's log-loss of a sequence is -ln p(sequence) = ln n + L ln b: the
    # length and the symbols of x are all the uncertainty; SEP's position, f(x) and EOS
    # follow from them.
    nll = math.log(n) + mean_length * math.log(b)
    # Accuracy: at the prefix of k symbols of x (reached with probability P(L >= k),
    # (n + 1 - k) / n for k >= 1), the next token is SEP with hazard h = P(L = k | L >= k) =
    # 1 / (n + 1 - k) (0 at k = 0), else each symbol with (1 - h) / b; the best guess is
    # right with the larger of the two. After SEP all L + 1 tokens are certain.
    correct = mean_length + 1
    for k in range(n + 1):
        reach = (n + 1 - max(k, 1)) / n
        hazard = 0.0 if k == 0 else 1 / (n + 1 - k)
        correct += reach * max(hazard, (1 - hazard) / b)
    return {"neg_log_perplexity": -nll / tokens, "accuracy": correct / tokens}


@registry.register_problem
class AlgorithmicLmReverseBinary10(AlgorithmicLanguageModel, algorithmic.AlgorithmicReverseBinary40):
    """Language model of random bits (length 1..10), "|", the bits reversed, EOS.

    Decoder-only (no inputs). The bits before "|" are unpredictable, the rest is fully
    determined. Ideal (Bayes-optimal) per-token values, `ideal_metrics()`:
    neg_log_perplexity = -(ln 10 + 5.5 ln 2) / 13 = -0.47038 nats, accuracy = 9.4 / 13
    = 0.72308. Dev lengths are those of train (no length generalization), so the ideal
    holds on dev; compare with neg_log_perplexity, not the label-smoothed loss.
    """

    train_length = 10
    dev_length = 10
    train_size = 50_000
    dev_size = 2_000
    train_shards = 2

    def ideal_metrics(self) -> dict[str, float]:
        """Bayes-optimal per-token neg_log_perplexity and accuracy on this problem."""
        if self.train_length != self.dev_length:
            raise ValueError("the ideal assumes dev lengths distributed as train lengths")
        return ideal_lm_metrics(self.dev_length, self.num_symbols)


# ----------------------------------------------------------------- classification

SENTIMENT_LABELS = ["neg", "pos"]

# Every polarity word marks exactly one opinion clause; no other word of the grammar
# carries polarity, so the label can be read back from the text (`review_score`).
POSITIVE_ADJECTIVES = ("good", "great", "wonderful", "excellent", "brilliant", "charming",
                       "clever", "moving", "delightful", "superb", "funny", "gripping")
NEGATIVE_ADJECTIVES = ("bad", "awful", "boring", "dull", "terrible", "clumsy",
                       "weak", "tedious", "predictable", "bland", "messy", "forgettable")
# (past tense, base form) of opinion verbs: "i loved ...", "i did not love ...".
POSITIVE_VERBS = (("loved", "love"), ("enjoyed", "enjoy"), ("liked", "like"), ("admired", "admire"))
NEGATIVE_VERBS = (("hated", "hate"), ("disliked", "dislike"), ("regretted", "regret"))
INTENSIFIERS = ("very", "really", "extremely", "truly", "incredibly")
NEGATORS = ("not", "never")
_SUBJECTS = ("the acting", "the plot", "the script", "the ending", "the soundtrack",
             "the dialogue", "the cast", "the pacing", "the story", "the film", "the movie",
             "the humor", "the villain", "the photography")
_NOUNS = ("film", "movie", "story", "script", "cast", "ending", "soundtrack", "plot")
# Copulas and their negated forms.
_COPULAS = (("is", "is not"), ("was", "was not"), ("felt", "never felt"), ("seemed", "never seemed"))
_FILLERS = ("i saw it last weekend", "we watched it at home", "it runs about two hours",
            "my sister picked it", "it came out last year", "i went in knowing nothing about it",
            "the director also wrote the script", "it is based on a novel",
            "there is a long flashback in the middle", "we rented it on a rainy sunday")
_OPENERS = ("honestly", "to be fair", "overall", "frankly", "in short", "all in all")
_CONNECTIVES = (", and ", ", but ", ". ", "; ")

_POLARITY = {
    **{w: 1 for w in POSITIVE_ADJECTIVES}, **{w: -1 for w in NEGATIVE_ADJECTIVES},
    **{w: 1 for forms in POSITIVE_VERBS for w in forms},
    **{w: -1 for forms in NEGATIVE_VERBS for w in forms},
}
_CLAUSE_SPLIT_RE = re.compile(r"[,.;]")
_ARTICLE_RE = re.compile(r"\ba (?=[aeiou])")  # "a excellent" -> "an excellent"


def _opinion(rng: random.Random) -> tuple[str, int]:
    """One opinion clause and its score: polarity (+-1), x2 if intensified, x-1 if negated."""
    negated = rng.random() < 0.3
    intensifier = rng.choice(INTENSIFIERS) if rng.random() < 0.3 else ""
    polarity = rng.choice((1, -1))
    score = polarity * (2 if intensifier else 1) * (-1 if negated else 1)
    form = rng.randrange(3)
    if form == 0:  # "the plot was not very clever"
        adjective = rng.choice(POSITIVE_ADJECTIVES if polarity > 0 else NEGATIVE_ADJECTIVES)
        copula = rng.choice(_COPULAS)[1 if negated else 0]
        words = [rng.choice(_SUBJECTS), copula, intensifier, adjective]
    elif form == 1:  # "i did not really enjoy the cast"
        past, base = rng.choice(POSITIVE_VERBS if polarity > 0 else NEGATIVE_VERBS)
        verb = ["did not", intensifier, base] if negated else [intensifier, past]
        words = ["i", *verb, rng.choice((*_SUBJECTS, "it"))]
    else:  # "not a truly gripping story"
        adjective = rng.choice(POSITIVE_ADJECTIVES if polarity > 0 else NEGATIVE_ADJECTIVES)
        words = ["not" if negated else "", "a", intensifier, adjective, rng.choice(_NOUNS)]
    text = " ".join(w for w in words if w)
    return _ARTICLE_RE.sub("an ", text), score


def generate_review(rng: random.Random) -> tuple[str, int]:
    """(review text, label): 1..3 opinions and 0..2 neutral facts, in random order.

    label = 1 (pos) if the opinion scores sum above 0, else 0 (neg); reviews whose
    scores cancel out are drawn again, so the label is always `review_score(text) > 0`.
    """
    while True:
        opinions = [_opinion(rng) for _ in range(rng.randint(1, 3))]
        total = sum(score for _, score in opinions)
        if total != 0:
            break
    clauses = [text for text, _ in opinions] + rng.sample(_FILLERS, rng.randint(0, 2))
    rng.shuffle(clauses)
    text = clauses[0]
    if rng.random() < 0.3:
        text = f"{rng.choice(_OPENERS)}, {text}"
    for clause in clauses[1:]:
        text += rng.choice(_CONNECTIVES) + clause
    return text + ".", int(total > 0)


def review_score(text: str) -> int:
    """The sentiment score of a `generate_review` text, read from its words.

    Per clause (split at , . ;): each polarity word counts +-1, doubled by an
    intensifier and negated by "not"/"never" in the same clause; the scores add up.
    """
    total = 0
    for clause in _CLAUSE_SPLIT_RE.split(text):
        words = clause.split()
        weight = (2 if any(w in INTENSIFIERS for w in words) else 1) * (
            -1 if any(w in NEGATORS for w in words) else 1)
        total += weight * sum(_POLARITY.get(w, 0) for w in words)
    return total


@registry.register_problem
class SentimentSynthetic(text_problems.Text2ClassProblem):
    """Template-grammar movie reviews -> neg / pos, with negation and mixed opinions.

    A review has 1..3 opinion clauses ("the plot was not very clever", "i really loved
    the cast", "a dull script") and up to 2 neutral facts. Each opinion scores +-1,
    x2 with an intensifier, x-1 when negated; the label is the sign of the sum (never
    0). Recognizing adjectives alone is not enough: negation flips them and mixed
    opinions are decided by intensity. The label is a deterministic function of the
    text (`review_score(text) > 0`), so an ideal classifier reaches accuracy 1.0 and
    neg_log_perplexity 0. Train 40,000 / dev 2,000 reviews, seeded per split; a small
    SentencePiece vocabulary (the grammar has ~130 words) built from 10,000 of them.
    """

    vocab_type = text_problems.VOCAB_SUBWORD
    approx_vocab_size = 2**8  # below the word count: some words come in pieces
    max_samples_for_vocab = 10_000  # keeps SentencePiece training to a few seconds
    splits = (problem.SplitSpec(problem.TRAIN_SPLIT, 2), problem.SplitSpec(problem.DEV_SPLIT, 1))
    sizes = {problem.TRAIN_SPLIT: 40_000, problem.DEV_SPLIT: 2_000}

    def class_labels(self, data_dir: str | None) -> list[str]:
        return list(SENTIMENT_LABELS)

    def num_examples(self, split: str) -> int:
        return self.sizes[split]

    def generate_samples(
        self, data_dir: str, tmp_dir: str, split: str, *, mirror: str | None = None
    ) -> Iterator[dict[str, object]]:
        if split not in self.sizes:
            raise ValueError(f"{self.name} has no {split!r} split; use train or dev.")
        # A string seed is hashed stably (not by PYTHONHASHSEED): same data every run.
        rng = random.Random(f"{self.dataset_filename()}-{split}")
        for _ in range(self.sizes[split]):
            text, label = generate_review(rng)
            yield {"inputs": text, "label": label}
