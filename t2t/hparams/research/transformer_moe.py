"""transformer_moe hyperparameter sets, as in T2T's models/research/transformer_moe.py.

T2T's values, with the mixture-of-experts defaults T2T kept in basic_params1
(moe_hidden_sizes "2048", moe_num_experts 64, moe_k 2, moe_loss_coef 1e-2) and the
attention hparams of its add_standard_attention_hparams. The model is in
t2t.models.research.transformer_moe (layer_types is explained there).

Differences from Tensor2Tensor:
- transformer_moe_prepend_8k is left out: it needs prepend_mode and local /
  memory-compressed attention ("locm", "redm"), which t2t does not implement; so are
  the hparams only those use (attention_loc_block_length, attention_red_*,
  prepend_mode) and num_sampled_classes (sampled softmax).
- transformer_moe_12k leaves out T2T's `factored_logit = True` (a misspelling of
  factored_logits that nothing in T2T read).
- transformer_moe_8k and _12k keep T2T's default_ff "sep", which t2t refuses in decoder
  layers (it sees future targets): override layer_types or default_ff to use them.
- transformer_moe_tiny is t2t's own (T2T has no small set): 2 + 2 layers of hidden 64
  with 4 experts in the second layer of each stack.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


@registry.register_hparams
def transformer_moe_base() -> HParams:
    """5 layers, hidden 512, noam schedule; layer_types "" is a plain Transformer."""
    hp = basic_params1()
    hp.norm_type = "layer"
    hp.hidden_size = 512
    hp.batch_size = 4096
    hp.max_length = 2001
    hp.max_input_seq_length = 2000
    hp.max_target_seq_length = 2000
    hp.dropout = 0.0
    hp.clip_grad_norm = 0.0  # no gradient clipping
    hp.optimizer_adam_epsilon = 1e-9
    hp.learning_rate_decay_scheme = "noam"
    hp.learning_rate = 0.1
    hp.learning_rate_warmup_steps = 2000
    hp.initializer_gain = 1.0
    hp.num_hidden_layers = 5
    hp.initializer = "uniform_unit_scaling"
    hp.weight_decay = 0.0
    hp.optimizer_adam_beta1 = 0.9
    hp.optimizer_adam_beta2 = 0.98
    hp.label_smoothing = 0.0
    hp.shared_embedding_and_softmax_weights = True
    hp.layer_preprocess_sequence = "n"
    hp.layer_postprocess_sequence = "da"
    hp.add_hparam("pos", "timing")  # "timing" or None
    hp.add_hparam("proximity_bias", False)
    # T2T's add_standard_attention_hparams (those of the layer types t2t implements).
    hp.add_hparam("num_heads", 8)
    hp.add_hparam("attention_key_channels", 0)  # 0: hidden_size
    hp.add_hparam("attention_value_channels", 0)
    hp.add_hparam("attention_dropout", 0.0)
    hp.add_hparam("filter_size", 2048)
    hp.add_hparam("relu_dropout", 0.0)
    # Mixture of experts (T2T's basic_params1 defaults).
    hp.add_hparam("moe_hidden_sizes", "2048")  # each expert's hidden sizes, comma-separated
    hp.add_hparam("moe_num_experts", 64)
    hp.add_hparam("moe_k", 2)  # experts per token
    hp.add_hparam("moe_loss_coef", 1e-2)
    # The architecture: see t2t.models.research.transformer_moe.
    hp.add_hparam("layer_types", "")
    hp.add_hparam("default_att", "a")
    hp.add_hparam("default_ff", "fc")
    return hp


@registry.register_hparams
def transformer_moe_8k() -> HParams:
    """Long sequences: 8192 tokens a batch, hidden 1024, separable-convolution blocks."""
    hp = transformer_moe_base()
    hp.batch_size = 8192
    hp.max_length = 0  # max_length == batch_size
    hp.eval_drop_long_sequences = True
    hp.min_length_bucket = 256
    hp.default_ff = "sep"
    hp.hidden_size = 1024
    return hp


@registry.register_hparams
def transformer_moe_8k_lm() -> HParams:
    """Language model: no encoder; decoder a-sepm / a-sepm / a-moe / a-sepm / a-sepm."""
    hp = transformer_moe_8k()
    hp.default_ff = "sepm"
    hp.layer_types = "#a/a/a-moe/a/a"
    return hp


@registry.register_hparams
def transformer_moe_2k() -> HParams:
    """Encoder a-sep x 5; decoder a-a-sepm x 2, a-a-moe, a-a-sepm x 2; batch 2048."""
    hp = transformer_moe_8k()
    hp.batch_size = 2048
    hp.default_ff = "sep"
    hp.layer_types = "a/a/a/a/a#a-sepm/a-sepm/a-moe/a-sepm/a-sepm"
    return hp


@registry.register_hparams
def transformer_moe_12k() -> HParams:
    """transformer_moe_8k with 12000 tokens a batch."""
    hp = transformer_moe_8k()
    hp.batch_size = 12000
    return hp


@registry.register_hparams
def transformer_moe_tiny() -> HParams:
    """t2t's CPU-sized set: hidden 64, 4 heads, 4 experts of hidden 128 (k 2) in the
    second of two layers of each stack."""
    hp = transformer_moe_base()
    hp.num_hidden_layers = 2
    hp.hidden_size = 64
    hp.filter_size = 128
    hp.num_heads = 4
    hp.moe_hidden_sizes = "128"
    hp.moe_num_experts = 4
    hp.layer_types = "a/a-moe#a/a-moe"
    return hp
