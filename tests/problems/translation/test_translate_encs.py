"""Tests of translate_encs_wmt32k, offline.

Tiny archives in the real WMT layouts (`training-parallel-nc-v13/`, root-level
CommonCrawl files, `training/`, `dev/`) are served by a local HTTP server used as a
URL-prefix mirror; the registered problem's tables are patched to the same URLs pinned
to the tiny files' hashes.
"""

from __future__ import annotations

import os

import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.translation import translate_encs
from tests.helpers.local_http import (
    check_real_pin_rejects,
    serve_folder,
    tfds_url_checksums,
    write_tar,
)
from tests.helpers.wmt_mirror import decoded_pairs, pair_files, pin_tables, word_pairs

_EN = "the house is small and old . we see a green river near my city ! where is it ?".split()
_CS = "dům je malý a starý . vidíme zelenou řeku blízko mého města ! kde je to ?".split()


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    return word_pairs(seed, count, _EN, _CS)


NC = "training-parallel-nc-v13"
CORPORA = {  # archive name -> (members (en, cs), pairs)
    f"{NC}.tgz": (
        (f"{NC}/news-commentary-v13.cs-en.en", f"{NC}/news-commentary-v13.cs-en.cs"),
        _pairs(1, 30),
    ),
    "training-parallel-commoncrawl.tgz": (
        ("commoncrawl.cs-en.en", "commoncrawl.cs-en.cs"),
        _pairs(2, 30),
    ),
    "training-parallel-europarl-v7.tgz": (
        ("training/europarl-v7.cs-en.en", "training/europarl-v7.cs-en.cs"),
        _pairs(3, 30),
    ),
}
DEV = _pairs(4, 12)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    for archive, (names, pairs) in CORPORA.items():
        decoy = {names[0].replace("cs-en", "de-en"): b"decoy\n"}
        write_tar(os.path.join(folder, archive), {**pair_files(names, pairs), **decoy})
    dev = pair_files(("dev/newstest2013.en", "dev/newstest2013.cs"), DEV)
    write_tar(os.path.join(folder, "dev.tgz"), {**dev, "dev/newstest2012.cs": b"decoy\n"})
    with serve_folder(folder) as (url, _):
        yield url, folder


@pytest.fixture()
def tiny(monkeypatch, mirror):
    return pin_tables(monkeypatch, translate_encs.TranslateEncsWmt32k, mirror[1],
                      translate_encs.ENCS_TRAIN_DATASETS, translate_encs.ENCS_DEV_DATASETS,
                      approx_vocab_size=150, train_shards=2)


def test_generate_and_read_back(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    rev = registry.problem("translate_encs_wmt32k_rev")  # generates the shared files
    summary = rev.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    train = [pair for _, pairs in CORPORA.values() for pair in pairs]
    assert summary["train"].examples == len(train) and summary["dev"].examples == len(DEV)
    files = sorted(os.listdir(data_dir))
    assert "vocab.translate_encs_wmt32k.150.model" in files
    assert "translate_encs_wmt32k-train-00001-of-00002" in files
    assert decoded_pairs(rev, data_dir, problem.EVAL) == [(c, e) for e, c in DEV]
    assert rev.hparams(data_dir).input_space_id == problem.SpaceID.CS_TOK

    prob = registry.problem("translate_encs_wmt32k")
    assert decoded_pairs(prob, data_dir, problem.EVAL) == DEV
    assert sorted(decoded_pairs(prob, data_dir, problem.TRAIN)) == sorted(train)
    assert prob.languages == ("en", "cs") and "bleu" in prob.eval_metrics()


RESOURCES = [
    translate_encs.NEWS_COMMENTARY_V13,
    translate_encs.COMMONCRAWL,
    translate_encs.EUROPARL_V7,
    translate_encs.WMT19_DEV,
]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.local_name)
def test_real_pins_reject_a_wrong_file(resource, tmp_path):
    check_real_pin_rejects(resource, tmp_path, b"not the real archive")


def test_pins_match_tensorflow_datasets():
    recorded = tfds_url_checksums("wmt_t2t_translate.txt", "wmt19_translate.txt")
    for res in RESOURCES:
        assert recorded[res.url] == (res.size, res.sha256), res.url


def test_registered_table():
    prob = registry.problem("translate_encs_wmt32k")
    assert prob.approx_vocab_size == 2**15 and [s.shards for s in prob.splits] == [10, 1]
    assert [c.resource for c in prob.train_datasets] == RESOURCES[:3]
    assert prob.dev_datasets[0].files == ("dev/newstest2013.en", "dev/newstest2013.cs")
