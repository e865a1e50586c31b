"""The docs' problem table is generated from the registry."""

import pytest

from t2t import registry
from t2t.data.inspection import catalog


def test_table_lists_every_builtin_problem():
    table = catalog.markdown_table()
    for name in registry.list_problems():
        builtin = type(registry.problem(name)).__module__.startswith("t2t.")
        assert (f"| `{name}` |" in table) == builtin, name
    assert "| `algorithmic_reverse_binary40_test` | symbol -> symbol | 2 symbols | train (1), dev (1) |" in table
    assert "image -> class_label" in table and "symbol (language model)" in table


def test_replace_block():
    text = f"a\n{catalog.BEGIN}\nold\n{catalog.END}\nb"
    assert catalog.replace_block(text, "new") == f"a\n{catalog.BEGIN}\nnew\n{catalog.END}\nb"
    with pytest.raises(ValueError, match="has no problems block"):
        catalog.replace_block("no markers", "x")


def test_readme_block_is_up_to_date():
    with open("docs/reference/problems.md", encoding="utf-8") as f:
        readme = f.read()
    assert catalog.replace_block(readme, catalog.markdown_table()) == readme, (
        "docs/reference/problems.md's problem table is stale: run python -m docsite reference")


def test_problems_registered_outside_the_library_stay_out_of_the_table():
    # The README block must not depend on which tests ran before in the same process.
    @registry.register_problem("zz_catalog_test_outside_problem")
    class Outside(registry.problem("algorithmic_reverse_binary40_test").__class__):
        pass

    try:
        assert "zz_catalog_test_outside_problem" not in catalog.markdown_table()
    finally:
        registry.REGISTRIES["problem"].unregister("zz_catalog_test_outside_problem")
