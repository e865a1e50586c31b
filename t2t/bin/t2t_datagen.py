"""t2t-datagen: download and prepare a problem's data as sharded TFRecord files.

  t2t-datagen --problem=algorithmic_reverse_binary40_test --data_dir=~/t2t_data
  t2t-datagen --problem=image_fashion_mnist --data_mirror=/usr/share/datasets/fashion-mnist
  t2t-datagen --problem=algorithmic_reverse_binary40_test --inspect
  t2t-datagen --problem=algorithmic_reverse_binary40_test --inspect_split=dev \\
      --dump_text=dev    # dev.inputs, dev.targets: t2t-decoder's input and reference
"""

from __future__ import annotations

import contextlib
import os
import time

from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, flag_help, output_paths

FLAGS = flags.FLAGS

config_flags.define(config.TaskConfig, only=("problem", "data_dir"), help={
    "problem": "Registered problem name(s), comma separated.",
    "data_dir": "Where the TFRecord shards and vocabularies go (default: $T2T_DATA_DIR or "
                "~/t2t_data).",
})
config_flags.define(config.DataConfig, only=("tmp_dir", "num_shards", "max_cases", "progress"))
flags.DEFINE_bool("inspect", False, "Do not generate: show decoded examples, length "
                  "statistics and label balance of the prepared data, and how many dev "
                  "examples also occur in train.")
flags.DEFINE_string("inspect_split", "train", "Split to inspect: train, dev or test.")
flags.DEFINE_integer("inspect_examples", 5, "Examples to show with --inspect.")
flags.DEFINE_integer("inspect_max_records", 100_000, "Records to read for --inspect statistics.")
flags.DEFINE_string("dump_text", None, "Do not generate: write the --inspect_split split's "
                    "text, one example per line, to PREFIX.inputs and PREFIX.targets (a "
                    "t2t-decoder --decode_from_file input and its --decode_reference).")
flags.DEFINE_string("use_vocab_from", None, "Encode a text problem's data with an imported "
                    "model's vocabulary: RUN is the run folder t2t-import wrote (it holds "
                    "vocab.pretrained.json); the vocabulary is copied into --data_dir, so the "
                    "model fine-tuned from RUN reads the data with its own ids (Tensor2Tensor "
                    "had no such flag).")
flag_help.group("Data", "use_vocab_from")


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


def generate(problem_name: str, data_dir: str, data: config.DataConfig,
             use_vocab_from: str | None = None) -> None:
    from t2t import gin_config, registry
    from t2t.data.bases import text_core

    problem = registry.problem(problem_name)
    if use_vocab_from:  # an imported model's vocabulary (t2t-import's run folder)
        text_core.set_use_vocab_from(problem, use_vocab_from)
        problem.check_pretrained_vocab_target(data_dir)  # before anything is written
    start = time.monotonic()
    common_flags.print_locations(data_dir, None)
    print(f"Generating {problem.name} into {data_dir}")
    tmp_dir = os.path.expanduser(data.tmp_dir or os.path.join(data_dir, "tmp"))
    summaries = problem.generate_data(
        data_dir, tmp_dir, mirror=data.data_mirror, max_cases=data.max_cases,
        num_shards=data.num_shards, progress=data.progress,
    )
    print(f"{problem.name}: done in {time.monotonic() - start:.1f}s")
    width = max([8, *map(len, summaries)])  # a multi-problem's splits read TASK/SPLIT
    print(f"  {'split':<{width}} {'examples':>10} {'shards written':>15} {'skipped':>8} "
          f"{'size':>10}")
    for split, s in summaries.items():
        print(f"  {split:<{width}} {s.examples:>10,} {s.shards_written:>15} "
              f"{s.shards_skipped:>8} {_format_bytes(s.bytes):>10}")
    from t2t.data.inspection import overlap  # dev examples that are also in train: a data leak

    for part in getattr(problem, "task_list", [problem]):  # a multi-problem: per task
        report = overlap.check_overlap(part, data_dir)
        if report is not None:
            print(report.format())
    gin_config.save_config(data_dir, f"{problem.dataset_filename()}.datagen_config.gin",
                           only_if_bound=True)


def inspect(problem_name: str, data_dir: str) -> None:
    from t2t import registry
    from t2t.data.inspection import inspect_data

    problem = registry.problem(problem_name)
    with _damaged_data_explained(problem, data_dir):
        report = inspect_data.inspect_problem(
            problem, data_dir, FLAGS.inspect_split, num_examples=FLAGS.inspect_examples,
            max_records=FLAGS.inspect_max_records,
        )
    print(report.format())


@contextlib.contextmanager
def _damaged_data_explained(problem, data_dir: str):
    """Turns TensorFlow's DataLossError into a DamagedDataError naming the bad shards."""
    import tensorflow as tf

    from t2t.data import problem as problem_lib

    try:
        yield
    except tf.errors.DataLossError as e:
        raise problem_lib.DamagedDataError(problem.damaged_data_message(data_dir, e)) from e


def dump_text(problem_name: str, data_dir: str, prefix: str) -> None:
    from t2t import registry
    from t2t.data.inspection import inspect_data

    problem = registry.problem(problem_name)
    with _damaged_data_explained(problem, data_dir):
        paths = inspect_data.write_text(problem, data_dir, FLAGS.inspect_split,
                                        os.path.expanduser(prefix))
    lines = sum(1 for _ in open(next(iter(paths.values())), encoding="utf-8"))
    print(f"{problem_name} [{FLAGS.inspect_split}]: wrote {lines:,} examples to "
          f"{', '.join(paths.values())}")


def _check_output_paths(data_dir: str | None, tmp_dir: str | None) -> None:
    """What this run writes, checked before any work (t2t.bin.output_paths: one line,
    exit 1): --dump_text's PREFIX.inputs/.targets (their folder is made), else with
    generation the data and tmp folders; --inspect writes nothing. None: not checked."""
    if FLAGS.dump_text:
        for suffix in (".inputs", ".targets"):
            output_paths.check_file("dump_text", FLAGS.dump_text, suffix, make_parents=True)
    elif not FLAGS.inspect:
        output_paths.check_dir("data_dir", data_dir)
        output_paths.check_dir("tmp_dir", tmp_dir)


def main(argv: list[str]) -> None:
    if not FLAGS.registry_help:  # the flags given, before TensorFlow starts
        _check_output_paths(FLAGS.data_dir, FLAGS.tmp_dir)
    if not common_flags.start(argv):
        return
    if not FLAGS.problem:
        common_flags.fail("--problem is required (see --registry_help for the names).")
    from t2t.data import problem as problem_lib
    from t2t.data.generation.download import DownloadError
    from t2t.registry import UnknownNameError

    task = config_flags.build(config.TaskConfig, only=("problem", "data_dir"))
    data = config_flags.build(config.DataConfig, only=("tmp_dir", "num_shards", "max_cases",
                                                       "progress", "data_mirror"))
    data_dir = os.path.expanduser(task.data_dir or common_flags.default_data_dir())
    _check_output_paths(data_dir, data.tmp_dir or os.path.join(data_dir, "tmp"))  # + gin's
    names = [n.strip() for n in task.problem.split(",") if n.strip()]
    if FLAGS.use_vocab_from and (FLAGS.inspect or FLAGS.dump_text):
        common_flags.fail("--use_vocab_from applies when generating; --inspect and "
                          "--dump_text read the vocabulary --data_dir holds (its copy of "
                          "the imported one): drop --use_vocab_from.")
    if FLAGS.dump_text and len(names) > 1:
        common_flags.fail(f"--dump_text writes one problem's text; --problem={task.problem!r} "
                          f"names {len(names)}: run once per problem.")
    for name in names:
        try:
            if FLAGS.dump_text:
                dump_text(name, data_dir, FLAGS.dump_text)
            elif FLAGS.inspect:
                inspect(name, data_dir)
            else:
                generate(name, data_dir, data, FLAGS.use_vocab_from)
        except (UnknownNameError, problem_lib.DataMissingError, DownloadError, ValueError,
                OSError) as e:
            common_flags.fail(str(e))
        except KeyboardInterrupt:
            common_flags.fail("interrupted: finished shards are kept; re-run to complete.")


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-datagen")
    flag_help.run(main, __doc__)


if __name__ == "__main__":
    run()
