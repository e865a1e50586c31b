"""Tests of t2t.bin.flag_help: every binary's --help lists its own flags, grouped, one
line each with defaults (absl's own --help printed only "Try --helpfull")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from t2t.bin import flag_help

BIN = os.path.dirname(sys.executable)


def _help(binary: str, arg: str = "--help") -> str:
    result = subprocess.run([os.path.join(BIN, binary), arg], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, COLUMNS="100"))
    assert result.returncode == 0, result.stderr
    assert "Try --helpfull" not in result.stdout
    return result.stdout


def _groups(text: str) -> dict[str, list[str]]:
    """{group title: [flag names]} of a --help text."""
    groups: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            title = line[:-1]
        elif line.startswith("  --") and title:
            name = line.split()[0].removeprefix("--").removeprefix("[no]").split("=")[0]
            groups.setdefault(title, []).append(name)
    return groups


def test_trainer_help_groups_its_own_flags_with_defaults():
    text = _help("t2t-trainer")
    assert text.startswith("t2t-trainer: train (and evaluate) any registered model")
    groups = _groups(text)
    assert {"problem", "model", "hparams_set", "hparams", "output_dir"} <= set(
        groups["Problem, model and run"])
    assert {"data_dir", "generate_data", "tmp_dir", "data_mirror"} <= set(groups["Data"])
    assert {"train_steps", "eval_steps", "schedule"} <= set(groups["Training"])
    assert {"worker_gpu", "cpu_devices", "use_tpu", "mixed_precision"} <= set(
        groups["Distribution and devices"])
    assert {"t2t_usr_dir", "gin_param", "verbosity"} <= set(groups["General"])
    assert "alsologtostderr" not in text and "test_srcdir" not in text  # absl's, TF's
    lines = text.splitlines()
    assert any(line.startswith("  --train_steps") and "(default: 1000)" in line for line in lines)
    assert any(line.startswith("  --tpu ") and "(also --cloud_tpu_name, --master)" in text
               for line in lines)
    assert "--helpfull lists every flag" in text


@pytest.mark.parametrize("binary, group, names", [
    ("t2t-decoder", "Decoding", {"decode_from_file", "decode_hparams", "score_file"}),
    ("t2t-exporter", "Export", {"export_dir", "skip_parity_check"}),
    ("t2t-datagen", "Data", {"data_dir", "tmp_dir"}),
    ("t2t-avg-all", "Options", {"model_dir", "n"}),
    ("t2t-bleu", "Options", {"translation", "reference"}),
    ("t2t-launch", "Options", {"num_workers", "num_ps"}),
])
def test_every_binary_lists_its_flags(binary, group, names):
    assert names <= set(_groups(_help(binary, "-h"))[group])


def test_first_sentence_keeps_abbreviations():
    assert flag_help.first_sentence("Decode each line. A language model continues.") == \
        "Decode each line."
    assert flag_help.first_sentence("Overrides, e.g. 'num_heads=2'. More.") == \
        "Overrides, e.g. 'num_heads=2'."
    assert flag_help.first_sentence("No full stop at all") == "No full stop at all"



def test_group_of_a_flag_declared_generated_or_neither():
    from absl import flags

    from t2t import config
    from t2t.bin import config_flags

    config_flags.define(config.TrainerConfig, only=("train_steps",),
                        flag_values=flags.FlagValues())
    assert config_flags.config_class_name("train_steps") == "TrainerConfig"
    assert flag_help.group_of("train_steps") == "Training"  # from its config class
    assert flag_help.group_of("registry_help") == flag_help.GENERAL  # declared
    assert config_flags.config_class_name("zz_no_such_flag") is None
    assert flag_help.group_of("zz_no_such_flag") == flag_help.OTHER

def test_help_spellings_and_flags_a_binary_does_not_use():
    text = _help("t2t-bleu", "--help=true")
    assert "--translation" in text
    for unused in ("t2t_usr_dir", "gin_param", "registry_help", "data_mirror"):
        assert f"--{unused}" not in text and f"--[no]{unused}" not in text
    assert flag_help.HELP_ARG.match("--helpshort") and flag_help.HELP_ARG.match("-?")
    assert not flag_help.HELP_ARG.match("--helpfull") and not flag_help.HELP_ARG.match("--nohelp")
