"""docsite.runner: a page's blocks run in order in one scratch folder; the first failure
names page:line, the command as run and its output; a broken block of a real page fails."""

import pathlib

import pytest

from docsite import blocks, runner


def _blocks(text: str) -> list[blocks.Block]:
    return blocks.page_blocks(text, "docs/x.md")


def test_blocks_share_a_scratch_home_and_run_as_ci_says(tmp_path):
    page = _blocks("\n".join([
        "<!-- ci: run | hello => bye -->", "```sh", "echo hello > ~/f.txt", "```",
        "<!-- ci: run -->", "```python",
        "import pathlib; assert pathlib.Path.home().joinpath('f.txt').read_text() == 'bye\\n'",
        "```",
        "<!-- ci: slow -->", "```sh", "false", "```",
        "<!-- ci: skip: a GPU -->", "```sh", "false", "```",
        "<!-- ci: background | ready=up -->", "```sh", "echo up; sleep 300", "```",
        "<!-- ci: run | fails -->", "```sh", "exit 3", "```"]) + "\n")
    done = runner.run_page(page, include_slow=False, scratch=tmp_path)
    assert [b.line for b in done.ran] == [2, 6, 18, 22]
    assert [b.line for b in done.left_for_slow] == [10]
    assert [b.reason for b in done.never_run] == ["a GPU"]
    assert (tmp_path / "f.txt").read_text() == "bye\n"
    with pytest.raises(runner.DocsCommandError, match=r"docs/x.md:10: exited with status 1"):
        runner.run_page(page, include_slow=True, scratch=tmp_path)


def test_a_slow_background_block_starts_only_in_the_slow_set(tmp_path):
    page = _blocks("\n".join([
        "<!-- ci: background | slow | ready=up -->", "```sh",
        "echo up; echo served > ~/served.txt; sleep 300", "```",
        "<!-- ci: slow -->", "```sh", "test -e ~/served.txt", "```"]) + "\n")
    quick = runner.run_page(page, include_slow=False, scratch=tmp_path / "quick")
    assert (quick.ran, [b.line for b in quick.left_for_slow]) == ([], [2, 6])
    assert not (tmp_path / "quick" / "served.txt").exists()
    slow = runner.run_page(page, include_slow=True, scratch=tmp_path / "slow")
    assert [b.line for b in slow.ran] == [2, 6]


@pytest.mark.parametrize("text, message", [
    ("<!-- ci: run -->\n```sh\necho partial output\nexit 7\n```\n",
     r"(?s)docs/x.md:2: exited with status 7\n--- the block as CI ran it ---\necho partial "
     r"output\nexit 7\n--- the end of its output ---\npartial output"),
    ("<!-- ci: run | fails -->\n```sh\ntrue\n```\n", r"exited 0, but the page shows it failing"),
    ("<!-- ci: run | timeout=1 -->\n```sh\nsleep 30\n```\n", r"did not finish in 1 s"),
    ("<!-- ci: background | ready=never -->\n```sh\necho starting; exit 2\n```\n",
     r"exited with status 2 before its output matched ready='never'"),
])
def test_failures_name_the_block_and_show_its_output(tmp_path, text, message):
    with pytest.raises(runner.DocsCommandError, match=message):
        runner.run_page(_blocks(text), include_slow=False, scratch=tmp_path)


def test_a_broken_command_in_a_real_page_fails_the_docs_test(tmp_path):
    """The docs test is not a formality: the quick start with one flag misspelt fails at
    that block's line."""
    page = pathlib.Path(runner.REPO, "docs", "tutorials", "quickstart.md")
    text = page.read_text(encoding="utf-8")
    (first,) = [b for b in blocks.page_blocks(text, str(page))
                if b.mode == "run" and "t2t-trainer" in b.text][:1]
    broken = text.replace("--hparams_set=transformer_tiny", "--hparams_set=transformer_tinny", 1)
    with pytest.raises(runner.DocsCommandError) as failure:
        runner.run_page(blocks.page_blocks(broken, str(page)), include_slow=False,
                        scratch=tmp_path)
    assert f"{page}:{first.line}: exited with status" in str(failure.value)
    assert "transformer_tinny" in str(failure.value)
