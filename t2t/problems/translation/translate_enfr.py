"""WMT'14 English -> French translation, as Tensor2Tensor's `translate_enfr_wmt32k`.

Training data is Tensor2Tensor's full ("large") WMT En-Fr mix, about 40.8M sentence
pairs in five archives (about 6.6 GB to download):

| corpus                      | archive                             | pairs  |
| --------------------------- | ----------------------------------- | ------ |
| CommonCrawl (WMT13)         | training-parallel-commoncrawl.tgz   | ~3.2M  |
| Europarl v7                 | training-parallel-europarl-v7.tgz   | ~2.0M  |
| News Commentary v9 (WMT14)  | training-parallel-nc-v9.tgz         | ~0.18M |
| 10^9 French-English (giga)  | training-giga-fren.tar (gzipped)    | ~22.5M |
| UN corpus (undoc.2000)      | training-parallel-un.tgz            | ~12.9M |

The dev split is newstest2013 (3000 pairs) from WMT19's dev.tgz, which holds the same
newstest2013.en / .fr as the WMT17 dev.tgz Tensor2Tensor named. Every archive is
pinned to the size and sha256 that TensorFlow Datasets records for its URL
(`tensorflow_datasets/url_checksums/wmt13_translate.txt`, `wmt14_translate.txt`,
`wmt19_translate.txt`).

The shared SentencePiece vocabulary (~32k pieces) is trained on an equal share of
`max_samples_for_vocab` pairs from the start of every training corpus (Tensor2Tensor
likewise sampled every corpus, by a byte budget per file), so no single corpus (the
web-crawled CommonCrawl read first, say) dominates it. Metrics: BLEU (sacrebleu, at
decode time) besides the per-token ones.

Append `_rev` (`translate_enfr_wmt32k_rev`) for French -> English.
"""

from __future__ import annotations

from t2t import registry
from t2t.data import problem
from t2t.data.bases import translate
from t2t.data.generation.download import Resource
from t2t.problems.translation import translate_ende

COMMONCRAWL = translate_ende.COMMONCRAWL
EUROPARL_V7 = translate_ende.EUROPARL_V7
NEWS_COMMENTARY_V9 = Resource(
    url="http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
    size=80418416,
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
)
GIGA_FREN = Resource(
    url="http://www.statmt.org/wmt10/training-giga-fren.tar",
    size=2595102720,
    sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a",
)
UN_CORPUS = Resource(
    url="http://www.statmt.org/wmt13/training-parallel-un.tgz",
    size=2365634246,
    sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
)
WMT19_DEV = translate_ende.WMT19_DEV

ENFR_TRAIN_DATASETS = (
    translate.ParallelCorpus(COMMONCRAWL, ("commoncrawl.fr-en.en", "commoncrawl.fr-en.fr")),
    translate.ParallelCorpus(
        EUROPARL_V7, ("training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr")
    ),
    translate.ParallelCorpus(
        NEWS_COMMENTARY_V9,
        ("training/news-commentary-v9.fr-en.en", "training/news-commentary-v9.fr-en.fr"),
    ),
    translate.ParallelCorpus(
        GIGA_FREN, ("giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz")
    ),
    translate.ParallelCorpus(UN_CORPUS, ("un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr")),
)
ENFR_DEV_DATASETS = (
    translate.ParallelCorpus(WMT19_DEV, ("dev/newstest2013.en", "dev/newstest2013.fr")),
)


# The vocabulary sampling shared by the WMT mixes (defined beside the En-De tables).
MixedCorporaTranslateProblem = translate_ende.MixedCorporaTranslateProblem


@registry.register_problem
class TranslateEnfrWmt32k(MixedCorporaTranslateProblem):
    """WMT'14 En-Fr (~40.8M pairs, T2T's large mix), shared ~32k SentencePiece vocab."""

    train_datasets = ENFR_TRAIN_DATASETS
    dev_datasets = ENFR_DEV_DATASETS
    source_language = "en"
    target_language = "fr"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.FR_TOK
    approx_vocab_size = 2**15  # 32768
    train_shards = 100
    dev_shards = 1
