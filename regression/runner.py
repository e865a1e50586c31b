"""Runs the regression cases and reports on them.

  python -m regression list                       # every case, and whether it runs here
  python -m regression run --quick                # CI's quick subset (the default)
  python -m regression run --full                 # every case this machine can run
  python -m regression run --case resnet_fashion_mnist --output /tmp/reg
  python -m regression readme --report regression_output/report.json --write regression/README.md
  python -m regression readme --report regression/results --write docs/results/regression.md \
      --curves docs/results/curves          # the table, and each case's eval curve (SVG)

`run` prepares each case's data with `t2t-datagen` into OUTPUT/data (shared by the
cases), trains with `t2t-trainer --output_dir=OUTPUT/CASE`, and checks the case's metric
at the final evaluation (OUTPUT/CASE/eval_results.jsonl) against its band. It writes
OUTPUT/CASE/log.txt, OUTPUT/CASE/METRIC.png (with matplotlib) and OUTPUT/report.json,
and exits with status 1 when a case fails.

This module is the command line; the work is done by regression/selection.py (which
cases, and whether each can run here), case_run.py (one case's commands and their run),
verdict.py (its final metrics against its bands), session.py (the selected cases in
order: --resume, interruptions, plots, report.json), tools.py (finding and streaming the
t2t programs), report.py (the report and its tables) and curves.py (the plots of the
eval curves).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any

from regression import matrix
from regression.case_run import case_commands, post_training_commands
from regression.case_spec import CPU_2CORE, Case
from regression.cases import CASES
from regression.curves import curves_section, write_curve_svgs
from regression.report import (
    BEGIN_MARKER,
    END_MARKER,
    REPORT_FILE,
    RegressionError,
    markdown_table,
    merge_reports,
    read_report,
    replace_block,
    report_paths,
    rewrite_marked_file,
)
from regression.selection import (
    HARDWARE_ENV,
    Registered,
    list_table,
    load_registered,
    parse_hardware,
    select_cases,
    skip_reasons,
)
from regression.session import RegressionRun, run_cases
from regression.tools import Execute, stream_command

DEFAULT_OUTPUT = "regression_output"


class Interrupted(KeyboardInterrupt):
    """SIGTERM (e.g. a CI timeout): handled as Ctrl-C."""


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(f"signal {signum}")


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
    selection = "case" if args.case else ("full" if args.full else "quick")
    run = RegressionRun(output_dir=output_dir, hardware=hardware, registered=registered,
                        execute=execute or stream_command, selection=selection,
                        resume=args.resume, trainer_args=args.trainer_arg)
    return run_cases(run, selected)


def gated_cases_table(cases: Sequence[Case]) -> str:
    """The cases that need hardware a 2-core CPU lacks (GPUs): each with its band and where
    the band comes from; they are SKIP wherever that hardware is not given."""
    gated = [case for case in cases if case.hardware != CPU_2CORE]
    if not gated:
        return ""
    lines = ["Cases that need GPUs (SKIP here; `python -m regression run --case NAME "
             "--hardware=HW` runs one where that hardware is):", "",
             "| case | hardware | problem | model / hparams_set | steps | metric | band | "
             "source of the band | result |", "|---|---|---|---|---:|---|---|---|---|"]
    for case in gated:
        cells = [case.name, case.hardware, case.problem, f"{case.model} / {case.hparams_set}",
                 str(case.train_steps), case.metric, f"[{case.band[0]:.2f}, {case.band[1]:.2f}]",
                 " ".join(case.measured_on.split()), f"SKIP: needs {case.hardware}"]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def cmd_readme(args: argparse.Namespace, cases: Sequence[Case]) -> int:
    paths = report_paths(args.report or [os.path.join(DEFAULT_OUTPUT, REPORT_FILE)])
    merged = merge_reports([read_report(path) for path in paths],
                           order=[case.name for case in cases])
    block = markdown_table(merged)
    if args.curves:
        names = write_curve_svgs(merged["cases"], args.curves)
        section = curves_section(names, args.curves, args.write)
        block += f"\n\n{section}" if section else ""
    gated = gated_cases_table(cases)
    block += f"\n\n{gated}" if gated else ""
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
    readme.add_argument("--curves", metavar="DIR",
                        help="also plot each case's eval curve into DIR/CASE.svg (the "
                             "folder's other .svg files are removed) and show them after "
                             "the table; needs matplotlib")
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
