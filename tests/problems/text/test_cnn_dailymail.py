"""Tests of summarize_cnn_dailymail32k, offline.

Tiny `cnn_stories.tgz` / `dailymail_stories.tgz` in the real layout
(`cnn/stories/<sha1 of URL>.story`, `dailymail/stories/...`, stories in the real
format with `@highlight` blocks) and the three URL lists are served by a local HTTP
server used as a URL-prefix mirror; the problem's resources are patched to pin the tiny
files' hashes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random

import pytest

from t2t import registry
from t2t.data import problem
from t2t.problems.text import cnn_dailymail
from tests.helpers.local_http import (
    check_real_pin_rejects,
    pinned,
    serve_folder,
    tfds_root,
    write_tar,
)

_WORDS = "the minister said on Tuesday that the new bridge will open in the city next year".split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))


def _story(rng: random.Random, cnn: bool) -> tuple[str, str, str]:
    """(raw .story text, expected article, expected summary)."""
    lead = "(CNN) -- " if cnn else "By Daily Mail Reporter . "
    paragraphs = [lead + _sentence(rng) + ".", _sentence(rng), _sentence(rng) + "?"]
    highlights = [_sentence(rng), _sentence(rng) + "."]
    raw = "\n\n".join(paragraphs) + "\n\n" + "".join(f"\n@highlight\n\n{h}\n" for h in highlights)
    # A paragraph without final punctuation gets a period, as in the standard script.
    article = " ".join([paragraphs[0], paragraphs[1] + ".", paragraphs[2]])
    summary = " ".join([highlights[0] + ".", highlights[1]])
    return raw, article, summary


def _url(kind: str, i: int) -> str:
    if kind == "cnn":
        return f"http://web.archive.org/web/20150401000000id_/http://www.cnn.com/2015/story-{i}/index.html"
    return f"http://www.dailymail.co.uk/news/article-{1000 + i}/story-{i}.html"


rng = random.Random(7)
STORIES = {}  # url -> (publisher, raw, article, summary)
SPLITS = {"train": [], "dev": [], "test": []}
for i in range(14):
    publisher = "cnn" if i % 3 else "dailymail"
    url = _url(publisher, i)
    STORIES[url] = (publisher, *_story(rng, publisher == "cnn"))
    SPLITS["train" if i < 8 else "dev" if i < 11 else "test"].append(url)
MISSING_URL = _url("cnn", 99)  # listed, but no story in either archive
EMPTY_URL = _url("dailymail", 98)  # a story with highlights but no article
STORIES[EMPTY_URL] = ("dailymail", "\n@highlight\n\nonly a highlight\n", "", "")
LISTS = {
    "all_train.txt": [*SPLITS["train"][:3], MISSING_URL, EMPTY_URL, *SPLITS["train"][3:]],
    "all_val.txt": SPLITS["dev"],
    "all_test.txt": SPLITS["test"],
}


def _expected(split: str) -> list[tuple[str, str]]:
    return [(STORIES[u][2], STORIES[u][3]) for u in SPLITS[split]]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mirror"))
    for archive, publisher in (("cnn_stories.tgz", "cnn"), ("dailymail_stories.tgz", "dailymail")):
        members = {
            f"{publisher}/stories/{hashlib.sha1(url.encode()).hexdigest()}.story": raw.encode()
            for url, (pub, raw, _, _) in STORIES.items()
            if pub == publisher
        }
        folders = (publisher, f"{publisher}/stories")
        write_tar(os.path.join(folder, archive), members, folders=folders)
    for name, urls in LISTS.items():
        with open(os.path.join(folder, name), "w") as f:
            f.writelines(u + "\n" for u in urls)

    with serve_folder(folder) as (url, _):
        yield url, folder


def _pinned(resource, folder):
    return pinned(resource, os.path.join(folder, resource.local_name))


@pytest.fixture()
def tiny(monkeypatch, mirror):
    _, folder = mirror
    cls = cnn_dailymail.SummarizeCnnDailymail32k
    archives = [(_pinned(res, folder), inner) for res, inner in cnn_dailymail.STORY_ARCHIVES]
    urls = {split: _pinned(res, folder) for split, res in cnn_dailymail.SPLIT_URLS.items()}
    monkeypatch.setattr(cls, "story_archives", archives)
    monkeypatch.setattr(cls, "split_urls", urls)
    monkeypatch.setattr(cls, "approx_vocab_size", 80)
    return cls


def test_generate_and_read_back(tiny, mirror, tmp_path, caplog):
    url, _ = mirror
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    prob = registry.problem("summarize_cnn_dailymail32k")
    with caplog.at_level(logging.WARNING):
        summary = prob.generate_data(data_dir, tmp_dir, mirror=url, progress=False, num_shards=2)
    assert hashlib.sha1(MISSING_URL.encode()).hexdigest() in caplog.text
    assert {k: v.examples for k, v in summary.items()} == {"train": 8, "dev": 3, "test": 3}
    assert "vocab.summarize_cnn_dailymail32k.80.model" in os.listdir(data_dir)

    samples = prob.generate_samples(data_dir, tmp_dir, "train", mirror=url)
    assert [(s["inputs"], s["targets"]) for s in samples] == _expected("train")  # list order

    encoders = prob.feature_encoders(data_dir)

    def decoded(split):
        dataset = prob.dataset(problem.EVAL, data_dir, deterministic=True, split=split)
        return [
            (
                encoders["inputs"].decode(ex["inputs"], strip_extraneous=True),
                encoders["targets"].decode(ex["targets"], strip_extraneous=True),
            )
            for ex in dataset.as_numpy_iterator()
        ]

    assert decoded("dev") == _expected("dev")
    assert decoded("test") == _expected("test")
    assert sorted(decoded("train")) == sorted(_expected("train"))
    assert {"rouge_2", "rouge_l", "accuracy"} <= set(prob.eval_metrics())
    hp = prob.hparams(data_dir)
    assert hp.input_space_id == hp.target_space_id == problem.SpaceID.EN_TOK


def test_vocab_texts_are_chunked(tiny, monkeypatch, mirror, tmp_path):
    url, _ = mirror
    monkeypatch.setattr(tiny, "vocab_chunk_chars", 40)
    monkeypatch.setattr(tiny, "max_samples_for_vocab", 2)
    texts = list(
        registry.problem("summarize_cnn_dailymail32k").text_for_vocab("", str(tmp_path), url)
    )
    assert all(len(t) <= 40 for t in texts)
    first_two = _expected("train")[:2]
    assert " ".join(texts) == " ".join(" ".join(pair) for pair in first_two)


def test_parse_story_and_chunks():
    text = (
        "(CNN) -- First line\n\nSecond line ends well!\n\n@highlight\n\nOne\n\n"
        "@highlight\n\nTwo\u201d\n"
    )
    assert cnn_dailymail.parse_story(text) == (
        "(CNN) -- First line. Second line ends well!",
        "One. Two\u201d",
    )
    assert cnn_dailymail.parse_story("@highlight\n\nonly\n") == ("", "only.")
    assert list(cnn_dailymail.text_chunks("aa bb cc dd", limit=5)) == ["aa bb", "cc dd"]
    assert list(cnn_dailymail.text_chunks("toolongword x", limit=5)) == ["toolongword", "x"]
    assert cnn_dailymail.url_hash("http://a") == hashlib.sha1(b"http://a").hexdigest()


RESOURCES = [
    cnn_dailymail.CNN_STORIES,
    cnn_dailymail.DAILYMAIL_STORIES,
    cnn_dailymail.TRAIN_URLS,
    cnn_dailymail.VAL_URLS,
    cnn_dailymail.TEST_URLS,
]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.local_name)
def test_real_pins_reject_a_wrong_file(resource, tmp_path):
    check_real_pin_rejects(resource, tmp_path, b"not the real file")


def test_pins_match_tensorflow_datasets():
    root = tfds_root()
    if root is None:
        pytest.skip("tensorflow_datasets is not installed")
    path = os.path.join(root, "url_checksums", "cnn_dailymail.txt")
    with open(path) as f:
        recorded = {
            url: (int(size), sha, name)
            for url, size, sha, name in (line.rstrip("\n").split("\t")[:4] for line in f)
        }
    for res in RESOURCES:
        assert recorded[res.url] == (res.size, res.sha256, res.local_name), res.url
