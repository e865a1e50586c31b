"""docsite.blocks: the CI markers of the docs' command blocks, and that every command
block of docs/ carries one."""

import pytest

from docsite import blocks


def _page(*parts: str) -> str:
    return "\n".join(parts) + "\n"


def test_markers_parse_into_blocks():
    text = _page("# P", "", "<!-- ci: run | --train_steps=4000 => --train_steps=20 | timeout=60 -->",
                 "```sh", "t2t-trainer --train_steps=4000", "```", "",
                 "<!-- ci: skip: needs 8 GPUs -->", "", "```python", "print(1)", "```",
                 "<!-- ci: background | ready=Serving on -->", "```bash", "t2t-serve", "```",
                 "```text", "output, no marker needed", "```")
    run, skip, background = blocks.page_blocks(text, "p.md")
    assert (run.line, run.mode, run.timeout_s, run.shortened) == (4, "run", 60, True)
    assert run.ci_text() == "t2t-trainer --train_steps=20\n"
    assert (skip.mode, skip.reason, skip.language, skip.where) == (
        "skip", "needs 8 GPUs", "python", "p.md:10")
    assert (background.mode, background.ready) == ("background", "Serving on")
    assert (run.quick, run.slow_only, background.quick, skip.quick) == (True, False, True, False)


def test_a_background_block_can_belong_to_the_slow_set():
    text = _page("<!-- ci: background | slow | ready=up -->", "```sh", "t2t-serve", "```",
                 "<!-- ci: slow -->", "```sh", "curl x", "```")
    server, client = blocks.page_blocks(text, "p.md")
    assert (server.mode, server.slow, server.quick, server.slow_only) == (
        "background", True, False, True)
    assert (client.quick, client.slow_only) == (False, True)


@pytest.mark.parametrize("text, message", [
    (_page("```sh", "ls", "```"), r"p.md:1: this sh block has no CI marker: put "
                                  r"'<!-- ci: run -->'"),
    (_page("<!-- ci: run -->", "prose", "```sh", "ls", "```"), r"p.md:1: a CI marker with no "
                                                                 r"command block under it"),
    (_page("<!-- ci: run -->", "```text", "x", "```"), r"p.md:1: a CI marker above a text block"),
    (_page("<!-- ci: sometimes -->", "```sh", "ls", "```"), r"unknown CI mode 'sometimes'.*"
                                                            r"run, slow, background, skip"),
    (_page("<!-- ci: skip -->", "```sh", "ls", "```"), r"needs a reason"),
    (_page("<!-- ci: run | quickly -->", "```sh", "ls", "```"), r"unknown CI option 'quickly'"),
    (_page("<!-- ci: run | slow -->", "```sh", "ls", "```"), r"unknown CI option 'slow'.*"
                                                             r"\(background blocks\) 'slow'"),
    (_page("<!-- ci: run | timeout=soon -->", "```sh", "ls", "```"), r"timeout='soon'"),
    (_page("<!-- ci: background -->", "```sh", "ls", "```"), r"needs 'ready=REGEX'"),
    (_page("<!-- ci: run -->", "```sh", "ls"), r"p.md:2: a code block that is never closed"),
])
def test_bad_markers_name_the_page_line_and_the_fix(text, message):
    with pytest.raises(blocks.MarkerError, match=message):
        blocks.page_blocks(text, "p.md")


def test_a_substitution_the_block_lost_is_an_error():
    (block,) = blocks.page_blocks(_page("<!-- ci: run | --steps=9 => --steps=1 -->", "```sh",
                                        "t2t-trainer --train_steps=9", "```"), "p.md")
    with pytest.raises(blocks.MarkerError, match=r"p.md:2: the CI marker replaces '--steps=9', "
                                                 r"which the block does not contain"):
        block.ci_text()


def test_every_command_block_in_the_docs_has_a_valid_marker():
    found = blocks.all_blocks("docs")  # raises MarkerError naming page:line
    every = [b for page in found.values() for b in page]
    assert len(found) >= 30 and len(every) >= 60
    for block in every:
        block.ci_text()  # every substitution still matches its block
