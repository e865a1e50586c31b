"""Hyperparameter sets of the LSTM sequence-to-sequence models (t2t.models.lstm).

Values follow Tensor2Tensor's `models/lstm.py` (v1.15). T2T also set
`daisy_chain_variables=False`; t2t has no daisy-chained variables, so that setting is
left out. The model registry has models of the same names (`lstm_seq2seq`); the two
registries are separate.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, REVERSE_LOG_SCALE, RangedHParams


@registry.register_hparams
def lstm_seq2seq() -> HParams:
    """LSTM encoder-decoder: 2 layers of 128 units (Tensor2Tensor's lstm_seq2seq)."""
    hparams = basic_params1()
    hparams.batch_size = 1024
    hparams.hidden_size = 128
    hparams.num_hidden_layers = 2
    hparams.initializer = "uniform_unit_scaling"
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 0.0
    return hparams


def lstm_attention_base() -> HParams:
    """lstm_seq2seq plus the attention settings (not registered, as in T2T).

    attention_layer_size: width of the attention vector (concat(cell output, context)
    projected without bias); output_attention: the decoder outputs that vector (True)
    or the top LSTM layer's output (False); num_heads: attention layers over one shared
    mechanism, concatenated.
    """
    hparams = lstm_seq2seq()
    hparams.add_hparam("attention_layer_size", hparams.hidden_size)
    hparams.add_hparam("output_attention", True)
    hparams.add_hparam("num_heads", 1)
    return hparams


@registry.register_hparams
def lstm_bahdanau_attention() -> HParams:
    """Additive (Bahdanau) attention over the encoder outputs."""
    hparams = lstm_attention_base()
    hparams.add_hparam("attention_mechanism", "bahdanau")
    return hparams


@registry.register_hparams
def lstm_luong_attention() -> HParams:
    """Multiplicative (Luong) attention over the encoder outputs."""
    hparams = lstm_attention_base()
    hparams.add_hparam("attention_mechanism", "luong")
    return hparams


@registry.register_hparams
def lstm_attention() -> HParams:
    """Tensor2Tensor's backwards-compatible name: Bahdanau attention."""
    return lstm_bahdanau_attention()


@registry.register_hparams
def lstm_bahdanau_attention_multi() -> HParams:
    """Bahdanau attention with 4 attention heads."""
    hparams = lstm_bahdanau_attention()
    hparams.num_heads = 4
    return hparams


@registry.register_hparams
def lstm_luong_attention_multi() -> HParams:
    """Luong attention with 4 attention heads."""
    hparams = lstm_luong_attention()
    hparams.num_heads = 4
    return hparams


@registry.register_ranged_hparams
def lstm_seq2seq_range(rhp: RangedHParams) -> None:
    """A search space around lstm_seq2seq (and the lstm_*_attention sets): the legacy
    schedule multiplies learning_rate by 0.002 for Adam, so 0.05-2 means 1e-4-4e-3."""
    rhp.set_float("learning_rate", 0.05, 2.0, scale=LOG_SCALE)
    rhp.set_discrete("learning_rate_warmup_steps", [100, 400, 1000, 4000], scale=LOG_SCALE)
    rhp.set_float("dropout", 0.0, 0.5)
    rhp.set_int("num_hidden_layers", 1, 4)
    rhp.set_discrete("hidden_size", [64, 128, 256, 512], scale=LOG_SCALE)
    rhp.set_float("optimizer_adam_beta2", 0.98, 0.999, scale=REVERSE_LOG_SCALE)
    rhp.set_float("clip_grad_norm", 0.5, 10.0, scale=LOG_SCALE)
