"""Tiny Hugging Face checkpoints made by `transformers` itself (random weights, seeded;
tokenizers trained on real text), built once per session for the t2t-import tests.

    folder = hf_checkpoint("marian_swish")   # config.json, model.safetensors, tokenizer files
    copy_checkpoint(folder, dst, config={"feed_forward_proj": "gated-foo"})

CHECKPOINTS names what each one exercises. Every model has d_model 32, 4 heads and a
vocabulary of ~600-800 ids, so building, saving and importing one takes about a second.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.helpers import hf_fixtures

# name -> what the checkpoint exercises (one per architecture option the importer maps)
CHECKPOINTS = {
    "marian_swish": "Marian: swish, scaled embeddings, a non-zero final_logits_bias",
    "marian_relu": "Marian: relu, unscaled embeddings, 3 encoder and 2 decoder layers",
    "t5_v1_0": "T5 v1.0: relu, softmax tied to the embedding (input scaled by d_model**-0.5)",
    "t5_v1_1": "T5 v1.1: gated-GELU, its own lm_head (no rescaling)",
}
# (T5 with num_decoder_layers != num_layers imports, but transformers 5.24's generate
# fails on it: its cache has num_layers entries, IndexError in EncoderDecoderCache.)
SEEDS = {"marian_swish": 5, "marian_relu": 1, "t5_v1_0": 2, "t5_v1_1": 3}
T5_VOCAB_SIZE = 610  # write_t5_tokenizer's 600 pieces + 10 sentinels
# EOS's softmax row is multiplied by the first number (its logit then varies more with the
# context) and Marian's final_logits_bias of EOS raised by the second, so that with these
# seeds some hypotheses end within NEW_TOKENS and others are cut: beam search's finished
# hypotheses and its length limit are both exercised (tests print the lengths).
EOS_LOGIT = {"marian_swish": (4.0, 3.5), "marian_relu": (1.0, 0.0), "t5_v1_0": (1.0, 0.0),
             "t5_v1_1": (3.0, 0.0)}
MARIAN_INIT_STD = 0.2  # transformers' 0.02 makes a random Marian ignore its input
# T5's pad row (the decoder's start embedding) shrunk: its logit stays near 0, the middle
# of the distribution, so pad never becomes a candidate (a generated pad id is where t2t
# and transformers differ by design: t2t's decoder zeroes the embedding of id 0).
T5_PAD_ROW_SCALE = 0.05


def _marian_model(vocab: dict[str, int], name: str) -> Any:
    import torch
    from transformers import MarianConfig, MarianMTModel

    swish = name == "marian_swish"
    config = MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_layers=2 if swish else 3, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=128, pad_token_id=vocab["<pad>"],
        eos_token_id=vocab["</s>"], decoder_start_token_id=vocab["<pad>"],
        scale_embedding=swish, activation_function="swish" if swish else "relu",
        forced_eos_token_id=None, init_std=MARIAN_INIT_STD)
    model = MarianMTModel(config)
    with torch.no_grad():
        if swish:
            model.final_logits_bias.normal_(0.0, 0.5)
        scale, bias = EOS_LOGIT[name]
        model.model.shared.weight[config.eos_token_id] *= scale
        model.final_logits_bias[0, config.eos_token_id] += bias
    return model


def _t5_model(name: str) -> Any:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    v1_1 = name == "t5_v1_1"
    # transformers 5 reads tie_word_embeddings=False as "no d_model**-0.5 before the
    # softmax" (scale_decoder_outputs) but still ties the head: untie it by hand below.
    config = T5Config(
        vocab_size=T5_VOCAB_SIZE, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu" if v1_1 else "relu", tie_word_embeddings=not v1_1,
        decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config)
    with torch.no_grad():
        if v1_1:
            model.lm_head.weight = torch.nn.Parameter(torch.randn(T5_VOCAB_SIZE, 32) * 0.2)
            model.config.tie_word_embeddings = False
        head = model.lm_head.weight  # v1.0: the shared embedding itself
        head[config.pad_token_id] *= T5_PAD_ROW_SCALE
        head[config.eos_token_id] *= EOS_LOGIT[name][0]
    return model


def build_model(name: str, tokenizer_folder: str) -> Any:
    """The tiny transformers model `name` (CHECKPOINTS) for the tokenizer in
    `tokenizer_folder`, its weights drawn from SEEDS[name]."""
    import torch

    torch.manual_seed(SEEDS[name])
    if name.startswith("marian"):
        with open(os.path.join(tokenizer_folder, "vocab.json"), encoding="utf-8") as f:
            return _marian_model(json.load(f), name).eval()
    return _t5_model(name).eval()


def make_checkpoint(name: str, tokenizer_folder: str, folder: str) -> str:
    """Copies `tokenizer_folder` to `folder` and saves the tiny model `name` (CHECKPOINTS)
    there with transformers' save_pretrained. Returns folder."""
    shutil.copytree(tokenizer_folder, folder)
    build_model(name, tokenizer_folder).save_pretrained(folder)
    return folder


def copy_checkpoint(source: str, folder: str, config: dict[str, Any] | None = None,
                    tensors: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
                    ) -> str:
    """A copy of the checkpoint folder `source` in `folder`, its config.json updated with
    `config` and its weights replaced by `tensors(weights)`. Returns folder."""
    shutil.copytree(source, folder)
    if config:
        path = os.path.join(folder, "config.json")
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
        values.update(config)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(values, f)
    if tensors is not None:
        from safetensors.numpy import load_file, save_file

        path = os.path.join(folder, "model.safetensors")
        save_file(tensors(dict(load_file(path))), path, metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="session")
def hf_tokenizer_folders(tmp_path_factory) -> dict[str, str]:
    """{"marian": English -> German MarianTokenizer folder, "t5": T5 tokenizer folder},
    trained on the apt/dpkg/coreutils/grep German catalogs."""
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("hf_tokenizers")
    pairs = hf_fixtures.gettext_pairs("de")
    return {"marian": hf_fixtures.write_marian_tokenizer(str(root / "marian"), pairs),
            "t5": hf_fixtures.write_t5_tokenizer(str(root / "t5"), [x for p in pairs for x in p])}


@pytest.fixture(scope="session")
def hf_checkpoint(tmp_path_factory, hf_tokenizer_folders) -> Callable[[str], str]:
    """name (CHECKPOINTS) -> the folder of that checkpoint, made on first use."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("hf_checkpoints")
    made: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in made:
            tokenizer = hf_tokenizer_folders["marian" if name.startswith("marian") else "t5"]
            made[name] = make_checkpoint(name, tokenizer, str(root / name))
        return made[name]

    return get
