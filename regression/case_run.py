"""One case run: its commands (datagen, training, what runs after training), their
execution into OUTPUT/CASE, and the case's result; and whether --resume may keep an
earlier result instead."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from regression import baselines, sample_agreement
from regression.case_spec import DECODE_METRICS, LAUNCHES, Case
from regression.cases import by_name
from regression.report import FAIL, INTERRUPTED, PASS, CaseResult, RegressionError
from regression.tools import Execute, stream_command, tool_command
from regression.verdict import judge, read_eval_results

LOG_FILE = "log.txt"
DECODES_FILE = "decodes.txt"  # OUTPUT/CASE/decodes.txt (+ .scores.json from t2t-decoder)
EXPORT_DIR = "export"


def prepare_case_dir(case_dir: str, resume: bool) -> None:
    """A fresh OUTPUT/CASE (or the old one kept with --resume)."""
    if os.path.isdir(case_dir) and not resume:
        entries = os.listdir(case_dir)
        if entries and LOG_FILE not in entries:
            raise RegressionError(
                f"{case_dir} exists and was not written by the regression runner: "
                f"remove it or use another --output")
        shutil.rmtree(case_dir)
    os.makedirs(case_dir, exist_ok=True)


def case_commands(case: Case, output_dir: str, trainer_extra: Sequence[str] = ()
                  ) -> tuple[list[str], list[str]]:
    """The t2t-datagen and t2t-trainer commands of `case` writing under `output_dir`
    (`trainer_extra`: more t2t-trainer flags, e.g. --random_seed=2)."""
    datagen = [*tool_command("t2t-datagen"), *case.datagen_args(),
               f"--data_dir={os.path.join(output_dir, 'data')}", "--progress=false"]
    trainer = [*tool_command("t2t-trainer"), *case.trainer_args(),
               f"--data_dir={os.path.join(output_dir, 'data')}",
               f"--output_dir={os.path.join(output_dir, case.name)}", *trainer_extra]
    if case.strategy in LAUNCHES:  # one trainer process per task of a local cluster
        trainer = [*tool_command("t2t-launch"), *LAUNCHES[case.strategy], "--", *trainer]
    return datagen, trainer


def post_training_commands(case: Case, output_dir: str) -> list[list[str]]:
    """What runs after training: the dev split's text written out and decoded against
    its targets (`decode_hparams`), and the export with its parity gate (`export`)."""
    data_dir = os.path.join(output_dir, "data")
    case_dir = os.path.join(output_dir, case.name)
    commands = []
    for split in decoded_splits(case):
        text = os.path.join(case_dir, split)
        commands.append([*tool_command("t2t-datagen"), f"--problem={case.problem}",
                         f"--data_dir={data_dir}", f"--inspect_split={split}",
                         f"--dump_text={text}"])
        commands.append([*tool_command("t2t-decoder"), f"--output_dir={case_dir}",
                         f"--data_dir={data_dir}", f"--decode_hparams={case.decode_hparams}",
                         f"--decode_from_file={text}.inputs",
                         f"--decode_reference={text}.targets",
                         f"--decode_to_file={os.path.join(case_dir, decodes_file(case, split))}"])
    if case.eval_split_after:
        commands.append([*tool_command("t2t-trainer"), *case.trainer_args(),
                         f"--data_dir={data_dir}", f"--output_dir={case_dir}",
                         "--schedule=evaluate", f"--eval_split={case.eval_split_after}",
                         "--eval_steps=0"])
    if case.sample_agreement:
        commands += sample_agreement.commands(
            case, by_name()[case.sample_agreement], case_dir, data_dir, tool_command)
    if case.export:
        commands.append([*tool_command("t2t-exporter"), f"--output_dir={case_dir}",
                         f"--data_dir={data_dir}",
                         f"--export_dir={os.path.join(case_dir, EXPORT_DIR)}"])
    return commands


def decoded_splits(case: Case) -> list[str]:
    """The splits decoded after training: decode_split, then also_decode_splits."""
    if case.decode_hparams is None:
        return []
    return [case.decode_split, *case.also_decode_splits]


def decodes_file(case: Case, split: str) -> str:
    """decodes.txt for the decode_split, decodes.SPLIT.txt for the others."""
    return DECODES_FILE if split == case.decode_split else f"decodes.{split}.txt"


def read_decode_scores(case_dir: str, filename: str = DECODES_FILE) -> dict[str, float]:
    """bleu, chrf (text) or wer, cer (speech) that t2t-decoder wrote next to its decodes
    ({} when absent)."""
    path = os.path.join(case_dir, filename + ".scores.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        scores = json.load(f)
    return {k: float(scores[k]) for k in DECODE_METRICS if scores.get(k) is not None}


def run_post_training(case: Case, output_dir: str, execute: Execute, log: TextIO,
                      prefix: str, commands_run: list[str]) -> tuple[dict[str, float], str]:
    """Runs `post_training_commands`; returns (metrics they measured, why one failed)."""
    metrics: dict[str, float] = {}
    for command in post_training_commands(case, output_dir):
        commands_run.append(shlex.join(command))
        tool = os.path.basename(command[0]) if command[0] != sys.executable else command[2]
        status = execute(command, log, prefix)
        if "exporter" in tool:
            metrics["export_parity"] = 1.0 if status == 0 else 0.0
            if status != 0:
                return metrics, f"t2t-exporter exited with status {status} (parity gate or export)"
        elif status != 0:
            return metrics, f"{tool} exited with status {status}"
    if case.eval_split_after:
        split_results = read_eval_results(os.path.join(output_dir, case.name),
                                          case.eval_split_after)
        if not split_results:
            return metrics, f"no evaluation of the {case.eval_split_after} split"
        metrics.update({f"{case.eval_split_after}_{k}": float(v)
                        for k, v in split_results[-1].items() if k != "step"})
    if case.below_baseline:
        try:
            metrics[case.below_baseline] = baselines.compute(case.below_baseline, case, output_dir)
        except Exception as e:  # a missing xz, unreadable data: this case fails, the run goes on
            return metrics, f"baseline {case.below_baseline} failed: {type(e).__name__}: {e}"
    if case.sample_agreement:
        from t2t import registry

        labels = list(registry.problem(case.problem).class_labels)
        try:
            metrics[sample_agreement.METRIC] = sample_agreement.agreement(
                os.path.join(output_dir, case.name), labels)
        except (OSError, ValueError) as e:
            return metrics, f"sample agreement failed: {e}"
    for split in decoded_splits(case):
        scores = read_decode_scores(os.path.join(output_dir, case.name), decodes_file(case, split))
        if not scores:
            return metrics, f"t2t-decoder wrote no scores for the {split} split"
        prefix = "" if split == case.decode_split else f"{split}_"
        metrics.update({prefix + name: value for name, value in scores.items()})
    return metrics, ""


def kept_result(earlier: CaseResult | None, case: Case, output_dir: str,
                trainer_extra: Sequence[str] = ()) -> CaseResult | None:
    """`earlier` when --resume may keep it instead of running `case` again: a finished
    run (PASS or FAIL, not interrupted) of the same commands, metric and bands."""
    if earlier is None or earlier.status not in (PASS, FAIL) or earlier.reason == INTERRUPTED:
        return None
    datagen, trainer = case_commands(case, output_dir, trainer_extra)
    planned = [shlex.join(trainer),
               *(shlex.join(c) for c in post_training_commands(case, output_dir))]
    ran = [c for c in earlier.commands if c != shlex.join(datagen)]
    if not ran or ran != planned[:len(ran)]:
        return None
    if earlier.metric != case.metric or earlier.bands != case.bands():
        return None
    return earlier


def run_case(case: Case, output_dir: str, *, execute: Execute = stream_command,
             prepared: set[tuple[str, str | None]] | None = None,
             resume: bool = False, trainer_extra: Sequence[str] = ()) -> CaseResult:
    """Datagen (once per problem and run), training of one case, what runs after
    training (decoding, export), then its verdict. With `resume`, training continues
    from what OUTPUT/CASE holds (`continued` says whether it held anything)."""
    result = CaseResult.for_case(case)
    prepared = set() if prepared is None else prepared
    datagen, trainer = case_commands(case, output_dir, trainer_extra)
    case_dir = os.path.join(output_dir, case.name)
    result.continued = resume and os.path.isdir(case_dir) and bool(os.listdir(case_dir))
    prepare_case_dir(case_dir, resume)
    result.log = os.path.relpath(os.path.join(case_dir, LOG_FILE), output_dir)
    prefix = f"[{case.name}] "
    start = time.monotonic()
    after: dict[str, float] = {}
    after_error = ""
    with open(os.path.join(case_dir, LOG_FILE), "a" if resume else "w", encoding="utf-8") as log:
        key = (case.problem, case.data_mirror)
        if key not in prepared:
            result.commands.append(shlex.join(datagen))
            status = execute(datagen, log, prefix)
            result.datagen_minutes = (time.monotonic() - start) / 60
            if status != 0:
                result.status, result.reason = FAIL, f"t2t-datagen exited with status {status}"
                result.minutes = result.datagen_minutes
                return result
            prepared.add(key)
        result.commands.append(shlex.join(trainer))
        status = execute(trainer, log, prefix)
        if status == 0:
            after, after_error = run_post_training(case, output_dir, execute, log, prefix,
                                                   result.commands)
    result.minutes = (time.monotonic() - start) / 60
    if case.below_baseline and case.below_baseline in after:
        low, high = result.bands[case.metric]
        result.bands[case.metric] = (low, min(high, after[case.below_baseline]))
    judge(result, read_eval_results(case_dir), status, after, after_error)
    if case.below_baseline and case.below_baseline in after:  # reported beside the metric
        result.values[case.below_baseline] = after[case.below_baseline]
    return result
