"""Transformer hyperparameter sets, with Tensor2Tensor's values (v1.15)."""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, RangedHParams


@registry.register_hparams
def transformer_base_v1() -> HParams:
    """The original base Transformer settings (post-norm, noam schedule)."""
    hp = basic_params1()
    hp.norm_type = "layer"
    hp.hidden_size = 512
    hp.batch_size = 4096
    hp.max_length = 256
    hp.clip_grad_norm = 0.0  # no gradient clipping
    hp.optimizer_adam_epsilon = 1e-9
    hp.learning_rate_schedule = "legacy"
    hp.learning_rate_decay_scheme = "noam"
    hp.learning_rate = 0.1
    hp.learning_rate_warmup_steps = 4000
    hp.initializer_gain = 1.0
    hp.num_hidden_layers = 6
    hp.initializer = "uniform_unit_scaling"
    hp.weight_decay = 0.0
    hp.optimizer_adam_beta1 = 0.9
    hp.optimizer_adam_beta2 = 0.98
    hp.label_smoothing = 0.1
    hp.shared_embedding_and_softmax_weights = True
    # Transformer-specific hparams.
    hp.add_hparam("filter_size", 2048)
    hp.add_hparam("num_encoder_layers", 0)  # 0: num_hidden_layers
    hp.add_hparam("num_decoder_layers", 0)
    hp.add_hparam("num_heads", 8)
    hp.add_hparam("attention_key_channels", 0)  # 0: hidden_size
    hp.add_hparam("attention_value_channels", 0)
    hp.add_hparam("ffn_layer", "dense_relu_dense")
    hp.add_hparam("attention_dropout", 0.0)
    hp.add_hparam("relu_dropout", 0.0)
    # "timing" (T2T), "sinusoid" (Vaswani's exponents, Marian), "relative_buckets" (T5), "none"
    hp.add_hparam("pos", "timing")
    hp.add_hparam("use_target_space_embedding", True)
    hp.add_hparam("self_attention_type", "dot_product")  # or "dot_product_relative"
    hp.add_hparam("max_relative_position", 0)  # its clipping distance (transformer_relative: 20)
    # The options of published architectures (t2t-import: Marian / OPUS-MT, T5); the
    # defaults are Tensor2Tensor's Transformer.
    hp.add_hparam("relative_attention_num_buckets", 32)  # pos=relative_buckets (T5)
    hp.add_hparam("relative_attention_max_distance", 128)
    hp.add_hparam("attention_use_bias", False)  # q/k/v/output biases (Marian)
    hp.add_hparam("attention_scale_queries", True)  # False: T5's unscaled dot product
    hp.add_hparam("ffn_activation", "relu")  # relu, gelu, gelu_tanh (T5 v1.1), swish (Marian)
    hp.add_hparam("ffn_use_bias", True)  # False: T5
    hp.add_hparam("softmax_bias", False)  # a bias on the logits (Marian's final_logits_bias)
    hp.add_hparam("multiply_softmax_input_mode", "none")  # "rsqrt_depth": T5 v1.0
    hp.add_hparam("decoder_start_embedding", "zeros")  # "pad": id 0's embedding (T5)
    return hp


@registry.register_hparams
def transformer_base_v2() -> HParams:
    """Pre-norm ("n" before, "da" after each sublayer) with attention/relu dropout."""
    hp = transformer_base_v1()
    hp.layer_preprocess_sequence = "n"
    hp.layer_postprocess_sequence = "da"
    hp.layer_prepostprocess_dropout = 0.1
    hp.attention_dropout = 0.1
    hp.relu_dropout = 0.1
    hp.learning_rate_warmup_steps = 8000
    hp.learning_rate = 0.2
    return hp


@registry.register_hparams
def transformer_base_v3() -> HParams:
    """v2 with the factored schedule constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size."""
    hp = transformer_base_v2()
    hp.optimizer_adam_beta2 = 0.997
    hp.learning_rate_schedule = "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size"
    hp.learning_rate_constant = 2.0
    return hp


@registry.register_hparams
def transformer_base() -> HParams:
    """The default Transformer: 6 layers, hidden 512, filter 2048, 8 heads."""
    return transformer_base_v3()


@registry.register_hparams
def transformer_big() -> HParams:
    """Hidden 1024, filter 4096, 16 heads, dropout 0.3 (8 GPUs in the paper)."""
    hp = transformer_base()
    hp.hidden_size = 1024
    hp.filter_size = 4096
    hp.batch_size = 2048
    hp.num_heads = 16
    hp.layer_prepostprocess_dropout = 0.3
    return hp


@registry.register_hparams
def transformer_big_single_gpu() -> HParams:
    hp = transformer_big()
    hp.layer_prepostprocess_dropout = 0.1
    hp.learning_rate_warmup_steps = 16000
    return hp


@registry.register_hparams
def transformer_base_single_gpu() -> HParams:
    hp = transformer_base()
    hp.batch_size = 1024
    hp.learning_rate_schedule = "constant*linear_warmup*rsqrt_decay"
    hp.learning_rate_constant = 0.1
    hp.learning_rate_warmup_steps = 16000
    return hp


@registry.register_hparams
def transformer_small() -> HParams:
    hp = transformer_base()
    hp.num_hidden_layers = 2
    hp.hidden_size = 256
    hp.filter_size = 1024
    hp.num_heads = 4
    return hp


@registry.register_hparams
def transformer_tiny() -> HParams:
    hp = transformer_base()
    hp.num_hidden_layers = 2
    hp.hidden_size = 128
    hp.filter_size = 512
    hp.num_heads = 4
    return hp


@registry.register_hparams
def transformer_test() -> HParams:
    """A very small Transformer for unit tests."""
    hp = transformer_base()
    hp.num_hidden_layers = 2
    hp.hidden_size = 16
    hp.filter_size = 8
    hp.num_heads = 2
    return hp


@registry.register_ranged_hparams
def transformer_base_range(rhp: RangedHParams) -> None:
    """Tensor2Tensor's search space around transformer_base."""
    rhp.set_float("learning_rate", 0.3, 3.0, scale=LOG_SCALE)
    rhp.set_discrete("learning_rate_warmup_steps", [1000, 2000, 4000, 8000, 16000])
    rhp.set_float("initializer_gain", 0.5, 2.0)
    rhp.set_float("optimizer_adam_beta1", 0.85, 0.95)
    rhp.set_float("optimizer_adam_beta2", 0.97, 0.99)
    rhp.set_float("weight_decay", 0.0, 1e-4)


@registry.register_ranged_hparams
def transformer_tiny_range(rhp: RangedHParams) -> None:
    """A small search space around transformer_tiny, for short runs (a CPU demo: a few
    hundred steps on an algorithmic problem). transformer_tiny's schedule is
    constant * linear_warmup * rsqrt_decay * rsqrt_hidden_size, so the rate is
    learning_rate_constant (and warmup), not learning_rate."""
    rhp.set_float("learning_rate_constant", 0.3, 5.0, scale=LOG_SCALE)
    rhp.set_discrete("learning_rate_warmup_steps", [100, 400, 1600, 8000], scale=LOG_SCALE)
    rhp.set_float("layer_prepostprocess_dropout", 0.0, 0.3)
    rhp.set_int("num_hidden_layers", 1, 3)
    rhp.set_discrete("hidden_size", [64, 128])
