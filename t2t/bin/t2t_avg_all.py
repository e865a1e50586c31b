"""t2t-avg-all: average the weights of a run's last N checkpoints into a new checkpoint.

  t2t-avg-all --model_dir=RUN --output_dir=RUN_AVG --n=8
  t2t-decoder --output_dir=RUN_AVG ...        # or t2t-exporter --output_dir=RUN_AVG

Floating-point model variables are averaged, others copied from the newest checkpoint;
the result is written at the newest step (RUN_AVG/ckpt-N) with RUN's run.json and
hparams.json, so the decoder and exporter find everything they need in RUN_AVG. Fewer
than N checkpoints: those that exist are averaged (with a warning).
"""

from __future__ import annotations

import os
import sys

from absl import flags

from t2t.bin import common_flags, flag_help, output_paths

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "The training run whose checkpoints are averaged.")
flags.DEFINE_string("output_dir", None, "Where to write the averaged checkpoint (default: "
                    "MODEL_DIR/avg).")
flags.DEFINE_integer("n", 8, "Average the last N checkpoints.")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        common_flags.fail(f"unexpected arguments {argv[1:]}; flags look like --model_dir=DIR.")
    if not FLAGS.model_dir:
        common_flags.fail("--model_dir required: the output_dir of a training run.")
    output_dir = os.path.expanduser(FLAGS.output_dir or os.path.join(FLAGS.model_dir, "avg"))
    output_paths.check_dir("output_dir", output_dir)  # before TensorFlow starts
    common_flags.import_tensorflow()
    from t2t.serving import average

    common_flags.print_locations(None, output_dir)
    try:
        paths = average.last_checkpoints(FLAGS.model_dir, FLAGS.n)
        if len(paths) < FLAGS.n:
            print(f"warning: only {len(paths)} checkpoint(s) in {FLAGS.model_dir} (asked for "
                  f"{FLAGS.n}): averaging those.", file=sys.stderr)
        written = average.average_checkpoints(FLAGS.model_dir, output_dir, FLAGS.n)
    except (average.AverageError, FileNotFoundError) as e:
        common_flags.fail(str(e))
    names = ", ".join(os.path.basename(p) for p in paths)
    print(f"Averaged {len(paths)} checkpoint(s) of {FLAGS.model_dir} ({names}) into {written}",
          flush=True)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-avg-all")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    run()
