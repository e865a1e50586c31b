"""The research workflows of the README, end to end with the real binaries:

  python -m regression.workflows multiproblem     [--output DIR] [--quick]
  python -m regression.workflows distillation     [--output DIR] [--quick]
  python -m regression.workflows backtranslation  [--output DIR] [--quick]
  python -m regression.workflows translation_loop [--output DIR] [--quick]
  python -m regression.workflows pretrained_import [--output DIR] [--quick]

multiproblem: one transformer_tiny on reverse+identity against each task alone, the same
  steps; for each task, the first evaluated step at which per-token dev accuracy reaches
  the single-task band's floor (THRESHOLD), and the final accuracy.
distillation: a teacher (transformer_tiny), then a student of a quarter of its width
  trained alone, against the teacher (--teacher_dir), and on the teacher's outputs
  (distilled:P), the same steps; dev accuracy of each.
backtranslation: a reverse model (P_rev) translates monolingual target text (the targets
  of another data set of the same task) into synthetic sources; a forward model trains
  on P alone and on backtranslated:P, the same steps; sacrebleu BLEU and chrF on P's dev.

translation_loop: English -> Vietnamese on the machine's own gettext catalogs
  (translate_envi_gettext8k, translate_envi_iwslt32k's shape, offline): transformer_tiny
  early-stopped on dev BLEU (--eval_early_stopping_metric=bleu) keeping the best
  checkpoint by dev BLEU; the test split decoded (beam 4) by the last checkpoint, the best
  one (--checkpoint_path=best) and the ensemble of the last 3 (--ensemble_last=3), with
  sacrebleu BLEU and chrF; t2t-translate-all + t2t-bleu --translations_dir give the test
  BLEU of every kept checkpoint (the curve, also in TensorBoard).

pretrained_import: a tiny Marian-shaped model saved by transformers, t2t-import'ed,
  fine-tuned on translate_envi_gettext8k (--use_vocab_from), exported and served; test
  BLEU/chrF and dev loss before and after, t2t-serve's answers against t2t-decoder's
  (regression/pretrained_workflow.py).

Each prints its table and writes OUTPUT/NAME/report.json (with the machine, every
command, each run's evaluations) and OUTPUT/NAME/log.txt. The numbers are what happened:
no band is asserted here (tests/regression/test_workflows.py runs --quick and checks
that every step ran and every number was read). --quick: a tenth of the steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from regression.pretrained_workflow import StepError, pretrained_import
from regression.report import format_table, machine_info
from regression.tools import stream_command, tool_command
from regression.verdict import read_eval_results

WORKFLOWS = ("multiproblem", "distillation", "backtranslation", "translation_loop",
             "pretrained_import")
REVERSE = "algorithmic_reverse_binary40_test"
IDENTITY = "algorithmic_identity_binary40_test"
# Monolingual target text for back-translation: targets of the same task drawn apart.
MONOLINGUAL_SOURCE = "algorithmic_reverse_binary10_dev40"
THRESHOLD = 0.90  # per-token accuracy: the floor of the reverse cases' bands
TINY = "transformer_tiny"
STUDENT = "hidden_size=32,filter_size=128"  # a quarter of transformer_tiny's width


class WorkflowError(RuntimeError):
    """A command of a workflow failed (the message names it and its log)."""


@dataclasses.dataclass
class Settings:
    """Steps of each training run and how often it evaluates."""

    steps: int = 1500
    eval_every: int = 250
    monolingual_lines: int = 3000
    # translation_loop: the most steps, and the plateau (steps) that stops it early.
    translation_steps: int = 5000
    translation_eval_every: int = 250
    early_stopping_steps: int = 1000
    # pretrained_import: test lines decoded before and after, lines sent to t2t-serve.
    pretrained_test_lines: int = 400
    served_lines: int = 64

    @classmethod
    def quick(cls) -> Settings:
        return cls(steps=150, eval_every=50, monolingual_lines=100, translation_steps=300,
                   translation_eval_every=100, early_stopping_steps=100,
                   pretrained_test_lines=50, served_lines=16)


class Workflow:
    """Runs one workflow's commands into OUTPUT/NAME, logging each."""

    def __init__(self, name: str, output: str, settings: Settings, log: TextIO):
        self.name, self.settings, self.log = name, settings, log
        self.dir = os.path.join(output, name)
        self.data_dir = os.path.join(output, "data")
        self.tmp_dir = os.path.join(self.dir, "tmp")
        os.makedirs(self.tmp_dir, exist_ok=True)
        self.commands: list[list[str]] = []
        self.runs: dict[str, list[dict[str, float]]] = {}

    def run(self, tool: str, *args: str) -> None:
        command = [*tool_command(tool), *args]
        self.commands.append(command)
        status = stream_command(command, self.log, f"[{self.name}] ")
        if status != 0:
            raise WorkflowError(f"{tool} exited with status {status}: {' '.join(command)} "
                                f"(log: {self.log.name})")

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def train(self, run: str, problem: str, hparams: str = "", *extra: str
              ) -> list[dict[str, float]]:
        """Trains transformer/transformer_tiny on `problem` for the settings' steps (data
        generated if missing); returns its dev evaluations."""
        out = self.path(run)
        self.run("t2t-trainer", "--generate_data", f"--problem={problem}",
                 "--model=transformer", f"--hparams_set={TINY}",
                 f"--hparams={','.join(h for h in ('learning_rate_warmup_steps=400', hparams) if h)}",
                 f"--train_steps={self.settings.steps}",
                 f"--local_eval_frequency={self.settings.eval_every}", "--eval_steps=0",
                 "--deterministic", "--random_seed=1", f"--data_dir={self.data_dir}",
                 f"--tmp_dir={self.tmp_dir}", f"--output_dir={out}", *extra)
        self.runs[run] = read_eval_results(out)
        if not self.runs[run]:
            raise WorkflowError(f"{out} holds no evaluation")
        return self.runs[run]

    def dump_text(self, problem: str, split: str, prefix: str) -> tuple[str, str]:
        """(inputs file, targets file) of `problem`'s `split`, as lines."""
        self.run("t2t-datagen", f"--problem={problem}", f"--data_dir={self.data_dir}",
                 f"--tmp_dir={self.tmp_dir}")
        self.run("t2t-datagen", f"--problem={problem}", f"--data_dir={self.data_dir}",
                 f"--inspect_split={split}", f"--dump_text={prefix}")
        return prefix + ".inputs", prefix + ".targets"

    def decode_args(self, run: str, source: str, target: str, reference: str | None = None
                    ) -> list[str]:
        """t2t-decoder's flags for greedy decodes of `source` by `run` into `target`. An
        interrupted decode leaves TARGET.partial; the same command continues it."""
        return [f"--output_dir={self.path(run)}", f"--data_dir={self.data_dir}",
                "--decode_hparams=beam_size=1", f"--decode_from_file={source}",
                f"--decode_to_file={target}",
                *([f"--decode_reference={reference}"] if reference else [])]

    def decode(self, run: str, source: str, target: str, reference: str | None = None
               ) -> dict[str, float]:
        """Greedy decodes of `source` by `run` into `target` (scored against `reference`)."""
        self.run("t2t-decoder", *self.decode_args(run, source, target, reference))
        if reference is None:
            return {}
        with open(target + ".scores.json", encoding="utf-8") as f:
            scores = json.load(f)
        return {k: float(v) for k, v in scores.items() if isinstance(v, (int, float))}


def _last(results: list[dict[str, float]], metric: str) -> float | None:
    values = [r[metric] for r in results if metric in r]
    return float(values[-1]) if values else None


def steps_to(results: list[dict[str, float]], metric: str, threshold: float) -> int | None:
    """The first evaluated step whose `metric` is >= threshold (None: never)."""
    return next((int(r["step"]) for r in results if r.get(metric, -1.0) >= threshold), None)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------ the workflows
def multiproblem(flow: Workflow) -> tuple[list[str], list[list[Any]]]:
    singles = {task: flow.train(f"single_{task}", task) for task in (REVERSE, IDENTITY)}
    multi = flow.train("multi", f"{REVERSE}+{IDENTITY}")
    rows = []
    for task, single in singles.items():
        rows.append([task, steps_to(single, "accuracy", THRESHOLD), _last(single, "accuracy"),
                     steps_to(multi, f"{task}/accuracy", THRESHOLD),
                     _last(multi, f"{task}/accuracy")])
    header = ["task", f"single: steps to {THRESHOLD}", "single: accuracy",
              f"multi: steps to {THRESHOLD}", "multi: accuracy"]
    return header, rows


def distillation(flow: Workflow) -> tuple[list[str], list[list[Any]]]:
    flow.train("teacher", REVERSE)
    flow.train("student_alone", REVERSE, STUDENT)
    flow.train("student_distilled", REVERSE,
               f"{STUDENT},distill_temperature=2.0,distill_weight=0.5",
               f"--teacher_dir={flow.path('teacher')}")
    inputs, _ = flow.dump_text(REVERSE, "train", os.path.join(flow.tmp_dir, "train"))
    shutil.copyfile(inputs, os.path.join(flow.tmp_dir, "distilled.inputs"))
    flow.decode("teacher", inputs, os.path.join(flow.tmp_dir, "distilled.targets"))
    flow.train("student_sequence_level", f"distilled:{REVERSE}", STUDENT)
    rows = [[run, _last(flow.runs[run], "accuracy"),
             _last(flow.runs[run], "accuracy_per_sequence")]
            for run in ("teacher", "student_alone", "student_distilled",
                        "student_sequence_level")]
    return ["run", "dev accuracy", "dev accuracy_per_sequence"], rows


def monolingual_targets(flow: Workflow) -> str:
    """TMP/backtranslated.targets: the settings' number of target-side lines (the targets
    of MONOLINGUAL_SOURCE's train split), the text the reverse model back-translates."""
    _, mono_all = flow.dump_text(MONOLINGUAL_SOURCE, "train",
                                 os.path.join(flow.tmp_dir, "monolingual"))
    mono = os.path.join(flow.tmp_dir, "backtranslated.targets")
    with open(mono_all, encoding="utf-8") as f, open(mono, "w", encoding="utf-8") as out:
        for _, line in zip(range(flow.settings.monolingual_lines), f, strict=False):
            out.write(line)
    return mono


def backtranslation(flow: Workflow) -> tuple[list[str], list[list[Any]]]:
    flow.train("reverse_model", f"{REVERSE}_rev")
    mono = monolingual_targets(flow)
    flow.decode("reverse_model", mono, os.path.join(flow.tmp_dir, "backtranslated.inputs"))
    dev_inputs, dev_targets = flow.dump_text(REVERSE, "dev", os.path.join(flow.tmp_dir, "dev"))
    rows = []
    for run, problem in (("forward", REVERSE), ("forward_backtranslated",
                                                 f"backtranslated:{REVERSE}")):
        flow.train(run, problem)
        scores = flow.decode(run, dev_inputs, flow.path(run, "dev.decodes"), dev_targets)
        rows.append([run, _last(flow.runs[run], "accuracy"), scores.get("bleu"),
                     scores.get("chrf")])
    return ["run", "dev accuracy", "dev BLEU", "dev chrF"], rows


GETTEXT = "translate_envi_gettext8k"
BEAM = "beam_size=4,alpha=0.6"


def bleu_curve(event_dir: str) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} of the scalars t2t-bleu --translations_dir wrote."""
    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(event_dir)
    events.Reload()
    curve: dict[int, dict[str, float]] = {}
    for tag in events.Tags()["scalars"]:
        for event in events.Scalars(tag):
            curve.setdefault(int(event.step), {})[tag] = float(event.value)
    return curve


def translation_loop(flow: Workflow) -> tuple[list[str], list[list[Any]]]:
    settings, run = flow.settings, flow.path("envi")
    every = settings.translation_eval_every
    flow.run("t2t-trainer", "--generate_data", f"--problem={GETTEXT}", "--model=transformer",
             f"--hparams_set={TINY}", "--hparams=batch_size=2048,learning_rate_warmup_steps=1000",
             f"--train_steps={settings.translation_steps}", f"--local_eval_frequency={every}",
             f"--save_checkpoints_steps={every}", "--keep_checkpoint_max=6",
             "--eval_steps=0", "--eval_decode_examples=400",
             "--eval_early_stopping_metric=bleu",
             f"--eval_early_stopping_steps={settings.early_stopping_steps}",
             "--eval_early_stopping_metric_delta=0.2", "--best_metric=bleu",
             "--deterministic", "--random_seed=1", f"--data_dir={flow.data_dir}",
             f"--tmp_dir={flow.tmp_dir}", f"--output_dir={run}")
    flow.runs["envi"] = read_eval_results(run)
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        best = json.load(f)["best_checkpoints"]["checkpoints"][0]
    last = flow.runs["envi"][-1]["step"]
    source, reference = flow.dump_text(GETTEXT, "test", os.path.join(flow.tmp_dir, "test"))
    rows = []
    for name, checkpoints, choice in (
            ("last checkpoint", f"{last}", []),
            ("best by dev BLEU", f"{best['step']}", ["--checkpoint_path=best"]),
            ("ensemble of the last 3", "last 3", ["--ensemble_last=3"])):
        target = flow.path(f"test.{name.split()[0]}.vi")
        flow.run("t2t-decoder", f"--output_dir={run}", f"--data_dir={flow.data_dir}",
                 f"--decode_hparams={BEAM}", f"--decode_from_file={source}",
                 f"--decode_to_file={target}", f"--decode_reference={reference}", *choice)
        with open(target + ".scores.json", encoding="utf-8") as f:
            scores = json.load(f)
        rows.append([f"{name} (beam 4)", checkpoints, scores["bleu"], scores["chrf"]])
    translations = flow.path("translations")
    flow.run("t2t-translate-all", f"--model_dir={run}", f"--source={source}",
             f"--translations_dir={translations}", "--decode_hparams=beam_size=1",
             f"--data_dir={flow.data_dir}")
    flow.run("t2t-bleu", f"--translations_dir={translations}", f"--reference={reference}")
    for step, values in sorted(bleu_curve(os.path.join(translations, "events")).items()):
        rows.append(["t2t-translate-all (greedy)", f"{step}", values.get("BLEU_cased"),
                     values.get("chrF")])
    stopped = (f"stopped at {last} of {settings.translation_steps}"
               if last < settings.translation_steps else
               f"no plateau: all {settings.translation_steps} steps")
    rows.append(["early stopping (dev BLEU)", stopped, None, None])
    return ["test decode", "checkpoint(s)", "test BLEU", "test chrF"], rows


_RUNNERS = {"multiproblem": multiproblem, "distillation": distillation,
            "backtranslation": backtranslation, "translation_loop": translation_loop,
            "pretrained_import": pretrained_import}


def run_workflow(name: str, output: str, settings: Settings) -> dict[str, Any]:
    """Runs workflow `name`; returns (and writes to OUTPUT/NAME/report.json) its report."""
    os.makedirs(os.path.join(output, name), exist_ok=True)
    with open(os.path.join(output, name, "log.txt"), "w", encoding="utf-8") as log:
        flow = Workflow(name, output, settings, log)
        header, rows = _RUNNERS[name](flow)
    report = {"workflow": name, "settings": dataclasses.asdict(settings),
              "machine": machine_info(), "header": header,
              "rows": [[_text(v) for v in row] for row in rows],
              "values": [dict(zip(header, row, strict=True)) for row in rows],
              "commands": flow.commands, "evaluations": flow.runs}
    with open(os.path.join(output, name, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regression.workflows",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("workflow", choices=WORKFLOWS)
    parser.add_argument("--output", default="workflows_output", help="where the runs go")
    parser.add_argument("--quick", action="store_true", help="a tenth of the steps")
    args = parser.parse_args(argv)
    settings = Settings.quick() if args.quick else Settings()
    try:
        report = run_workflow(args.workflow, args.output, settings)
    except (WorkflowError, StepError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    steps = (f"at most {settings.translation_steps}" if args.workflow == "translation_loop"
             else str(settings.steps))
    print(f"\n{args.workflow} ({steps} steps per run):")
    print(format_table(report["header"], report["rows"]))
    print(f"Report: {os.path.join(args.output, args.workflow, 'report.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
