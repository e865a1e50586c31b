"""Tests of t2t.gin_config: parsing --gin_file/--gin_param and saving the config."""

from __future__ import annotations

import gin
import pytest

from t2t import gin_config

CONFIGURABLE = "zz_t2t_test_gin_settings"


@gin.configurable(CONFIGURABLE)
def settings(value=1, name="default"):
    return value, name


@pytest.fixture(autouse=True)
def clear_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def test_parse_gin_binding_reaches_the_configurable():
    assert settings() == (1, "default")
    gin_config.parse_gin(bindings=[f"{CONFIGURABLE}.value=3", f"{CONFIGURABLE}.name='x'"])
    assert settings() == (3, "x")
    assert settings(value=5) == (5, "x")  # explicit arguments still win


def test_config_is_not_finalized_so_it_can_be_parsed_again():
    gin_config.parse_gin(bindings=[f"{CONFIGURABLE}.value=3"])
    gin_config.parse_gin(bindings=[f"{CONFIGURABLE}.value=4"])
    assert settings()[0] == 4


def test_save_config_writes_the_binding(tmp_path):
    gin_config.parse_gin(bindings=[f"{CONFIGURABLE}.value=7"])
    settings()  # makes the binding operative
    directory = tmp_path / "out" / "nested"
    path = gin_config.save_config(str(directory))
    assert path == str(directory / gin_config.OPERATIVE_CONFIG_FILENAME)
    text = (directory / "operative_config.gin").read_text()
    assert f"{CONFIGURABLE}.value = 7" in text
    assert not (directory / "operative_config.gin.tmp").exists()


def test_save_config_writes_bindings_not_yet_used(tmp_path):
    gin_config.parse_gin(bindings=[f"{CONFIGURABLE}.name='unused'"])
    path = gin_config.save_config(str(tmp_path), "custom.gin")
    assert path == str(tmp_path / "custom.gin")
    assert f"{CONFIGURABLE}.name = 'unused'" in (tmp_path / "custom.gin").read_text()


def test_save_config_with_nothing_bound_writes_nothing(tmp_path):
    assert gin_config.save_config(str(tmp_path / "d")) is None
    assert not (tmp_path / "d").exists()


def test_parse_gin_file(tmp_path):
    config = tmp_path / "settings.gin"
    config.write_text(f"{CONFIGURABLE}.value = 11\n{CONFIGURABLE}.name = 'from_file'\n")
    gin_config.parse_gin(files=[str(config)], bindings=[f"{CONFIGURABLE}.name='override'"])
    assert settings() == (11, "override")  # bindings apply after files


@pytest.mark.parametrize("binding, gin_says", [
    ("ZzT2tTestNoSuchConfigurable.x=1", "No configurable matching"),
    (f"{CONFIGURABLE}.no_such_param=1", "doesn't have a parameter named 'no_such_param'"),
    (f"{CONFIGURABLE}.value = = 3", ""),
    ("not a binding", ""),
])
def test_bad_binding_raises_value_error_with_hint(binding, gin_says):
    with pytest.raises(ValueError) as info:
        gin_config.parse_gin(bindings=[binding])
    message = str(info.value)
    assert message.startswith("Bad gin configuration (")
    assert gin_says in message
    assert "Bindings look like --gin_param='InputConfig.shuffle_buffer_size=2048'" in message
    assert info.value.__cause__ is not None  # gin's own error is kept


def test_missing_gin_file(tmp_path):
    missing = str(tmp_path / "missing.gin")
    with pytest.raises(FileNotFoundError, match=f"--gin_file={missing!r} does not exist"):
        gin_config.parse_gin(files=[missing], bindings=[f"{CONFIGURABLE}.value=2"])
    assert settings()[0] == 1  # nothing was bound


def test_bindings_of_library_configurables_work_before_their_modules_are_imported():
    # A fresh process: the binaries parse gin before importing the trainer.
    import subprocess
    import sys

    script = (
        "from t2t import gin_config\n"
        "gin_config.parse_gin(bindings=['TrainerConfig.decode_summaries=0'])\n"
        "from t2t.trainer.trainer import TrainerConfig\n"
        "print(TrainerConfig().decode_summaries)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0"


def test_bindings_of_moved_settings_are_applied_where_they_live_now(tmp_path, caplog):
    from t2t.config import RuntimeConfig

    old_file = tmp_path / "old.gin"
    old_file.write_text("TrainerConfig.random_seed = 11\n")
    gin.clear_config()
    try:
        gin_config.parse_gin(files=[str(old_file)],
                             bindings=["TrainerConfig.deterministic = True"])
        runtime = RuntimeConfig()
        assert (runtime.random_seed, runtime.deterministic) == (11, True)
    finally:
        gin.clear_config()
    assert "TrainerConfig.random_seed is now RuntimeConfig.random_seed" in caplog.text
    assert "TrainerConfig.deterministic is now RuntimeConfig.deterministic" in caplog.text
