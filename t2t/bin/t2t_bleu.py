"""t2t-bleu: corpus BLEU and chrF of a translation file, or of every translation
t2t-translate-all wrote (a BLEU curve by step, in TensorBoard too).

  t2t-bleu --translation=newstest.decodes --reference=newstest.de

  t2t-translate-all --model_dir=RUN --source=newstest.en   # RUN/translations/PROBLEM-STEP
  t2t-bleu --translations_dir=RUN/translations --reference=newstest.de
  tensorboard --logdir=RUN     # BLEU_cased, BLEU_uncased and chrF by step
                               # (in RUN/translations/events: the --event_dir default)

The files hold one sentence per line, line-aligned. The scores are sacrebleu's, with its
default settings (13a tokenization; BLEU_uncased lowercases both sides first); each is
printed with its signature (BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...),
which is what makes a score comparable to a published one.

With --translations_dir every file NAME-STEP in it (of at least --min_steps steps) is
scored, oldest step first: a table of step -> BLEU and chrF is printed with the best
step (ties of BLEU broken by chrF), and each step's scores are written to --event_dir
as TensorBoard scalars (tags
BLEU_cased, BLEU_uncased, chrF, each + --tag_suffix; wall time: the translation file's
modification time, which t2t-translate-all sets to its checkpoint's). Events are written
for the steps after the last one written before (recorded in
EVENT_DIR/last_evaluated_step.txt, as Tensor2Tensor did; one file per --tag_suffix), so
running it again adds only the new steps' points. --wait_minutes keeps looking for new translations.
"""

from __future__ import annotations

import os
import re
import sys

from absl import flags

from t2t.bin import common_flags, flag_help, output_paths

FLAGS = flags.FLAGS

flags.DEFINE_string("translation", None, "The system's output, one sentence per line.")
flags.DEFINE_string("reference", None, "The reference translations, line-aligned.")
flags.DEFINE_string("translations_dir", None, "Score every translation NAME-STEP in this "
                    "folder (t2t-translate-all's), instead of --translation.")
flags.DEFINE_string("event_dir", None, "Where --translations_dir writes the scores by step "
                    "as TensorBoard events (default: TRANSLATIONS_DIR/events).")
flags.DEFINE_enum("bleu_variant", None, ["cased", "uncased", "both"], "BLEU of the cased "
                  "text, of the lowercased text, or both (default: both with "
                  "--translations_dir, as Tensor2Tensor; cased with --translation).")
flags.DEFINE_string("tag_suffix", "", "Added to the event tags (BLEU_cased, BLEU_uncased, "
                    "chrF), e.g. '_beam4' to plot decode settings apart.")
flags.DEFINE_integer("min_steps", 0, "Ignore translations of fewer steps.")
flags.DEFINE_float("wait_minutes", 0.0, "After the last translation, wait up to this many "
                   "minutes for a new one (looking every 10 s), each time.")

LAST_STEP_FILE = "last_evaluated_step.txt"
_DIR_FLAGS = ("event_dir", "tag_suffix", "min_steps", "wait_minutes")


def bleu_tags(variant: str) -> list[str]:
    """The BLEU scores of `variant` (cased, uncased, both), by Tensor2Tensor's tags."""
    return {"cased": ["BLEU_cased"], "uncased": ["BLEU_uncased"],
            "both": ["BLEU_cased", "BLEU_uncased"]}[variant]


def corpus_scores(hypotheses: list[str], references: list[str],
                  tags: list[str]) -> dict[str, tuple[float, str]]:
    """{tag: (score 0-100, sacrebleu's one-line report with its signature)} for the BLEU
    `tags` (BLEU_cased, BLEU_uncased) and chrF; DecodeError when the line counts differ."""
    from sacrebleu.metrics import BLEU

    from t2t.decoding import decode_scores

    cased = decode_scores.score_bleu(hypotheses, references)  # checks the alignment
    scores = {}
    if "BLEU_cased" in tags:
        scores["BLEU_cased"] = (cased["bleu"], cased["bleu_text"])
    if "BLEU_uncased" in tags:
        bleu = BLEU(lowercase=True)
        score = bleu.corpus_score(list(hypotheses), [list(references)])
        scores["BLEU_uncased"] = (float(score.score),
                                  score.format(signature=str(bleu.get_signature())))
    scores["chrF"] = (cased["chrf"], cased["chrf_text"])
    return scores


def _read_lines(flag: str, path: str) -> list[str]:
    from t2t.decoding import decoder as decoder_lib

    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--{flag}={path!r}: no such file.")
    return decoder_lib.read_text_lines(path)


def _score_file(variant: str) -> None:
    """--translation against --reference: sacrebleu's report lines."""
    texts = {name: _read_lines(name, FLAGS[name].value) for name in ("translation", "reference")}
    scores = corpus_scores(texts["translation"], texts["reference"], bleu_tags(variant))
    for _, text in scores.values():
        print(text)


# ------------------------------------------------------------ --translations_dir
def last_step_path(event_dir: str, tag_suffix: str = "") -> str:
    """Where the last step written to `event_dir` (tags + `tag_suffix`) is recorded:
    EVENT_DIR/last_evaluated_step.txt (Tensor2Tensor's file), one per tag suffix."""
    stem, ext = os.path.splitext(LAST_STEP_FILE)
    safe_suffix = re.sub(r"[^\w.-]", "_", tag_suffix)  # "/beam4" names no folder
    return os.path.join(event_dir, f"{stem}{safe_suffix}{ext}")


def read_last_step(event_dir: str, tag_suffix: str = "") -> int:
    """The last step whose events (tags + `tag_suffix`) were written to `event_dir`
    (-1: none)."""
    try:
        with open(last_step_path(event_dir, tag_suffix), encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return -1


def _write_last_step(event_dir: str, tag_suffix: str, step: int) -> None:
    path = last_step_path(event_dir, tag_suffix)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{step}\n")
    os.replace(path + ".tmp", path)


class EventWriter:
    """Scalars by step into `event_dir` (TensorBoard's event files), with wall times
    given: a translation's points sit at its checkpoint's time."""

    def __init__(self, event_dir: str):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.event_dir = event_dir
        self._writer = EventFileWriter(event_dir)

    def write(self, step: int, wall_time: float, values: dict[str, float]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, simple_value=value)
            for tag, value in values.items()])
        self._writer.add_event(event_pb2.Event(wall_time=wall_time, step=step,
                                               summary=summary))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def _translations_lister(translations_dir: str, min_steps: int):
    """A function listing the translations NAME-STEP of one NAME; DecodeError when the
    folder holds several NAMEs (two problems' or runs' translations: steps would mix)."""
    from t2t.decoding.decode_scores import DecodeError
    from t2t.utils import step_files

    def list_translations() -> list:
        found = step_files.list_step_files(translations_dir, min_steps)
        names = sorted({f.prefix for f in found})
        if len(names) > 1:
            raise DecodeError(f"--translations_dir={translations_dir} holds the translations "
                              f"of {len(names)} runs or problems ({', '.join(names)}): give "
                              f"each its own folder (t2t-translate-all --translations_dir).")
        return found

    return list_translations


def _table_row(step: int, scores: dict[str, tuple[float, str]], name: str) -> str:
    values = "".join(f"{scores[tag][0]:>{max(len(tag), 6) + 2}.2f}" for tag in scores)
    return f"{step:>10}{values}  {name}"


def score_translations(translations_dir: str, references: list[str], tags: list[str],
                       event_dir: str, tag_suffix: str = "", min_steps: int = 0,
                       wait_minutes: float = 0.0) -> list[tuple[int, dict[str, float]]]:
    """Scores each translation in `translations_dir` (step order, then new ones for up to
    `wait_minutes`), printing a table row each, and writes the steps after the last one
    written before to `event_dir`; returns [(step, {tag: score})]."""
    from t2t.decoding.decode_scores import DecodeError
    from t2t.utils import step_files

    rows: list[tuple[int, dict[str, float]]] = []
    last_written = read_last_step(event_dir, tag_suffix)
    writer = None
    header = "".join(f"{tag:>{max(len(tag), 6) + 2}}" for tag in [*tags, "chrF"])
    print(f"{'step':>10}{header}  translation", flush=True)
    try:
        for found in step_files.follow(_translations_lister(translations_dir, min_steps),
                                       wait_minutes):
            try:
                scores = corpus_scores(_read_lines("translations_dir", found.path),
                                       references, tags)
            except DecodeError as e:  # not line-aligned
                raise DecodeError(f"{found.path}: {e}") from None
            print(_table_row(found.step, scores, os.path.basename(found.path)), flush=True)
            values = {tag: score for tag, (score, _) in scores.items()}
            rows.append((found.step, values))
            if found.step > last_written:
                writer = writer or EventWriter(event_dir)
                writer.write(found.step, found.mtime,
                             {tag + tag_suffix: value for tag, value in values.items()})
                _write_last_step(event_dir, tag_suffix, found.step)
    finally:
        if writer is not None:
            writer.close()
    if rows:
        _print_summary(rows, scores, tags, event_dir, last_written)
    return rows


def _print_summary(rows, last_scores, tags: list[str], event_dir: str,
                   last_written: int) -> None:
    """The best step (by the first BLEU tag; ties, e.g. all 0 early in training, broken
    by the other scores in order, chrF last, then the earlier step), the signatures, and
    where events went."""
    key = tags[0]
    order = [key, *(tag for tag in rows[0][1] if tag != key)]
    step, best = max(rows, key=lambda row: (*(row[1][tag] for tag in order), -row[0]))
    others = ", ".join(f"{tag} {value:.2f}" for tag, value in best.items() if tag != key)
    print(f"best: step {step} ({key} {best[key]:.2f}; {others})")
    for tag, (_, text) in last_scores.items():
        print(f"{tag}: {text.split(' = ')[0]}")  # sacrebleu's signature
    new = [s for s, _ in rows if s > last_written]
    before = f" (steps up to {last_written} were written before)" if last_written >= 0 else ""
    print(f"TensorBoard events of {len(new)} step(s) written to {event_dir}{before}",
          flush=True)


def _check_flags() -> str:
    """The BLEU variant; fails on a missing or conflicting flag."""
    if FLAGS.translation and FLAGS.translations_dir:
        common_flags.fail("--translation and --translations_dir: choose one (a file, or "
                          "every translation t2t-translate-all wrote in a folder).")
    if not FLAGS.translation and not FLAGS.translations_dir:
        common_flags.fail("--translation=FILE or --translations_dir=DIR required (with "
                          "--reference).")
    if not FLAGS.reference:
        common_flags.fail("--reference required: the reference translations, line-aligned.")
    if FLAGS.translation:
        given = [f"--{name}" for name in _DIR_FLAGS if FLAGS[name].present]
        if given:
            common_flags.fail(f"{', '.join(given)} applies to --translations_dir, not to "
                              f"--translation.")
    elif FLAGS.wait_minutes < 0 or FLAGS.min_steps < 0:
        bad = "wait_minutes" if FLAGS.wait_minutes < 0 else "min_steps"
        common_flags.fail(f"--{bad}={FLAGS[bad].value}: give a value >= 0.")
    return FLAGS.bleu_variant or ("cased" if FLAGS.translation else "both")


def _score_dir(variant: str) -> None:
    translations_dir = os.path.expanduser(FLAGS.translations_dir)
    event_dir = os.path.expanduser(FLAGS.event_dir or os.path.join(translations_dir, "events"))
    output_paths.check_dir("event_dir", event_dir)
    if not os.path.isdir(translations_dir) and not FLAGS.wait_minutes:
        raise FileNotFoundError(f"--translations_dir={FLAGS.translations_dir!r}: no such "
                                f"folder (t2t-translate-all --translations_dir writes it).")
    references = _read_lines("reference", FLAGS.reference)
    rows = score_translations(translations_dir, references, bleu_tags(variant), event_dir,
                              FLAGS.tag_suffix, FLAGS.min_steps, FLAGS.wait_minutes)
    if not rows:
        at_least = f" of at least {FLAGS.min_steps} steps" if FLAGS.min_steps else ""
        raise FileNotFoundError(f"no translation NAME-STEP{at_least} in {translations_dir}: "
                                f"write them with t2t-translate-all --translations_dir="
                                f"{translations_dir} ...")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        common_flags.fail(f"unexpected arguments {argv[1:]}; flags look like --translation=F.")
    variant = _check_flags()
    common_flags.import_tensorflow()
    from t2t.decoding import decoder as decoder_lib

    try:
        if FLAGS.translation:
            _score_file(variant)
        else:
            _score_dir(variant)
    except (decoder_lib.DecodeError, OSError) as e:
        common_flags.fail(str(e))
    except KeyboardInterrupt:
        sys.exit(130)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-bleu")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    run()
