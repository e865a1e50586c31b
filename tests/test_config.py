"""The config tree: one declaration per setting, gin-bindable, never edited when used."""

import dataclasses

import gin
import pytest

from t2t import config


def test_every_setting_has_help_and_a_default():
    for cls in config.CONFIGS:
        for field in dataclasses.fields(cls):
            assert field.metadata.get("help"), f"{cls.__name__}.{field.name} has no help"
        cls()  # every field has a default


def test_experiment_config_is_a_tree_of_the_configs():
    tree = config.ExperimentConfig().to_dict()
    assert set(tree) == {"task", "data", "trainer", "runtime", "input"}
    assert tree["trainer"]["train_steps"] == 1000 and tree["runtime"]["sync"] is True


def test_gin_binds_the_fields():
    gin.clear_config()
    try:
        gin.parse_config(["RuntimeConfig.random_seed = 5", "InputConfig.seed = 3"])
        assert config.RuntimeConfig().random_seed == 5 and config.InputConfig().seed == 3
    finally:
        gin.clear_config()
    assert config.RuntimeConfig().random_seed is None


@pytest.mark.parametrize("text, fragment", [
    ("beam_sise=2", "Did you mean: beam_size"),
    ("beam_size=two", "beam_size"),
    ("beam_size=0,top_p=1.5", "beam_size=0 (need >= 1); top_p=1.5"),
    ("temperature=0.7,beam_size=4", "needs beam_size=1"),
])
def test_decode_hparams_errors_name_the_value(text, fragment):
    with pytest.raises(config.DecodeHParamsError, match=fragment.replace("(", r"\(")
                       .replace(")", r"\)")):
        config.DecodeHParams.parse(text)


def test_decode_hparams_parse_and_help():
    parsed = config.DecodeHParams.parse("beam_size=2,alpha=0.1,return_beams=true")
    assert (parsed.beam_size, parsed.alpha, parsed.return_beams) == (2, 0.1, True)
    assert config.DecodeHParams.help_string().startswith("beam_size=4,alpha=0.6,")


def test_moved_settings_point_to_existing_fields():
    for old, new in config.MOVED_SETTINGS.items():
        cls_name, field = new.split(".")
        assert field in {f.name for f in dataclasses.fields(getattr(config, cls_name))}
        assert field not in {f.name for f in dataclasses.fields(config.TrainerConfig)}, old
