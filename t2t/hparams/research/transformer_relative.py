"""Relative position Transformer sets, as in T2T's models/transformer.py (v1.15).

Use them with the plain Transformer: `--model=transformer --hparams_set=transformer_relative`.
Self-attention (encoder and decoder) then learns relative position embeddings clipped
at max_relative_position (Shaw et al., 2018; t2t.layers.relative_attention) and no
sinusoidal timing signal is added (pos None).

Differences from Tensor2Tensor: none in the values; T2T's self_attention_type and
max_relative_position live in transformer_base_v1 here too (t2t.hparams.transformer).
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.transformer import transformer_base, transformer_big


def _relative(hp: HParams) -> HParams:
    hp.pos = None
    hp.self_attention_type = "dot_product_relative"
    hp.max_relative_position = 20
    return hp


@registry.register_hparams
def transformer_relative() -> HParams:
    """transformer_base with relative position self-attention instead of timing signals."""
    return _relative(transformer_base())


@registry.register_hparams
def transformer_relative_tiny() -> HParams:
    """transformer_relative at 2 layers, hidden 128, filter 512, 4 heads."""
    hp = transformer_relative()
    hp.num_hidden_layers = 2
    hp.hidden_size = 128
    hp.filter_size = 512
    hp.num_heads = 4
    return hp


@registry.register_hparams
def transformer_relative_big() -> HParams:
    """transformer_big with relative position self-attention."""
    return _relative(transformer_big())
