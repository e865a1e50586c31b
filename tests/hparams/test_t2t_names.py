"""Tests of t2t.hparams.t2t_names: Tensor2Tensor's hparam names t2t maps or lacks, as
HParams, the trainer and the README apply them."""

from __future__ import annotations

import logging
import re

import pytest

from t2t import registry
from t2t.hparams import t2t_names
from t2t.hparams.basic import basic_params1, create_hparams
from t2t.hparams.hparams import HParams, HParamsError, MissingHParamError
from t2t.hparams.t2t_names import IGNORED, MAPPED, REFUSED, T2T_HPARAMS

PROBLEM = "algorithmic_reverse_binary40_test"


def _registered_keys() -> set[str]:
    return {key for name in registry.list_hparams() for key in registry.hparams(name)()}


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# ----------------------------------------------------------------------- the table
def test_mapped_names_are_in_basic_params1_and_the_others_in_no_set():
    basic, registered = set(basic_params1()), _registered_keys()
    kinds = {kind: {n for n, e in T2T_HPARAMS.items() if e.kind == kind}
             for kind in t2t_names.KINDS}
    assert kinds[MAPPED] <= basic, kinds[MAPPED] - basic
    assert not (kinds[IGNORED] | kinds[REFUSED]) & registered
    assert {"activation_dtype", "weight_dtype", "sampling_method", "sampling_temp",
            "eval_run_autoregressive", "max_input_seq_length"} <= kinds[MAPPED]
    assert {"learning_rate_minimum", "daisy_chain_variables"} <= kinds[IGNORED]
    assert {"scheduled_sampling_prob", "prepend_mode"} <= kinds[REFUSED]
    for name, entry in T2T_HPARAMS.items():
        assert entry.use and "\n" not in entry.use, name
        if entry.kind == MAPPED:  # t2t's sets start from T2T's default
            assert basic_params1().get(name) == entry.t2t_default, name


@pytest.mark.parametrize("name", sorted(n for n, e in T2T_HPARAMS.items()
                                        if e.kind != MAPPED))
def test_a_t2t_name_at_its_default_is_accepted_silently(name, caplog):
    default = T2T_HPARAMS[name].t2t_default
    with caplog.at_level(logging.WARNING):
        added = basic_params1()
        added.add_hparam(name, default)
        parsed = basic_params1().parse(f"{name}={default}")  # None: "None"
    assert added.get(name) == default and name in parsed
    assert parsed.get(name) == (None if default is None else default)
    assert not _warnings(caplog)


def test_a_refused_value_fails_with_one_line_naming_what_to_use():
    message = ("hparam scheduled_sampling_prob=0.5 is Tensor2Tensor's and not in t2t: t2t "
               "trains with teacher forcing only (no scheduled sampling). Leave it at 0.0 "
               "or drop it.")
    hp = create_hparams("transformer_tiny")
    for attempt in (lambda: setattr(hp, "scheduled_sampling_prob", 0.5),
                    lambda: hp.add_hparam("scheduled_sampling_prob", 0.5),
                    lambda: hp.set_hparam("scheduled_sampling_prob", 0.5),
                    lambda: hp.parse("scheduled_sampling_prob=0.5")):
        with pytest.raises(HParamsError) as raised:
            attempt()
        assert str(raised.value) == message
    assert "scheduled_sampling_prob" not in hp
    hp.scheduled_sampling_prob = 0.0  # T2T's default, then another value: still refused
    for attempt in (lambda: setattr(hp, "scheduled_sampling_prob", 0.5),
                    lambda: hp.parse("scheduled_sampling_prob=0.5")):
        with pytest.raises(HParamsError, match="scheduled_sampling_prob=0.5 is Tensor2"):
            attempt()
    assert hp.scheduled_sampling_prob == 0.0
    with pytest.raises(HParamsError, match=r"prepend_mode='prepend_inputs_masked_attention'"
                                           r" .*Text2Self"):
        create_hparams("transformer_tiny", "prepend_mode=prepend_inputs_masked_attention")
    with pytest.raises(HParamsError, match="give t2t-trainer --warm_start_from=DIR"):
        hp.pretrained_model_dir = "/runs/base"


def test_an_ignored_value_is_kept_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING):
        hp = basic_params1()
        hp.symbol_modality_num_shards = 7  # Tensor2Tensor's transformer sets said 16
        HParams(**hp.values())  # a copy: the same warning is not repeated
        parsed = basic_params1().parse("daisy_chain_variables=false")
    assert hp.symbol_modality_num_shards == 7 and parsed.daisy_chain_variables is False
    assert _warnings(caplog) == [
        "hparam symbol_modality_num_shards=7 is Tensor2Tensor's; t2t ignores it: nothing to "
        "set: an embedding is one variable (--ps_min_shard_bytes splits variables over "
        "parameter servers).",
        "hparam daisy_chain_variables=False is Tensor2Tensor's; t2t ignores it: nothing to "
        "set: tf.distribute keeps the replicas' variables in sync."]


def test_reading_a_t2t_name_a_set_lacks_says_what_to_use():
    hp = create_hparams("transformer_base")
    with pytest.raises(MissingHParamError, match=re.escape(
            "Tensor2Tensor's hparam 'use_pad_remover' is not in t2t: nothing to set: padding "
            "is masked.")):
        _ = hp.use_pad_remover
    assert not hasattr(hp, "use_pad_remover") and hp.get("use_pad_remover", 1) == 1
    hp.set_hparam("use_pad_remover", True)  # T2T code setting it at its default: added
    assert hp.use_pad_remover is True


def test_other_unknown_names_still_fail_with_close_matches():
    with pytest.raises(HParamsError, match="Unknown hparam 'hiden_size'.*hidden_size") as e:
        basic_params1().parse("hiden_size=3")
    assert "Tensor2Tensor" not in str(e.value)
    with pytest.raises(HParamsError, match="Unknown hparam 'not_a_t2t_name'"):
        basic_params1().set_hparam("not_a_t2t_name", 1)


# --------------------------------------------------------------- mixed precision
def _precision(overrides: str, flag: str | None = None) -> str | None:
    return t2t_names.mixed_precision(basic_params1().parse(overrides), flag)


def test_activation_dtype_selects_mixed_precision_unless_the_flag_does():
    assert _precision("") is None
    assert _precision("activation_dtype=bfloat16") == "bfloat16"
    assert _precision("activation_dtype=float16") == "float16"
    assert _precision("", "float16") == "float16"  # float32: T2T's default, no opinion
    assert _precision("activation_dtype=bfloat16", "bfloat16") == "bfloat16"


@pytest.mark.parametrize("overrides, flag, message", [
    ("activation_dtype=bfloat16", "float16",
     "--mixed_precision=float16 contradicts hparam activation_dtype='bfloat16'"),
    ("activation_dtype=int8", None,
     "hparam activation_dtype='int8': use one of float32, bfloat16, float16."),
    ("weight_dtype=bfloat16", None,
     "hparam weight_dtype='bfloat16': t2t keeps float32 master weights; set "
     "weight_dtype=float32 and compute in 16 bits with activation_dtype=bfloat16/float16 "
     "or --mixed_precision."),
])
def test_precision_hparams_t2t_cannot_honour_are_errors(overrides, flag, message):
    with pytest.raises(HParamsError, match=re.escape(message)):
        _precision(overrides, flag)


def test_t2t_trainer_applies_activation_dtype(tmp_path):
    import keras

    from tests.helpers.binaries import run_binary

    args = [f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_test",
            f"--data_dir={tmp_path}/data", f"--output_dir={tmp_path}/run", "--dry_run"]
    try:
        mapped = run_binary("t2t-trainer", *args, "--hparams=activation_dtype=bfloat16")
        assert mapped.code == 0, mapped.err
        assert "'mixed_precision': 'bfloat16'" in mapped.out
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        clash = run_binary("t2t-trainer", *args, "--hparams=activation_dtype=bfloat16",
                           "--mixed_precision=float16")
        assert clash.code == 1 and not clash.traceback
        assert clash.err.strip().splitlines() == [
            "error: --mixed_precision=float16 contradicts hparam activation_dtype='bfloat16': "
            "give one of them (or the same precision in both)."]
    finally:
        keras.mixed_precision.set_global_policy("float32")  # other tests build models next


def test_a_trainer_given_a_float32_runtime_refuses_activation_dtype(tmp_path):
    from t2t.trainer import runtime as runtime_lib
    from t2t.trainer.trainer import Trainer

    runtime = runtime_lib.start()
    hparams = create_hparams("transformer_test", "activation_dtype=float16")
    with pytest.raises(HParamsError, match=re.escape(
            "hparam activation_dtype='float16' asks for mixed_precision='float16', but the "
            "given runtime was started without it")):
        Trainer(registry.problem(PROBLEM), "transformer", hparams, str(tmp_path),
                str(tmp_path / "run"), runtime=runtime)


# -------------------------------------------------------------------------- README
def test_readme_lists_each_t2t_hparam_t2t_maps_or_lacks():
    table = t2t_names.markdown_table()
    assert table.count("\n| `") == len(T2T_HPARAMS)
    assert ("| `scheduled_sampling_prob` | not in t2t; a value other than `0.0` is an error: "
            "t2t trains with teacher forcing only (no scheduled sampling) |") in table
    with open("docs/how-to/coming-from-t2t.md", encoding="utf-8") as f:
        readme = f.read()
    assert readme.count(t2t_names.BEGIN) == 1, (
        f"docs/how-to/coming-from-t2t.md lacks the table of Tensor2Tensor hparams: add the lines "
        f"{t2t_names.BEGIN} and {t2t_names.END}, then run "
        f"python -m docsite reference")
    block = readme.split(t2t_names.BEGIN + "\n", 1)[1].split("\n" + t2t_names.END, 1)[0]
    assert block == table, ("docs/how-to/coming-from-t2t.md's table of Tensor2Tensor hparams is stale: "
                            "run python -m docsite reference")


def test_the_flags_the_table_cites_exist():
    from t2t import config
    from t2t.bin import config_flags

    flags = {flag for cls in config.CONFIGS for _, flag in config_flags.flag_fields(cls)}
    cited = {name for entry in T2T_HPARAMS.values()
             for name in re.findall(r"--(\w+)", entry.use)}
    assert cited and cited <= flags | {"decode_hparams"}, cited - flags
