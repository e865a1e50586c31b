"""The README's hparams sets table is generated from the registry."""

from t2t import registry
from t2t.hparams import catalog


def _listed_sets(table: str) -> list[str]:
    """The names in the table's "hparams sets" column, in order."""
    rows = [line.split(" | ") for line in table.split("\n")[2:]]
    return [name.strip("`") for row in rows for name in row[1].split(", ")]


def test_table_lists_every_builtin_set_once():
    table = catalog.markdown_table()
    listed = _listed_sets(table)
    for name in registry.list_hparams():
        builtin = registry.hparams(name).__module__.startswith("t2t.")
        assert listed.count(name) == int(builtin), name
    for name in ("basic_1", "lstm_attention", "lstm_bahdanau_attention_multi",
                 "lstm_luong_attention_multi", "resnet_imagenet_34", "resnet_imagenet_102",
                 "shakeshake_tpu"):
        assert f"`{name}`" in table, name
    assert "| transformer | `transformer_base`," in table
    assert "`resnet_tiny_cpu` is a t2t addition" in table


def test_sets_are_sorted_naturally():
    names = ["resnet_101", "resnet_cifar_15", "resnet_18", "resnet_imagenet_102"]
    assert sorted(names, key=catalog.natural_key) == [
        "resnet_18", "resnet_101", "resnet_cifar_15", "resnet_imagenet_102"]
    assert "`resnet_18`, `resnet_34`, `resnet_50`, `resnet_101`," in catalog.markdown_table()


def test_replace_block_uses_the_hparams_markers():
    text = f"a\n{catalog.BEGIN}\nold\n{catalog.END}\nb"
    assert catalog.replace_block(text, "new") == f"a\n{catalog.BEGIN}\nnew\n{catalog.END}\nb"


def test_readme_block_is_up_to_date():
    with open("docs/reference/models.md", encoding="utf-8") as f:
        readme = f.read()
    assert catalog.replace_block(readme, catalog.markdown_table()) == readme, (
        "docs/reference/models.md's hparams sets table is stale: run python -m docsite reference")


def test_sets_registered_outside_the_library_stay_out_of_the_table():
    # The README block must not depend on which tests ran before in the same process.
    @registry.register_hparams("zz_catalog_test_outside_hparams")
    def outside():
        """A set of a test, not of the library."""
        return registry.hparams("basic_params1")()

    try:
        assert "zz_catalog_test_outside_hparams" not in catalog.markdown_table()
    finally:
        registry.REGISTRIES["hparams"].unregister("zz_catalog_test_outside_hparams")
