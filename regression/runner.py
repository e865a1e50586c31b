"""Runs the regression cases and reports on them.

  python -m regression list                       # every case, and whether it runs here
  python -m regression run --quick                # CI's quick subset (the default)
  python -m regression run --full                 # every case this machine can run
  python -m regression run --case resnet_fashion_mnist --output /tmp/reg
  python -m regression readme --report regression_output/report.json --write regression/README.md

`run` prepares each case's data with `t2t-datagen` into OUTPUT/data (shared by the
cases), trains with `t2t-trainer --output_dir=OUTPUT/CASE`, and checks the case's metric
at the final evaluation (OUTPUT/CASE/eval_results.jsonl) against its band. It writes
OUTPUT/CASE/log.txt, OUTPUT/CASE/METRIC.png (with matplotlib) and OUTPUT/report.json,
and exits with status 1 when a case fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from regression import matrix
from regression.cases import (
    CASES,
    CPU_2CORE,
    DECODE_METRICS,
    LAUNCHES,
    MIRROR_SOURCES,
    PROGRAM_SOURCES,
    STRATEGIES,
    Case,
)
from regression.report import (
    BEGIN_MARKER,
    END_MARKER,
    FAIL,
    INTERRUPTED,
    PASS,
    REPORT_FILE,
    SKIP,
    CaseResult,
    RegressionError,
    band_text,
    earlier_results,
    format_table,
    machine_info,
    markdown_table,
    merge_reports,
    plot_curve,
    plots_available,
    read_report,
    replace_block,
    report_paths,
    results_table,
    rewrite_marked_file,
    value_text,
    write_report,
)

DEFAULT_OUTPUT = "regression_output"
LOG_FILE = "log.txt"
EVAL_RESULTS_FILE = "eval_results.jsonl"  # t2t.trainer.run_dir.EVAL_RESULTS_FILE
HARDWARE_ENV = "T2T_REGRESSION_HARDWARE"

_MODULES = {"t2t-datagen": "t2t.bin.t2t_datagen", "t2t-trainer": "t2t.bin.t2t_trainer",
            "t2t-launch": "t2t.bin.t2t_launch", "t2t-decoder": "t2t.bin.t2t_decoder",
            "t2t-exporter": "t2t.bin.t2t_exporter"}
DECODES_FILE = "decodes.txt"  # OUTPUT/CASE/decodes.txt (+ .scores.json from t2t-decoder)
EXPORT_DIR = "export"

# execute(command, log, prefix) -> exit status; the default streams a subprocess.
Execute = Callable[[list[str], TextIO, str], int]


class Interrupted(KeyboardInterrupt):
    """SIGTERM (e.g. a CI timeout): handled as Ctrl-C."""


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(f"signal {signum}")


# ------------------------------------------------------------------ what can run here
@dataclasses.dataclass(frozen=True)
class Registered:
    """The registered names of t2t (or a fake one in tests)."""

    problems: frozenset[str]
    models: frozenset[str]
    hparams_sets: frozenset[str]

    def has_problem(self, name: str) -> bool:
        return name in self.problems or (name.endswith("_rev") and name[:-4] in self.problems)


_LIST_REGISTERED = (
    "import json; from t2t import registry; print(json.dumps([registry.list_problems(), "
    "registry.list_models(), registry.list_hparams()]))"
)


def load_registered() -> Registered:
    """t2t's registered names, read in a subprocess (TensorFlow's import takes a few
    seconds and logs to stderr; this process stays free of it)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    out = subprocess.run([sys.executable, "-c", _LIST_REGISTERED], capture_output=True,
                         text=True, env=env, timeout=600)
    try:
        problems, models, hparams_sets = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as e:
        tail = "\n".join(out.stderr.strip().splitlines()[-10:])
        raise RegressionError(f"cannot read t2t's registry (status {out.returncode}):\n{tail}"
                              ) from e
    return Registered(frozenset(problems), frozenset(models), frozenset(hparams_sets))


def parse_hardware(spec: str | None) -> frozenset[str]:
    """The hardware this machine offers: --hardware, else $T2T_REGRESSION_HARDWARE, else
    cpu-2core."""
    if spec is None:
        spec = os.environ.get(HARDWARE_ENV) or CPU_2CORE
    return frozenset(h.strip() for h in spec.split(",") if h.strip())


def skip_reasons(case: Case, hardware: Iterable[str], registered: Registered,
                 mirror_exists: Callable[[str], bool] = os.path.isdir,
                 program_exists: Callable[[str], object] = shutil.which) -> list[str]:
    """Why `case` cannot run here; empty when it can."""
    hardware = frozenset(hardware)
    reasons = []
    if case.hardware not in hardware:
        reasons.append(f"needs {case.hardware} (available: {', '.join(sorted(hardware)) or '-'};"
                       f" pass --hardware={case.hardware} where it is)")
    if STRATEGIES.get(case.strategy, ()) is None:
        reasons.append(f"strategy {case.strategy} not supported by t2t-trainer yet")
    elif case.strategy not in STRATEGIES:
        reasons.append(f"unknown strategy {case.strategy!r}")
    if not registered.has_problem(case.problem):
        reasons.append(f"problem {case.problem!r} not registered")
    if case.model not in registered.models:
        reasons.append(f"model {case.model!r} not registered")
    if case.hparams_set not in registered.hparams_sets:
        reasons.append(f"hparams set {case.hparams_set!r} not registered")
    mirror = case.data_mirror
    if mirror and "://" not in mirror and not mirror_exists(mirror):
        source = MIRROR_SOURCES.get(mirror)
        reasons.append(f"data mirror {mirror} missing" + (f" ({source})" if source else ""))
    for program in case.programs:
        if not program_exists(program):
            source = PROGRAM_SOURCES.get(program)
            reasons.append(f"program {program} not found" + (f" ({source})" if source else ""))
    return reasons


def select_cases(cases: Sequence[Case], *, full: bool = False,
                 names: Sequence[str] | None = None) -> list[Case]:
    """--case NAME... (in the order given), --full (all) or the quick subset."""
    if names:
        table = {case.name: case for case in cases}
        unknown = [n for n in names if n not in table]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, table, n=3)
                hints.append(name + (f" (did you mean {', '.join(close)}?)" if close else ""))
            raise RegressionError(f"unknown case {'; '.join(hints)}; "
                                  f"`python -m regression list` shows them all")
        return [table[n] for n in dict.fromkeys(names)]
    return list(cases) if full else [case for case in cases if case.quick]


def in_band(value: float | None, band: Sequence[float]) -> bool:
    """low <= value <= high (a missing or NaN value is never in the band)."""
    low, high = band
    return value is not None and low <= value <= high


def read_eval_results(case_dir: str, split: str = "dev") -> list[dict[str, float]]:
    """The run's evaluations of `split`, oldest first (a torn last line is ignored)."""
    name = EVAL_RESULTS_FILE if split == "dev" else f"eval_results_{split}.jsonl"
    path = os.path.join(case_dir, name)
    if not os.path.exists(path):
        return []
    results = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return results


def _recorded_note(result: CaseResult, name: str) -> str:
    """Why a band is narrower than the case's own, where a recorded figure made it so."""
    if name not in result.recorded:
        return ""
    value, tolerance = result.recorded[name]
    return (f" (recorded {value:.4f} +- {tolerance:g} for this deterministic run: the change "
            f"learns differently; if that is intended, measure again and update the record)")


def judge(result: CaseResult, eval_results: list[dict[str, float]], returncode: int,
          after: dict[str, float] | None = None, after_error: str = "") -> None:
    """Fills values, curve and PASS/FAIL from the evaluations, the trainer's status and
    what was measured after training (`after`: bleu, chrf, export_parity; `after_error`:
    why a post-training step failed)."""
    metric = result.metric
    result.eval_results = eval_results
    curve_metric = result.curve_metric or metric
    result.curve = [(int(r["step"]), float(r[curve_metric])) for r in eval_results
                    if curve_metric in r]
    last = eval_results[-1] if eval_results else None
    final = {k: float(v) for k, v in (last or {}).items() if k != "step"}
    final.update(after or {})
    result.values = {name: final[name] for name in result.bands if name in final}
    result.value = result.values.get(metric)
    if last is not None:
        result.final_step = int(last.get("step", -1))
    missing = [name for name in result.bands if name not in final]
    outside = [f"{name} {final[name]:.4f} outside {band_text(band)}" + _recorded_note(result, name)
               for name, band in result.bands.items()
               if name in final and not in_band(final[name], band)]
    if returncode != 0:
        result.status, result.reason = FAIL, f"t2t-trainer exited with status {returncode}"
    elif last is None:
        result.status, result.reason = FAIL, f"no evaluation in {EVAL_RESULTS_FILE}"
    elif result.final_step != result.train_steps:
        result.status = FAIL
        result.reason = (f"final evaluation at step {result.final_step}, "
                         f"not at train_steps {result.train_steps}")
    elif after_error:
        result.status, result.reason = FAIL, after_error
    elif missing:
        keys = ", ".join(sorted(final))
        result.status = FAIL
        result.reason = (f"metric {', '.join(repr(m) for m in missing)} not in the final "
                         f"evaluation (it has: {keys})")
    elif outside:
        result.status, result.reason = FAIL, "; ".join(outside)
    else:
        result.status, result.reason = PASS, ""


# ------------------------------------------------------------------------ running
def tool_command(name: str) -> list[str]:
    """The console script next to this Python, on PATH, or `python -m` its module."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return [beside]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", _MODULES[name]]


def stream_command(command: list[str], log: TextIO, prefix: str) -> int:
    """Runs `command`, copying its output to stdout (each line prefixed) and to `log`."""
    header = f"$ {shlex.join(command)}\n"
    sys.stdout.write(prefix + header)
    log.write(header)
    log.flush()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", env=env)
    finished = False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
            log.write(line)
            log.flush()
        finished = True
    finally:
        if finished:
            proc.wait()
        else:
            # Interrupted: stop the child (t2t-trainer saves a checkpoint on SIGTERM) and
            # give it time to finish before killing it.
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            else:  # keep what it said on the way out ("Stopped by a signal at step N ...")
                rest = proc.stdout.read() if proc.stdout else ""
                sys.stdout.write("".join(prefix + line for line in rest.splitlines(True)))
                log.write(rest)
                log.flush()
    return proc.returncode


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
        from regression import cases as cases_lib
        from regression import sample_agreement

        commands += sample_agreement.commands(
            case, cases_lib.by_name()[case.sample_agreement], case_dir, data_dir, tool_command)
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
        from regression import baselines

        try:
            metrics[case.below_baseline] = baselines.compute(case.below_baseline, case, output_dir)
        except Exception as e:  # a missing xz, unreadable data: this case fails, the run goes on
            return metrics, f"baseline {case.below_baseline} failed: {type(e).__name__}: {e}"
    if case.sample_agreement:
        from regression import sample_agreement
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


# ---------------------------------------------------------------------- listing
def list_table(cases: Sequence[Case], hardware: Iterable[str], registered: Registered,
               mirror_exists: Callable[[str], bool] = os.path.isdir) -> str:
    rows = []
    for case in cases:
        reasons = skip_reasons(case, hardware, registered, mirror_exists)
        rows.append([
            case.name + (" *" if case.quick else ""), case.problem,
            f"{case.model}/{case.hparams_set}", case.train_steps, case.metric, band_text(case.band),
            case.hardware, f"{case.expected_minutes:g}",
            "yes" if not reasons else "no: " + "; ".join(reasons),
        ])
    header = ["case", "problem", "model/hparams_set", "steps", "metric", "band", "hardware",
              "minutes", "runnable here?"]
    return format_table(header, rows) + "\n(* quick: in CI's quick subset)"


# ---------------------------------------------------------------------- commands
def cmd_list(args: argparse.Namespace, cases: Sequence[Case],
             registered: Registered | None) -> int:
    registered = registered or load_registered()
    print(list_table(cases, parse_hardware(args.hardware), registered))
    return 0


def dry_run(selected: Sequence[Case], output_dir: str, hardware: frozenset[str],
            registered: Registered, trainer_extra: Sequence[str] = ()) -> int:
    """Prints each case's commands, or why it would be skipped; writes nothing."""
    for case in selected:
        reasons = skip_reasons(case, hardware, registered)
        if reasons:
            print(f"[{case.name}] SKIP: {'; '.join(reasons)}")
            continue
        print(f"[{case.name}] would run (about {case.expected_minutes:g} min):")
        for command in [*case_commands(case, output_dir, trainer_extra),
                        *post_training_commands(case, output_dir)]:
            print(f"  {shlex.join(command)}")
    return 0


def cmd_run(args: argparse.Namespace, cases: Sequence[Case], registered: Registered | None,
            execute: Execute | None) -> int:
    selected = select_cases(cases, full=args.full, names=args.case)
    if not selected:
        raise RegressionError("no case selected")
    hardware = parse_hardware(args.hardware)
    registered = registered or load_registered()
    output_dir = os.path.abspath(args.output)
    if args.dry_run:
        return dry_run(selected, output_dir, hardware, registered, args.trainer_arg)
    os.makedirs(output_dir, exist_ok=True)
    report_path = os.path.join(output_dir, REPORT_FILE)
    selection = "case" if args.case else ("full" if args.full else "quick")
    machine = machine_info()
    started = machine["date"]
    earlier_report, earlier = earlier_results(report_path) if args.resume else ({}, {})
    started = earlier_report.get("started", started) if earlier else started
    can_plot = plots_available()
    if not can_plot:
        print("matplotlib is not installed: plots are skipped (pip install matplotlib).")
    results: list[CaseResult] = []
    prepared: set[tuple[str, str | None]] = set()
    print(f"Running {len(selected)} case(s) ({selection}) into {output_dir}; "
          f"hardware: {', '.join(sorted(hardware))}")
    for index, case in enumerate(selected):
        reasons = skip_reasons(case, hardware, registered)
        kept = kept_result(earlier.get(case.name), case, output_dir, args.trainer_arg)
        if reasons:
            result = CaseResult.for_case(case)
            result.status, result.reason = SKIP, "; ".join(reasons)
            print(f"[{case.name}] SKIP: {result.reason}")
        elif kept is not None:
            result = kept
            print(f"[{case.name}] kept from the run of {str(result.date)[:16]} (t2t "
                  f"{result.commit}): {result.status} {case.metric} {value_text(result.value)} "
                  f"in {result.minutes:.1f} min", flush=True)
        else:
            print(f"[{case.name}] {case.problem} {case.model}/{case.hparams_set} "
                  f"{case.train_steps} steps (about {case.expected_minutes:g} min)", flush=True)
            previous = earlier.get(case.name)
            earlier_minutes = (previous.minutes if previous is not None
                               and previous.reason == INTERRUPTED else 0.0)
            case_started = time.monotonic()
            date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            try:
                result = run_case(case, output_dir, execute=execute or stream_command,
                                  prepared=prepared, resume=args.resume,
                                  trainer_extra=args.trainer_arg)
            except KeyboardInterrupt:
                result = CaseResult.for_case(case)
                result.status, result.reason = FAIL, INTERRUPTED
                result.commit, result.date = machine.get("t2t_commit"), date
                # Kept so that a --resume run counts the time already spent on the case.
                result.minutes = earlier_minutes + (time.monotonic() - case_started) / 60
                results.append(result)
                # Cases of the earlier report not reached yet stay in the report.
                results += [earlier[c.name] for c in selected[index + 1:] if c.name in earlier]
                write_report(report_path, results, machine, selection=selection,
                             hardware=sorted(hardware), started=started, interrupted=True,
                             trainer_args=args.trainer_arg)
                print(f"\nInterrupted during {case.name}; partial report: {report_path}",
                      file=sys.stderr)
                return 130
            result.commit, result.date = machine.get("t2t_commit"), date
            if earlier_minutes:
                result.earlier_minutes = earlier_minutes
                result.minutes += earlier_minutes
                result.continued = True
            if can_plot and result.curve:
                plot = plot_curve(result, os.path.join(output_dir, case.name,
                                                       f"{case.metric}.png"))
                result.plot = os.path.relpath(plot, output_dir) if plot else None
            print(f"[{case.name}] {result.status} {case.metric} {value_text(result.value)} "
                  f"band {band_text(result.bands.get(case.metric, case.band))} "
                  f"in {result.minutes:.1f} min"
                  + (f": {result.reason}" if result.reason else ""), flush=True)
        results.append(result)
        write_report(report_path, results, machine, selection=selection,
                     hardware=sorted(hardware), started=started, trainer_args=args.trainer_arg)
    finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    write_report(report_path, results, machine, selection=selection, hardware=sorted(hardware),
                 started=started, finished=finished, trainer_args=args.trainer_arg)
    print()
    print(results_table(results))
    print(f"\nReport: {report_path}")
    if all(r.status == SKIP for r in results):
        print("warning: every selected case was skipped; nothing was checked.")
    return 1 if any(r.status == FAIL for r in results) else 0


def cmd_readme(args: argparse.Namespace, cases: Sequence[Case]) -> int:
    paths = report_paths(args.report or [os.path.join(DEFAULT_OUTPUT, REPORT_FILE)])
    block = markdown_table(merge_reports([read_report(path) for path in paths],
                                         order=[case.name for case in cases]))
    if not args.write:
        print(block)
        return 0
    rewrite_marked_file(args.write, replace_block, block)
    print(block)
    print(f"\nUpdated the results block of {args.write}.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m regression",
        description="t2t's regression suite: train standard cases, check final metrics "
                    "against bands.")
    sub = parser.add_subparsers(dest="command", required=True)
    hardware_help = (f"comma-separated hardware this machine offers, e.g. {CPU_2CORE},1xGPU "
                     f"(default: ${HARDWARE_ENV}, else {CPU_2CORE})")

    run = sub.add_parser("run", help="run cases and check their bands")
    which = run.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="the quick subset (default)")
    which.add_argument("--full", action="store_true", help="every case")
    which.add_argument("--case", action="append", metavar="NAME",
                       help="this case (repeatable)")
    run.add_argument("--output", default=DEFAULT_OUTPUT,
                     help=f"output folder (default: {DEFAULT_OUTPUT})")
    run.add_argument("--hardware", default=None, help=hardware_help)
    run.add_argument("--resume", action="store_true",
                     help="continue an earlier run into OUTPUT instead of starting over: "
                          "cases its report.json finished with the same commands and bands "
                          "are kept; the others continue from their folders")
    run.add_argument("--trainer-arg", action="append", default=[], metavar="FLAG",
                     help="one more t2t-trainer flag for every case, e.g. "
                          "--trainer-arg=--random_seed=2 (repeatable)")
    run.add_argument("--dry-run", action="store_true",
                     help="print what would run and why cases skip; run nothing")

    lst = sub.add_parser("list", help="show every case and whether it can run here")
    lst.add_argument("--hardware", default=None, help=hardware_help)

    readme = sub.add_parser("readme", help="the markdown results table of a report")
    readme.add_argument("--report", action="append",
                        help="report.json to read, or a folder of them (e.g. regression/results); "
                             "repeat to merge several runs, later runs of a case win (default: "
                             f"{os.path.join(DEFAULT_OUTPUT, REPORT_FILE)})")
    readme.add_argument("--write", metavar="README",
                        help=f"replace the block between {BEGIN_MARKER} and {END_MARKER} in "
                             f"this file")
    matrix.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, cases: Sequence[Case] = CASES,
         registered: Registered | None = None, execute: Execute | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return cmd_list(args, cases, registered)
        if args.command == "matrix":
            return matrix.cmd_matrix(args)
        if args.command == "run":
            previous = signal.signal(signal.SIGTERM, _raise_interrupted)
            try:
                return cmd_run(args, cases, registered, execute)
            finally:
                signal.signal(signal.SIGTERM, previous)
        return cmd_readme(args, cases)
    except RegressionError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
