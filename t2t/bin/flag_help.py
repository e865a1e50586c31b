"""--help for the t2t binaries: their own flags, grouped, one line each, with defaults.

absl's --help lists the flags of the main module only, and a console script's main
module defines none, so it printed nothing but "Try --helpfull" (whose list buries the
binary's flags among absl's and TensorFlow's). `run(main, __doc__)` starts a binary
with `--help`, `--helpshort`, `-help` and `-h` printing `help_text`: the binary's
docstring, then every flag defined by t2t's modules, by group (the config class a flag
comes from, or a `group(...)` declaration), then a pointer to --helpfull.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable

from absl import app, flags

from t2t.bin import config_flags, t2t_flag_compat
from t2t.utils import optional_deps

FLAGS = flags.FLAGS

# --help, -help, --helpshort, -h, -? (and --help=true ...): t2t's help. --helpfull is absl's.
HELP_ARG = re.compile(r"^(--?help(short)?(=(true|t|1|yes))?|-h|-\?)$", re.IGNORECASE)
GENERAL = "General"
COMPAT_MODULE = "t2t.bin.t2t_flag_compat"
OTHER = "Options"

# Groups of the flags generated from the config tree (t2t.config), by config class.
CONFIG_GROUPS = {
    "TaskConfig": "Problem, model and run",
    "DataConfig": "Data",
    "TrainerConfig": "Training",
    "RuntimeConfig": "Distribution and devices",
    "InputConfig": "Input pipeline",
    "ExportConfig": "Export",
    "TunerConfig": "Tuning",
}
# The order groups are printed in; others follow in order of appearance.
GROUP_ORDER = ("Problem, model and run", "Data", "Training", "Distribution and devices",
               "Decoding", "Export", "Tuning", "Input pipeline", OTHER, GENERAL)

VERBOSITY_HELP = ("Logging verbosity: 0 (the default) shows t2t's progress, warnings and "
                  "errors; 1 adds debug lines and, where TensorFlow runs, its start-up and "
                  "INFO lines.")
_groups: dict[str, str] = {}  # flag name -> group, explicit declarations


def group(title: str, *names: str) -> None:
    """Declares that flags `names` belong to group `title` in --help (a declaration wins
    over the config class's group; names a binary lacks are ignored)."""
    for name in names:
        _groups[name] = title


def group_of(flag_name: str) -> str:
    """The --help group of the flag --`flag_name`: its `group(...)` declaration, else the
    group of the config class it was generated from, else "Options"."""
    config_cls_name = config_flags.config_class_name(flag_name)
    return _groups.get(flag_name) or CONFIG_GROUPS.get(config_cls_name or "", OTHER)


group(GENERAL, "t2t_usr_dir", "registry_help", "gin_file", "gin_param", "verbosity")
group("Data", "data_dir", "data_mirror", "generate_data", "tmp_dir")


_ABSL_ENUM_PREFIX = re.compile(r"^<[^>]*>: ")
_ABSL_MULTI_SUFFIX = re.compile(r";\s*repeat this option to specify a list of values$")
_ALIAS_HELP = re.compile(r"^Alias for --(\w+)\.$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")


def first_sentence(text: str) -> str:
    """The first sentence of a flag's help ("Decode each line. A ..." -> "Decode each
    line."), whitespace collapsed; "e.g." and the like do not end it."""
    text = " ".join(text.split())
    for match in _SENTENCE_END.finditer(text):
        if not text[:match.start()].endswith(_ABBREVIATIONS):
            return text[:match.start()]
    return text


def _is_own_module(module: str) -> bool:
    """A module of t2t's binaries (imported, or run as a script: named by its path)."""
    return module.startswith("t2t.") or module == sys.argv[0] or (
        os.sep + os.path.join("t2t", "bin") + os.sep) in module


def _own_flags() -> list[flags.Flag]:
    """The flags t2t's modules define in this process, plus absl's --verbosity (not the
    shared flags a binary accepts and ignores: t2t.bin.t2t_flag_compat's)."""
    seen, own = set(), []
    for module, module_flags in FLAGS.flags_by_module_dict().items():
        if not _is_own_module(module) or module == COMPAT_MODULE:
            continue
        for flag in module_flags:
            if flag.name not in seen:
                seen.add(flag.name)
                own.append(flag)
    if "verbosity" in FLAGS and "verbosity" not in seen:
        own.append(FLAGS["verbosity"])
    return own


def _flag_title(flag: flags.Flag) -> str:
    if flag.boolean:
        return f"--[no]{flag.name}"
    enum_values = getattr(getattr(flag, "parser", None), "enum_values", None)
    if enum_values and len("|".join(enum_values)) <= 40:
        return f"--{flag.name}={{{'|'.join(enum_values)}}}"
    return f"--{flag.name}"


def _description(flag: flags.Flag, aliases: list[str]) -> str:
    help_text = _ABSL_MULTI_SUFFIX.sub("", _ABSL_ENUM_PREFIX.sub("", flag.help or ""))
    text = VERBOSITY_HELP if flag.name == "verbosity" else first_sentence(help_text)
    if _ABSL_MULTI_SUFFIX.search(flag.help or ""):
        text += " (repeatable)"
    if aliases:
        text += f" (also {', '.join('--' + a for a in sorted(aliases))})"
    default = flag.default
    if default is not None and default != "" and default != [] and flag.name != "verbosity":
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        text += f" (default: {shown})"
    if flag.short_name:
        text += f" (-{flag.short_name})"
    return text


def help_text(doc: str | None, program: str | None = None, width: int | None = None,
              hidden: tuple[str, ...] = ()) -> str:
    """The binary's --help: `doc`, then its own flags (but `hidden`) by group, one entry
    each."""
    program = os.path.basename(program or sys.argv[0])
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    by_group: dict[str, list[flags.Flag]] = {}
    aliases: dict[str, list[str]] = {}
    own = [flag for flag in _own_flags() if flag.name not in hidden]
    for flag in own:
        alias_of = _ALIAS_HELP.match(flag.help or "")
        if alias_of:
            aliases.setdefault(alias_of[1], []).append(flag.name)
    for flag in own:
        if _ALIAS_HELP.match(flag.help or ""):
            continue  # listed with the flag it stands for
        by_group.setdefault(group_of(flag.name), []).append(flag)
    order = [g for g in GROUP_ORDER if g in by_group] + [
        g for g in by_group if g not in GROUP_ORDER]
    lines = [(doc or "").strip(), "", f"Usage: {program} [flags]"]
    for title in order:
        lines += ["", f"{title}:"]
        for flag in sorted(by_group[title], key=lambda f: f.name):
            head = f"  {_flag_title(flag)}"
            body = textwrap.wrap(_description(flag, aliases.get(flag.name, [])),
                                 max(width - 32, 40), break_long_words=False,
                                 break_on_hyphens=False)
            if len(head) > 29:
                lines.append(head)
                lines += [" " * 32 + part for part in body]
            else:
                lines.append(head.ljust(32) + body[0] if body else head)
                lines += [" " * 32 + part for part in body[1:]]
    lines += ["", "--helpfull lists every flag (with absl's and TensorFlow's) and its whole "
                  "description."]
    return "\n".join(lines).lstrip("\n") + "\n"


def _markdown_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_reference(doc: str | None, program: str, hidden: tuple[str, ...] = ()) -> str:
    """The binary's flags as a markdown reference section (`--helpmarkdown`, for the docs
    site): its docstring's first paragraph, then per --help group a table of each flag,
    its default and its whole description."""
    by_group: dict[str, list[flags.Flag]] = {}
    own = [flag for flag in _own_flags() if flag.name not in hidden]
    for flag in own:
        if not _ALIAS_HELP.match(flag.help or ""):
            by_group.setdefault(group_of(flag.name), []).append(flag)
    aliases: dict[str, list[str]] = {}
    for flag in own:
        alias_of = _ALIAS_HELP.match(flag.help or "")
        if alias_of:
            aliases.setdefault(alias_of[1], []).append(flag.name)
    order = [g for g in GROUP_ORDER if g in by_group] + [
        g for g in by_group if g not in GROUP_ORDER]
    summary = (doc or "").strip().split("\n\n")[0]
    lines = [f"## {program}", "", _markdown_cell(summary)]
    for title in order:
        lines += ["", f"### {program}: {title}", "", "| flag | default | description |",
                  "|---|---|---|"]
        for flag in sorted(by_group[title], key=lambda f: f.name):
            default = None if flag.name == "verbosity" else flag.default
            shown = ("" if default is None or default == "" or default == [] else
                     str(default).lower() if isinstance(default, bool) else str(default))
            help_text_ = VERBOSITY_HELP if flag.name == "verbosity" else _ABSL_MULTI_SUFFIX.sub(
                "", _ABSL_ENUM_PREFIX.sub("", flag.help or ""))
            if aliases.get(flag.name):
                help_text_ += f" (also {', '.join('--' + a for a in sorted(aliases[flag.name]))})"
            lines.append(f"| `{_flag_title(flag)}` | {f'`{_markdown_cell(shown)}`' if shown else ''} "
                         f"| {_markdown_cell(help_text_)} |")
    return "\n".join(lines) + "\n"


def _parse_flags(doc: str | None, argv: list[str], hidden: tuple[str, ...] = ()) -> list[str]:
    """absl's flag parsing, with t2t's --help (and --helpmarkdown, the docs site's flag
    reference) first, and the shared flags the binary accepts (t2t_flag_compat) defined
    before and noted after."""
    for arg in argv[1:]:
        if arg == "--":
            break
        if arg == "--helpmarkdown":
            sys.stdout.write(markdown_reference(doc, os.path.basename(argv[0]), hidden))
            sys.exit(0)
        if HELP_ARG.match(arg):
            sys.stdout.write(help_text(doc, argv[0], hidden=hidden))
            sys.exit(0)
    t2t_flag_compat.before_parse(hidden)
    rest = app.parse_flags_with_usage(argv)
    t2t_flag_compat.after_parse()
    return rest


def _without_traceback(main: Callable[[list[str]], None]) -> Callable[[list[str]], None]:
    """`main`, a missing optional dependency printed as one error line (exit status 1)."""

    @functools.wraps(main)
    def wrapped(argv: list[str]) -> None:
        try:
            main(argv)
        except optional_deps.MissingDependencyError as e:
            sys.stderr.write(f"error: {e}\n")
            sys.exit(1)

    return wrapped


def run(main: Callable[[list[str]], None], doc: str | None,
        argv: list[str] | None = None, hidden: tuple[str, ...] = ()) -> None:
    """`absl.app.run(main)` with t2t's --help (the binary's docstring is `doc`; `hidden`:
    flags defined in the process that the binary does not use); a missing optional
    dependency ends in one `error:` line, not a traceback."""
    app.run(_without_traceback(main), argv=argv,
            flags_parser=functools.partial(_parse_flags, doc, hidden=hidden))
