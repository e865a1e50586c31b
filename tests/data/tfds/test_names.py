"""Tests for t2t.data.tfds.names: normalizing names, problem name <-> TFDS name in
both directions over every config of some multi-config data sets, and the errors for
names that are not tfds_ names or name no data set or config. Offline: only TFDS's
code-defined builder classes are looked up."""

from __future__ import annotations

import types

import pytest

from t2t import registry
from t2t.data.tfds import names as tfds_names

tfds = pytest.importorskip("tensorflow_datasets")


def test_normalize_and_problem_name_for() -> None:
    assert tfds_names.normalize("Glue/SST-2.v1 x") == "glue_sst_2_v1_x"
    assert tfds_names.problem_name_for("mnist") == "tfds_mnist"
    assert tfds_names.problem_name_for("mnist:3.0.1") == "tfds_mnist"  # No versions.
    assert tfds_names.problem_name_for("Wmt14_Translate/DE-EN") == "tfds_wmt14_translate__de_en"
    assert tfds_names.problem_name_for("super_glue/wsc.fixed:1.0.2") == "tfds_super_glue__wsc_fixed"


@pytest.mark.parametrize("dataset", ["glue", "wmt14_translate", "super_glue"])
def test_every_config_maps_both_ways(dataset: str) -> None:
    configs = [c.name for c in tfds.builder_cls(dataset).BUILDER_CONFIGS]
    assert len(configs) > 3
    problem_names = set()
    for config in configs:
        name = tfds_names.problem_name_for(f"{dataset}/{config}")
        assert name.startswith(tfds_names.PREFIX + dataset + tfds_names.CONFIG_SEPARATOR)
        assert tfds_names.tfds_name_for(name) == f"{dataset}/{config}"
        problem_names.add(name)
    assert len(problem_names) == len(configs)
    assert tfds_names.tfds_name_for(tfds_names.PREFIX + dataset) == dataset
    # Config names match whatever their case and punctuation.
    upper = tfds_names.PREFIX + dataset + "__" + configs[1].upper().replace("-", ".")
    assert tfds_names.tfds_name_for(upper) == f"{dataset}/{configs[1]}"


def test_names_that_are_not_tfds_names() -> None:
    for bad in ("mnist", "tfds_", "TFDS_mnist"):
        with pytest.raises(ValueError, match=f"'{bad}' is not a tfds_ problem name"):
            tfds_names.tfds_name_for(bad)


def test_unknown_data_sets_and_configs_are_named() -> None:
    with pytest.raises(registry.UnknownNameError) as e:
        tfds_names.tfds_name_for("tfds_no_such_set_xyz")
    message = str(e.value)
    assert "'tfds_no_such_set_xyz'" in message and "no data set 'no_such_set_xyz'" in message
    assert "tfds_<dataset>__<config>" in message
    with pytest.raises(
        registry.UnknownNameError, match="has no config 'foo'; its configs are: none"
    ):
        tfds_names.tfds_name_for("tfds_mnist__foo")
    with pytest.raises(
        registry.UnknownNameError, match=r"no config 'de_fr'.*tfds_wmt14_translate__fr_en"
    ):
        tfds_names.tfds_name_for("tfds_wmt14_translate__de_fr")


def test_other_lookup_errors_propagate(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> None:
        raise ImportError(f"cannot import the builder of {name}")

    monkeypatch.setattr(tfds_names, "tfds", types.SimpleNamespace(builder_cls=broken))
    with pytest.raises(ImportError, match="builder of mnist"):
        tfds_names.tfds_name_for("tfds_mnist")
