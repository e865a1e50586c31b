"""Tests of translate_enfr_wmt32k, offline.

Tiny archives in the real WMT layouts (root-level CommonCrawl files, `training/`
folders, the giga-fren .tar of gzipped files, `un/`, `dev/`) are served by a local
HTTP server used as a URL-prefix mirror; the registered problem's tables are patched
to the same URLs pinned to the tiny files' hashes.
"""

from __future__ import annotations

import os

import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.translation import translate_enfr
from tests.helpers.local_http import (
    check_real_pin_rejects,
    serve_folder,
    tfds_url_checksums,
    write_tar,
)
from tests.helpers.wmt_mirror import decoded_pairs, pair_files, pin_tables, word_pairs

_EN = "the house is small and old . we see a green river near my city ! where is it ?".split()
_FR = "la maison est petite et vieille . nous voyons une rivière verte près de ma ville !".split()


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    return word_pairs(seed, count, _EN, _FR)


CORPORA = {  # archive name -> (members (en, fr), pairs)
    "training-parallel-commoncrawl.tgz": (
        ("commoncrawl.fr-en.en", "commoncrawl.fr-en.fr"),
        _pairs(1, 30),
    ),
    "training-parallel-europarl-v7.tgz": (
        ("training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr"),
        _pairs(2, 30),
    ),
    "training-parallel-nc-v9.tgz": (
        ("training/news-commentary-v9.fr-en.en", "training/news-commentary-v9.fr-en.fr"),
        _pairs(3, 30),
    ),
    "training-giga-fren.tar": (
        ("giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz"),
        _pairs(4, 30),
    ),
    "training-parallel-un.tgz": (
        ("un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr"),
        _pairs(5, 30),
    ),
}
DEV = _pairs(6, 12)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    for archive, (names, pairs) in CORPORA.items():
        members = pair_files(names, pairs, compress=names[0].endswith(".gz"))
        decoy = {"commoncrawl.de-en.en": b"decoy\n"} if "commoncrawl" in archive else {}
        write_tar(os.path.join(folder, archive), {**members, **decoy})
    dev = pair_files(("dev/newstest2013.en", "dev/newstest2013.fr"), DEV)
    write_tar(os.path.join(folder, "dev.tgz"), {**dev, "dev/newstest2013.de": b"decoy\n"})
    with serve_folder(folder) as (url, _):
        yield url, folder


@pytest.fixture()
def tiny(monkeypatch, mirror):
    return pin_tables(monkeypatch, translate_enfr.TranslateEnfrWmt32k, mirror[1],
                      translate_enfr.ENFR_TRAIN_DATASETS, translate_enfr.ENFR_DEV_DATASETS,
                      approx_vocab_size=150, train_shards=2)


def test_generate_and_read_back(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("translate_enfr_wmt32k")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    train = [pair for _, pairs in CORPORA.values() for pair in pairs]
    assert summary["train"].examples == len(train) and summary["dev"].examples == len(DEV)
    files = sorted(os.listdir(data_dir))
    assert "vocab.translate_enfr_wmt32k.150.model" in files
    assert [f for f in files if f.startswith("translate_enfr_wmt32k-")] == [
        "translate_enfr_wmt32k-dev-00000-of-00001",
        "translate_enfr_wmt32k-train-00000-of-00002",
        "translate_enfr_wmt32k-train-00001-of-00002",
    ]
    assert decoded_pairs(prob, data_dir, problem.EVAL) == DEV
    assert sorted(decoded_pairs(prob, data_dir, problem.TRAIN)) == sorted(train)
    hp = prob.hparams(data_dir)
    assert (hp.input_space_id, hp.target_space_id) == (
        problem.SpaceID.EN_BPE_TOK,
        problem.SpaceID.FR_TOK,
    )
    assert "bleu" in prob.eval_metrics()

    rev = registry.problem("translate_enfr_wmt32k_rev")
    assert decoded_pairs(rev, data_dir, problem.EVAL) == [(f, e) for e, f in DEV]
    assert rev.languages == ("fr", "en")


def test_vocab_samples_every_corpus(tiny, monkeypatch, mirror, tmp_path):
    url, _ = mirror
    monkeypatch.setattr(tiny, "max_samples_for_vocab", 10)  # 2 pairs from each of 5 corpora
    texts = list(registry.problem("translate_enfr_wmt32k").text_for_vocab("", str(tmp_path), url))
    expected = [t for _, pairs in CORPORA.values() for pair in pairs[:2] for t in pair]
    assert texts == expected


RESOURCES = [
    translate_enfr.COMMONCRAWL,
    translate_enfr.EUROPARL_V7,
    translate_enfr.NEWS_COMMENTARY_V9,
    translate_enfr.GIGA_FREN,
    translate_enfr.UN_CORPUS,
    translate_enfr.WMT19_DEV,
]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.local_name)
def test_real_pins_reject_a_wrong_file(resource, tmp_path):
    check_real_pin_rejects(resource, tmp_path, b"not the real archive")


def test_pins_match_tensorflow_datasets():
    recorded = tfds_url_checksums("wmt13_translate.txt", "wmt14_translate.txt", "wmt19_translate.txt")
    for res in RESOURCES:
        assert recorded[res.url] == (res.size, res.sha256), res.url


def test_registered_table():
    prob = registry.problem("translate_enfr_wmt32k")
    assert prob.approx_vocab_size == 2**15 and prob.vocab_type == "subword"
    assert [s.shards for s in prob.splits] == [100, 1]
    assert [c.resource for c in prob.train_datasets] == RESOURCES[:5]
    assert prob.dev_datasets[0].files == ("dev/newstest2013.en", "dev/newstest2013.fr")
    assert prob.languages == ("en", "fr")
