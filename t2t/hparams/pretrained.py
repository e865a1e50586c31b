"""Hyperparameter sets of published architectures read by t2t-import: Marian, T5.

t2t's transformer as Marian (OPUS-MT) and T5 v1.0 / v1.1, at their base sizes. An imported
run records one of these with its checkpoint's sizes as overrides (run.json), so
t2t-trainer, t2t-decoder and t2t-exporter rebuild exactly the imported model.

Fine-tuning settings: Adam at a constant 1e-4 after 100 warm-up steps (about what
OPUS-MT and T5 fine-tuning recipes use); raise it for a model trained from scratch.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.transformer import transformer_base


def _fine_tuning(hp: HParams) -> HParams:
    hp.learning_rate_schedule = "constant*linear_warmup"
    hp.learning_rate_constant = 1e-4
    hp.learning_rate_warmup_steps = 100
    hp.optimizer_adam_beta2 = 0.999
    hp.optimizer_adam_epsilon = 1e-8
    hp.use_target_space_embedding = False
    return hp


@registry.register_hparams
def transformer_opus_mt() -> HParams:
    """Marian's transformer as OPUS-MT publishes it (Helsinki-NLP/opus-mt-*): 6 + 6
    post-norm layers, hidden 512, 8 heads, filter 2048, swish, biases on every
    projection, sinusoidal positions in Marian's layout, embeddings scaled by
    sqrt(hidden) and shared with the softmax, a bias on the logits, norm epsilon 1e-5."""
    hp = _fine_tuning(transformer_base())
    hp.layer_preprocess_sequence = "none"
    hp.layer_postprocess_sequence = "dan"
    hp.norm_epsilon = 1e-5
    hp.pos = "sinusoid"
    hp.ffn_activation = "swish"
    hp.attention_use_bias = True
    hp.softmax_bias = True
    hp.multiply_embedding_mode = "sqrt_depth"
    hp.shared_embedding_and_softmax_weights = True
    hp.attention_dropout = 0.0
    hp.relu_dropout = 0.0
    hp.layer_prepostprocess_dropout = 0.1
    return hp


@registry.register_hparams
def transformer_t5() -> HParams:
    """T5 v1.0 (t5-small's shape): 6 + 6 pre-norm layers with RMS norms, hidden 512,
    8 heads of 64, filter 2048, relu without biases, relative position buckets (32,
    up to 128), unscaled dot products, unscaled embeddings shared with the softmax
    (whose input is scaled by hidden**-0.5), and the pad embedding as the decoder's start."""
    hp = _fine_tuning(transformer_base())
    hp.layer_preprocess_sequence = "n"
    hp.layer_postprocess_sequence = "da"
    hp.norm_type = "rms"
    hp.norm_epsilon = 1e-6
    hp.pos = "relative_buckets"
    hp.attention_scale_queries = False
    hp.ffn_use_bias = False
    hp.multiply_embedding_mode = "none"
    hp.shared_embedding_and_softmax_weights = True
    hp.multiply_softmax_input_mode = "rsqrt_depth"
    hp.decoder_start_embedding = "pad"
    hp.attention_dropout = 0.1
    hp.relu_dropout = 0.1
    hp.layer_prepostprocess_dropout = 0.1
    return hp


@registry.register_hparams
def transformer_t5_v1_1() -> HParams:
    """T5 v1.1 (t5-v1_1-small's shape: hidden 512, 6 heads of 64, filter 1024, 8 + 8
    layers): gated-GELU (tanh) feed-forward layers and a softmax of its own (embeddings
    shared by encoder and decoder only, no rescaling)."""
    hp = transformer_t5()
    hp.num_heads = 6
    hp.attention_key_channels = hp.attention_value_channels = 384
    hp.filter_size = 1024
    hp.num_hidden_layers = 8
    hp.ffn_layer = "dense_gated_dense"
    hp.ffn_activation = "gelu_tanh"
    hp.shared_embedding_and_softmax_weights = False
    hp.shared_embedding = True
    hp.multiply_softmax_input_mode = "none"
    return hp
