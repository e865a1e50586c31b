"""Hyperparameter sets of `imagetransformer` (Tensor2Tensor's image_transformer.py).

Values are Tensor2Tensor's (v1.15) for the sets kept, with these changes of form:
`ffn_layer` "conv_hidden_relu" is t2t's "dense_relu_dense" (the same network);
`query_shape` and `memory_flange` (T2T's local 2-D attention, in common_image_attention's
defaults) are plain hparams here; likelihoods other than the 256-way categorical (DMOL),
dilated, MoE and "separate RGB embedding" variants are left out.
`imagetransformer_tiny_cpu` is a t2t addition for tests and CPU runs.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


def image_transformer_base() -> HParams:
    """T2T's image_transformer_base: 12 decoder layers of local 1-D attention, 512 wide."""
    hp = basic_params1()
    hp.hidden_size = 512
    hp.batch_size = 1  # images
    hp.max_length = 0
    hp.dropout = 0.0
    hp.clip_grad_norm = 0.0
    hp.optimizer_adam_epsilon = 1e-9
    hp.learning_rate_schedule = "legacy"
    hp.learning_rate_decay_scheme = "noam"
    hp.learning_rate = 0.1
    hp.learning_rate_warmup_steps = 4000
    hp.initializer_gain = 0.2
    hp.num_hidden_layers = 6
    hp.initializer = "uniform_unit_scaling"
    hp.weight_decay = 0.0
    hp.optimizer_adam_beta1 = 0.9
    hp.optimizer_adam_beta2 = 0.98
    hp.label_smoothing = 0.0
    hp.norm_type = "layer"
    hp.layer_prepostprocess_dropout = 0.0
    hp.add_hparam("filter_size", 512)
    hp.add_hparam("num_heads", 8)
    hp.add_hparam("ffn_layer", "dense_relu_dense")
    hp.add_hparam("attention_dropout", 0.0)
    hp.add_hparam("relu_dropout", 0.0)
    hp.add_hparam("pos", "timing")  # 2-D timing signal over rows and sub-pixel columns
    hp.add_hparam("num_decoder_layers", 12)  # 0: num_hidden_layers
    hp.add_hparam("dec_attention_type", "local_1d")  # or "local_2d"
    hp.add_hparam("block_length", 256)  # local_1d: query block (memory: it + the one before)
    hp.add_hparam("query_shape", [8, 16])  # local_2d: rows x sub-pixel columns
    hp.add_hparam("memory_flange", [8, 16])  # local_2d: rows above, columns each side
    hp.add_hparam("unconditional", False)  # ignore the inputs (class or image)
    return hp


@registry.register_hparams
def imagetransformer_base() -> HParams:
    return image_transformer_base()


@registry.register_hparams
def imagetransformer_cifar10_base() -> HParams:
    """T2T's best CIFAR-10 set with cross entropy: 2.90 bits/dim (unconditional)."""
    hp = image_transformer_base()
    hp.batch_size = 4
    hp.num_heads = 4
    hp.num_decoder_layers = 12
    hp.block_length = 256
    hp.hidden_size = 512
    hp.filter_size = 2048
    hp.learning_rate = 0.5
    hp.learning_rate_warmup_steps = 4000
    hp.layer_preprocess_sequence = "none"
    hp.layer_postprocess_sequence = "dan"
    hp.layer_prepostprocess_dropout = 0.3
    hp.unconditional = True
    return hp


@registry.register_hparams
def imagetransformer_tiny() -> HParams:
    """T2T's imagetransformer_tiny: 2 layers of 64."""
    hp = image_transformer_base()
    hp.num_hidden_layers = 2
    hp.num_decoder_layers = 0
    hp.hidden_size = 64
    hp.batch_size = 1
    return hp


@registry.register_hparams
def imagetransformer_tiny_cpu() -> HParams:
    """28 x 28 grayscale generation on a CPU: 4 layers of 128, blocks of 112 sub-pixels
    (4 rows of 28) reading the 4 rows before, batch 16."""
    hp = image_transformer_base()
    hp.num_hidden_layers = 4
    hp.num_decoder_layers = 0
    hp.hidden_size = 128
    hp.filter_size = 512
    hp.num_heads = 4
    hp.block_length = 112
    hp.query_shape = [4, 14]
    hp.memory_flange = [4, 7]
    hp.batch_size = 16
    hp.layer_preprocess_sequence = "n"
    hp.layer_postprocess_sequence = "da"
    hp.learning_rate_schedule = "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size"
    hp.learning_rate_constant = 1.0
    hp.learning_rate_warmup_steps = 500
    hp.initializer_gain = 1.0
    return hp
