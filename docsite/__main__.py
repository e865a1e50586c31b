"""`python -m docsite run [PAGE ...] [--slow]`: run the docs' marked command blocks;
`python -m docsite list`: count them by how CI runs them;
`python -m docsite reference [--check]`: regenerate the reference pages (or fail when
one is stale)."""

from __future__ import annotations

import argparse
import pathlib
import sys

from docsite import blocks, runner


def _page_path(page: str) -> pathlib.Path:
    """A page given on the command line: as a path, else relative to the repository."""
    path = pathlib.Path(page)
    return path.resolve() if path.exists() else (runner.REPO / page).resolve()


def _selected(pages: list[str]) -> dict[str, list[blocks.Block]]:
    """Page -> blocks of the `pages` given (default: every page); only those are parsed."""
    if not pages:
        return blocks.all_blocks(runner.REPO / "docs")
    docs = {path.resolve() for path in blocks.docs_pages(runner.REPO / "docs")}
    paths = [_page_path(page) for page in pages]
    missing = [str(path) for path in paths if path not in docs]
    if missing:
        raise SystemExit(f"error: not a docs page: {', '.join(missing)}; pages are the .md "
                         f"files under {runner.REPO / 'docs'}")
    return {str(path): blocks.page_blocks(path.read_text(encoding="utf-8"), str(path))
            for path in paths}


def count_line(found: dict[str, list[blocks.Block]]) -> str:
    """One line: blocks CI runs (shortened ones among them), slow-set blocks, never run."""
    every = [b for page in found.values() for b in page]
    ci = [b for b in every if b.quick]
    return (f"docs commands: {len(every)} blocks on {len(found)} pages; {len(ci)} run by "
            f"the docs test ({sum(b.shortened for b in ci)} shortened), "
            f"{sum(b.slow_only for b in every)} more with --slow, "
            f"{sum(b.mode == 'skip' for b in every)} never run")


def _run(args: argparse.Namespace) -> int:
    found = _selected(args.pages)
    print(count_line(found))
    for page, page_blocks in found.items():
        if not page_blocks:
            continue
        try:
            done = runner.run_page(page_blocks, include_slow=args.slow)
        except runner.DocsCommandError as e:
            print(f"FAIL {e}", file=sys.stderr)
            return 1
        print(f"ok   {page}: {len(done.ran)} run, {len(done.left_for_slow)} left for the slow "
              f"set, {len(done.never_run)} never run ({done.seconds:.0f} s)")
        slowest = sorted(done.block_seconds.items(), key=lambda item: -item[1])[:5]
        if slowest:
            print("     slowest blocks: " + ", ".join(f"line {line} {seconds:.0f} s"
                                                       for line, seconds in slowest))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docsite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the marked command blocks of PAGEs (default: all)")
    run.add_argument("pages", nargs="*", metavar="PAGE")
    run.add_argument("--slow", action="store_true", help="also the blocks marked slow")
    sub.add_parser("list", help="count the marked blocks")
    reference = sub.add_parser("reference", help="write the generated reference pages")
    reference.add_argument("--check", action="store_true",
                           help="write nothing; exit 1 naming each stale page")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "list":
            print(count_line(blocks.all_blocks(runner.REPO / "docs")))
            return 0
        from docsite import reference as reference_pages  # imports the registry: only here

        return reference_pages.main(check=args.check)
    except blocks.MarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
