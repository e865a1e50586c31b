"""Tests for t2t.data.bases.translate (through translate_ende_wmt_nc8k), offline.

Tiny archives in the real WMT layout are served by a local HTTP server used as a
URL-prefix mirror. They cannot match the real pinned hashes, so the tests patch the
registered problem's corpus tables with the same URLs pinned to the tiny files' hashes:
the fetch / extract / stream / encode / write / read path is the one real data takes.
"""

from __future__ import annotations

import gzip
import html
import os

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.bases import translate
from t2t.data.generation.download import Resource
from t2t.problems.translation import translate_ende
from tests.helpers.local_http import (
    check_real_pin_rejects,
    pinned,
    serve_folder,
    tfds_url_checksums,
    write_tar,
)
from tests.helpers.wmt_mirror import pin_tables, word_pairs

_EN = (
    "the house is small and old . we see a green river near the city . my friend buys "
    "bread , cheese and water today ! where is the bridge over the street ? the girl "
    "reads a beautiful book"
).split()
_DE = (
    "das Haus ist klein und alt . wir sehen einen grünen Fluss nahe der Stadt . mein "
    "Freund kauft Brot , Käse und Wasser heute ! wo ist die Brücke über die Straße ? das "
    "Mädchen liest ein schönes Buch groß Öl"
).split()


def _sentences(seed: int, count: int) -> list[tuple[str, str]]:
    pairs = word_pairs(seed, count, _EN, _DE, lengths=(3, 12), numbered=False)
    for i in range(0, count, 17):  # characters SGML escapes
        en, de = pairs[i]
        pairs[i] = (f'{en} "Müller & Sons" < 5', f'{de} "Müller & Söhne" < 5')
    return pairs


TRAIN = _sentences(1, 200)
DEV = _sentences(2, 20)
NC = "training-parallel-nc-v13"


def _lines(texts: list[str], newline: str = "\n") -> bytes:
    return "".join(t + newline for t in texts).encode("utf-8")


def _sgm(texts: list[str], kind: str, lang: str) -> bytes:
    lines = [f'<{kind}set setid="newstest2013" srclang="any" trglang="{lang}">']
    lines.append('<doc sysid="ref" docid="test-doc" genre="news" origlang="en">')
    lines.append("<p>")
    lines += [f'<seg id="{i}">{html.escape(t, quote=False)}</seg>' for i, t in enumerate(texts, 1)]
    lines += ["</p>", "</doc>", f"</{kind}set>"]
    return _lines(lines)


def _tgz(path: str, members: dict[str, bytes]) -> None:
    write_tar(path, members, folders=sorted({m.split("/")[0] for m in members if "/" in m}))


_REQUESTS: list[str] = []  # paths the mirror served


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """(URL prefix, folder) of a mirror holding the tiny archives."""
    folder = str(tmp_path_factory.mktemp("mirror"))
    _tgz(
        os.path.join(folder, f"{NC}.tgz"),
        {
            f"{NC}/news-commentary-v13.de-en.en": _lines([en for en, _ in TRAIN]),
            f"{NC}/news-commentary-v13.de-en.de": _lines([de for _, de in TRAIN]),
            f"{NC}/news-commentary-v13.cs-en.en": b"decoy\n",
        },
    )
    _tgz(
        os.path.join(folder, "dev.tgz"),
        {
            "dev/newstest2013.en": _lines([en for en, _ in DEV]),
            "dev/newstest2013.de": _lines([de for _, de in DEV]),
            "dev/newstest2013-src.en.sgm": _sgm([en for en, _ in DEV], "src", "de"),
            "dev/newstest2013-ref.de.sgm": _sgm([de for _, de in DEV], "ref", "de"),
            "dev/newstest2012.en": b"decoy\n",
        },
    )
    with serve_folder(folder, _REQUESTS) as (url, _):
        yield url, folder


@pytest.fixture(scope="module")
def mirror_url(mirror):
    return mirror[0]


@pytest.fixture()
def tiny_ende(monkeypatch, mirror):
    """translate_ende_wmt_nc8k with its tables pinned to the tiny archives, vocab ~200."""
    return pin_tables(monkeypatch, translate_ende.TranslateEndeWmtNc8k, mirror[1],
                      translate_ende.ENDE_NC_TRAIN_DATASETS, translate_ende.ENDE_DEV_DATASETS,
                      approx_vocab_size=200)


def _decoded(prob: problem.Problem, data_dir: str, mode: str) -> list[tuple[str, str]]:
    encoders = prob.feature_encoders(data_dir)
    out = []
    for ex in prob.dataset(mode, data_dir, deterministic=True).as_numpy_iterator():
        assert ex["inputs"][-1] == 1 and ex["targets"][-1] == 1  # EOS
        out.append(
            (
                encoders["inputs"].decode(ex["inputs"], strip_extraneous=True),
                encoders["targets"].decode(ex["targets"], strip_extraneous=True),
            )
        )
    return out


def test_generate_and_read_back(tiny_ende, mirror_url, tmp_path):
    assert set(c for pair in DEV for s in pair for c in s) <= set(
        c for pair in TRAIN for s in pair for c in s
    )  # so that the vocabulary covers the dev text
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    _REQUESTS.clear()
    prob = registry.problem("translate_ende_wmt_nc8k")
    assert isinstance(prob, tiny_ende)
    summary = prob.generate_data(data_dir, tmp_dir, mirror=mirror_url, progress=False)
    assert summary["train"].examples == len(TRAIN) and summary["dev"].examples == len(DEV)
    assert sorted(set(_REQUESTS)) == ["/dev.tgz", f"/{NC}.tgz"]

    files = sorted(os.listdir(data_dir))
    assert "vocab.translate_ende_wmt_nc8k.200.model" in files
    shards = [f for f in files if f.startswith("translate_ende_wmt_nc8k-")]
    assert shards == ["translate_ende_wmt_nc8k-dev-00000-of-00001"] + [
        f"translate_ende_wmt_nc8k-train-{i:05d}-of-00010" for i in range(10)
    ]
    assert _decoded(prob, data_dir, problem.EVAL) == DEV  # inputs English, targets German
    assert sorted(_decoded(prob, data_dir, problem.TRAIN)) == sorted(TRAIN)

    hp = prob.hparams(data_dir)
    assert (hp.input_space_id, hp.target_space_id) == (
        problem.SpaceID.EN_BPE_TOK,
        problem.SpaceID.DE_BPE_TOK,
    )
    assert hp.vocab_size["inputs"] == hp.vocab_size["targets"] <= 200
    assert "bleu" in prob.eval_metrics() and "accuracy" in prob.eval_metrics()
    assert prob.languages == ("en", "de")

    # _rev reads the same files with the sides swapped.
    rev = registry.problem("translate_ende_wmt_nc8k_rev")
    rev.generate_data(data_dir, tmp_dir, mirror=mirror_url, progress=False)
    assert _decoded(rev, data_dir, problem.EVAL) == [(de, en) for en, de in DEV]
    assert rev.languages == ("de", "en")
    assert rev.hparams(data_dir).input_space_id == problem.SpaceID.DE_BPE_TOK


def test_rev_generates_into_fresh_dir(tiny_ende, mirror_url, tmp_path):
    data_dir = str(tmp_path / "data")
    rev = registry.problem("translate_ende_wmt_nc8k_rev")
    rev.generate_data(data_dir, str(tmp_path / "tmp"), mirror=mirror_url, progress=False)
    assert os.path.exists(os.path.join(data_dir, "translate_ende_wmt_nc8k-train-00009-of-00010"))
    assert _decoded(rev, data_dir, problem.EVAL) == [(de, en) for en, de in DEV]


def test_sgml_segments(tiny_ende, monkeypatch, mirror_url, tmp_path):
    tmp_dir = str(tmp_path)
    dev = tiny_ende.dev_datasets[0].resource
    sgm = translate.ParallelCorpus(
        dev, ("dev/newstest2013-src.en.sgm", "dev/newstest2013-ref.de.sgm")
    )
    source, target = translate.corpus_files(sgm, tmp_dir, mirror_url)
    assert list(translate.read_segments(source)) == [en for en, _ in DEV]
    assert list(translate.read_segments(target)) == [de for _, de in DEV]
    assert any("&amp;" in line for line in open(source, encoding="utf-8"))  # really escaped
    monkeypatch.setattr(tiny_ende, "dev_datasets", [sgm])
    samples = registry.problem("translate_ende_wmt_nc8k").generate_samples(
        "", tmp_dir, "dev", mirror=mirror_url
    )
    assert [(s["inputs"], s["targets"]) for s in samples] == DEV


def test_sgml_several_segments_per_line_and_gzip(tmp_path):
    path = str(tmp_path / "x.sgm.gz")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(
            '<doc><p><seg id="1"> a &lt;b&gt; </seg><seg id=2>&#252;</seg>\n<seg id="3"></seg></p>\n'
        )
    assert list(translate.read_segments(path)) == ["a <b>", "ü", ""]


class _Tiny(translate.TranslateProblem):
    """A translation problem over one archive `tiny.tgz` (not registered)."""

    source_language, target_language = "en", "de"
    approx_vocab_size = 50


def _tiny_problem(folder: str, members: dict[str, bytes], name: str) -> _Tiny:
    path = os.path.join(folder, name)
    _tgz(path, members)
    resource = pinned(Resource(f"http://example.invalid/{name}"), path)
    prob = _Tiny()
    prob.train_datasets = [translate.ParallelCorpus(resource, ("c/src.en", "c/tgt.de"))]
    return prob


def test_empty_lines_are_skipped(mirror, tmp_path):
    url, folder = mirror
    src = _lines(["one", "", "   ", "four", "five", "six"], newline="\r\n")
    tgt = _lines(["eins", "zwei", "drei", "", "fünf", " sechs "])
    prob = _tiny_problem(folder, {"c/src.en": src, "c/tgt.de": tgt}, "empty.tgz")
    samples = list(prob.generate_samples("", str(tmp_path), "train", mirror=url))
    assert samples == [
        {"inputs": "one", "targets": "eins"},
        {"inputs": "five", "targets": "fünf"},
        {"inputs": "six", "targets": "sechs"},
    ]


def test_line_count_mismatch_names_both_files(mirror, tmp_path):
    url, folder = mirror
    src = _lines(["one", "two", "three", "four", "five"])
    tgt = _lines(["eins", "zwei", "drei", "vier"])
    prob = _tiny_problem(folder, {"c/src.en": src, "c/tgt.de": tgt}, "mismatch.tgz")
    with pytest.raises(translate.LineCountMismatchError) as info:
        list(prob.generate_samples("", str(tmp_path), "train", mirror=url))
    message = str(info.value)
    assert os.path.join("c", "src.en") in message and os.path.join("c", "tgt.de") in message
    assert "has 5 lines" in message and "has 4" in message


def test_missing_member_is_reported(mirror, tmp_path):
    url, folder = mirror
    prob = _tiny_problem(folder, {"c/src.en": b"a\n", "c/other.de": b"b\n"}, "missing.tgz")
    with pytest.raises(FileNotFoundError, match=r"missing.tgz has no file 'c/tgt.de'.*c/other.de"):
        list(prob.generate_samples("", str(tmp_path), "train", mirror=url))
    with pytest.raises(ValueError, match="no 'test' split"):
        list(prob.generate_samples("", str(tmp_path), "test", mirror=url))


@pytest.mark.parametrize("resource", [translate_ende.NEWS_COMMENTARY_V13, translate_ende.WMT19_DEV])
def test_real_pins_reject_a_wrong_file(resource, tmp_path):
    check_real_pin_rejects(resource, tmp_path, b"not the real archive")
    assert not os.path.exists(tmp_path / "dl" / resource.local_name)


def test_pins_match_tensorflow_datasets():
    recorded = tfds_url_checksums("wmt_t2t_translate.txt", "wmt19_translate.txt")
    resources = [
        translate_ende.NEWS_COMMENTARY_V13,
        translate_ende.WMT19_DEV,
        translate_ende.COMMONCRAWL,
        translate_ende.EUROPARL_V7,
    ]
    for res in resources:
        assert recorded[res.url] == (res.size, res.sha256), res.url
