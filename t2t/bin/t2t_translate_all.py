"""t2t-translate-all: translate a file with every checkpoint of a training run.

  t2t-translate-all --model_dir=RUN --source=newstest.en \\
      --decode_hparams="beam_size=4,alpha=0.6"        # writes RUN/translations/PROBLEM-STEP
  t2t-bleu --translations_dir=RUN/translations --reference=newstest.de  # BLEU by step,
                                                       # as TensorBoard scalars too
  # Alongside a training run: translate each new checkpoint as it appears, waiting up to
  # 30 minutes for the next one, until the run's last step (its --train_steps)
  t2t-translate-all --model_dir=RUN --source=newstest.en --wait_minutes=30

Each checkpoint of --model_dir (those its "checkpoint" file lists and every CKPT-STEP.index
present) with at least --min_steps steps is decoded as `t2t-decoder --checkpoint_path=CKPT
--decode_from_file=SOURCE` would, into TRANSLATIONS_DIR/PROBLEM-STEP (Tensor2Tensor's
names), oldest first. A translation already there is skipped, so a second run only
translates new checkpoints; one cut short by a crash is never left half-written (the
decoder writes PROBLEM-STEP.partial and renames it when complete; the next run resumes
it). Each translation gets its checkpoint's modification time (T2T's --keep_timestamp),
which t2t-bleu writes as the wall time of its TensorBoard points.

The model is loaded once and each checkpoint's weights are restored into it (no process
start per checkpoint). --decoder_command runs a command per checkpoint instead
(Tensor2Tensor's flag: e.g. a job-queue wrapper, "qsub -sync y t2t-decoder {params}").
--problem, --model, --hparams_set, --hparams, --data_dir and --t2t_usr_dir default to
the run's records (run.json, hparams.json), as for t2t-decoder.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time

from absl import flags

from t2t import config
from t2t.bin import common_flags, config_flags, flag_help, output_paths

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "The training run whose checkpoints are translated "
                    "(the trainer's --output_dir).")
flags.DEFINE_alias("output_dir", "model_dir")
flags.DEFINE_string("source", None, "The file to translate, one sentence per line.")
flags.DEFINE_string("translations_dir", None, "Where to write the translations, one file "
                    "per checkpoint named PROBLEM-STEP (default: MODEL_DIR/translations).")
flags.DEFINE_integer("min_steps", 0, "Ignore checkpoints with fewer steps.")
flags.DEFINE_float("wait_minutes", 0.0, "After the last checkpoint, wait up to this many "
                   "minutes for a new one (looking every 10 s), each time; stop once the "
                   "checkpoint of --train_steps is translated.")
flags.DEFINE_integer("train_steps", None, "The run's last step: --wait_minutes stops "
                     "waiting once its checkpoint is translated (default: the run's "
                     "--train_steps, from MODEL_DIR/operative_config.gin or flags.txt).")
flags.DEFINE_string("decoder_command", None, "Run this shell command per checkpoint "
                    "instead of decoding in this process; {params} is replaced by "
                    "t2t-decoder's flags, e.g. 't2t-decoder {params}'.")
config_flags.define(config.TaskConfig, exclude=("output_dir",), help={
    "problem": "Registered problem name (default: the run's, from MODEL_DIR/run.json).",
    "model": "Registered model name (default: the run's).",
    "hparams_set": "Registered hparams set (default: the run's resolved hparams, "
                   "MODEL_DIR/hparams.json).",
    "hparams": "Overrides, e.g. 'num_heads=2' (as at training).",
    "data_dir": "Prepared data: the vocabulary (default: the data_dir the run recorded in "
                "run.json, else $T2T_DATA_DIR or ~/t2t_data).",
})
flags.DEFINE_string("decode_hparams", "", "Decoding settings (DecodeHParams of t2t.config), "
                    f"as t2t-decoder's, e.g. 'beam_size=4,alpha=0.6'; all, with their "
                    f"defaults: '{config.DecodeHParams.help_string()}'.")
flags.DEFINE_integer("beam_size", None, "Tensor2Tensor's flag: the same as "
                     "--decode_hparams=beam_size=N.")
flags.DEFINE_float("alpha", None, "Tensor2Tensor's flag: the same as "
                   "--decode_hparams=alpha=A.")
flags.DEFINE_string("decode_task", None, "A multi-problem's task to translate with (one of "
                    "the names joined by + in --problem); required for a multi-problem.")
flag_help.group("Decoding", "decode_hparams", "beam_size", "alpha", "decode_task")
flag_help.group("Problem, model and run", "model_dir")

# Decode hparams (and their defaults) that would write other than one translation per
# source line (several per line, several passes, a part of the file): t2t-bleu needs one.
_ONE_OUTPUT_PER_LINE = {"return_beams": False, "write_beam_scores": False, "num_samples": 1,
                        "num_decodes": 1, "shards": 1}


def recorded_train_steps(model_dir: str) -> int | None:
    """The train_steps the run in `model_dir` trained to: gin's binding in its
    operative_config.gin (written where no flag set it), else --train_steps in its
    flags.txt; None when neither records it."""
    patterns = (("operative_config.gin", r"^TrainerConfig\.train_steps\s*=\s*(\d+)\s*$"),
                ("flags.txt", r"^--train_steps=(\d+)\s*$"))
    for name, pattern in patterns:
        try:
            with open(os.path.join(model_dir, name), encoding="utf-8") as f:
                match = re.search(pattern, f.read(), re.MULTILINE)
        except OSError:
            continue
        if match:
            return int(match.group(1))
    return None


def decode_hparams_text(decode_hparams: str, beam_size: int | None,
                        alpha: float | None) -> str:
    """--decode_hparams with T2T's --beam_size/--alpha folded in; DecodeHParamsError when
    one is given both ways."""
    given = {part.split("=", 1)[0].strip() for part in decode_hparams.split(",") if part}
    parts = [decode_hparams] if decode_hparams else []
    for name, value in (("beam_size", beam_size), ("alpha", alpha)):
        if value is None:
            continue
        if name in given:
            raise config.DecodeHParamsError(
                f"--{name}={value} and --decode_hparams={decode_hparams!r} both set {name}: "
                f"give it once.")
        parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return ",".join(parts)


class InProcessTranslator:
    """Decodes with the run's model in this process: loaded at the first checkpoint,
    each later checkpoint's weights restored into it (the traced decode is reused)."""

    def __init__(self, problem, model_name: str, hparams, data_dir: str, decode_hparams):
        self.problem, self.model_name, self.hparams = problem, model_name, hparams
        self.data_dir, self.decode_hparams = data_dir, decode_hparams
        self.decoder = None

    def _restore(self, checkpoint: str) -> None:
        """The model's weights from `checkpoint` (DecodeError as load_model's)."""
        from t2t.decoding import decoder as decoder_lib
        from t2t.models import checkpoints

        model = self.decoder.model
        try:
            checkpoints.restore(checkpoint, model)
        except checkpoints.DamagedCheckpointError as e:
            raise decoder_lib.DecodeError(str(e)) from e
        except checkpoints.CheckpointError as e:
            raise decoder_lib.DecodeError(
                f"The checkpoint {checkpoint} does not match model {self.model_name!r} with "
                f"these hparams: {str(e)[:300]}") from e
        model.checkpoint_path = checkpoint  # the decodes' resume record names it

    def translate(self, checkpoint: str, source: str, output: str) -> int:
        """Decodes `source` with `checkpoint` into `output`; returns its line count."""
        from t2t.decoding import decoder as decoder_lib
        from t2t.features import Modality

        if self.decoder is None:
            model = decoder_lib.load_model(self.problem, self.model_name, self.hparams,
                                           self.data_dir, checkpoint)
            targets = model.problem_hparams.modality.get("targets")
            if targets == Modality.IMAGE:
                raise decoder_lib.DecodeError(
                    f"{self.problem.name} generates images: t2t-translate-all writes text "
                    f"(sample images with t2t-decoder).")
            self.decoder = decoder_lib.Decoder(self.problem, model, self.data_dir,
                                               self.decode_hparams)
        else:
            self._restore(checkpoint)
        return self.decoder.decode_file(source, output)


class CommandTranslator:
    """Runs --decoder_command per checkpoint, {params} replaced by t2t-decoder's flags."""

    def __init__(self, template: str, shared_args: list[str]):
        self.template, self.shared_args = template, shared_args

    def command(self, checkpoint: str, source: str, output: str) -> str:
        args = [*self.shared_args, f"--checkpoint_path={checkpoint}",
                f"--decode_from_file={source}", f"--decode_to_file={output}"]
        return self.template.replace("{params}", " ".join(shlex.quote(a) for a in args))

    def translate(self, checkpoint: str, source: str, output: str) -> int:
        from t2t.decoding import decoder as decoder_lib

        command = self.command(checkpoint, source, output)
        print(f"Running: {command}", flush=True)
        status = subprocess.run(command, shell=True, check=False).returncode
        if status != 0:
            raise decoder_lib.DecodeError(f"--decoder_command exited with status {status} for "
                                          f"{checkpoint}: {command}")
        if not os.path.isfile(output):
            raise decoder_lib.DecodeError(f"--decoder_command wrote no {output} for "
                                          f"{checkpoint}: its {{params}} must reach "
                                          f"t2t-decoder ({command}).")
        with open(output, "rb") as f:
            return sum(1 for _ in f)


def _command_args(model_dir: str, decode_hparams: str) -> list[str]:
    """t2t-decoder's flags for --decoder_command: the run, the decode settings, and the
    run flags given here (the decoder finds the rest in the run's records, as here)."""
    args = [f"--output_dir={model_dir}"]
    if decode_hparams:
        args.append(f"--decode_hparams={decode_hparams}")
    args += config_flags.given(config.TaskConfig, exclude=("output_dir",))
    for name in ("t2t_usr_dir", "decode_task"):
        if FLAGS[name].value:
            args.append(f"--{name}={FLAGS[name].value}")
    return args


def _translate_one(translator, found, source: str, output: str) -> bool:
    """Translates checkpoint `found` (a StepFile) into `output` with its time; False when
    the checkpoint was removed since it was listed (the trainer keeps the last few)."""
    from t2t.decoding import decoder as decoder_lib

    index = found.path + ".index"
    try:
        start = time.monotonic()
        count = translator.translate(found.path, source, output)
    except decoder_lib.DecodeError:
        if os.path.exists(index):
            raise
        print(f"note: {found.path} was removed before it was translated (the trainer keeps "
              f"its last --keep_checkpoint_max checkpoints): skipped", file=sys.stderr,
              flush=True)
        return False
    os.utime(output, (time.time(), found.mtime))  # T2T's --keep_timestamp
    print(f"Translated {count} lines with {found.path} (step {found.step}) in "
          f"{time.monotonic() - start:.1f} s: {output}", flush=True)
    return True


def translate_all(translator, model_dir: str, source: str, translations_dir: str,
                  name: str, min_steps: int, wait_minutes: float,
                  stop_step: int | None) -> tuple[int, int]:
    """Translates each checkpoint of `model_dir` (step >= min_steps, oldest first, then
    each new one for up to `wait_minutes`, until `stop_step`) into
    TRANSLATIONS_DIR/NAME-STEP, skipping those present; returns (translated, skipped)."""
    from t2t.utils import step_files

    translated = skipped = 0
    for found in step_files.follow(lambda: step_files.list_checkpoints(model_dir, min_steps),
                                   wait_minutes, stop_step):
        output = os.path.join(translations_dir, f"{name}-{found.step}")
        if os.path.exists(output):
            print(f"Skipping step {found.step}: {output} exists", flush=True)
            skipped += 1
        elif _translate_one(translator, found, source, output):
            translated += 1
    return translated, skipped


def _check_flags() -> tuple[str, str, str]:
    """(model_dir, source, translations_dir), expanded; fails on a bad one."""
    if not FLAGS.model_dir:
        common_flags.fail("--model_dir required: the output_dir of a training run.")
    if not FLAGS.source:
        common_flags.fail("--source required: the file to translate, one sentence per line.")
    model_dir, source = os.path.expanduser(FLAGS.model_dir), os.path.expanduser(FLAGS.source)
    if not os.path.isdir(model_dir):
        common_flags.fail(f"--model_dir={FLAGS.model_dir}: no such folder: give the "
                          f"output_dir of a training run.")
    if not os.path.isfile(source):
        common_flags.fail(f"--source={FLAGS.source}: no such file.")
    if os.path.getsize(source) == 0:
        common_flags.fail(f"--source={FLAGS.source} is empty: nothing to translate.")
    if FLAGS.wait_minutes < 0 or FLAGS.min_steps < 0:
        bad = "wait_minutes" if FLAGS.wait_minutes < 0 else "min_steps"
        common_flags.fail(f"--{bad}={FLAGS[bad].value}: give a value >= 0.")
    template = FLAGS.decoder_command
    if template is not None and "{params}" not in template:
        common_flags.fail(f"--decoder_command={template!r} lacks {{params}}, where "
                          f"t2t-decoder's flags go: e.g. 't2t-decoder {{params}}'.")
    translations_dir = os.path.expanduser(FLAGS.translations_dir
                                          or os.path.join(model_dir, "translations"))
    output_paths.check_dir("translations_dir", translations_dir)
    return model_dir, source, translations_dir


def _make_translator(model_dir: str, data_dir: str, problem, model_name: str, hparams):
    """The --decoder_command runner, else the in-process one; fails on bad settings."""
    from t2t.decoding import decoder as decoder_lib

    text = decode_hparams_text(FLAGS.decode_hparams, FLAGS.beam_size, FLAGS.alpha)
    dhp = decoder_lib.DecodeHParams.parse(text)
    other = [f"{k}={getattr(dhp, k)}" for k, one in _ONE_OUTPUT_PER_LINE.items()
             if getattr(dhp, k, one) != one]
    if other:
        raise decoder_lib.DecodeError(
            f"--decode_hparams {', '.join(other)}: t2t-translate-all writes one translation "
            f"per source line (what t2t-bleu scores); leave "
            f"{' and '.join(s.split('=')[0] for s in other)} out.")
    if FLAGS.decoder_command:
        return CommandTranslator(FLAGS.decoder_command, _command_args(model_dir, text))
    return InProcessTranslator(problem, model_name, hparams, data_dir, dhp)


def main(argv: list[str]) -> None:
    checked = None if FLAGS.registry_help else _check_flags()  # --registry_help needs no run
    if not common_flags.start(argv) or checked is None:
        return
    model_dir, source, translations_dir = checked
    from t2t import registry
    from t2t.data import multi_problem
    from t2t.data import problem as problem_lib
    from t2t.decoding import decoder as decoder_lib
    from t2t.hparams.hparams import HParamsError, MissingHParamError

    task = config_flags.build(config.TaskConfig, exclude=("output_dir",))
    try:
        problem_name, model_name, _, hparams = common_flags.resolve_run(
            model_dir, task.problem, task.model, task.hparams_set, task.hparams)
        data_dir = common_flags.resolve_data_dir(task.data_dir, model_dir)
        problem = multi_problem.select_task(registry.problem(problem_name), FLAGS.decode_task)
        registry.model(model_name)
        translator = _make_translator(model_dir, data_dir, problem, model_name, hparams)
        common_flags.print_locations(data_dir, translations_dir)
        os.makedirs(translations_dir, exist_ok=True)
        stop_step = FLAGS.train_steps or recorded_train_steps(model_dir)
        translated, skipped = translate_all(
            translator, model_dir, source, translations_dir, problem.name, FLAGS.min_steps,
            FLAGS.wait_minutes, stop_step)
    except (registry.UnknownNameError, HParamsError, MissingHParamError,
            problem_lib.DataMissingError, decoder_lib.DecodeError, FileNotFoundError,
            multi_problem.TaskChoiceError) as e:
        common_flags.fail(str(e))
    except KeyboardInterrupt:
        sys.exit(130)
    if translated + skipped == 0:
        common_flags.fail(f"no checkpoint in {model_dir}"
                          + (f" with at least {FLAGS.min_steps} steps" if FLAGS.min_steps
                             else "") + ": train first (t2t-trainer --output_dir="
                          f"{model_dir} ...) or give the --model_dir of a training run.")
    print(f"{translated} checkpoint(s) translated, {skipped} already translated, in "
          f"{translations_dir}: score them with t2t-bleu --translations_dir="
          f"{translations_dir} --reference=REFERENCE", flush=True)


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-translate-all")
    flag_help.run(main, __doc__, hidden=("data_mirror",))


if __name__ == "__main__":
    run()
