"""Tests of t2t.problems.text.text_files: language models over text files, offline.

The corpus is a temporary folder of real English prose (openings of public-domain
books and speeches), in sub-folders, one file gzipped, plus an empty file.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import pathlib
import re
import shutil

import pytest

from t2t import registry
from t2t.data import problem
from t2t.data.encoders import text_encoder
from t2t.problems.text import text_files

PROSE = {
    "austen/pride_and_prejudice.txt": (
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife.\n\nHowever little known the feelings or views "
        "of such a man may be on his first entering a neighbourhood, this truth is so well "
        "fixed in the minds of the surrounding families, that he is considered the rightful "
        "property of some one or other of their daughters.\n"
    ),
    "dickens/tale_of_two_cities.txt": (
        "It was the best of times, it was the worst of times, it was the age of wisdom, it "
        "was the age of foolishness, it was the epoch of belief, it was the epoch of "
        "incredulity, it was the season of Light, it was the season of Darkness, it was the "
        "spring of hope, it was the winter of despair, we had everything before us, we had "
        "nothing before us, we were all going direct to Heaven, we were all going direct "
        "the other way - in short, the period was so far like the present period, that some "
        "of its noisiest authorities insisted on its being received, for good or for evil, "
        "in the superlative degree of comparison only.\n"
    ),
    "melville/moby_dick.txt": (
        "Call me Ishmael. Some years ago - never mind how long precisely - having little or "
        "no money in my purse, and nothing particular to interest me on shore, I thought I "
        "would sail about a little and see the watery part of the world.\nIt is a way I have "
        "of driving off the spleen and regulating the circulation.\n"
    ),
    "lincoln/gettysburg.txt": (
        "Four score and seven years ago our fathers brought forth on this continent, a new "
        "nation, conceived in Liberty, and dedicated to the proposition that all men are "
        "created equal.\nNow we are engaged in a great civil war, testing whether that "
        "nation, or any nation so conceived and so dedicated, can long endure.\n"
    ),
    "carroll/alice.txt": (
        "Alice was beginning to get very tired of sitting by her sister on the bank, and of "
        "having nothing to do: once or twice she had peeped into the book her sister was "
        "reading, but it had no pictures or conversations in it, 'and what is the use of a "
        "book,' thought Alice 'without pictures or conversations?'\n"
    ),
    "doyle/scandal_in_bohemia.txt": (
        "To Sherlock Holmes she is always the woman. I have seldom heard him mention her "
        "under any other name.\nIn his eyes she eclipses and predominates the whole of her "
        "sex.\n"
    ),
    "thoreau/walden.txt": (
        "When I wrote the following pages, or rather the bulk of them, I lived alone, in the "
        "woods, a mile from any neighbor, in a house which I had built myself, on the shore "
        "of Walden Pond, in Concord, Massachusetts, and earned my living by the labor of my "
        "hands only.\nAt present I am a sojourner in civilized life again.\n"
    ),
    "declaration.txt": (
        "When in the Course of human events, it becomes necessary for one people to dissolve "
        "the political bands which have connected them with another, and to assume among the "
        "powers of the earth, the separate and equal station to which the Laws of Nature and "
        "of Nature's God entitle them, a decent respect to the opinions of mankind requires "
        "that they should declare the causes which impel them to the separation.\n"
    ),
}
# Gzipped, with multi-byte UTF-8 that chunk boundaries may cut through.
GZ_NAME, GZ_TEXT = "goethe/faust.txt.gz", (
    "Habe nun, ach! Philosophie, Juristerei und Medizin, und leider auch Theologie! "
    "Durchaus studiert, mit heißem Bemühn.\nDa steh ich nun, ich armer Tor! Und bin so "
    "klug als wie zuvor.\n"
)
ALL_DOCS = {**PROSE, GZ_NAME: GZ_TEXT}


def _write_corpus(folder: str) -> None:
    for name, text in PROSE.items():
        os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    os.makedirs(os.path.join(folder, "goethe"), exist_ok=True)
    with gzip.open(os.path.join(folder, GZ_NAME), "wb") as f:
        f.write(GZ_TEXT.encode("utf-8"))
    open(os.path.join(folder, "empty.txt"), "w").close()
    with open(os.path.join(folder, "notes.md"), "w") as f:  # not .txt: not in the corpus
        f.write("# not part of the corpus\n")


@pytest.fixture()
def corpus(tmp_path):
    folder = str(tmp_path / "corpus")
    _write_corpus(folder)
    return folder


def _split_docs(prob, tmp_dir):
    return {s: list(prob.documents(tmp_dir, s)) for s in ("train", "dev", "test")}


def _shard_ids(path):
    import tensorflow as tf

    return [
        list(tf.train.Example.FromString(r.numpy()).features.feature["targets"].int64_list.value)
        for r in tf.data.TFRecordDataset(path)
    ]


def _read_split(prob, data_dir, split):
    """The split's examples in generation order (shards are dealt round-robin)."""
    shards = [_shard_ids(p) for p in prob.data_files(data_dir, split)]
    longest = max((len(s) for s in shards), default=0)
    return [s[i] for i in range(longest) for s in shards if i < len(s)]


def test_generate_data_round_trip(corpus, tmp_path, monkeypatch):
    cls = text_files.LanguagemodelTextFiles
    monkeypatch.setattr(cls, "max_example_length", 64)
    prob = registry.problem("languagemodel_text_files")
    data_dir = str(tmp_path / "data")
    summary = prob.generate_data(data_dir, corpus, progress=False)
    names = sorted(os.listdir(data_dir))
    assert [n for n in names if "-train-" in n] == [
        f"languagemodel_text_files-train-{i:05d}-of-00010" for i in range(10)
    ]
    assert "languagemodel_text_files-dev-00000-of-00001" in names
    assert "languagemodel_text_files-test-00000-of-00001" in names

    docs = _split_docs(prob, corpus)
    assert all(docs.values()), docs  # >= 3 documents: every split has one
    flat = [d for s in docs.values() for d in s]
    assert sorted(flat) == sorted(ALL_DOCS.values())  # each document in exactly one split
    encoder = prob.feature_encoders(data_dir)["targets"]
    assert encoder.vocab_size == 258
    for split, texts in docs.items():
        examples = _read_split(prob, data_dir, split)
        assert summary[split].examples == len(examples)
        assert all(len(e) <= 64 and e[-1] == text_encoder.EOS_ID for e in examples)
        assert text_encoder.EOS_ID not in [i for e in examples for i in e[:-1]]
        # Cut each document's ids as generation does: the examples are exactly those.
        position = 0
        for text in texts:
            ids = encoder.encode(text)
            count = -(-len(ids) // 63)
            chunks = examples[position : position + count]
            position += count
            assert [i for c in chunks for i in c[:-1]] == ids
            assert encoder.decode([i for c in chunks for i in c[:-1]]) == text
        assert position == len(examples)
    # The long Dickens paragraph needs several examples.
    assert sum(len(e) for e in _read_split(prob, data_dir, "train")) > 64


def test_split_is_deterministic_and_seeded(corpus, monkeypatch):
    cls = text_files.LanguagemodelTextFiles

    def partition():
        return {s: tuple(d) for s, d in _split_docs(cls(), corpus).items()}

    first = partition()
    assert partition() == first
    monkeypatch.setattr(cls, "split_seed", 99)
    assert partition() != first


def test_hash_split_does_not_depend_on_other_files():
    ids = [f"books/{i:04d}.txt" for i in range(2000)]
    assert text_files.plan_splits(ids, 1234, 0.05, 0.05) == {}  # no repair needed
    splits = [text_files.hash_split(1234, i, 0.05, 0.05) for i in ids]
    assert 50 < splits.count("dev") < 150 and 50 < splits.count("test") < 150
    assert text_files.hash_split(1234, "books/0007.txt", 0.05, 0.05) == splits[7]


def test_tiny_corpus_gets_every_split():
    for n in range(3, 12):
        ids = [f"doc{i}.txt" for i in range(n)]
        moved = text_files.plan_splits(ids, 1234, 0.05, 0.05)
        splits = [moved.get(i) or text_files.hash_split(1234, i, 0.05, 0.05) for i in ids]
        assert set(splits) == {"train", "dev", "test"}, (n, splits)
    assert text_files.plan_splits(["a", "b"], 1234, 0.05, 0.05) == {}


def test_line_documents(corpus):
    prob = registry.problem("languagemodel_text_files_lines")
    docs = _split_docs(prob, corpus)
    assert all(docs.values())
    lines = [line for text in ALL_DOCS.values() for line in text.splitlines() if line.strip()]
    assert sorted(d for s in docs.values() for d in s) == sorted(lines)
    assert not set(docs["train"]) & set(docs["test"])


def test_missing_pattern_is_a_clear_error(tmp_path):
    prob = registry.problem("languagemodel_text_files")
    empty = str(tmp_path / "nothing_here")
    with pytest.raises(problem.DataMissingError) as info:
        prob.generate_data(str(tmp_path / "data"), empty, progress=False)
    message = str(info.value)
    assert "'.'" in message and empty in message
    assert "Put .txt files under --tmp_dir or set corpus_pattern" in message
    with pytest.raises(problem.DataMissingError, match=r"\*\*/\*\.text"):
        text_files.find_files("**/*.text", str(tmp_path))


def test_glob_pattern_and_invalid_utf8(corpus, caplog):
    bad = os.path.join(corpus, "latin1", "cafe.txt")
    os.makedirs(os.path.dirname(bad))
    with open(bad, "wb") as f:  # Latin-1 bytes, not UTF-8
        f.write(b"The caf\xe9 was closed.\nA na\xefve guest waited.\n")

    class Latin(text_files.TextFilesLanguageModelProblem):
        corpus_pattern = "latin1/*.txt"
        document_unit = text_files.LINE

    with caplog.at_level(logging.WARNING):
        docs = [d for s in ("train", "dev", "test") for d in Latin().documents(corpus, s)]
    assert sorted(docs) == sorted(["The caf\ufffd was closed.", "A na\ufffdve guest waited."])
    warnings = [r for r in caplog.records if "cafe.txt" in r.getMessage()]
    assert len(warnings) == 1  # one per file, not one per line or per pass
    base, files = text_files.find_files("**/*.txt.gz", corpus)
    assert base == corpus and files == [os.path.join(corpus, GZ_NAME)]


def test_sentencepiece_vocab_from_train_only(corpus, tmp_path):
    prob = registry.problem("languagemodel_text_files_sp8k")
    assert prob.vocab_type == "subword" and prob.approx_vocab_size == 8000
    train_lines = {
        line for d in prob.documents(corpus, "train") for line in d.splitlines() if line.strip()
    }
    pieces = list(prob.text_for_vocab("", corpus, None))
    assert pieces and set(pieces) <= train_lines
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, corpus, progress=False, num_shards=1)
    assert os.path.exists(os.path.join(data_dir, "vocab.languagemodel_text_files_sp8k.8000.model"))
    assert prob.hparams(data_dir).vocab_size["targets"] < 8000  # a tiny corpus: fewer pieces


MODULE = '''"""Represents a parser for email messages.

The parser reads a message from a file or a string and builds the message object
tree that the rest of the package works with."""


class Parser:
    """Parses RFC 2822 and MIME email messages into message objects.

    The parser is not incremental: it reads the whole input before it returns."""

    def parse(self, fp, headersonly=False):
        """Create a message structure from the data in a file."""
        def inner():
            """A nested helper: its docstring counts too."""


async def fetch():
    """Fetch the next message from the mailbox, waiting if there is none."""
'''


def _fake_stdlib(root: str) -> None:
    files = {
        "email/parser.py": MODULE,
        "json/decoder.py": MODULE.replace("email", "JSON"),
        "string.py": MODULE.replace("email messages", "strings"),
        "tiny.py": '"""Too short."""\n',
        "broken.py": '"""A docstring long enough to keep, in a file that fails."""\ndef (:\n',
        "test/test_parser.py": MODULE,
        "unittest/test/test_case.py": MODULE,
        "lib2to3/tests/data.py": MODULE,
        "idlelib/editor.py": MODULE,
        "site-packages/pkg.py": MODULE,
        "email/__pycache__/parser.py": MODULE,
    }
    for name, source in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, name)) or root, exist_ok=True)
        with open(os.path.join(root, name), "w", encoding="utf-8") as f:
            f.write(source)


def test_docstring_corpus_from_a_fake_stdlib(tmp_path, caplog, monkeypatch):
    stdlib, out = str(tmp_path / "lib"), str(tmp_path / "tmp" / "python_docstrings")
    _fake_stdlib(stdlib)
    with caplog.at_level(logging.WARNING):
        manifest = text_files.build_docstring_corpus(stdlib, out)
    assert "broken.py" in caplog.text
    written = sorted(
        os.path.relpath(os.path.join(d, n), out) for d, _, ns in os.walk(out) for n in ns
    )
    assert written == ["MANIFEST.json", "email/parser.txt", "json/decoder.txt", "string.txt"]
    with open(os.path.join(out, "email", "parser.txt"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("Represents a parser for email messages.\n\nThe parser reads")
    assert "Parses RFC 2822" in text and "nested helper" in text and "Fetch the next" in text
    assert manifest["modules"] == 3 and manifest["python"] == __import__("sys").version

    # Idempotent: a second build reads the manifest and extracts nothing.
    monkeypatch.setattr(text_files, "module_text", lambda path: pytest.fail("rebuilt"))
    assert text_files.build_docstring_corpus(stdlib, out) == manifest
    monkeypatch.undo()
    # Another Python version: rebuilt from scratch (stale files go).
    with open(os.path.join(out, "MANIFEST.json"), "w") as f:
        json.dump({**manifest, "python": "2.7.18"}, f)
    open(os.path.join(out, "stale.txt"), "w").close()
    text_files.build_docstring_corpus(stdlib, out)
    assert not os.path.exists(os.path.join(out, "stale.txt"))
    assert sorted(n for n in os.listdir(tmp_path / "tmp")) == ["python_docstrings"]

    # The problem builds the corpus in prepare() and generates from it.
    cls = text_files.LanguagemodelPythonDocstrings
    monkeypatch.setattr(cls, "stdlib", stdlib)
    shutil.rmtree(out)
    prob = registry.problem("languagemodel_python_docstrings")
    assert prob.max_example_length == 256 and prob.vocab_type == "byte"
    summary = prob.generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"), progress=False)
    assert os.path.exists(os.path.join(out, "MANIFEST.json"))
    assert all(summary[s].shards_written for s in ("train", "dev", "test"))
    assert all(len(list(prob.documents(str(tmp_path / "tmp"), s))) == 1 for s in summary)


def test_real_stdlib_gives_over_a_megabyte(tmp_path):
    manifest = text_files.build_docstring_corpus(
        text_files.stdlib_dir(), str(tmp_path / "python_docstrings")
    )
    assert manifest["bytes"] > 1_000_000 and manifest["modules"] > 100
    assert os.path.isfile(tmp_path / "python_docstrings" / "email" / "parser.txt")


@pytest.mark.skipif(shutil.which("xz") is None, reason="xz is not installed")
def test_xz_bits_per_byte():
    repetitive = "It was the best of times, it was the worst of times. " * 400
    assert text_files.xz_bits_per_byte(repetitive) < 0.5
    prose = "\n".join(ALL_DOCS.values())
    assert 1.0 < text_files.xz_bits_per_byte(prose) < 8.0
    with pytest.raises(ValueError):
        text_files.xz_bits_per_byte("")


LM_PAGE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "how-to" / "language-models.md"


def _readme_command(problem_name: str) -> tuple[str, str]:
    """(--hparams_set, --hparams) of docs/how-to/language-models.md's t2t-trainer command
    for `problem_name`."""
    text = LM_PAGE.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if line.lstrip().startswith("t2t-trainer") and f"--problem={problem_name} " in line:
            flags = dict(re.findall(r"--(\w+)=(\"[^\"]*\"|'[^']*'|\S+)", line))
            return flags["hparams_set"], flags.get("hparams", "").strip("\"'")
    pytest.fail(f"{LM_PAGE} shows no t2t-trainer command with --problem={problem_name}.")


@pytest.mark.parametrize("name", ["languagemodel_text_files", "languagemodel_python_docstrings"])
def test_the_readme_command_keeps_the_examples_of_real_text(name, tmp_path):
    """The docs' command trains on (nearly) every example the problem cuts: the
    problem's example length and the command's max_length agree. Real English: the
    docstrings of the standard library's email and json packages."""
    from t2t.data.pipeline import length_report
    from t2t.hparams.basic import create_hparams

    hparams_set, overrides = _readme_command(name)
    stdlib, corpus = text_files.stdlib_dir(), tmp_path / "corpus"
    prob = registry.problem(name)
    if name == "languagemodel_python_docstrings":
        prob.stdlib = os.path.join(stdlib, "email")
    else:
        for package in ("email", "json"):
            text_files.build_docstring_corpus(os.path.join(stdlib, package), str(corpus / package))
    data_dir = str(tmp_path / "data")
    prob.generate_data(data_dir, str(corpus), progress=False)
    report = length_report.length_report(prob, data_dir, create_hparams(hparams_set, overrides),
                                         "train")
    assert report.complete and report.examples_seen > 100 and report.longest > 200
    assert report.examples_dropped <= 0.02 * report.examples_seen, report.message()
    assert report.tokens_dropped <= 0.02 * report.tokens_seen, report.message()
