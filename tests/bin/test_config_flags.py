"""Flags generated from the config tree: names, types, choices, aliases, gin, given."""

import re

import gin
import pytest
from absl import flags

from t2t import config
from t2t.bin import config_flags


def _flags(*config_classes, argv=(), **kwargs):
    values = flags.FlagValues()
    for cls in config_classes:
        config_flags.define(cls, flag_values=values, **kwargs)
    values(["prog", *argv])
    return values


def test_every_flag_field_becomes_a_typed_flag():
    values = _flags(config.TrainerConfig, config.RuntimeConfig)
    assert values["train_steps"].value == 1000 and values["train_steps"].flag_type() == "int"
    assert values["deterministic"].flag_type() == "bool"
    assert values["collective_timeout"].value == 300.0  # field collective_timeout_s
    assert values["mixed_precision"].flag_type() == "string enum"
    assert "decode_summaries" not in values  # gin-only (flag=False)
    assert "Evaluate every this many steps." in values["local_eval_frequency"].help


def test_flags_given_win_over_gin_and_absent_ones_keep_it():
    values = _flags(config.TrainerConfig, config.RuntimeConfig,
                    argv=["--train_steps=7", "--master=grpc://10.0.0.2:8470"])
    gin.clear_config()
    try:
        gin.parse_config(["TrainerConfig.eval_steps = 3", "TrainerConfig.train_steps = 99"])
        trainer = config_flags.build(config.TrainerConfig, flag_values=values)
        runtime = config_flags.build(config.RuntimeConfig, flag_values=values)
    finally:
        gin.clear_config()
    assert trainer.train_steps == 7 and trainer.eval_steps == 3
    assert runtime.tpu == "grpc://10.0.0.2:8470"  # through the alias
    assert config_flags.given(config.TrainerConfig, flag_values=values) == ["--train_steps=7"]


def test_bad_values_are_refused_by_the_flag_parser():
    with pytest.raises(flags.IllegalFlagValueError, match="mixed_precision"):
        _flags(config.RuntimeConfig, argv=["--mixed_precision=int8"])
    with pytest.raises(flags.IllegalFlagValueError, match="train_steps"):
        _flags(config.TrainerConfig, argv=["--train_steps=many"])


def test_only_exclude_and_help_overrides():
    values = _flags(config.TrainerConfig, only=("train_steps",),
                    help={"train_steps": "Steps of each trial."})
    assert list(values) == ["train_steps"] and values["train_steps"].help == "Steps of each trial."
    with pytest.raises(ValueError, match="no flag fields"):
        config_flags.define(config.TrainerConfig, only=("decode_summaries",),
                            flag_values=flags.FlagValues())
    given = _flags(config.RuntimeConfig, argv=["--nosync", "--cpu_devices=2"])
    assert config_flags.given(config.RuntimeConfig, flag_values=given) == [
        "--cpu_devices=2", "--nosync"]


BINARY_CONFIGS = {
    "t2t_trainer": [(config.TaskConfig, None), (config.DataConfig, ("generate_data", "tmp_dir")),
                    (config.TrainerConfig, None), (config.RuntimeConfig, None)],
    "t2t_tuner": [(config.TaskConfig, None), (config.TunerConfig, None),
                  (config.TrainerConfig, ("train_steps", "eval_steps", "warm_start_from")),
                  (config.RuntimeConfig, ("random_seed", "mixed_precision", "cpu_devices"))],
    "t2t_decoder": [(config.TaskConfig, None)],
    "t2t_exporter": [(config.TaskConfig, None), (config.ExportConfig, None)],
    "t2t_datagen": [(config.TaskConfig, ("problem", "data_dir")),
                    (config.DataConfig, ("tmp_dir", "num_shards", "max_cases", "progress"))],
}


@pytest.mark.parametrize("binary", sorted(BINARY_CONFIGS))
def test_each_binary_shows_the_flags_of_its_configs(binary):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", f"t2t.bin.{binary}", "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-2000:]  # absl's --help exits 1
    shown = set(re.findall(r"^  --(?:\[no\])?(\w+)", result.stdout, re.M))
    for cls, only in BINARY_CONFIGS[binary]:
        for field, name in config_flags.flag_fields(cls, only):
            assert name in shown, f"{binary} lacks --{name} ({cls.__name__}.{field.name})"
    assert "tensorflow" not in result.stderr.lower()  # flags are defined without TensorFlow
