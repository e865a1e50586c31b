"""The valid values of a language-model export's generate settings (t2t.serving.lm_serving:
temperature, top_k, top_p, max_new_tokens, seed), checked before a request reaches the
model: the signature itself takes any value, and a max_new_tokens of 10**6 would allocate
its key/value cache and decode for minutes.

    check_generate_request(request, info)   # RequestError (400) naming the bad setting

The rules and messages are :generateStream's (t2t.serving.lm_streaming), so a setting is
refused in the same words on REST :predict, gRPC Predict, V2 /infer and the stream.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from t2t.serving.rest_api import PredictRequest, RequestError

# The signatures that take the settings (lm_serving's names).
SETTINGS_SIGNATURES = ("generate", "generate_start")
MAX_NEW_TOKENS = 4096  # the key/value cache is allocated up front for this many tokens
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def check_settings(temperature: float, top_k: int, top_p: float, max_new_tokens: int,
                   seed: int) -> None:
    """RequestError naming the first setting outside its valid range."""
    if not (math.isfinite(temperature) and temperature >= 0):
        raise RequestError(f"temperature={temperature}: give 0 (greedy) or more")
    if top_k < 0 or top_k > _INT32_MAX:
        raise RequestError(f"top_k={top_k}: give 0 (every token) or a positive count")
    if not 0 < top_p <= 1:
        raise RequestError(f"top_p={top_p}: give a probability in (0, 1] (1: every token)")
    if not 0 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise RequestError(f"max_new_tokens={max_new_tokens}: give 1 to {MAX_NEW_TOKENS}, or 0 "
                           "for the export's own (--decode_hparams max_new_tokens)")
    if not -1 <= seed <= _INT64_MAX:
        raise RequestError(f"seed={seed}: give 0 to 2**63-1 (the same seed, the same text), "
                           "or -1 to draw one")


def check_generate_request(request: PredictRequest, info: dict[str, Any]) -> None:
    """For a t2t export (`info`: its t2t_export.json) and a call of generate or
    generate_start with all five settings: RequestError unless each is valid."""
    names = ("temperature", "top_k", "top_p", "max_new_tokens", "seed")
    if (not info.get("problem_hparams") or request.signature.name not in SETTINGS_SIGNATURES
            or not all(np.ndim(request.inputs.get(n, 0)) == 0 and n in request.inputs
                       for n in names)):
        return
    values = {name: request.inputs[name].item() for name in names}
    check_settings(float(values["temperature"]), int(values["top_k"]),
                   float(values["top_p"]), int(values["max_new_tokens"]), int(values["seed"]))
