"""MarianMTModel (OPUS-MT) -> t2t's transformer with transformer_opus_mt's options.

Marian: post-norm encoder-decoder, q/k/v/output projections and feed-forward layers with
biases, swish (or relu/gelu), sinusoidal positions with sines in the first half of the
channels (hparams.pos "sinusoid"), embeddings scaled by sqrt(d_model), one embedding
shared by encoder, decoder and softmax, and final_logits_bias on the logits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from t2t.pretrained import weight_mapping
from t2t.pretrained.weight_mapping import UnsupportedCheckpointError

ARCHITECTURES = ("MarianMTModel",)
# Hugging Face activation_function -> hparams.ffn_activation
ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu",
               "gelu_new": "gelu_tanh"}


def _same(config: dict[str, Any], encoder_key: str, decoder_key: str) -> Any:
    if config[encoder_key] != config[decoder_key]:
        raise UnsupportedCheckpointError(
            f"{encoder_key}={config[encoder_key]} differs from {decoder_key}="
            f"{config[decoder_key]}: t2t's transformer has one value for both (supported: "
            f"equal values, as every OPUS-MT model has).")
    return config[encoder_key]


def hparams_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """transformer_opus_mt's overrides reproducing `config` (config.json as a dict);
    UnsupportedCheckpointError naming an option t2t cannot express."""
    activation = config.get("activation_function", "swish")
    if activation not in ACTIVATIONS:
        raise UnsupportedCheckpointError(
            f"activation_function={activation!r} is not supported: use one of {sorted(ACTIVATIONS)}.")
    checks = (("share_encoder_decoder_embeddings", True), ("tie_word_embeddings", True),
              ("normalize_before", False), ("add_bias_logits", False))
    for key, supported in checks:
        if config.get(key, supported) != supported:
            raise UnsupportedCheckpointError(
                f"{key}={config[key]!r} is not supported (OPUS-MT's Marian models have "
                f"{key}={supported}).")
    decoder_vocab = config.get("decoder_vocab_size") or config["vocab_size"]
    if decoder_vocab != config["vocab_size"]:
        raise UnsupportedCheckpointError(
            f"decoder_vocab_size={decoder_vocab} differs from vocab_size={config['vocab_size']} "
            f"(separate vocabularies): t2t-import supports one joint vocabulary.")
    if config.get("decoder_start_token_id", config["pad_token_id"]) != config["pad_token_id"]:
        raise UnsupportedCheckpointError(
            f"decoder_start_token_id={config['decoder_start_token_id']} is not the pad id "
            f"{config['pad_token_id']}: t2t's decoder starts from the pad (zero) embedding.")
    return {
        "hidden_size": config["d_model"],
        "num_encoder_layers": config["encoder_layers"],
        "num_decoder_layers": config["decoder_layers"],
        "num_hidden_layers": max(config["encoder_layers"], config["decoder_layers"]),
        "num_heads": _same(config, "encoder_attention_heads", "decoder_attention_heads"),
        "filter_size": _same(config, "encoder_ffn_dim", "decoder_ffn_dim"),
        "ffn_activation": ACTIVATIONS[activation],
        "multiply_embedding_mode": "sqrt_depth" if config.get("scale_embedding", False) else "none",
        "layer_prepostprocess_dropout": float(config.get("dropout", 0.1)),
        "attention_dropout": float(config.get("attention_dropout", 0.0)),
        "relu_dropout": float(config.get("activation_dropout", 0.0)),
    }


def _attention(prefix: str) -> dict[str, str]:
    """t2t attention sublayer names -> Marian's, for one attention block."""
    names = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "output_transform": "out_proj"}
    mapped = {}
    for t2t_name, hf_name in names.items():
        mapped[f"inner.{t2t_name}.kernel"] = f"{prefix}.{hf_name}.weight"
        mapped[f"inner.{t2t_name}.bias"] = f"{prefix}.{hf_name}.bias"
    return mapped


def _norm(hf_name: str, sublayer: str) -> dict[str, str]:
    return {f"{sublayer}.post.norm.gamma": f"{hf_name}.weight",
            f"{sublayer}.post.norm.beta": f"{hf_name}.bias"}


def layer_names(stack: str, index: int) -> dict[str, str]:
    """{t2t variable path under the model: Hugging Face name} of one encoder/decoder layer."""
    hf = f"model.{stack}.layers.{index}"
    t2t = f"{stack}.stack_layers.{index}"
    mapped = {f"self_attention.{k}": v for k, v in _attention(f"{hf}.self_attn").items()}
    mapped.update(_norm(f"{hf}.self_attn_layer_norm", "self_attention"))
    if stack == "decoder":
        mapped.update({f"encdec_attention.{k}": v
                       for k, v in _attention(f"{hf}.encoder_attn").items()})
        mapped.update(_norm(f"{hf}.encoder_attn_layer_norm", "encdec_attention"))
    for t2t_name, hf_name in (("inner", "fc1"), ("outer", "fc2")):
        mapped[f"ffn.inner.{t2t_name}.kernel"] = f"{hf}.{hf_name}.weight"
        mapped[f"ffn.inner.{t2t_name}.bias"] = f"{hf}.{hf_name}.bias"
    mapped.update(_norm(f"{hf}.final_layer_norm", "ffn"))
    return {f"{t2t}.{k}": v for k, v in mapped.items()}


def assignments(model: Any, tensors: dict[str, np.ndarray], config: dict[str, Any],
                checkpoint_ids: list[int]) -> weight_mapping.Assignments:
    """Every t2t variable of `model` with its value from Marian's `tensors`."""
    result = weight_mapping.Assignments(tensors)
    embedding = result.take("model.shared.weight")
    # The same table appears under other names (tied); they must hold the same values.
    for alias in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                  "lm_head.weight"):
        result.check_equal(alias, embedding)
    modality = model.targets_modality
    result.put(modality.embedding, embedding[checkpoint_ids])
    bias = result.take("final_logits_bias").reshape(-1)
    result.put(modality.softmax_bias, bias[checkpoint_ids])
    for stack, count in (("encoder", config["encoder_layers"]), ("decoder", config["decoder_layers"])):
        for index in range(count):
            result.put_paths(model, layer_names(stack, index), transpose_kernels=True)
        # The position tables are the sinusoids hparams.pos "sinusoid" computes.
        result.check_sinusoid(f"model.{stack}.embed_positions.weight")
    return result
