"""T5ForConditionalGeneration (T5 v1.0, v1.1; mT5's layout) -> t2t's transformer with
transformer_t5 / transformer_t5_v1_1's options.

T5: pre-norm with RMS norms (no bias), projections without biases, unscaled dot
products, relative position buckets (one table per stack, in its first layer), relu
(v1.0) or gated-GELU (v1.1) feed-forward layers, unscaled embeddings shared by encoder
and decoder; v1.0 ties the softmax to them and scales its input by d_model**-0.5, v1.1
has its own. The decoder starts from the embedding of the pad id 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from t2t.pretrained import weight_mapping
from t2t.pretrained.weight_mapping import UnsupportedCheckpointError

ARCHITECTURES = ("T5ForConditionalGeneration", "MT5ForConditionalGeneration")
# Hugging Face's dense_act_fn (from feed_forward_proj) -> hparams.ffn_activation
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh":
               "gelu_tanh", "silu": "swish", "swish": "swish"}


def feed_forward(config: dict[str, Any]) -> tuple[bool, str]:
    """(gated, hparams.ffn_activation) of config's feed_forward_proj ("relu", "gated-gelu")."""
    projection = config.get("feed_forward_proj", "relu")
    parts = projection.split("-")
    gated = parts[0] == "gated"
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if len(parts) > 2 or (len(parts) == 2 and not gated) or activation not in ACTIVATIONS:
        raise UnsupportedCheckpointError(
            f"feed_forward_proj={projection!r} is not supported: use relu, gelu, gated-gelu, "
            f"gated-relu or gated-silu.")
    return gated, ACTIVATIONS[activation]


def tied_softmax(config: dict[str, Any], tensors: dict[str, np.ndarray]) -> bool:
    """Whether the softmax is the shared embedding: no lm_head.weight, or an equal one."""
    head = tensors.get("lm_head.weight")
    return head is None or (head.shape == tensors["shared.weight"].shape
                            and np.array_equal(head, tensors["shared.weight"]))


def scales_softmax_input(config: dict[str, Any]) -> bool:
    """T5 v1.0's d_model**-0.5 before a tied softmax: transformers >= 5 records it as
    scale_decoder_outputs; earlier config.json files say it with tie_word_embeddings."""
    if "scale_decoder_outputs" in config:
        return bool(config["scale_decoder_outputs"])
    return bool(config.get("tie_word_embeddings", True))


def hparams_overrides(config: dict[str, Any], tensors: dict[str, np.ndarray]) -> dict[str, Any]:
    """transformer_t5's overrides reproducing `config` and the checkpoint's tying."""
    if config.get("is_decoder") or config.get("model_type") == "umt5":
        raise UnsupportedCheckpointError(
            f"model_type={config.get('model_type')!r} (is_decoder={config.get('is_decoder')}) "
            f"is not supported: t2t-import reads T5 / mT5 encoder-decoders.")
    gated, activation = feed_forward(config)
    tied = tied_softmax(config, tensors)
    heads, key_depth = config["num_heads"], config["d_kv"]
    decoder_layers = config.get("num_decoder_layers") or config["num_layers"]
    return {
        "hidden_size": config["d_model"],
        "num_heads": heads,
        "attention_key_channels": heads * key_depth,
        "attention_value_channels": heads * key_depth,
        "filter_size": config["d_ff"],
        "num_encoder_layers": config["num_layers"],
        "num_decoder_layers": decoder_layers,
        "num_hidden_layers": max(config["num_layers"], decoder_layers),
        "ffn_layer": "dense_gated_dense" if gated else "dense_relu_dense",
        "ffn_activation": activation,
        "relative_attention_num_buckets": config.get("relative_attention_num_buckets", 32),
        "relative_attention_max_distance": config.get("relative_attention_max_distance", 128),
        "norm_epsilon": float(config.get("layer_norm_epsilon", 1e-6)),
        "shared_embedding_and_softmax_weights": tied,
        "shared_embedding": not tied,
        "multiply_softmax_input_mode": "rsqrt_depth" if tied and scales_softmax_input(config)
        else "none",
        "layer_prepostprocess_dropout": float(config.get("dropout_rate", 0.1)),
        "attention_dropout": float(config.get("dropout_rate", 0.1)),
        "relu_dropout": float(config.get("dropout_rate", 0.1)),
    }


def _attention(prefix: str, sublayer: str) -> dict[str, str]:
    mapped = {f"{sublayer}.inner.{t2t}.kernel": f"{prefix}.{hf}.weight"
              for t2t, hf in (("q", "q"), ("k", "k"), ("v", "v"), ("output_transform", "o"))}
    return mapped


def layer_names(stack: str, index: int, gated: bool) -> dict[str, str]:
    """{t2t variable path under the model: Hugging Face name} of one block."""
    hf = f"{stack}.block.{index}.layer"
    mapped = _attention(f"{hf}.0.SelfAttention", "self_attention")
    mapped["self_attention.pre.norm.scale"] = f"{hf}.0.layer_norm.weight"
    ffn = 1
    if stack == "decoder":
        mapped.update(_attention(f"{hf}.1.EncDecAttention", "encdec_attention"))
        mapped["encdec_attention.pre.norm.scale"] = f"{hf}.1.layer_norm.weight"
        ffn = 2
    dense = f"{hf}.{ffn}.DenseReluDense"
    if gated:
        mapped["ffn.inner.inner.kernel"] = f"{dense}.wi_0.weight"
        mapped["ffn.inner.linear.kernel"] = f"{dense}.wi_1.weight"
    else:
        mapped["ffn.inner.inner.kernel"] = f"{dense}.wi.weight"
    mapped["ffn.inner.outer.kernel"] = f"{dense}.wo.weight"
    mapped["ffn.pre.norm.scale"] = f"{hf}.{ffn}.layer_norm.weight"
    return {f"{stack}.stack_layers.{index}.{k}": v for k, v in mapped.items()}


def assignments(model: Any, tensors: dict[str, np.ndarray], config: dict[str, Any],
                checkpoint_ids: list[int]) -> weight_mapping.Assignments:
    """Every t2t variable of `model` with its value from T5's `tensors`. Embedding rows
    past the tokenizer's ids are kept (checkpoint_ids is the identity here)."""
    result = weight_mapping.Assignments(tensors)
    embedding = result.take("shared.weight")[checkpoint_ids]
    for alias in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        result.check_equal(alias, tensors["shared.weight"])
    modality = model.targets_modality
    result.put(modality.embedding, embedding, "shared.weight")
    if tied_softmax(config, tensors):
        result.check_equal("lm_head.weight", tensors["shared.weight"])
    else:
        result.put(modality.softmax_weights, result.take("lm_head.weight")[checkpoint_ids],
                   "lm_head.weight")
    gated, _ = feed_forward(config)
    decoder_layers = config.get("num_decoder_layers") or config["num_layers"]
    for stack, count in (("encoder", config["num_layers"]), ("decoder", decoder_layers)):
        for index in range(count):
            result.put_paths(model, layer_names(stack, index, gated), transpose_kernels=True)
        table = f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        result.put(weight_mapping.resolve(model, f"{stack}.position_bias.embeddings"),
                   result.take(table), table)
        result.put(weight_mapping.resolve(model, f"{stack}.final.norm.scale"),
                   result.take(f"{stack}.final_layer_norm.weight"), f"{stack}.final_layer_norm")
    return result
