"""`python -m benchmarks compare [A] [B]`: two history entries side by side, regressions
beyond the noise flagged.

    python -m benchmarks compare [A] [B] [--history PATH] [--list]

A and B select entries of the history (benchmarks/history.jsonl, see history.py). B
defaults to the newest entry with key figures; A to the newest entry before B with the
same --quick flag and the same kind of machine (CPU model and count). A selector is

- an index: -1 the newest, -2 the one before, ...; 0, 1, ... from the oldest (at most
  three digits, so that it is never mistaken for a commit or a year);
- a commit hash prefix (4 or more characters) or a timestamp prefix ("2026-11-25",
  "2026-11-25T14:3"): the newest entry that matches (a note says when several do).

Each key figure present in both is printed as before, now and the change in percent, with
the noise threshold it is judged against. Direction: each entry records every key figure's
unit and better direction (figure.Figure); for older entries without them, figures whose
names speak of time or memory (LOWER_IS_BETTER) are better lower, the rest (ratios,
throughputs, MFU) higher. A change beyond the threshold in the worse direction is flagged
REGRESSION, one in the better direction "better".

The noise of a figure: the history's repeated runs of the same code (same commit and the
same hash of the uncommitted diff) and the same benchmarks in the run (they share one
process, so the earlier ones change the later ones' figures) on the same kind of machine,
with the same --quick flag and the same arguments for that benchmark, as B. Within each such group the relative
spread max/min - 1 (the largest |a/b - 1| between two of its runs); the figure's noise is
the largest spread over the groups, and its threshold that noise, at least NOISE_FLOOR (a
figure that hardly moves between repeats is not flagged for rounding-sized changes). A
figure without repeats in the history is judged against DEFAULT_NOISE, the suite's own
WORSE threshold. Which it was is printed per figure, with the runs and their load average.

Exit status: 0 no regression flagged, 1 at least one flagged, 2 usage error (no history,
a selector that matches nothing, no entry to compare with).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from benchmarks import history
from benchmarks.figure import FLAG_CHANGE, Figure

DEFAULT_NOISE = FLAG_CHANGE  # 10%: no repeated runs of a figure in the history
NOISE_FLOOR = 0.02  # thresholds below 2% would flag rounding-sized changes
LOWER_IS_BETTER = ("ms/token", "step time", "peak", "memory", "seconds", "latency")
LIST_LIMIT = 12  # entries shown in the listing of an error message
_INDEX = re.compile(r"-\d+|\d{1,3}")
Entry = Mapping[str, Any]


class UsageError(Exception):
    """A selector or history that cannot give two entries to compare (exit status 2)."""


# ------------------------------------------------------------------ entries
def position(entries: list[Entry], index: int) -> str:
    """'#3 (-2)': an entry's index from the oldest and from the newest."""
    return f"#{index} ({index - len(entries)})"


def _load(entry: Entry) -> str:
    """'load 1.5->2.5': the 1-minute load average at the run's start and end."""
    load = entry.get("load") or {}
    start, end = load.get("start"), load.get("end")
    if not start and not end:
        return "load ?"
    return f"load {start[0] if start else '?'}->{end[0] if end else '?'}"


def brief(entries: list[Entry], index: int) -> str:
    """One line per entry: position, timestamp, commit, flag, benchmarks, machine, load."""
    entry = entries[index]
    git = entry.get("git") or {}
    cpu, cpus = history.host_key(entry)
    selected = ",".join(entry.get("selected") or (entry.get("results") or {}))
    return (f"{position(entries, index):<10} {entry.get('timestamp', '?')}  "
            f"{git.get('commit') or '?'}{'+dirty' if git.get('dirty') else ''}  "
            f"{'--quick' if entry.get('quick') else 'full'}  {selected or '-'}  "
            f"{cpu or '?'} x {cpus or '?'}  {_load(entry)}")


def listing(entries: list[Entry], limit: int | None = LIST_LIMIT) -> str:
    """The entries, newest last (only the last `limit` unless None)."""
    first = 0 if limit is None else max(0, len(entries) - limit)
    lines = [f"  {brief(entries, i)}" for i in range(first, len(entries))]
    if first:
        lines.insert(0, f"  ... {first} earlier entries (--list shows all)")
    return "\n".join(lines)


def select(entries: list[Entry], selector: str) -> tuple[int, str | None]:
    """(index, note) of the entry `selector` names (see the module doc); raises UsageError
    naming the selector and listing the entries when none matches."""
    selector = selector.strip()
    if _INDEX.fullmatch(selector):
        index = int(selector)
        if -len(entries) <= index < len(entries):
            return index % len(entries), None
        raise UsageError(f"entry index {selector} is out of range: the history has "
                         f"{len(entries)} entries (0..{len(entries) - 1}, or -1..-"
                         f"{len(entries)}):\n{listing(entries)}")
    matches = [i for i, e in enumerate(entries)
               if (len(selector) >= 4 and str((e.get("git") or {}).get("commit") or "")
                   .startswith(selector))
               or str(e.get("timestamp", "")).startswith(selector)]
    if not matches:
        raise UsageError(f"no history entry matches {selector!r} (an index like -1, a commit "
                         f"hash prefix of 4+ characters or a timestamp prefix like "
                         f"2026-11-25T14); the entries:\n{listing(entries)}")
    note = (f"{selector!r} matches {len(matches)} entries; using the newest, "
            f"{position(entries, matches[-1])}" if len(matches) > 1 else None)
    return matches[-1], note


def pick(entries: list[Entry], a: str | None, b: str | None) -> tuple[int, int, list[str]]:
    """(before index, now index, notes) from the selectors (None: the defaults)."""
    notes: list[str] = []
    if b is not None:
        now, note = select(entries, b)
        notes += [note] if note else []
    else:
        with_figures = [i for i, e in enumerate(entries) if e.get("key_figures")]
        if not with_figures:
            raise UsageError("no history entry has key figures (every run failed?):\n"
                             + listing(entries))
        now = with_figures[-1]
    if a is not None:
        before, note = select(entries, a)
        notes += [note] if note else []
    else:
        same = [i for i in range(now) if entries[i].get("key_figures")
                and entries[i].get("quick") == entries[now].get("quick")
                and history.host_key(entries[i]) == history.host_key(entries[now])]
        if not same:
            flag = "--quick" if entries[now].get("quick") else "full"
            cpu, cpus = history.host_key(entries[now])
            raise UsageError(f"no entry before {position(entries, now)} with the same flag "
                             f"({flag}) and machine ({cpu} x {cpus}): name A explicitly; "
                             f"the entries:\n{listing(entries)}")
        before = same[-1]
    if before == now:
        raise UsageError(f"A and B are the same entry, {position(entries, now)}: select "
                         f"two different ones; the entries:\n{listing(entries)}")
    for index in (before, now):
        if not entries[index].get("key_figures"):
            raise UsageError(f"entry {position(entries, index)} has no key figures (its "
                             f"benchmarks failed): select another one;\n{listing(entries)}")
    return before, now, notes


# -------------------------------------------------------------------- noise
def direction(key: str, info: Mapping[str, Any] | None = None) -> str:
    """"higher" or "lower": the recorded direction, else guessed from the name."""
    if info and info.get("better") in ("higher", "lower"):
        return info["better"]
    return "lower" if any(hint in key for hint in LOWER_IS_BETTER) else "higher"


def spread(values: list[float]) -> float | None:
    """max/min - 1 of positive values (the largest |a/b - 1| of two), None if any <= 0."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return max(values) / min(values) - 1.0


def _selected(entry: Entry) -> tuple[str, ...]:
    return tuple(entry.get("selected") or (entry.get("results") or {}))


def repeat_groups(entries: list[Entry], reference: Entry) -> dict[tuple, list[int]]:
    """Indexes of the entries with the same flag and machine as `reference`, grouped by
    (commit, diff hash, benchmarks run): the benchmarks share one process, so the ones run
    before a benchmark change its figures (decoding after resnet measured 2-4x slower);
    only groups of two or more."""
    groups: dict[tuple, list[int]] = {}
    for i, entry in enumerate(entries):
        code = history.code_key(entry)
        if (code and entry.get("key_figures") and entry.get("quick") == reference.get("quick")
                and history.host_key(entry) == history.host_key(reference)):
            groups.setdefault((*code, _selected(entry)), []).append(i)
    return {code: indexes for code, indexes in groups.items() if len(indexes) > 1}


def _benchmark_argv(entry: Entry, key: str) -> str:
    benchmark = key.split(": ", 1)[0]
    result = (entry.get("results") or {}).get(benchmark) or {}
    return json.dumps(result.get("argv"))


def measure_noise(entries: list[Entry], reference: Entry) -> dict[str, tuple[float, int]]:
    """Figure key -> (largest spread over the repeat groups, runs of that group; the larger
    group on a tie), for the figures repeated with the same benchmark arguments."""
    noise: dict[str, tuple[float, int]] = {}
    for indexes in repeat_groups(entries, reference).values():
        values: dict[tuple[str, str], list[float]] = {}
        for i in indexes:
            for key, value in (entries[i].get("key_figures") or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.setdefault((key, _benchmark_argv(entries[i], key)), []).append(value)
        for (key, _), group in values.items():
            found = spread(group)
            if found is not None and (found, len(group)) > noise.get(key, (-1.0, 0)):
                noise[key] = (found, len(group))
    return noise


def threshold(key: str, noise: Mapping[str, tuple[float, int]]) -> tuple[float, str]:
    """(threshold, where it came from) of one figure."""
    if key not in noise:
        return DEFAULT_NOISE, "default"
    value, runs = noise[key]
    if value < NOISE_FLOOR:
        return NOISE_FLOOR, f"floor; {runs} runs {100 * value:.1f}%"
    return value, f"{runs} runs"


def noise_source(entries: list[Entry], reference: Entry) -> list[str]:
    """Lines saying where the noise comes from: each repeat group with its load."""
    groups = repeat_groups(entries, reference)
    flag = "--quick" if reference.get("quick") else "full"
    cpu, cpus = history.host_key(reference)
    lines = [f"Noise: per figure the largest spread max/min - 1 between repeated runs of the "
             f"same code (commit + diff hash) and benchmarks, {flag}, same benchmark "
             f"arguments, on {cpu} x {cpus}; threshold = that spread, at least "
             f"{100 * NOISE_FLOOR:.0f}%; figures without repeats: the default "
             f"{100 * DEFAULT_NOISE:.0f}%."]
    if not groups:
        lines.append("  no repeated runs in the history: every figure uses the default "
                     f"{100 * DEFAULT_NOISE:.0f}% (run the same commit again to measure it).")
    for (commit, diff, selected), indexes in groups.items():
        loads = [x for i in indexes for x in ((entries[i].get("load") or {}).get("start"),
                                              (entries[i].get("load") or {}).get("end")) if x]
        load = (f"load average (1 min) {min(x[0] for x in loads)}-{max(x[0] for x in loads)}"
                if loads else "load not recorded")
        runs = ", ".join(position(entries, i).split()[0] for i in indexes)
        lines.append(f"  repeats: commit {commit}{f' (diff {diff})' if diff else ''}, "
                     f"{','.join(selected)}: {len(indexes)} runs {runs}; {load}")
    return lines


# ------------------------------------------------------------------- report
def _format(value: float, info: Mapping[str, Any] | None) -> str:
    if info and info.get("unit"):
        return Figure("", "", value, info["unit"]).format()
    return f"{value:.4g}"


def rows(before: Entry, now: Entry, noise: Mapping[str, tuple[float, int]]
         ) -> list[dict[str, Any]]:
    """One dict per key figure numeric in both (before non-zero), in `now`'s order: key,
    before, now, change (now/before - 1), threshold, source, better, verdict."""
    old_figures, info = before.get("key_figures") or {}, {
        **(before.get("key_figure_info") or {}), **(now.get("key_figure_info") or {})}
    found = []
    for key, value in (now.get("key_figures") or {}).items():
        old = old_figures.get(key)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (old, value)):
            continue
        if not old:
            continue
        change = value / old - 1.0
        limit, source = threshold(key, noise)
        better = direction(key, info.get(key))
        worse = change < -limit if better == "higher" else change > limit
        improved = change > limit if better == "higher" else change < -limit
        found.append({"key": key, "before": _format(old, info.get(key)),
                      "now": _format(value, info.get(key)), "change": change,
                      "threshold": limit, "source": source, "better": better,
                      "verdict": "REGRESSION" if worse else "better" if improved else ""})
    return found


def report(entries: list[Entry], before: int, now: int, notes: list[str]) -> tuple[str, int]:
    """The printed comparison and the number of regressions flagged."""
    a, b = entries[before], entries[now]
    lines = [*notes, f"before (A): {brief(entries, before)}", f"now    (B): {brief(entries, now)}",
             "  (load: the 1-minute load average at the start -> end of the run)"]
    if history.host_key(a) != history.host_key(b):
        lines.append("  (A and B ran on different machines: the changes include that)")
    if a.get("quick") != b.get("quick"):
        lines.append("  (A and B differ in --quick: the figures are not measured alike)")
    if _selected(a) != _selected(b):
        lines.append("  (A and B ran different benchmarks in one process: a benchmark's figures "
                     "depend on those run before it)")
    if history.code_key(a) and history.code_key(a) == history.code_key(b):
        lines.append("  (A and B ran the same code: every change between them is noise)")
    lines += noise_source(entries, b)
    found = rows(a, b, measure_noise(entries, b))
    if not found:
        return "\n".join([*lines, "No key figure in common."]), 0
    width = max(len(r["key"]) for r in found)
    lines.append(f"{'figure':<{width}}  {'before':>18}  {'now':>18}  {'change':>8}  "
                 "threshold (source)")
    for r in found:
        arrow = "^" if r["better"] == "higher" else "v"
        lines.append(f"{r['key']:<{width}}  {r['before']:>18}  {r['now']:>18}  "
                     f"{100 * r['change']:+7.1f}%  {arrow} {100 * r['threshold']:4.1f}% "
                     f"({r['source']})  {r['verdict']}".rstrip())
    lines.append("(^: higher is better, v: lower is better)")
    missing = sorted(set(a.get("key_figures") or {}) - set(b.get("key_figures") or {}))
    if missing:
        lines.append(f"{len(missing)} figure(s) of A not in B: {', '.join(missing[:5])}"
                     + (", ..." if len(missing) > 5 else ""))
    if b.get("failed"):
        lines.append(f"B's failed benchmarks: {', '.join(b['failed'])}")
    regressions = [r["key"] for r in found if r["verdict"] == "REGRESSION"]
    lines.append(f"{len(regressions)} regression(s) beyond the noise"
                 + (f": {'; '.join(regressions)}" if regressions else "") + ".")
    return "\n".join(lines), len(regressions)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks compare", description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="A, B: an index (-1 newest, -2, ...; 0 oldest), a commit hash prefix (4+ "
               "characters) or a timestamp prefix. Exit status 0: no regression, 1: one or "
               "more flagged, 2: usage error.")
    parser.add_argument("a", nargs="?", metavar="A", help="the earlier entry (default: the "
                        "newest before B with the same --quick flag and machine)")
    parser.add_argument("b", nargs="?", metavar="B", help="the later entry (default: newest)")
    parser.add_argument("--history", default=history.DEFAULT_PATH,
                        help="the history file (default %(default)s)")
    parser.add_argument("--list", action="store_true", help="list the entries and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status (0, 1: regression flagged, 2: usage error)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    entries = history.read(args.history)
    try:
        if not entries:
            raise UsageError(f"no history at {args.history} (run `python -m benchmarks "
                             "[--quick]` first, or pass --history PATH)")
        if args.list:
            print(f"{args.history}: {len(entries)} entries\n{listing(entries, None)}")
            return 0
        before, now, notes = pick(entries, args.a, args.b)
    except UsageError as e:
        print(f"python -m benchmarks compare: error: {e}", file=sys.stderr)
        return 2
    text, regressions = report(entries, before, now, [f"History: {args.history}", *notes])
    print(text)
    return 1 if regressions else 0
