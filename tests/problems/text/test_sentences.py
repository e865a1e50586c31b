"""Tests of t2t.problems.text.sentences: plain sentences and the held-out deal."""

from __future__ import annotations

from t2t.problems.text import sentences


def test_plain_sentences_keep_words_only():
    text = ("Return the number of items. See os.path.join() for paths. Use assertRaisesRegex "
            "as a context manager. Load the module 'fullname' now. The module's name is "
            "kept here. Too short. Return a list of the labels on the message!")
    assert list(sentences.plain_sentences(text)) == [
        "return the number of items", "the module's name is kept here",
        "return a list of the labels on the message"]


def test_the_held_out_deal_depends_on_the_text_alone():
    corpus = [f"sentence number {i} of the corpus" for i in range(2000)]
    held = [s for s in corpus if sentences.held_out(s)]
    assert 150 < len(held) < 250  # about 10%
    assert held == [s for s in reversed(corpus) if sentences.held_out(s)][::-1]


def test_case_is_kept_when_asked_and_the_deal_ignores_it():
    text = "Return the number of items. The module's name is kept here."
    assert list(sentences.plain_sentences(text, lowercase=False)) == [
        "Return the number of items", "The module's name is kept here"]
    assert sentences.held_out("Return the Items") == sentences.held_out("return the items")
