"""CTranslate2 export of a trained `transformer`: the fastest CPU decoding (int8/int16).

    version_dir = export_ctranslate2(problem, "transformer", hparams, data_dir, "RUN",
                                     "RUN/export_ctranslate2", DecodeHParams(),
                                     quantization="int8")
    translator = ctranslate2.Translator(version_dir)     # seq2seq; a language model:
    generator = ctranslate2.Generator(version_dir)       # decoder-only runs

writes EXPORT_DIR/<unix timestamp>/ holding CTranslate2's model folder (model.bin,
config.json, shared_/source_/target_vocabulary.json or vocabulary.json), the problem's
encoder files and t2t_ctranslate2.json (problem, model, checkpoint, quantization,
vocabularies, parity). `Vocabulary(version_dir)` turns text into the model's tokens and
back (t2t's encoder, rebuilt from those files).

The weights map exactly (t2t.models.transformer, t2t.layers): embeddings times
sqrt(hidden_size) (multiply_embedding_mode sqrt_depth); t2t's sinusoid (sines then
cosines, position 0 first) given to CTranslate2 as explicit position encodings, for
MAX_POSITIONS positions, with the target space embedding (a constant vector t2t adds to
every encoder position) folded into the encoder's; q, k and v projections (no biases)
fused as CTranslate2 wants them; pre-norm ("n" / "da") or post-norm ("none" / "dan")
layer norms with hparams.norm_epsilon and the final norms of a pre-norm stack; relu
feed-forward with biases; shared or separate embeddings and softmax. t2t starts the
decoder from a zero vector and embeds id 0 (PAD) as zeros everywhere: the exported
embedding tables have a zero row 0, and PAD ("<pad>") is the decoder start token, so
CTranslate2 computes the same. Vocabulary: one token per t2t id, in t2t's order;
PAD 0 is "<pad>", EOS 1 is "<EOS>" (CTranslate2's end token; a source ends in it,
as t2t's Decoder's inputs do: `Vocabulary.tokenize` appends it).

Anything else is refused with the hparam and what would work (ExportError): other
model classes, relative or local attention, attention_key/value_channels other than
hidden_size, other ffn layers or norms, image/audio inputs, classifiers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.features import EOS_ID, PAD_ID, RESERVED_TOKENS, Modality
from t2t.hparams.hparams import HParams
from t2t.serving import ctranslate2_parity
from t2t.serving import export as export_lib
from t2t.serving.ctranslate2_parity import (  # the folder's facts, shared with the gate
    EOS_TOKEN,
    INFO_FILE,
    LANGUAGE_MODEL,
    PAD_TOKEN,
    SEQ2SEQ,
)

QUANTIZATIONS = ("float32", "int8", "int16")
MAX_POSITIONS = 2048  # rows of the position tables: the longest input / output + 1


class CTranslate2ExportError(export_lib.ExportError):
    """A model, hparam or setting that CTranslate2's Transformer cannot express."""


def _refuse(what: str, fix: str) -> CTranslate2ExportError:
    return CTranslate2ExportError(f"--format=ctranslate2 cannot export {what}; {fix}")


# ------------------------------------------------------------------ checks
def check_quantization(quantization: str) -> str:
    """`quantization` if CTranslate2 export takes it, else CTranslate2ExportError."""
    if quantization not in QUANTIZATIONS:
        raise CTranslate2ExportError(
            f"--quantization={quantization!r} is not one of {', '.join(QUANTIZATIONS)} "
            f"(int8: fastest on CPU; float32: exact).")
    return quantization


def _norm_layout(hparams: Any) -> bool:
    """True for pre-norm ("n" / "da"), False for post-norm ("none" / "dan"); dropout
    letters are ignored (inference)."""
    pre = hparams.layer_preprocess_sequence.replace("none", "").replace("d", "")
    post = hparams.layer_postprocess_sequence.replace("none", "").replace("d", "")
    if (pre, post) == ("n", "a"):
        return True
    if (pre, post) == ("", "an"):
        return False
    raise _refuse(
        f"layer_preprocess_sequence={hparams.layer_preprocess_sequence!r} with "
        f"layer_postprocess_sequence={hparams.layer_postprocess_sequence!r}",
        "CTranslate2 has pre-norm (\"n\" / \"da\") and post-norm (\"none\" / \"dan\").")


def check_model(model: Any, problem_name: str) -> str:
    """SEQ2SEQ or LANGUAGE_MODEL when CTranslate2 can express `model`, else
    CTranslate2ExportError naming the model, hparam or feature and what would work."""
    from t2t.models import transformer

    if type(model) is not transformer.Transformer:
        raise _refuse(f"model {type(model).__name__}", "only --model=transformer (CTranslate2's "
                      "Transformer); use --format=saved_model for this model.")
    php, hp = model.problem_hparams, model.hparams
    inputs, targets = php.modality.get("inputs"), php.modality.get("targets")
    if php.is_classifier or targets != Modality.SYMBOL:
        raise _refuse(f"{problem_name} ({targets} targets)", "CTranslate2 decodes text "
                      "targets; use --format=saved_model.")
    if inputs not in (None, Modality.SYMBOL):
        raise _refuse(f"{problem_name}'s {inputs} inputs", "CTranslate2's encoder reads "
                      "token ids; use --format=saved_model.")
    checks = [
        ("self_attention_type", hp.get("self_attention_type", "dot_product"), ("dot_product",)),
        ("ffn_layer", hp.ffn_layer, ("dense_relu_dense",)),
        ("norm_type", hp.norm_type, ("layer",)),
        ("pos", hp.pos, ("timing", "none", None)),
        ("attention_key_channels", hp.attention_key_channels, (0, hp.hidden_size)),
        ("attention_value_channels", hp.attention_value_channels, (0, hp.hidden_size)),
        # the options of imported architectures (t2t-import) this converter does not map
        ("attention_use_bias", hp.get("attention_use_bias", False), (False,)),
        ("attention_scale_queries", hp.get("attention_scale_queries", True), (True,)),
        ("ffn_activation", hp.get("ffn_activation", "relu"), ("relu",)),
        ("softmax_bias", hp.get("softmax_bias", False), (False,)),
        ("multiply_softmax_input_mode", hp.get("multiply_softmax_input_mode", "none"),
         ("none",)),
        ("decoder_start_embedding", hp.get("decoder_start_embedding", "zeros"), ("zeros",)),
    ]
    for name, value, allowed in checks:
        if value not in allowed:
            raise _refuse(f"{name}={value!r}", f"CTranslate2's Transformer needs {name} in "
                          f"{[a for a in allowed if a is not None]}; use --format=saved_model.")
    _norm_layout(hp)
    return LANGUAGE_MODEL if inputs is None else SEQ2SEQ


# --------------------------------------------------------------- weights
def timing_table(positions: int, channels: int) -> np.ndarray:
    """t2t's timing signal (t2t.layers.positional) for positions 0..positions-1:
    float32 [positions, channels], sines then cosines."""
    num_timescales = channels // 2
    log_increment = math.log(1.0e4) / max(num_timescales - 1, 1)
    inv = np.exp(np.arange(num_timescales, dtype=np.float32) * np.float32(-log_increment))
    scaled = np.arange(positions, dtype=np.float32)[:, None] * inv[None, :]
    table = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    if channels % 2:
        table = np.pad(table, [[0, 0], [0, 1]])
    return table.astype(np.float32)


def _array(variable: Any) -> np.ndarray:
    return np.asarray(variable.numpy(), np.float32)


def _linear(spec: Any, dense: Any) -> None:
    """A Keras Dense [in, out] kernel (and bias) as CTranslate2's [out, in] weight."""
    spec.weight = np.ascontiguousarray(_array(dense.kernel).T)
    if dense.use_bias:
        spec.bias = _array(dense.bias)


def _fused(spec: Any, denses: Sequence[Any]) -> None:
    spec.weight = np.concatenate([_array(d.kernel).T for d in denses], axis=0)


def _norm(spec: Any, norm: Any) -> None:
    spec.gamma, spec.beta = _array(norm.gamma), _array(norm.beta)


def _attention(spec: Any, sublayer: Any, pre_norm: bool, self_attention: bool) -> None:
    inner = sublayer.inner
    if self_attention:
        _fused(spec.linear[0], [inner.q, inner.k, inner.v])
    else:
        _linear(spec.linear[0], inner.q)
        _fused(spec.linear[1], [inner.k, inner.v])
    _linear(spec.linear[-1], inner.output_transform)
    _norm(spec.layer_norm, (sublayer.pre if pre_norm else sublayer.post).norm)


def _ffn(spec: Any, sublayer: Any, pre_norm: bool) -> None:
    _linear(spec.linear_0, sublayer.inner.inner)
    _linear(spec.linear_1, sublayer.inner.outer)
    _norm(spec.layer_norm, (sublayer.pre if pre_norm else sublayer.post).norm)


def _embedding_table(modality: Any) -> np.ndarray:
    """The modality's embedding [V, H] with row 0 (PAD) zero, as t2t embeds id 0."""
    table = _array(modality.embedding).copy()
    table[PAD_ID] = 0.0
    return table


def _stack(spec: Any, stack: Any, pre_norm: bool, encodings: np.ndarray) -> None:
    spec.position_encodings.encodings = encodings
    if pre_norm:
        _norm(spec.layer_norm, stack.final.norm)
    for layer_spec, layer in zip(spec.layer, stack.stack_layers, strict=True):
        _attention(layer_spec.self_attention, layer.self_attention, pre_norm, True)
        if getattr(layer, "encdec_attention", None) is not None:
            _attention(layer_spec.attention, layer.encdec_attention, pre_norm, False)
        _ffn(layer_spec.ffn, layer.ffn, pre_norm)


def build_spec(model: Any, kind: str) -> Any:
    """The CTranslate2 spec (TransformerSpec or TransformerDecoderModelSpec) holding
    `model`'s weights (vocabularies not yet registered)."""
    from ctranslate2.specs import transformer_spec

    hp = model.hparams
    pre_norm = _norm_layout(hp)
    heads = int(hp.num_heads)
    decoder_spec = transformer_spec.TransformerDecoderSpec(
        len(model.decoder.stack_layers), heads, pre_norm=pre_norm,
        with_encoder_attention=kind == SEQ2SEQ)
    hidden = int(hp.hidden_size)
    timing = (timing_table(MAX_POSITIONS, hidden) if hp.pos == "timing"
              else np.zeros([MAX_POSITIONS, hidden], np.float32))
    scale = hp.multiply_embedding_mode == "sqrt_depth"
    targets = model.targets_modality
    decoder_spec.scale_embeddings = scale
    decoder_spec.embeddings.weight = _embedding_table(targets)
    weights = targets.embedding if targets.share_softmax else targets.softmax_weights
    decoder_spec.projection.weight = _array(weights)
    _stack(decoder_spec, model.decoder, pre_norm, timing)
    if kind == LANGUAGE_MODEL:
        spec = transformer_spec.TransformerDecoderModelSpec(decoder_spec)
    else:
        encoder_spec = transformer_spec.TransformerEncoderSpec(
            len(model.encoder.stack_layers), heads, pre_norm=pre_norm)
        encoder_spec.scale_embeddings = scale
        encoder_spec.embeddings[0].weight = _embedding_table(model.feature_modalities["inputs"])
        encodings = timing
        if model.target_space_embedding is not None:  # the same vector at every position
            space = _array(model.target_space_embedding.embeddings)[
                model.problem_hparams.target_space_id]
            encodings = (timing + space[None, :]).astype(np.float32)
        _stack(encoder_spec, model.encoder, pre_norm, encodings)
        spec = transformer_spec.TransformerSpec(encoder_spec, decoder_spec)
        spec.config.decoder_start_token = PAD_TOKEN
    spec.config.layer_norm_epsilon = float(hp.norm_epsilon)
    spec.config.bos_token, spec.config.eos_token = PAD_TOKEN, EOS_TOKEN
    spec.config.unk_token = PAD_TOKEN  # t2t has no unknown-token id (Vocabulary refuses)
    return spec


# ------------------------------------------------------------ vocabulary
def vocabulary_tokens(encoder: Any, vocab_size: int) -> list[str]:
    """One distinct token per t2t id, in t2t's order: the encoder's own string for the
    id where it is distinct ("<pad>", "<EOS>", words, subwords, pieces), else "<id_N>"."""
    tokens, seen = [], set()
    for i in range(vocab_size):
        if i < len(RESERVED_TOKENS):
            token = RESERVED_TOKENS[i]
        elif encoder is None:
            token = str(i)
        else:
            try:
                token = encoder.decode_list([i])[0]
            except (ValueError, IndexError):
                token = ""
        if not token or token in seen or token.startswith("<id_"):
            token = f"<id_{i}>"
        seen.add(token)
        tokens.append(token)
    return tokens


def _encoder_files(description: dict[str, Any] | None, encoder: Any) -> list[tuple[str, str]]:
    """(source path, base name) of the files an encoder's description names."""
    found = []
    while description is not None and encoder is not None:
        for key, attribute in (("model_file", "model_file"), ("vocab_file", "filename")):
            path = getattr(encoder, attribute, None)
            if key in description and path:
                found.append((os.fspath(path), os.path.basename(os.fspath(path))))
        description, encoder = description.get("base"), getattr(encoder, "base", None)
    return found


class Vocabulary:
    """An export's text <-> CTranslate2 tokens: t2t's encoders (rebuilt from the files in
    the folder) and the token of each id (the export's vocabulary files)."""

    def __init__(self, folder: str):
        with open(os.path.join(folder, INFO_FILE), encoding="utf-8") as f:
            info = json.load(f)
        self.source_tokens, self.target_tokens = info["source_tokens"], info["target_tokens"]
        self._target_ids = {t: i for i, t in enumerate(self.target_tokens)}
        self._source_ids = {t: i for i, t in enumerate(self.source_tokens or [])}
        build = lambda d: None if d is None else text_encoder.build_encoder(d, folder)  # noqa: E731
        self.source_encoder = build(info["encoders"].get("source"))
        self.target_encoder = build(info["encoders"].get("target"))
        self.max_input_length = int(info["max_input_length"])

    def _ids(self, encoder: Any, text: str) -> list[int]:
        return encoder.encode(text) if encoder is not None else [int(w) for w in text.split()]

    def tokenize(self, text: str) -> list[str]:
        """Source text -> tokens ending in "<EOS>" (cut to max_input_length before it, as
        t2t-decoder does). ValueError naming ids the source vocabulary lacks."""
        ids = [*self._ids(self.source_encoder, text)[: self.max_input_length], EOS_ID]
        bad = [i for i in ids if not 0 <= i < len(self.source_tokens)]
        if bad:
            raise ValueError(f"{text!r} encodes to ids {bad} outside the source vocabulary "
                             f"of {len(self.source_tokens)}: fix the input.")
        return [self.source_tokens[i] for i in ids]

    def prompt_tokens(self, text: str) -> list[str]:
        """A language model's prompt -> start tokens ("<pad>" first, as t2t's decoder
        starts from a zero vector), keeping its last max_input_length ids."""
        ids = self._ids(self.target_encoder, text)[-self.max_input_length:] if text else []
        return [PAD_TOKEN, *(self.target_tokens[i] for i in ids)]

    def target_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self._target_ids[t] for t in tokens]

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens -> text, up to EOS, as t2t-decoder prints it."""
        from t2t.decoding import settings as settings_lib

        ids = np.asarray([*self.target_ids(tokens), EOS_ID], np.int64)
        return settings_lib.target_text(ids, self.target_encoder, False)


def _register_vocabularies(spec: Any, kind: str, tokens: dict[str, list[str] | None]) -> None:
    if kind == LANGUAGE_MODEL:
        spec.register_vocabulary(tokens["target"])
    else:
        spec.register_source_vocabulary(tokens["source"])
        spec.register_target_vocabulary(tokens["target"])


# ----------------------------------------------------------------- export
def _convert(spec: Any, folder: str, quantization: str) -> None:
    """CTranslate2's converter machinery: validate, alias, quantize and save `spec`."""
    from ctranslate2.converters.converter import Converter

    class _Spec(Converter):
        def _load(self) -> Any:
            return spec

    _Spec().convert(folder, quantization=quantization, force=True)


def _describe_encoders(problem: Any, data_dir: str | None, kind: str, folder: str
                       ) -> dict[str, Any]:
    """{"source", "target"}: each encoder's description, its files copied into folder."""
    encoders = problem.feature_encoders(data_dir)
    described = {}
    for side, feature in (("source", "inputs"), ("target", "targets")):
        encoder = encoders.get(feature)
        if side == "source" and kind == LANGUAGE_MODEL:
            continue
        description = export_lib.describe(encoder)
        for path, name in _encoder_files(description, encoder):
            shutil.copyfile(path, os.path.join(folder, name))
        described[side] = description
    return described


def export_ctranslate2(
    problem: problem_lib.Problem,
    model_name: str,
    hparams: HParams,
    data_dir: str | None,
    checkpoint: str,
    export_dir: str,
    dhp: DecodeHParams,
    *,
    quantization: str = "float32",
    parity_check: bool = True,
    parity_examples: int = export_lib.PARITY_EXAMPLES,
    model: Any = None,
) -> str:
    """Writes EXPORT_DIR/<timestamp>/ (CTranslate2's model folder, the encoder files,
    t2t_ctranslate2.json) and returns it; with `parity_check` only once
    t2t.serving.ctranslate2_parity's gate passed (else it is deleted)."""
    from t2t.decoding import settings as settings_lib

    check_quantization(quantization)
    try:
        import ctranslate2  # noqa: F401
    except ImportError as e:
        raise CTranslate2ExportError(f"--format=ctranslate2 needs the ctranslate2 package "
                                     f"({e}): pip install ctranslate2") from e
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    kind = check_model(model, problem.name)
    settings = settings_lib.resolve(dhp, model)
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    os.makedirs(export_dir, exist_ok=True)
    version = export_lib.new_version(export_dir)
    staging = os.path.join(export_dir, f"temp-{version}-{os.getpid()}")
    try:
        encoders = problem.feature_encoders(data_dir)
        vocab = model.problem_hparams.vocab_size
        tokens = {"target": vocabulary_tokens(encoders.get("targets"), vocab["targets"]),
                  "source": (vocabulary_tokens(encoders.get("inputs"), vocab["inputs"])
                             if kind == SEQ2SEQ else None)}
        spec = build_spec(model, kind)
        _register_vocabularies(spec, kind, tokens)
        _convert(spec, staging, quantization)
        info = {
            "problem": problem.name, "model": model_name, "kind": kind,
            "checkpoint": os.path.abspath(getattr(model, "checkpoint_path", checkpoint)),
            "quantization": quantization, "max_positions": MAX_POSITIONS,
            "max_input_length": settings.max_input_length,
            "decode_hparams": dataclasses.asdict(dhp),
            "encoders": _describe_encoders(problem, data_dir, kind, staging),
            "source_tokens": tokens["source"], "target_tokens": tokens["target"],
            "versions": {**export_lib.versions(), "ctranslate2": _ctranslate2_version()},
            "exported_at": int(version), "parity": None,
        }
        export_lib.write_json(os.path.join(staging, INFO_FILE), info)
        if parity_check:
            info["parity"] = ctranslate2_parity.check_parity(
                staging, problem, model, data_dir, dhp, parity_examples)
            export_lib.write_json(os.path.join(staging, INFO_FILE), info)
        version_dir = os.path.join(export_dir, version)
        os.replace(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return version_dir


def _ctranslate2_version() -> str:
    import ctranslate2

    return ctranslate2.__version__


def report_lines(version_dir: str) -> list[str]:
    """What t2t-exporter prints about a CTranslate2 export."""
    with open(os.path.join(version_dir, INFO_FILE), encoding="utf-8") as f:
        info = json.load(f)
    size = os.path.getsize(os.path.join(version_dir, "model.bin"))
    runner = "Generator" if info["kind"] == LANGUAGE_MODEL else "Translator"
    lines = [f"CTranslate2 model ({info['quantization']}, {size / 1024:.1f} KiB): "
             f"ctranslate2.{runner}({version_dir!r}); text <-> tokens: "
             f"t2t.serving.ctranslate2_export.Vocabulary({version_dir!r})"]
    return lines + ctranslate2_parity.report_lines(info.get("parity"))
