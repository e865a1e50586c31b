"""Universal Transformer hyperparameter sets, as in T2T's models/research/
universal_transformer.py (names and values as there).

`update_hparams_for_universal_transformer` adds the hparams that t2t's
universal_transformer reads, with T2T's defaults. Notes:
  - T2T sets `pos = None` (positions are added at every step instead); t2t spells it
    "none".
  - T2T's universal_transformer_big re-runs update_hparams_for_universal_transformer on
    universal_transformer_base, which its HParams refuses (the hparams exist already);
    t2t's set is what it means: base with hidden 2048, filter 8192.
  - Only the hparams the model reads are added: T2T's knobs of the parts t2t leaves out
    (mix_with_transformer, num_mixedin_layers, num_inrecurrence_layers,
    position_start_index, add_or_concat_timing_signal, add_sru, transformer_ffn_type,
    gate/highway/dwa/lstm settings, use_memory_as_final_state, daisy_chain_variables)
    are not, and neither are the sets that need those parts (skip, highway, dwa, lstm,
    gru, mix_*, concat, sru, sepconv, position timing, act_type "global", the *_tpu sets)
    nor the two ranged sets (they search over transformer_ffn_type "sepconv").
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.transformer import transformer_base, transformer_tiny


def update_hparams_for_universal_transformer(hparams: HParams) -> HParams:
    """Adds the Universal Transformer's hparams (T2T's defaults) to a Transformer set."""
    hparams.pos = "none"  # add_position_timing_signal adds them at every step
    hparams.add_hparam("recurrence_type", "basic")  # "basic" or "act"
    hparams.add_hparam("num_rec_steps", hparams.num_hidden_layers)
    hparams.add_hparam("add_position_timing_signal", True)  # at every step
    hparams.add_hparam("add_step_timing_signal", True)  # the depth signal
    hparams.add_hparam("step_timing_signal_type", "learned")  # or "sinusoid"
    hparams.add_hparam("act_type", "basic")  # or "accumulated"
    hparams.add_hparam("act_max_steps", 2 * hparams.num_hidden_layers)
    hparams.add_hparam("act_halting_bias_init", 1.0)
    hparams.add_hparam("act_epsilon", 0.01)
    hparams.add_hparam("act_loss_weight", 0.01)
    return hparams


@registry.register_hparams
def universal_transformer_base() -> HParams:
    """One layer as wide as transformer_big's (hidden 1024, filter 4096, 16 heads),
    applied 6 times: about transformer_base's capacity."""
    hp = transformer_base()
    hp.hidden_size = 1024
    hp.filter_size = 4096
    hp.num_heads = 16
    hp.layer_prepostprocess_dropout = 0.3
    return update_hparams_for_universal_transformer(hp)


@registry.register_hparams
def universal_transformer_big() -> HParams:
    hp = universal_transformer_base()
    hp.hidden_size = 2048
    hp.filter_size = 8192
    return hp


@registry.register_hparams
def universal_transformer_small() -> HParams:
    """transformer_base's sizes (hidden 512), 6 steps."""
    return update_hparams_for_universal_transformer(transformer_base())


@registry.register_hparams
def universal_transformer_tiny() -> HParams:
    """transformer_tiny's sizes (hidden 128, 4 heads), 8 steps (ACT: at most 4)."""
    hp = update_hparams_for_universal_transformer(transformer_tiny())
    hp.num_rec_steps = 8
    return hp


@registry.register_hparams
def transformer_teeny() -> HParams:
    """transformer_base with hidden 128, filter 128, 2 heads (T2T defines it with the
    Universal Transformer)."""
    hp = transformer_base()
    hp.hidden_size = 128
    hp.filter_size = 128
    hp.num_heads = 2
    return hp


@registry.register_hparams
def universal_transformer_teeny() -> HParams:
    hp = update_hparams_for_universal_transformer(transformer_teeny())
    hp.num_rec_steps = 10
    return hp


@registry.register_hparams
def universal_transformer_tall() -> HParams:
    hp = universal_transformer_small()
    hp.num_rec_steps = 16
    return hp


@registry.register_hparams
def universal_transformer_step_sinusoid_timing_tiny() -> HParams:
    hp = universal_transformer_tiny()
    hp.step_timing_signal_type = "sinusoid"
    return hp


@registry.register_hparams
def adaptive_universal_transformer_base() -> HParams:
    hp = universal_transformer_base()
    hp.recurrence_type = "act"
    return hp


@registry.register_hparams
def adaptive_universal_transformer_small() -> HParams:
    hp = universal_transformer_small()
    hp.recurrence_type = "act"
    return hp


@registry.register_hparams
def adaptive_universal_transformer_tiny() -> HParams:
    hp = universal_transformer_tiny()
    hp.recurrence_type = "act"
    return hp


def _adaptive_tall(act_loss_weight: float) -> HParams:
    hp = universal_transformer_small()
    hp.recurrence_type = "act"
    hp.num_hidden_layers = 16  # as T2T; the steps are act_max_steps
    hp.batch_size = 1024
    hp.act_max_steps = 24
    hp.act_loss_weight = act_loss_weight
    return hp


@registry.register_hparams
def adaptive_universal_transformer_tall() -> HParams:
    return _adaptive_tall(0.01)


@registry.register_hparams
def adaptive_universal_transformer_tall_actlossw0() -> HParams:
    return _adaptive_tall(0.0)


@registry.register_hparams
def adaptive_universal_transformer_tall_actlossw001() -> HParams:
    return _adaptive_tall(0.001)


def _adaptive_dropout(rate: float) -> HParams:
    hp = universal_transformer_base()
    hp.recurrence_type = "act"
    hp.layer_prepostprocess_dropout = rate
    hp.attention_dropout = rate
    hp.relu_dropout = rate
    return hp


@registry.register_hparams
def adaptive_universal_transformer_base_dropout03() -> HParams:
    return _adaptive_dropout(0.3)


@registry.register_hparams
def adaptive_universal_transformer_base_dropout05() -> HParams:
    return _adaptive_dropout(0.5)
