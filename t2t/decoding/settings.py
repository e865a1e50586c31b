"""Decode settings resolved for a model, and decoded ids as text: the one resolution that
t2t-decoder and t2t-exporter (which bakes the settings into the SavedModel) share.

    settings = resolve(DecodeHParams.parse("beam_size=4"), model)
    infer.infer(model, features, decode_length, **settings.infer_args())
    text = target_text(ids, encoders.get("targets"), settings.is_class_label)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from t2t.config import DecodeHParams, DecodeHParamsError
from t2t.data.encoders import text_encoder

# max_input_length when neither the decode hparams nor the model's hparams set one.
DEFAULT_MAX_INPUT_LENGTH = 1024


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
    """What decoding a given model does (DecodeHParams with the model's defaults).

    top_beams: outputs returned per input (beam_size with return_beams, else 1; at most
    the number of classes for a classifier). max_input_length: tokens kept per input.
    """

    beam_size: int
    top_beams: int
    alpha: float
    extra_length: int
    temperature: float
    top_k: int
    top_p: float
    return_beams: bool
    max_input_length: int
    max_new_tokens: int = 0
    num_samples: int = 1
    seed: int = -1
    return_prompt: bool = False
    force_decode_length: bool = False
    partial_targets: bool = False
    num_decodes: int = 1
    beam_search_rule: str = "t2t"

    def infer_args(self) -> dict[str, Any]:
        """Keyword arguments of `t2t.decoding.infer.infer` (force_decode_length only when
        on, so that a stand-in infer function need not know it)."""
        args = {"beam_size": self.beam_size, "top_beams": self.top_beams, "alpha": self.alpha,
                "temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                "num_samples": self.num_samples, "seed": self.seed}
        if self.force_decode_length:
            args["force_decode_length"] = True
        if self.beam_search_rule != "t2t":
            args["beam_search_rule"] = self.beam_search_rule
        return args

    @property
    def outputs_per_input(self) -> int:
        """Texts decoded per input: top_beams, or num_samples when sampling."""
        return self.num_samples if self.num_samples > 1 else self.top_beams

    def new_tokens(self, longest_input: int) -> int:
        """Tokens to decode: max_new_tokens, else longest_input + extra_length (seq2seq)
        or extra_length (a language model: longest_input 0)."""
        return self.max_new_tokens or longest_input + self.extra_length

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def sampling(self) -> bool:
        """Whether outputs are drawn at random (temperature > 0, one beam)."""
        return self.temperature > 0 and self.beam_size == 1


def model_sampling(decode_hparams: DecodeHParams, hparams: Any) -> tuple[int, float, int]:
    """(beam_size, temperature, top_k): the decode hparams', with the model hparams'
    sampling_method / sampling_temp / sampling_keep_top_k (T2T's names) as the defaults
    of what --decode_hparams did not give. sampling_method=random samples at
    sampling_temp (with beam_size=1 unless beam_size was given: then beam search, as in
    T2T); sampling_keep_top_k <= 0 keeps every token."""
    dhp = decode_hparams
    beam_size, temperature, top_k = dhp.beam_size, dhp.temperature, dhp.top_k
    if hparams is None or "sampling_method" not in hparams:
        return beam_size, temperature, top_k
    method, temp = hparams.sampling_method, hparams.get("sampling_temp", 1.0)
    keep_top_k = hparams.get("sampling_keep_top_k", -1)
    if method not in ("argmax", "random"):
        raise DecodeHParamsError(f"hparams.sampling_method={method!r}: use argmax or random "
                                 f"(--hparams=sampling_method=random).")
    if temp < 0:
        raise DecodeHParamsError(f"hparams.sampling_temp={temp}: need >= 0 (0 is greedy).")
    beam_free = beam_size == 1 or not dhp.is_given("beam_size")
    if method == "random" and temp > 0 and beam_free and not dhp.is_given("temperature"):
        beam_size, temperature = 1, float(temp)
    if temperature > 0 and not dhp.is_given("top_k"):
        top_k = max(int(keep_top_k), 0)
    return beam_size, temperature, top_k


def resolve(decode_hparams: DecodeHParams, model: Any) -> DecodeSettings:
    """The settings `decode_hparams` mean for `model` (its problem and hparams; see
    `model_sampling` for the hparams' sampling_method)."""
    dhp = decode_hparams
    dhp.validate()
    php = model.problem_hparams
    hparams = getattr(model, "hparams", None)
    beam_size, temperature, top_k = model_sampling(dhp, hparams)
    top_beams = beam_size if dhp.return_beams else 1
    if php.is_classifier:
        top_beams = min(top_beams, php.vocab_size.get("targets") or 1)
    model_max = hparams.max_length if hparams is not None and "max_length" in hparams else 0
    return DecodeSettings(
        beam_size=beam_size, top_beams=top_beams, alpha=dhp.alpha,
        extra_length=dhp.extra_length, temperature=temperature, top_k=top_k,
        top_p=dhp.top_p, return_beams=dhp.return_beams,
        max_input_length=dhp.max_input_length or model_max or DEFAULT_MAX_INPUT_LENGTH,
        max_new_tokens=dhp.max_new_tokens, num_samples=dhp.num_samples, seed=dhp.seed,
        return_prompt=dhp.return_prompt, force_decode_length=dhp.force_decode_length,
        partial_targets=dhp.partial_targets, num_decodes=dhp.num_decodes,
        beam_search_rule=dhp.beam_search_rule,
    )


def target_text(ids: Any, encoder: Any, is_class_label: bool) -> str:
    """Output ids as text: a class name (the first id), or the text of the ids up to EOS
    (ids joined by spaces when the problem has no encoder)."""
    if np.asarray(ids).dtype.kind == "f":  # real-valued targets: the numbers
        return " ".join(f"{v:.6g}" for v in np.asarray(ids, np.float64).reshape(-1))
    if is_class_label:
        label = int(np.asarray(ids).reshape(-1)[0])
        return encoder.decode([label]) if encoder is not None else str(label)
    if encoder is None:
        return " ".join(str(i) for i in text_encoder.strip_extraneous(ids))
    return encoder.decode(ids, strip_extraneous=True)
