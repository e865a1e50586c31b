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
from t2t.problems.translation import wmt

# The archives (wmt.py holds them for every WMT pair), under the names used before.
COMMONCRAWL = wmt.COMMONCRAWL
EUROPARL_V7 = wmt.EUROPARL_V7
NEWS_COMMENTARY_V9 = wmt.NEWS_COMMENTARY_V9
GIGA_FREN = wmt.GIGA_FREN
UN_CORPUS = wmt.UN_CORPUS
WMT19_DEV = wmt.WMT19_DEV

ENFR_TRAIN_DATASETS = wmt.corpora("fr", "commoncrawl", "europarl_v7", "nc_v9", "giga_fren", "un")
ENFR_DEV_DATASETS = wmt.corpora("fr", "newstest2013")
# The vocabulary sampling shared by the WMT mixes.
MixedCorporaTranslateProblem = wmt.MixedCorporaTranslateProblem


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
