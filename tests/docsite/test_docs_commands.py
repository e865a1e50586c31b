"""Every marked command block of docs/ runs, page by page: CI's quick run (-m "not slow")
runs every page's quick blocks, `run` and `background` (shortened where their markers
say so);
the slow set runs each page again with its `slow` blocks too. The count is printed at
the end of the run (tests/conftest.py) and by `python -m docsite list`.

A page's quick blocks are kept to ~15 s on an idle 2-core machine (the quick start and
the serving tutorial and how-to, which train, export and serve a model, take 40-90 s
each); what takes longer, and what reads its output, is marked `slow` on the page (a
server whose model a slow block trains: `background | slow`).

The pages are split over a few test classes: pytest-xdist (--dist=loadscope) gives each
class to one worker, so the two workers share the pages instead of one running them all.
"""

import pytest

from docsite import blocks, runner

PAGES = {page: found for page, found in blocks.all_blocks(runner.REPO / "docs").items()
         if found}


def _id(page: str) -> str:
    return page.split("/docs/", 1)[-1]


def _pages_with_commands(*sections: str) -> list[str]:
    return [p for p, found in PAGES.items() if _id(p).split("/")[0] in sections
            and any(b.quick for b in found)]


def _ci_pages(*sections: str, half: int | None = None) -> list:
    """The pages of `sections` with blocks to run (`half` 0 or 1: every other one)."""
    pages = _pages_with_commands(*sections)
    return [pytest.param(p, id=_id(p)) for p in (pages if half is None else pages[half::2])]


def _run(page: str) -> None:
    done = runner.run_page(PAGES[page], include_slow=False)
    print(f"{_id(page)}: {len(done.ran)} blocks in {done.seconds:.0f} s")


class TestTutorials:
    @pytest.mark.parametrize("page", _ci_pages("tutorials"))
    def test_commands_run(self, page):
        _run(page)


class TestHowToFirstHalf:
    @pytest.mark.parametrize("page", _ci_pages("how-to", half=0))
    def test_commands_run(self, page):
        _run(page)


class TestHowToSecondHalf:
    @pytest.mark.parametrize("page", _ci_pages("how-to", half=1))
    def test_commands_run(self, page):
        _run(page)


class TestReferenceExplanationResults:
    @pytest.mark.parametrize("page", _ci_pages("reference", "explanation", "results"))
    def test_commands_run(self, page):
        _run(page)


def test_every_page_with_commands_is_in_a_class():
    every = {p for p, found in PAGES.items() if any(b.quick for b in found)}
    assert every == set(_pages_with_commands("tutorials", "how-to", "reference",
                                             "explanation", "results")), (
        "a docs section no class runs: add it above")


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p, f in PAGES.items()
                                  if any(b.slow_only for b in f)], ids=_id)
def test_page_commands_run_with_the_slow_blocks(page):
    runner.run_page(PAGES[page], include_slow=True)
