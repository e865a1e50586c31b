"""Checkpoint portability across TensorFlow releases, for `python -m regression matrix`.

Each writer version trains a tiny transformer (20 steps of `transformer_test` on
`algorithmic_reverse_binary40_test`) and evaluates its own checkpoint; every reader
version then evaluates a copy of that run (`t2t-trainer --schedule=evaluate`, which
restores model, optimizer and input position) and decodes two lines with
`t2t-decoder`. A load is "ok" when both commands exit 0 and the reader's eval loss
equals the writer's within `LOSS_TOLERANCE` (same weights, same dev batches).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence

PROBLEM = "algorithmic_reverse_binary40_test"
MODEL_FLAGS = ("--model=transformer", "--hparams_set=transformer_test",
               "--hparams=batch_size=256")
TRAIN_STEPS = 20
EVAL_STEPS = 2
LOSS_TOLERANCE = 1e-3  # float32 eval loss of identical weights and batches
DECODE_INPUT = "1 0 1 1\n0 0 1\n"

# run(command, log_path, cwd, env) -> exit status (matrix.run_logged in practice).
Runner = Callable[[Sequence[str], str, str, Mapping[str, str]], int]


@dataclasses.dataclass
class Load:
    """One reader version restoring one writer version's checkpoint."""

    writer: str
    reader: str
    ok: bool
    loss: float | None = None
    writer_loss: float | None = None
    error: str = ""
    log: str = ""


def _module(python: str, module: str, *flags: str) -> list[str]:
    return [python, "-m", module, *flags]


def _last_eval(run_dir: str) -> dict[str, float] | None:
    path = os.path.join(run_dir, "eval_results.jsonl")
    if not os.path.exists(path):
        return None
    lines = [line for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def log_tail(path: str, lines: int = 12) -> str:
    """The last `lines` lines of a log file, preferring from the first 'Error' line on."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return ""
    tail = text[-lines:]
    errors = [line for line in tail if "Error" in line or "error:" in line]
    return "\n".join(errors[-3:] if errors else tail[-3:])


def write_run(python: str, work_dir: str, version: str, cwd: str, env: Mapping[str, str],
              run: Runner) -> tuple[str | None, float | None, str]:
    """Trains the tiny run under `version`: (run dir or None, its own eval loss, error).
    The data (version independent TFRecords) is generated once into work_dir/data."""
    data_dir = os.path.join(work_dir, "data")
    run_dir = os.path.join(work_dir, f"written-by-tf-{version}")
    log = os.path.join(work_dir, f"write-tf-{version}.log")
    if os.path.exists(log):
        os.remove(log)
    if not os.path.isdir(data_dir):
        status = run(_module(python, "t2t.bin.t2t_datagen", f"--problem={PROBLEM}",
                             f"--data_dir={data_dir}", "--progress=false"), log, cwd, env)
        if status != 0:
            shutil.rmtree(data_dir, ignore_errors=True)
            return None, None, f"t2t-datagen exited with {status}: {log_tail(log)}"
    shutil.rmtree(run_dir, ignore_errors=True)
    status = run(_module(python, "t2t.bin.t2t_trainer", f"--problem={PROBLEM}", *MODEL_FLAGS,
                         f"--data_dir={data_dir}", f"--output_dir={run_dir}",
                         f"--train_steps={TRAIN_STEPS}", f"--eval_steps={EVAL_STEPS}",
                         f"--local_eval_frequency={TRAIN_STEPS}", "--random_seed=1"),
                 log, cwd, env)
    if status != 0:
        return None, None, f"t2t-trainer exited with {status}: {log_tail(log)}"
    final = _last_eval(run_dir)
    if not final or "loss" not in final:
        return None, None, f"no eval loss in {run_dir}/eval_results.jsonl"
    return run_dir, float(final["loss"]), ""


def load_run(python: str, run_dir: str, writer: str, writer_loss: float, reader: str,
             cwd: str, env: Mapping[str, str], run: Runner) -> Load:
    """Evaluates and decodes a copy of `run_dir` (written under `writer`) under `reader`."""
    work_dir = os.path.dirname(run_dir)
    copy = os.path.join(work_dir, f"tf-{writer}-read-by-tf-{reader}")
    log = os.path.join(work_dir, f"tf-{writer}-read-by-tf-{reader}.log")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy)
    if os.path.exists(log):
        os.remove(log)
    os.remove(os.path.join(copy, "eval_results.jsonl"))
    result = Load(writer=writer, reader=reader, ok=False, writer_loss=writer_loss, log=log)
    data_dir = os.path.join(work_dir, "data")
    status = run(_module(python, "t2t.bin.t2t_trainer", f"--problem={PROBLEM}", *MODEL_FLAGS,
                         f"--data_dir={data_dir}", f"--output_dir={copy}",
                         "--schedule=evaluate", f"--eval_steps={EVAL_STEPS}",
                         f"--train_steps={TRAIN_STEPS}"), log, cwd, env)
    final = _last_eval(copy)
    if status != 0 or not final or "loss" not in final:
        result.error = f"evaluate exited with {status}: {log_tail(log)}"
        return result
    result.loss = float(final["loss"])
    source = os.path.join(copy, "decode.inputs")
    with open(source, "w", encoding="utf-8") as f:
        f.write(DECODE_INPUT)
    status = run(_module(python, "t2t.bin.t2t_decoder", f"--problem={PROBLEM}", *MODEL_FLAGS,
                         f"--data_dir={data_dir}", f"--output_dir={copy}",
                         "--decode_hparams=beam_size=1,batch_size=2,extra_length=3",
                         f"--decode_from_file={source}",
                         f"--decode_to_file={os.path.join(copy, 'decodes.txt')}"),
                 log, cwd, env)
    if status != 0:
        result.error = f"t2t-decoder exited with {status}: {log_tail(log)}"
    elif abs(result.loss - writer_loss) > LOSS_TOLERANCE:
        result.error = (f"eval loss {result.loss:.6f} under tf-{reader} differs from "
                        f"{writer_loss:.6f} under tf-{writer} (tolerance {LOSS_TOLERANCE})")
    else:
        result.ok = True
    return result


def portability(pythons: Mapping[str, str], writers: Sequence[str], work_dir: str, cwd: str,
                envs: Mapping[str, Mapping[str, str]], run: Runner,
                say: Callable[[str], None] = print) -> list[Load]:
    """Every reader in `pythons` (version -> venv python) loads each writer's run
    (a writer that cannot train is reported as one failed load per reader)."""
    os.makedirs(work_dir, exist_ok=True)
    loads: list[Load] = []
    for writer in writers:
        run_dir, writer_loss, error = write_run(pythons[writer], work_dir, writer, cwd,
                                                envs[writer], run)
        if run_dir is None or writer_loss is None:
            say(f"[portability] tf-{writer} could not write a checkpoint: {error}")
            loads += [Load(writer, reader, False, error=f"writer failed: {error}")
                      for reader in pythons if reader != writer]
            continue
        say(f"[portability] tf-{writer} wrote {run_dir} (eval loss {writer_loss:.6f})")
        for reader in pythons:
            if reader == writer:
                continue
            load = load_run(pythons[reader], run_dir, writer, writer_loss, reader, cwd,
                            envs[reader], run)
            say(f"[portability] tf-{writer} -> tf-{reader}: "
                f"{'ok' if load.ok else 'FAILED: ' + load.error}")
            loads.append(load)
    return loads


def table_text(loads: Sequence[Load]) -> str:
    """'tf-2.19 -> tf-2.20 ok; ...' (one entry per load)."""
    return "; ".join(f"tf-{x.writer} -> tf-{x.reader} {'ok' if x.ok else 'FAILED'}"
                     for x in loads) or "-"


def as_dicts(loads: Sequence[Load]) -> list[dict[str, object]]:
    return [dataclasses.asdict(x) for x in loads]

