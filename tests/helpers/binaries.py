"""A t2t binary's main (run_binary), or its whole console-script entry point with
Tensor2Tensor's shared flags (run_entry), run in the test's own process: stdout, stderr
and absl warnings captured, the exit status as app.run would give it.

TensorFlow is imported once per test process instead of once per binary start (about
6 s on 2 cores), which is what makes the many flag-error and bad-input checks cheap.
The binaries each define flags such as --problem, so the flags of the previously
loaded binary are removed before the next one is imported. Tests of what only a real
process shows (start-up log noise, signals, exit codes from the shell) start one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import logging
import sys
import traceback

BINARIES = {
    "t2t-trainer": "t2t.bin.t2t_trainer",
    "t2t-datagen": "t2t.bin.t2t_datagen",
    "t2t-decoder": "t2t.bin.t2t_decoder",
    "t2t-exporter": "t2t.bin.t2t_exporter",
    "t2t-serve": "t2t.bin.t2t_serve",
    "t2t-bleu": "t2t.bin.t2t_bleu",
    "t2t-tuner": "t2t.bin.t2t_tuner",
    "t2t-avg-all": "t2t.bin.t2t_avg_all",
    "t2t-translate-all": "t2t.bin.t2t_translate_all",
    "t2t-import": "t2t.bin.t2t_import",
}
_FLAG_MODULES = (*BINARIES.values(), "t2t.bin.run_flags")


@dataclasses.dataclass
class Result:
    """What a binary's main left: exit status, stdout, stderr (absl warnings included)."""

    code: int
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err


def load_binary(module_name: str):
    """Imports the binary module afresh, after removing every binary's flags."""
    from absl import flags

    from t2t.bin import common_flags  # noqa: F401 (the flags shared by all binaries stay)

    values = flags.FLAGS
    by_module = values.flags_by_module_dict()
    for name in _FLAG_MODULES:
        for flag in list(by_module.get(name, [])):  # deleting edits these lists
            if flag.name in values:
                delattr(values, flag.name)
        sys.modules.pop(name, None)
        # `from t2t.bin import run_flags` would find the old module on the package.
        package, _, attribute = name.rpartition(".")
        if hasattr(sys.modules[package], attribute):
            delattr(sys.modules[package], attribute)
    return importlib.import_module(module_name)


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def _forget_shared_flags() -> None:
    """Removes the shared flags t2t_flag_compat defined for the last entry point run here
    (the next binary may define one of them itself) and its record of that binary."""
    from absl import flags

    from t2t.bin import t2t_flag_compat as compat

    for name in list(compat._defined):
        if name in flags.FLAGS:
            delattr(flags.FLAGS, name)
    compat._defined.clear()
    compat._pending.clear()
    compat._binary = None


def _call(binary: str, call) -> Result:
    """Runs `call()` with stdout, stderr and absl warnings captured; the exit status as
    absl's app.run would give it (an exception: status 1 and a traceback on stderr)."""
    from absl import flags

    values = flags.FLAGS
    out, err, warnings = io.StringIO(), io.StringIO(), []
    handler = _Collect(warnings)
    absl_logger = logging.getLogger("absl")
    absl_logger.addHandler(handler)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                call()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # what app.run would print before exiting with 1
                err.write(traceback.format_exc())
                code = 1
    finally:
        absl_logger.removeHandler(handler)
        _forget_shared_flags()
        values.unparse_flags()
        values([binary])  # parsed, all defaults: nothing leaks into the next run
    return Result(code, out.getvalue(), err.getvalue() + "".join(w + "\n" for w in warnings))


def run_binary(binary: str, *args: str) -> Result:
    """Runs `binary`'s main with the flags `args` in this process."""
    from absl import flags

    _forget_shared_flags()
    module = load_binary(BINARIES[binary])
    values = flags.FLAGS
    values.unparse_flags()
    argv = values([binary, *args])
    return _call(binary, lambda: module.main(argv))


def run_entry(binary: str, *args: str) -> Result:
    """Runs `binary`'s console-script entry point (its `run()`: Tensor2Tensor's shared
    flags accepted, t2t's --help, absl's app.run) with the command line `args`, in this
    process."""
    from absl import flags

    _forget_shared_flags()
    module = load_binary(BINARIES[binary])
    flags.FLAGS.unparse_flags()

    def call() -> None:
        saved = sys.argv
        sys.argv = [binary, *args]
        try:
            module.run()
        finally:
            sys.argv = saved

    return _call(binary, call)
