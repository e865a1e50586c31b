"""The WMT archives shared by the En-De, En-Fr and En-Cs problems, and their tables.

Each archive holds one file per language of each pair, named by a pattern with the
pair's other language (`{xx}`) and the side (`{side}`: "en" or `xx`), e.g. CommonCrawl's
`commoncrawl.de-en.en` / `commoncrawl.de-en.de`. `corpora("de", "commoncrawl",
"europarl_v7")` builds the ParallelCorpus rows Tensor2Tensor listed by hand per pair.
Every archive is pinned to the size and sha256 TensorFlow Datasets records for its URL
(`tensorflow_datasets/url_checksums/wmt*_translate.txt`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from t2t.data import problem
from t2t.data.bases import translate
from t2t.data.generation.download import Resource

NEWS_COMMENTARY_V13 = Resource(
    url="http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz",
    size=113157482,
    sha256="17992b7e919cfb754c60f4e754148bc23b80706ad0ed7b34150831a554b40c91",
)
NEWS_COMMENTARY_V9 = Resource(
    url="http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
    size=80418416,
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
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
WMT19_DEV = Resource(  # holds the same newstest2013 files as the WMT17 dev.tgz T2T named
    url="http://data.statmt.org/wmt19/translation-task/dev.tgz",
    size=38654961,
    sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7",
)

# name -> (archive, path of each side's file inside it)
CORPUS_FILES: dict[str, tuple[Resource, str]] = {
    "nc_v13": (NEWS_COMMENTARY_V13,
               "training-parallel-nc-v13/news-commentary-v13.{xx}-en.{side}"),
    "nc_v9": (NEWS_COMMENTARY_V9, "training/news-commentary-v9.{xx}-en.{side}"),
    "commoncrawl": (COMMONCRAWL, "commoncrawl.{xx}-en.{side}"),
    "europarl_v7": (EUROPARL_V7, "training/europarl-v7.{xx}-en.{side}"),
    "giga_fren": (GIGA_FREN, "giga-fren.release2.fixed.{side}.gz"),
    "un": (UN_CORPUS, "un/undoc.2000.{xx}-en.{side}"),
    "newstest2013": (WMT19_DEV, "dev/newstest2013.{side}"),
}


def corpora(language: str, *names: str) -> tuple[translate.ParallelCorpus, ...]:
    """The English-`language` ParallelCorpus rows of the named archives, in that order.

    Each row reads (English file, `language` file) from its archive, e.g.
    `corpora("cs", "newstest2013")` -> dev/newstest2013.en, dev/newstest2013.cs.
    """
    unknown = [n for n in names if n not in CORPUS_FILES]
    if unknown:
        raise ValueError(f"unknown WMT corpus {unknown[0]!r}; known: {', '.join(CORPUS_FILES)}")
    rows = []
    for name in names:
        resource, pattern = CORPUS_FILES[name]
        files = tuple(pattern.format(xx=language, side=side) for side in ("en", language))
        rows.append(translate.ParallelCorpus(resource, files))
    return tuple(rows)


class MixedCorporaTranslateProblem(translate.TranslateProblem):
    """A TranslateProblem whose vocabulary samples every training corpus equally.

    `max_samples_for_vocab` pairs in all: `max_samples_for_vocab // len(corpora)` from
    the start of each corpus of the train split, read in table order (Tensor2Tensor
    likewise sampled every corpus, by a byte budget per file), so that no single corpus
    (the web-crawled CommonCrawl, say) dominates the vocabulary. The corpora are read
    as they are, before any filtering a subclass applies to its samples.
    """

    def text_for_vocab(self, data_dir: str, tmp_dir: str, mirror: str | None) -> Iterator[str]:
        train = self.source_data_files(problem.TRAIN_SPLIT)
        share = max(1, self.max_samples_for_vocab // len(train))
        for corpus in train:
            source, target = translate.corpus_files(corpus, tmp_dir, mirror)
            for sample in itertools.islice(translate.parallel_samples(source, target), share):
                yield sample["inputs"]
                yield sample["targets"]
