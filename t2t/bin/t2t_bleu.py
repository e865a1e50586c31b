"""t2t-bleu: corpus BLEU and chrF of a translation file against a reference file.

  t2t-bleu --translation=newstest.decodes --reference=newstest.de

Both files hold one sentence per line, line-aligned. The scores are sacrebleu's, with
its default settings (13a tokenization, mixed case); each is printed with its
signature (BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...), which is
what makes a score comparable to a published one.
"""

from __future__ import annotations

import os

from absl import flags

from t2t.bin import common_flags, flag_help

FLAGS = flags.FLAGS

flags.DEFINE_string("translation", None, "The system's output, one sentence per line.")
flags.DEFINE_string("reference", None, "The reference translations, line-aligned.")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        common_flags.fail(f"unexpected arguments {argv[1:]}; flags look like --translation=F.")
    missing = [f"--{n}" for n in ("translation", "reference") if not FLAGS[n].value]
    if missing:
        common_flags.fail(f"{', '.join(missing)} required.")
    common_flags.import_tensorflow()
    from t2t.decoding import decoder as decoder_lib

    try:
        texts = {}
        for name in ("translation", "reference"):
            path = os.path.expanduser(FLAGS[name].value)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--{name}={FLAGS[name].value!r}: no such file.")
            texts[name] = decoder_lib.read_text_lines(path)
        scores = decoder_lib.score_bleu(texts["translation"], texts["reference"])
    except (decoder_lib.DecodeError, OSError) as e:
        common_flags.fail(str(e))
    print(scores["bleu_text"])
    print(scores["chrf_text"])


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-bleu")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    run()
