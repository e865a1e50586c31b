"""The PyTorch side of benchmarks.training: torch.nn.Transformer at t2t's sizes.

Same d_model, heads, encoder/decoder layers, dim_feedforward, dropout 0.1 everywhere as
in the transformer sets, pre-norm, the embedding tied to the output projection,
sinusoidal positions, label smoothing (padding ignored), Adam betas/epsilon. Eager, or
`torch.compile(dynamic=True)` (one compilation for every batch shape; inductor needs a
C++ compiler); bfloat16 under `torch.autocast("cpu", dtype=torch.bfloat16)`. Never a t2t
dependency: `pip install torch==2.13.0` to benchmark against it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Step = Callable[[], tuple[float, float]]


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _model(hp_dims: dict[str, Any], vocab_size: int, max_length: int) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F

    d, h = hp_dims, hp_dims["hidden"]

    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, h)
            nn.init.normal_(self.embedding.weight, 0.0, h**-0.5)
            self.input_dropout = nn.Dropout(d["dropout"])
            with warnings.catch_warnings():  # "enable_nested_tensor is True, but ..."
                warnings.simplefilter("ignore", UserWarning)
                self.transformer = nn.Transformer(
                    d_model=h, nhead=d["heads"], num_encoder_layers=d["encoder_layers"],
                    num_decoder_layers=d["decoder_layers"], dim_feedforward=d["filter"],
                    dropout=d["dropout"], batch_first=True, norm_first=True,
                )
            position = torch.arange(max_length, dtype=torch.float32)[:, None]
            scale = torch.exp(-math.log(1.0e4) * torch.arange(h // 2) / max(h // 2 - 1, 1))
            timing = torch.cat([torch.sin(position * scale), torch.cos(position * scale)], 1)
            self.register_buffer("timing", timing)

        def embed(self, ids):
            return self.input_dropout(self.embedding(ids) * h**0.5 + self.timing[: ids.shape[1]])

        def forward(self, inputs, targets):
            shifted = F.pad(targets, (1, 0))[:, :-1]
            padding = inputs == 0
            length = targets.shape[1]
            causal = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
            out = self.transformer(
                self.embed(inputs), self.embed(shifted), tgt_mask=causal, tgt_is_causal=True,
                src_key_padding_mask=padding, memory_key_padding_mask=padding,
            )
            return out @ self.embedding.weight.t()

    return Seq2Seq().train()


def torch_step(hp_dims: dict[str, Any], vocab_size: int, batches: Sequence[dict[str, np.ndarray]],
               precision: str = "float32", threads: int | None = None,
               compile: bool = False) -> Step:
    """A step of the torch model on the next of `batches` (int [B, L] "inputs" and
    "targets", 0-padded; cycled). Returns (examples, non-padding tokens) of the batch."""
    import torch
    from torch.nn import functional as F

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    d = hp_dims
    max_length = max(max(b["inputs"].shape[1], b["targets"].shape[1]) for b in batches)
    model = _model(d, vocab_size, max_length)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(d["beta1"], d["beta2"]),
                                 eps=d["epsilon"])
    autocast = precision == "bfloat16"
    prepared = [(torch.from_numpy(b["inputs"].astype(np.int64)),
                 torch.from_numpy(b["targets"].astype(np.int64)),
                 float(len(b["targets"])),
                 float(np.count_nonzero(b["inputs"]) + np.count_nonzero(b["targets"])))
                for b in batches]

    def loss_of(inputs, targets):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs, targets)
        return F.cross_entropy(logits.float().reshape(-1, vocab_size), targets.reshape(-1),
                               ignore_index=0, label_smoothing=d["label_smoothing"])

    forward = torch.compile(loss_of, dynamic=True) if compile else loss_of
    position = [0]

    def step() -> tuple[float, float]:
        inputs, targets, examples, tokens = prepared[position[0] % len(prepared)]
        position[0] += 1
        optimizer.zero_grad(set_to_none=True)
        loss = forward(inputs, targets)
        loss.backward()
        optimizer.step()
        loss.item()
        return examples, tokens

    return step
