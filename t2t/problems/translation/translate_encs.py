"""WMT English -> Czech translation, as Tensor2Tensor's `translate_encs_wmt32k`.

Training data is Tensor2Tensor's table less CzEng (which needs a manual, licensed
download): about 1.0M sentence pairs from three archives (about 1.7 GB to download,
two of them shared with the En-De and En-Fr problems):

| corpus                 | archive                           | cs-en pairs |
| ---------------------- | --------------------------------- | ----------- |
| News Commentary v13    | training-parallel-nc-v13.tgz      | ~211k       |
| CommonCrawl (WMT13)    | training-parallel-commoncrawl.tgz | ~162k       |
| Europarl v7            | training-parallel-europarl-v7.tgz | ~647k       |

The dev split is newstest2013 (3000 pairs) from WMT19's dev.tgz (the same
newstest2013.en / .cs as the WMT17 dev.tgz Tensor2Tensor named). Every archive is
pinned to the size and sha256 that TensorFlow Datasets records for its URL
(`tensorflow_datasets/url_checksums/wmt_t2t_translate.txt`, `wmt19_translate.txt`).

The shared SentencePiece vocabulary (~32k pieces) samples every training corpus
equally (see `wmt.MixedCorporaTranslateProblem`). Metrics: BLEU (sacrebleu,
at decode time) besides the per-token ones.

To add CzEng 1.7 once you hold it, list it first in a subclass's `train_datasets`.
Append `_rev` (`translate_encs_wmt32k_rev`) for Czech -> English.
"""

from __future__ import annotations

from t2t import registry
from t2t.data import problem
from t2t.problems.translation import wmt

# The archives (wmt.py holds them for every WMT pair), under the names used before.
NEWS_COMMENTARY_V13 = wmt.NEWS_COMMENTARY_V13
COMMONCRAWL = wmt.COMMONCRAWL
EUROPARL_V7 = wmt.EUROPARL_V7
WMT19_DEV = wmt.WMT19_DEV

ENCS_TRAIN_DATASETS = wmt.corpora("cs", "nc_v13", "commoncrawl", "europarl_v7")
ENCS_DEV_DATASETS = wmt.corpora("cs", "newstest2013")


@registry.register_problem
class TranslateEncsWmt32k(wmt.MixedCorporaTranslateProblem):
    """WMT En-Cs (NC v13 + CommonCrawl + Europarl v7, ~1.0M pairs), ~32k shared vocab."""

    train_datasets = ENCS_TRAIN_DATASETS
    dev_datasets = ENCS_DEV_DATASETS
    source_language = "en"
    target_language = "cs"
    input_space_id = problem.SpaceID.EN_BPE_TOK
    target_space_id = problem.SpaceID.CS_TOK
    approx_vocab_size = 2**15  # 32768
    train_shards = 10
    dev_shards = 1
