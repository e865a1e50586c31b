"""Tests of the translate_ende_* problems: Tensor2Tensor's tables, offline.

The registered tables are checked against Tensor2Tensor's translate_ende.py (the
corpora, the files inside their archives, the dev set, shard counts, vocabularies,
space ids). Generation runs on tiny archives in the real WMT layouts
(`training-parallel-nc-v13/`, root-level CommonCrawl files, `training/`, `dev/`),
served by a local HTTP server used as a URL-prefix mirror, with the problems' tables
patched to the same URLs pinned to the tiny files' hashes.
"""

from __future__ import annotations

import os

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.problems.translation import translate_ende
from tests.helpers.local_http import serve_folder, write_tar
from tests.helpers.wmt_mirror import decoded_pairs, pair_files, pin_tables

# Tensor2Tensor's _ENDE_TRAIN_DATASETS and _ENDE_EVAL_DATASETS (translate_ende.py):
# (URL, (English file, German file)) with the paths inside each archive.
T2T_TRAIN = [
    (
        "http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz",
        (
            "training-parallel-nc-v13/news-commentary-v13.de-en.en",
            "training-parallel-nc-v13/news-commentary-v13.de-en.de",
        ),
    ),
    (
        "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
        ("commoncrawl.de-en.en", "commoncrawl.de-en.de"),
    ),
    (
        "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
        ("training/europarl-v7.de-en.en", "training/europarl-v7.de-en.de"),
    ),
]
# T2T read newstest2013 from WMT17's dev.tgz; WMT19's holds the same two files.
T2T_DEV_FILES = ("dev/newstest2013.en", "dev/newstest2013.de")

FULL_MIX = ("translate_ende_wmt32k", "translate_ende_wmt8k", "translate_ende_wmt_characters",
            "translate_ende_wmt_clean32k")


def _table(datasets) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.resource.url, tuple(c.files)) for c in datasets]


# ------------------------------------------------------------------ the tables
@pytest.mark.parametrize("name", FULL_MIX)
def test_full_mix_is_t2ts_table(name):
    prob = registry.problem(name)
    assert _table(prob.train_datasets) == T2T_TRAIN
    assert [tuple(c.files) for c in prob.dev_datasets] == [T2T_DEV_FILES]
    assert [(s.name, s.shards) for s in prob.splits] == [("train", 100), ("dev", 1)]
    assert prob.is_generate_per_split
    assert prob.languages == ("en", "de")
    assert "bleu" in prob.eval_metrics()


def test_vocabularies_and_space_ids():
    for name, size in (("translate_ende_wmt32k", 2**15), ("translate_ende_wmt8k", 2**13),
                       ("translate_ende_wmt_clean32k", 2**15)):
        prob = registry.problem(name)
        assert prob.vocab_type == "subword" and prob.approx_vocab_size == size, name
        assert (prob.input_space_id, prob.target_space_id) == (
            problem.SpaceID.EN_BPE_TOK, problem.SpaceID.DE_BPE_TOK), name

    chars = registry.problem("translate_ende_wmt_characters")
    assert chars.vocab_type == "byte"  # T2T's VocabType.CHARACTER: its ByteTextEncoder
    hp = chars.hparams(None)  # needs no vocabulary file
    assert hp.vocab_size == {"inputs": 258, "targets": 258}
    assert (hp.input_space_id, hp.target_space_id) == (problem.SpaceID.EN_CHR,
                                                       problem.SpaceID.DE_CHR)
    assert isinstance(chars.feature_encoders(None)["inputs"], text_encoder.ByteTextEncoder)
    rev = registry.problem("translate_ende_wmt_characters_rev").hparams(None)
    assert (rev.input_space_id, rev.target_space_id) == (problem.SpaceID.DE_CHR,
                                                         problem.SpaceID.EN_CHR)

    clean = registry.problem("translate_ende_wmt_clean32k")
    assert clean.vocab_filename == "vocab.translate_ende_wmt32k.32768.model"
    assert registry.problem("translate_ende_wmt_clean32k_rev").vocab_filename == (
        "vocab.translate_ende_wmt32k.32768.model")


@pytest.mark.parametrize("name, size", [("translate_ende_wmt_nc32k", 2**15),
                                        ("translate_ende_wmt_nc8k", 2**13)])
def test_news_commentary_only_problems(name, size):
    prob = registry.problem(name)
    assert _table(prob.train_datasets) == T2T_TRAIN[:1]  # one corpus
    assert [tuple(c.files) for c in prob.dev_datasets] == [T2T_DEV_FILES]
    assert [s.shards for s in prob.splits] == [10, 1]
    assert prob.vocab_type == "subword" and prob.approx_vocab_size == size
    assert prob.vocab_filename == f"vocab.{name}.{size}.model"  # not the full mix's
    assert (prob.input_space_id, prob.target_space_id) == (
        problem.SpaceID.EN_BPE_TOK, problem.SpaceID.DE_BPE_TOK)


# ------------------------------------------------------------------ the cleaner
def test_clean_drops_what_t2t_drops():
    """Tensor2Tensor's cleaner_en_xx.clean_en_xx_pairs gives exactly `kept` for `pairs`
    (checked with its code under Python 3, its izip read as zip)."""
    pairs = [
        ("The house is small.", "Das Haus ist klein."),  # kept
        ("the house is small.", "das Haus ist klein."),  # no capital at the start
        ("The house is small", "Das Haus ist klein"),  # no final . ? !
        ("Why is it ?", "Warum?"),  # the mark must follow a word character
        ("Note: the house is small.", "Hinweis: klein."),  # a label
        ("Call 555 1234 now.", "Ruf 555 1234 an."),  # digits split by a space
        ('He said "yes.', 'Er sagte "ja.'),  # one double quote
        ('"The house is small."', '"Das Haus ist klein."'),  # wholly quoted
        ("A '' B.", "A '' B."),  # two quotes in a row
        ("The house , small.", "Das Haus , klein."),  # a lone comma between spaces
        ("The house (old is small.", "Das Haus (alt ist klein."),  # unclosed (
        ("The house) is small.", "Das Haus) ist klein."),  # unopened )
        ("BERLIN - The house is small.", "BERLIN - Das Haus ist klein."),  # tagline
        ("Copyright 2010 The house.", "Copyright 2010 Das Haus."),  # boilerplate
        ("FOO_bar is small.", "FOO_bar ist klein."),  # an identifier
        ("It's Jim's 'car' you 'see' here.", "Es ist Jims Auto."),  # many single quotes
        ("I can't, won't, don't go.", "Ich gehe nicht."),  # kept: 't and 's are fine
        ("“Yes,” he said.", "„Ja“, sagte er."),  # kept: two double quotes
        # Two sentences each: replaced by the two sentence pairs.
        ("The house is small. The cat is big.", "Das Haus ist klein. Die Katze ist groß."),
        # Two English sentences, one German: dropped.
        ("The house is small. The cat is big.", "Das Haus ist klein und die Katze groß."),
        # English does not break before a lower-case word; German does here: dropped.
        ("The house is small. the cat is big.", "Das Haus ist klein. Die Katze ist groß."),
        # "U.S. Army" is one English sentence but two German ones: dropped.
        ("The U.S. Army is big.", "Die U.S. Armee ist groß."),
        # Three each; the last two English sentences hold one double quote each.
        ('What? He said "Go. Now" to me.', 'Was? Er sagte "Geh. Jetzt" zu mir.'),
        ("What? No! Yes.", "Was? Nein! Ja."),  # three clean sentence pairs
    ]
    assert list(translate_ende.clean_en_xx_pairs(pairs)) == [
        ("The house is small.", "Das Haus ist klein."),
        ("I can't, won't, don't go.", "Ich gehe nicht."),
        ("“Yes,” he said.", "„Ja“, sagte er."),
        ("The house is small.", "Das Haus ist klein."),
        ("The cat is big.", "Die Katze ist groß."),
        ("What?", "Was?"),
        ("What?", "Was?"), ("No!", "Nein!"), ("Yes.", "Ja."),
    ]
    assert translate_ende.is_noisy_english("the cat.")
    assert not translate_ende.is_noisy_english("The cat.")


# ------------------------------------------------------------ generating the mix
_SUBJECTS = [("The house", "Das Haus"), ("My friend", "Mein Freund"), ("The girl", "Das Mädchen"),
             ("A river", "Ein Fluss"), ("The city", "Die Stadt")]
_PREDICATES = [("is small", "ist klein"), ("reads a book", "liest ein Buch"),
               ("sees the bridge", "sieht die Brücke"), ("is old", "ist alt"),
               ("buys bread", "kauft Brot")]


def _clean_pairs(start: int, count: int) -> list[tuple[str, str]]:
    """Sentence pairs the cleaner keeps as they are."""
    out = []
    for i in range(start, start + count):
        (s_en, s_de), (p_en, p_de) = _SUBJECTS[i % 5], _PREDICATES[(i // 5) % 5]
        out.append((f"{s_en} {p_en} number{i}.", f"{s_de} {p_de} Nummer{i}."))
    return out


NOISY = [  # dropped by the cleaner
    ("the house is small.", "das Haus ist klein."),
    ("Note: my friend is old.", "Hinweis: mein Freund ist alt."),
    ("The city (old is small.", "Die Stadt (alt ist klein."),
]
SPLIT = ("The girl is small. The city is old.", "Das Mädchen ist klein. Die Stadt ist alt.")
CORPORA = [  # T2T's three corpora, in order: their pairs
    _clean_pairs(0, 25),
    _clean_pairs(25, 20) + NOISY + [SPLIT],
    _clean_pairs(45, 25),
]
DEV = _clean_pairs(70, 6) + [NOISY[0]]  # the dev split is never cleaned


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """(URL prefix, folder) of a mirror holding the three tiny corpora and dev.tgz."""
    folder = str(tmp_path_factory.mktemp("mirror"))
    for corpus, pairs in zip(translate_ende.ENDE_TRAIN_DATASETS, CORPORA, strict=True):
        decoy = {corpus.files[0].replace("de-en", "cs-en"): b"decoy\n"}
        write_tar(os.path.join(folder, corpus.resource.local_name),
                  {**pair_files(corpus.files, pairs), **decoy})
    dev = pair_files(("dev/newstest2013.en", "dev/newstest2013.de"), DEV)
    write_tar(os.path.join(folder, "dev.tgz"), {**dev, "dev/newstest2012.de": b"decoy\n"})
    with serve_folder(folder) as (url, _):
        yield url, folder


@pytest.fixture()
def tiny(monkeypatch, mirror):
    """The full-mix problems with their tables pinned to the tiny archives, 2 shards."""
    monkeypatch.setattr(translate_ende.TranslateEndeWmt32k, "approx_vocab_size", 80)
    return pin_tables(monkeypatch, translate_ende.TranslateEndeWmt, mirror[1],
                      translate_ende.ENDE_TRAIN_DATASETS, translate_ende.ENDE_DEV_DATASETS,
                      train_shards=2)


def test_wmt32k_reads_the_three_corpora(tiny, mirror, tmp_path):
    url, _ = mirror
    prob = registry.problem("translate_ende_wmt32k")
    samples = list(prob.generate_samples("", str(tmp_path), "train", mirror=url))
    assert [(s["inputs"], s["targets"]) for s in samples] == [p for c in CORPORA for p in c]
    dev = list(prob.generate_samples("", str(tmp_path), "dev", mirror=url))
    assert [(s["inputs"], s["targets"]) for s in dev] == DEV


def test_vocab_samples_every_corpus(tiny, monkeypatch, mirror, tmp_path):
    url, _ = mirror
    monkeypatch.setattr(tiny, "max_samples_for_vocab", 6)  # 2 pairs from each corpus
    texts = list(registry.problem("translate_ende_wmt32k").text_for_vocab("", str(tmp_path), url))
    assert texts == [t for pairs in CORPORA for pair in pairs[:2] for t in pair]


def test_characters_generate_and_read_back(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("translate_ende_wmt_characters")
    summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    train = [p for c in CORPORA for p in c]
    assert summary["train"].examples == len(train) and summary["dev"].examples == len(DEV)
    assert not [f for f in os.listdir(data_dir) if f.startswith("vocab.")]  # bytes need none
    assert decoded_pairs(prob, data_dir, problem.EVAL) == DEV
    assert sorted(decoded_pairs(prob, data_dir, problem.TRAIN)) == sorted(train)
    ex = next(prob.dataset(problem.EVAL, data_dir, deterministic=True).as_numpy_iterator())
    assert list(ex["inputs"]) == [b + 2 for b in DEV[0][0].encode("utf-8")] + [1]


def test_clean32k_cleans_train_only_and_shares_wmt32ks_vocab(tiny, mirror, tmp_path):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    clean = registry.problem("translate_ende_wmt_clean32k")
    summary = clean.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    kept = CORPORA[0] + CORPORA[1][:20] + [
        ("The girl is small.", "Das Mädchen ist klein."),
        ("The city is old.", "Die Stadt ist alt."),
    ] + CORPORA[2]
    assert summary["train"].examples == len(kept) and summary["dev"].examples == len(DEV)
    files = sorted(os.listdir(data_dir))
    assert [f for f in files if f.startswith("vocab.")] == [  # wmt32k's, none of its own
        "vocab.translate_ende_wmt32k.80.model", "vocab.translate_ende_wmt32k.80.vocab"]
    assert sorted(decoded_pairs(clean, data_dir, problem.TRAIN)) == sorted(kept)
    assert decoded_pairs(clean, data_dir, problem.EVAL) == DEV  # NOISY[0] stays in dev

    # translate_ende_wmt32k finds the vocabulary there and uses it as it is.
    vocab = os.path.join(data_dir, "vocab.translate_ende_wmt32k.80.model")
    before = os.stat(vocab).st_mtime_ns
    wmt = registry.problem("translate_ende_wmt32k")
    wmt.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert os.stat(vocab).st_mtime_ns == before
    assert sorted(decoded_pairs(wmt, data_dir, problem.TRAIN)) == sorted(p for c in CORPORA for p in c)
    ids = clean.feature_encoders(data_dir)["inputs"].encode("The house is small number3.")
    assert ids == wmt.feature_encoders(data_dir)["inputs"].encode("The house is small number3.")
