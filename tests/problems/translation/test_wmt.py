"""Tests of the shared WMT archive table (t2t/problems/translation/wmt.py)."""

from __future__ import annotations

import pytest

from t2t.problems.translation import wmt


def test_corpora_name_each_sides_file_inside_its_archive():
    nc, crawl, dev = wmt.corpora("cs", "nc_v13", "commoncrawl", "newstest2013")
    assert nc.resource is wmt.NEWS_COMMENTARY_V13
    assert nc.files == ("training-parallel-nc-v13/news-commentary-v13.cs-en.en",
                        "training-parallel-nc-v13/news-commentary-v13.cs-en.cs")
    assert crawl.files == ("commoncrawl.cs-en.en", "commoncrawl.cs-en.cs")
    assert (dev.resource, dev.files) == (wmt.WMT19_DEV,
                                         ("dev/newstest2013.en", "dev/newstest2013.cs"))
    (giga,) = wmt.corpora("fr", "giga_fren")
    assert giga.files == ("giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz")


def test_an_unknown_corpus_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match=r"unknown WMT corpus 'europarl_v8'; known: .*europarl_v7"):
        wmt.corpora("de", "commoncrawl", "europarl_v8")
