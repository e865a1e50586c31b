"""The one writer of generated README blocks (t2t.utils.readme_tables): its marker
convention, the block replacement, the atomic file write, the command line, and that
every generator of the project's README uses it."""

import os
import pathlib
import re
import stat

import pytest

from t2t.utils import readme_tables

BEGIN, END = readme_tables.markers("demo")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator_markers() -> dict[str, tuple[str, str]]:
    """Module -> (BEGIN, END) of every generator of a README.md block."""
    from benchmarks import report as benchmarks_report
    from docsite import model_table
    from regression import matrix_table, report
    from t2t.bin import t2t_flag_compat
    from t2t.data.inspection import catalog as problems_catalog
    from t2t.hparams import catalog as hparams_catalog
    from t2t.hparams import t2t_names

    return {
        "t2t.data.inspection.catalog": (problems_catalog.BEGIN, problems_catalog.END),
        "t2t.hparams.catalog": (hparams_catalog.BEGIN, hparams_catalog.END),
        "t2t.bin.t2t_flag_compat": (t2t_flag_compat.BEGIN, t2t_flag_compat.END),
        "t2t.hparams.t2t_names": (t2t_names.BEGIN, t2t_names.END),
        "regression.report": (report.BEGIN_MARKER, report.END_MARKER),
        "regression.matrix_table": (matrix_table.MATRIX_BEGIN, matrix_table.MATRIX_END),
        "docsite.model_table": (model_table.BEGIN, model_table.END),
        "benchmarks.report": (benchmarks_report.BEGIN, benchmarks_report.END),
    }


def test_markers_follow_one_convention():
    assert readme_tables.markers("t2t-flags") == ("<!-- t2t-flags:begin -->",
                                                  "<!-- t2t-flags:end -->")
    assert readme_tables.block_name(BEGIN, END) == "demo"
    with pytest.raises(ValueError, match="'Demo Table': use lowercase letters"):
        readme_tables.markers("Demo Table")
    for begin, end in [("<!-- demo:start -->", END), (BEGIN, "<!-- other:end -->")]:
        with pytest.raises(ValueError, match=r"build them with readme_tables\.markers\(NAME\)"):
            readme_tables.replace_block(f"{begin}\n{end}\n", "x", begin, end)


def test_replace_block_puts_the_block_between_its_own_marker_lines():
    text = f"# t\n\nThe {BEGIN} in prose is no marker.\n  {BEGIN}\nold\nold\n{END}\nafter"
    assert readme_tables.replace_block(text, "\nnew\n\n", BEGIN, END) == (
        f"# t\n\nThe {BEGIN} in prose is no marker.\n  {BEGIN}\nnew\n{END}\nafter")
    assert readme_tables.replace_block(f"{BEGIN}\n{END}\n", "", BEGIN, END) == (
        f"{BEGIN}\n\n{END}\n")


@pytest.mark.parametrize("text, problem", [
    ("no markers\n", "has no demo block: add a line <!-- demo:begin --> and, below it, a "
                     "line <!-- demo:end --> where the table goes"),
    (f"{BEGIN}\nno end\n", "has no demo block"),
    (f"{END}\n{BEGIN}\n", "has no demo block"),
    (f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n", "has more than one demo block: keep one line"),
])
def test_missing_doubled_or_reversed_markers_are_refused(text, problem):
    with pytest.raises(readme_tables.MarkerError, match=re.escape(problem)):
        readme_tables.replace_block(text, "x", BEGIN, END)


def test_write_block_is_atomic_keeps_the_mode_and_skips_unchanged_files(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{BEGIN}\nold\n{END}\nb\n", encoding="utf-8")
    readme.chmod(0o640)
    assert readme_tables.write_block(str(readme), "| x |", BEGIN, END) is True
    assert readme.read_text(encoding="utf-8") == f"a\n{BEGIN}\n| x |\n{END}\nb\n"
    assert stat.S_IMODE(readme.stat().st_mode) == 0o640
    inode = readme.stat().st_ino
    assert readme_tables.write_block(str(readme), "| x |", BEGIN, END) is False
    assert readme.stat().st_ino == inode  # not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]  # no temporary left

    bare = tmp_path / "BARE.md"
    bare.write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(readme_tables.MarkerError, match=f"^{re.escape(str(bare))}: the README "
                                                        f"has no demo block"):
        readme_tables.write_block(str(bare), "| x |", BEGIN, END)
    assert bare.read_text(encoding="utf-8") == "# no markers\n"


def test_run_cli_prints_writes_and_fails_in_one_line(tmp_path, capsys):
    def run(*argv):
        status = readme_tables.run_cli(list(argv), "demo", lambda: "| t |", BEGIN, END)
        out, err = capsys.readouterr()
        return status, out, err

    assert run() == (0, "| t |\n", "")
    readme = tmp_path / "README.md"
    readme.write_text(f"{BEGIN}\n{END}\n", encoding="utf-8")
    assert run("--write", str(readme)) == (0, "", "")
    assert readme.read_text(encoding="utf-8") == f"{BEGIN}\n| t |\n{END}\n"
    status, _, err = run("--write", str(tmp_path / "missing.md"))
    assert status == 1 and err == (f"error: cannot update {tmp_path / 'missing.md'}: No such "
                                   f"file or directory; give --write an existing, writable "
                                   f"README file\n")
    readme.write_text("nothing\n", encoding="utf-8")
    status, _, err = run("--write", str(readme))
    assert status == 1 and err.startswith(f"error: {readme}: the README has no demo block")
    assert err.count("\n") == 1 and readme.read_text(encoding="utf-8") == "nothing\n"


def test_every_generator_uses_the_convention_and_its_block_is_in_the_docs():
    lines = [line.strip() for page in sorted(pathlib.Path(REPO, "docs").rglob("*.md"))
             for line in page.read_text(encoding="utf-8").splitlines()]
    names = set()
    for module, (begin, end) in _generator_markers().items():
        name = readme_tables.block_name(begin, end)  # ValueError off the convention
        assert (lines.count(begin), lines.count(end)) == (1, 1), (
            f"docs/ needs one line {begin} and one line {end} ({module})")
        names.add(name)
    # Every marked block in the docs has its generator.
    marked = {m[1] for line in lines for m in [re.fullmatch(r"<!-- ([\w-]+):\w+ -->", line)] if m}
    assert marked == names
