"""Tests of t2t-bleu --translations_dir: a folder of translations by step scored into a
table and TensorBoard scalars (read back with TensorBoard's EventAccumulator), new steps
only on a second run; and its errors. Its --translation mode is tested with t2t-decoder
(tests/bin/test_t2t_decoder.py). The mains run in this process (tests/helpers/binaries.py)."""

from __future__ import annotations

import os
import re
import threading

import pytest
from sacrebleu.metrics import BLEU, CHRF
from tensorboard.backend.event_processing import event_accumulator

from tests.helpers.binaries import run_binary

REFERENCE = ["The cat sat on the mat .", "A dog ran to the red house .",
             "It rains in Paris today .", "We like green tea ."]
# Each step's translation: a curve that rises, with a lowercased one at step 30.
BY_STEP = {
    10: ["the the the", "a dog", "rain", "tea"],
    20: ["The cat sat on a mat .", "A dog ran to a house .", "It rains today .",
         "We like tea ."],
    30: [line.lower() for line in REFERENCE],
}
ROW = re.compile(r"^\s*(\d+)((?:\s+\d+\.\d\d)+)\s+(\S+)$")


def _write(folder, name, lines, mtime):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def translations(tmp_path):
    """(translations_dir, reference path): t2t-translate-all's files PROBLEM-STEP with
    the checkpoints' times, plus files that are not translations."""
    folder = tmp_path / "translations"
    folder.mkdir()
    for step, lines in BY_STEP.items():
        _write(folder, f"translate_tiny-{step}", lines, 1_000_000.0 + step)
    (folder / "translate_tiny-40.partial").write_text("half\n")  # a decode under way
    reference = tmp_path / "reference.txt"
    reference.write_text("\n".join(REFERENCE) + "\n")
    return str(folder), str(reference)


def _scalars(event_dir, tag):
    accumulator = event_accumulator.EventAccumulator(str(event_dir))
    accumulator.Reload()
    return [(e.step, round(e.value, 4), e.wall_time) for e in accumulator.Scalars(tag)]


def _table(out):
    return {int(m[1]): [float(v) for v in m[2].split()] for line in out.splitlines()
            if (m := ROW.match(line))}


def test_translations_dir_writes_a_curve_then_only_new_steps(translations, tmp_path):
    folder, reference = translations
    events = tmp_path / "events"
    result = run_binary("t2t-bleu", f"--translations_dir={folder}",
                        f"--reference={reference}", f"--event_dir={events}")
    assert result.code == 0, result.err[-3000:]
    header = result.out.splitlines()[0].split()
    assert header == ["step", "BLEU_cased", "BLEU_uncased", "chrF", "translation"]
    table = _table(result.out)
    assert list(table) == [10, 20, 30]
    # The scores are sacrebleu's: cased BLEU, lowercased BLEU and chrF of each file.
    for step, lines in BY_STEP.items():
        expected = [BLEU().corpus_score(lines, [REFERENCE]).score,
                    BLEU(lowercase=True).corpus_score(lines, [REFERENCE]).score,
                    CHRF().corpus_score(lines, [REFERENCE]).score]
        assert table[step] == [round(v, 2) for v in expected], step
    assert table[30][1] == 100.0 and table[30][0] < 100.0  # only the case differs
    assert f"best: step 30 (BLEU_cased {table[30][0]:.2f}; BLEU_uncased 100.00, chrF " in \
        result.out  # by the first BLEU column
    assert "BLEU_uncased: BLEU|nrefs:1|case:lc|eff:no|tok:13a" in result.out
    assert f"TensorBoard events of 3 step(s) written to {events}" in result.out
    # One point per step and tag, at the translation's time.
    for column, tag in enumerate(("BLEU_cased", "BLEU_uncased", "chrF")):
        assert _scalars(events, tag) == [
            (step, pytest.approx(table[step][column], abs=0.006), 1_000_000.0 + step)
            for step in BY_STEP], tag
    assert (events / "last_evaluated_step.txt").read_text() == "30\n"
    # A new translation: the second run prints every step, writes only the new one.
    _write(folder, "translate_tiny-40", REFERENCE, 1_000_040.0)
    again = run_binary("t2t-bleu", f"--translations_dir={folder}",
                       f"--reference={reference}", f"--event_dir={events}")
    assert again.code == 0, again.err[-3000:]
    assert list(_table(again.out)) == [10, 20, 30, 40] and "best: step 40" in again.out
    assert "events of 1 step(s) written" in again.out and "up to 30 were written" in again.out
    assert [s for s, _, _ in _scalars(events, "BLEU_cased")] == [10, 20, 30, 40]


def test_variant_suffix_min_steps_and_default_event_dir(translations):
    folder, reference = translations
    result = run_binary("t2t-bleu", f"--translations_dir={folder}", f"--reference={reference}",
                        "--bleu_variant=uncased", "--tag_suffix=/beam4", "--min_steps=20")
    assert result.code == 0, result.err[-3000:]
    assert result.out.splitlines()[0].split() == ["step", "BLEU_uncased", "chrF", "translation"]
    assert list(_table(result.out)) == [20, 30] and "best: step 30 (BLEU_uncased 100.00" in result.out
    events = os.path.join(folder, "events")  # the default: TRANSLATIONS_DIR/events
    accumulator = event_accumulator.EventAccumulator(events)
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == ["BLEU_uncased/beam4", "chrF/beam4"]
    assert os.path.exists(os.path.join(events, "last_evaluated_step_beam4.txt"))


def test_wait_minutes_scores_a_translation_that_appears(translations, monkeypatch):
    from t2t.utils import step_files

    folder, reference = translations
    monkeypatch.setattr(step_files, "POLL_SECONDS", 0.1)
    later = threading.Timer(0.5, _write, (folder, "translate_tiny-40", REFERENCE, 1_000_040.0))
    later.start()
    try:
        result = run_binary("t2t-bleu", f"--translations_dir={folder}",
                            f"--reference={reference}", "--wait_minutes=0.03")
    finally:
        later.join()
    assert result.code == 0, result.err[-3000:]
    assert list(_table(result.out)) == [10, 20, 30, 40]


def test_translation_mode_prints_both_variants_when_asked(translations):
    folder, reference = translations
    result = run_binary("t2t-bleu", f"--translation={folder}/translate_tiny-30",
                        f"--reference={reference}", "--bleu_variant=both")
    assert result.code == 0, result.err[-3000:]
    cased, uncased, chrf = result.out.splitlines()
    assert "case:mixed" in cased and "case:lc" in uncased and " = 100.00 " in uncased
    assert chrf.startswith("chrF2|")


def test_errors(translations, tmp_path):
    folder, reference = translations

    def error(*args):
        result = run_binary("t2t-bleu", *args)
        assert result.code == 1 and not result.traceback, result.err[-3000:]
        return result.err.strip().splitlines()[-1]

    assert "--translation and --translations_dir: choose one" in error(
        f"--translation={reference}", f"--translations_dir={folder}", f"--reference={reference}")
    assert "--translation=FILE or --translations_dir=DIR required" in error(
        f"--reference={reference}")
    assert "--reference required" in error(f"--translations_dir={folder}")
    assert "--event_dir, --min_steps applies to --translations_dir, not to --translation" in \
        error(f"--translation={reference}", f"--reference={reference}", "--event_dir=e",
              "--min_steps=3")
    assert "--wait_minutes=-1.0: give a value >= 0" in error(
        f"--translations_dir={folder}", f"--reference={reference}", "--wait_minutes=-1")
    assert f"--translations_dir={str(tmp_path / 'no')!r}: no such folder" in error(
        f"--translations_dir={tmp_path / 'no'}", f"--reference={reference}")
    (tmp_path / "empty").mkdir()
    assert "no translation NAME-STEP of at least 5 steps in" in error(
        f"--translations_dir={tmp_path / 'empty'}", f"--reference={reference}", "--min_steps=5")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert f"--event_dir={a_file / 'events'}: {a_file} is a file, not a folder" in error(
        f"--translations_dir={folder}", f"--reference={reference}",
        f"--event_dir={a_file / 'events'}")
    _write(folder, "translate_tiny-50", REFERENCE[:2], 1_000_050.0)
    assert f"{folder}/translate_tiny-50: 2 translations but 4 references" in error(
        f"--translations_dir={folder}", f"--reference={reference}", f"--event_dir={tmp_path}/e")
    os.remove(os.path.join(folder, "translate_tiny-50"))
    _write(folder, "translate_other-15", REFERENCE, 1_000_015.0)
    assert "holds the translations of 2 runs or problems (translate_other, translate_tiny)" \
        in error(f"--translations_dir={folder}", f"--reference={reference}")


def test_a_tie_of_bleu_is_broken_by_chrf(capsys):
    """Early in training every step's BLEU can be 0: the best step is then the one with
    the best chrF, not the first one."""
    from t2t.bin import t2t_bleu

    rows = [(100, {"BLEU_cased": 0.0, "chrF": 3.5}), (200, {"BLEU_cased": 0.0, "chrF": 9.25}),
            (300, {"BLEU_cased": 0.0, "chrF": 7.0}), (400, {"BLEU_cased": 0.0, "chrF": 9.25})]
    t2t_bleu._print_summary(rows, {}, ["BLEU_cased"], "events", -1)
    assert "best: step 200 (BLEU_cased 0.00; chrF 9.25)" in capsys.readouterr().out
