"""WMT English -> German translation, as Tensor2Tensor's `translate_ende_wmt*` problems.

Training data here is News Commentary v13 only (about 284k sentence pairs, one 113 MB
archive): small enough to prepare and train on a CPU, and to hold on a small mirror.
Tensor2Tensor's full WMT En-De mix also used Europarl v7 and CommonCrawl (together
another ~1.6 GB of archives, ~4.5M pairs); their tables are kept below as
`ENDE_FULL_TRAIN_DATASETS`, pinned like the others, for a problem of your own:

    @registry.register_problem
    class TranslateEndeWmtFull32k(translate_ende.TranslateEndeWmt32k):
        train_datasets = translate_ende.ENDE_FULL_TRAIN_DATASETS
        train_shards = 100

The dev split is newstest2013 (3000 pairs) from WMT19's dev.tgz. Every archive is
pinned to the size and sha256 that TensorFlow Datasets records for its URL
(`tensorflow_datasets/url_checksums/wmt_t2t_translate.txt`, `wmt19_translate.txt`), so
a mirror copy must be byte-identical to the published file.

Append `_rev` to a name (`translate_ende_wmt32k_rev`) for German -> English.
"""

from __future__ import annotations

from t2t import registry
from t2t.problems import problem, translate
from t2t.problems.download import Resource

NEWS_COMMENTARY_V13 = Resource(
    url="http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz",
    size=113157482,
    sha256="17992b7e919cfb754c60f4e754148bc23b80706ad0ed7b34150831a554b40c91",
)
WMT19_DEV = Resource(
    url="http://data.statmt.org/wmt19/translation-task/dev.tgz",
    size=38654961,
    sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7",
)
COMMONCRAWL = Resource(
    url="http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
    size=918311367,
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
)
EUROPARL_V7 = Resource(
    url="http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    size=657632379,
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
)

ENDE_TRAIN_DATASETS = (
    translate.ParallelCorpus(
        NEWS_COMMENTARY_V13,
        (
            "training-parallel-nc-v13/news-commentary-v13.de-en.en",
            "training-parallel-nc-v13/news-commentary-v13.de-en.de",
        ),
    ),
)
# Tensor2Tensor's full training mix (not used by the problems registered here).
ENDE_FULL_TRAIN_DATASETS = (
    *ENDE_TRAIN_DATASETS,
    translate.ParallelCorpus(COMMONCRAWL, ("commoncrawl.de-en.en", "commoncrawl.de-en.de")),
    translate.ParallelCorpus(
        EUROPARL_V7, ("training/europarl-v7.de-en.en", "training/europarl-v7.de-en.de")
    ),
)
ENDE_DEV_DATASETS = (
    translate.ParallelCorpus(WMT19_DEV, ("dev/newstest2013.en", "dev/newstest2013.de")),
)


class TranslateEndeWmt(translate.TranslateProblem):
    """English -> German on News Commentary v13; dev newstest2013 (unregistered base)."""

    train_datasets = ENDE_TRAIN_DATASETS
    dev_datasets = ENDE_DEV_DATASETS
    source_language = "en"
    target_language = "de"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.DE_BPE_TOK
    train_shards = 10  # Tensor2Tensor wrote 100 for its ~4.5M-pair mix
    dev_shards = 1


@registry.register_problem
class TranslateEndeWmt8k(TranslateEndeWmt):
    """WMT En-De (News Commentary v13), shared SentencePiece vocabulary of ~8k pieces."""

    approx_vocab_size = 2**13  # 8192


@registry.register_problem
class TranslateEndeWmt32k(TranslateEndeWmt):
    """WMT En-De (News Commentary v13), shared SentencePiece vocabulary of ~32k pieces."""

    approx_vocab_size = 2**15  # 32768
