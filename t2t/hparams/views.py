"""Typed views of the hparams a model or layer reads: one `typing.Protocol` per family.

A model's and a layer's signatures name the view of the keys they read
(`hparams: TransformerHParams`), not `Any`; an HParams bag satisfies a view when it
defines each of its keys with a value of the declared type. A key read only in some
configurations is `Annotated[T, ReadWhen("...")]`: never required, type-checked when
the set defines it. Each view declares the keys its own module reads; the views of the
layers it builds come in as bases (`TransformerHParams(TransformerLayerHParams, ...)`).

    views.check(hparams, TransformerHParams, SymbolModalityHParams, model="transformer")

raises one HParamsError naming each missing key (with the registered sets that define
it) and each value of the wrong type; `create_model` runs it with the model class's
`HPARAMS_VIEW` and the view of each modality of the problem.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from typing import Annotated, Any, Protocol

from t2t import registry
from t2t.features import Modality
from t2t.hparams.hparams import HParams, HParamsError


@dataclasses.dataclass(frozen=True)
class ReadWhen:
    """Marks a view's key read only in some configurations (`condition` says which)."""

    condition: str


# ------------------------------------------------------------------------ layers
class InitializerHParams(Protocol):
    """t2t.layers.common.initializer: the weight initializer."""

    initializer: str
    initializer_gain: float


class NormHParams(Protocol):
    """t2t.layers.common.make_norm / PrePostProcess: the normalization layer."""

    norm_type: str
    norm_epsilon: float


class LocalAttentionHParams(Protocol):
    """t2t.layers.local_attention.pattern_for: the local attention pattern."""

    dec_attention_type: str
    block_length: Annotated[int, ReadWhen("dec_attention_type is local_1d")]
    query_shape: Annotated[list[int], ReadWhen("dec_attention_type is local_2d")]
    memory_flange: Annotated[list[int], ReadWhen("dec_attention_type is local_2d")]


class AudioFeatureHParams(Protocol):
    """t2t.layers.audio.log_mel_features: PCM -> log-mel features."""

    audio_frame_length: float  # ms
    audio_frame_step: float  # ms
    audio_preemphasis: float
    audio_num_mel_bins: int
    audio_lower_edge_hertz: float
    audio_upper_edge_hertz: float  # 0: half the sample rate
    audio_normalization: str
    audio_add_delta_deltas: bool


class SpecAugmentHParams(Protocol):
    """t2t.layers.audio.spec_augment: time and frequency masks."""

    specaugment_time_masks: int
    specaugment_time_mask_max_frames: int
    specaugment_freq_masks: int
    specaugment_freq_mask_max_bins: int


class ModalityHParams(Protocol):
    """t2t.layers.modalities.Modality: every modality."""

    hidden_size: int


class SymbolModalityHParams(ModalityHParams, Protocol):
    """t2t.layers.modalities.SymbolModality: token embeddings and softmax."""

    shared_embedding_and_softmax_weights: bool
    symbol_dropout: float
    multiply_embedding_mode: str
    softmax_bias: Annotated[bool, ReadWhen("defined (default False)")]
    multiply_softmax_input_mode: Annotated[str, ReadWhen("defined (default none)")]


class AudioModalityHParams(ModalityHParams, InitializerHParams, AudioFeatureHParams,
                           SpecAugmentHParams, Protocol):
    """t2t.layers.modalities.AudioModality: features, SpecAugment, strided convolutions."""

    audio_frontend_channels: int
    audio_frontend_layers: int
    audio_normalization: str
    specaugment_time_masks: int
    specaugment_freq_masks: int


# ------------------------------------------------------------------------ models
class ModelHParams(Protocol):
    """t2t.models.t2t_model.T2TModel: what every model reads."""

    label_smoothing: float
    shared_embedding_and_softmax_weights: Annotated[
        bool, ReadWhen("inputs and targets are symbols of one vocabulary")]
    shared_embedding: Annotated[bool, ReadWhen("inputs and targets are symbols of one vocabulary")]


class BasicFcReluHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.basic.BasicFcRelu."""

    hidden_size: int
    num_hidden_layers: int
    dropout: float


class ByteNetHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.bytenet.ByteNet."""

    hidden_size: int
    num_hidden_layers: int
    kernel_height: int
    kernel_width: int
    dropout: float
    num_block_repeat: int


class NeuralGPUHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.neural_gpu.NeuralGPU."""

    hidden_size: int
    num_hidden_layers: int
    kernel_height: int
    kernel_width: int
    dropout: float


class XceptionHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.xception.Xception."""

    hidden_size: int
    num_hidden_layers: int
    kernel_height: int
    kernel_width: int
    dropout: float
    xception_entry_flow: Annotated[str | None, ReadWhen("defined (default auto)")]


class SliceNetHParams(ModelHParams, InitializerHParams, NormHParams, Protocol):
    """t2t.models.slicenet.SliceNet."""

    hidden_size: int
    num_hidden_layers: int
    kernel_height: int
    kernel_width: int
    dropout: float
    kernel_scheme: str
    dilation_scheme: str
    large_kernel_size: int
    separability: int
    attention_type: str
    num_heads: int
    attention_dropout: float
    attention_key_channels: int
    attention_value_channels: int


class ShakeShakeHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.shake_shake.ShakeShake."""

    hidden_size: int
    num_hidden_layers: int
    layer_prepostprocess_dropout: float
    shake_shake_num_branches: int
    shake_shake_concat: int


class ResnetHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.resnet.Resnet."""

    block_fn: str
    is_cifar: bool
    layer_sizes: list[int]
    filter_sizes: list[int]
    bottleneck_ratios: list[int]


class RevNetHParams(ModelHParams, Protocol):
    """t2t.models.revnet.RevNet."""

    dim: str
    bottleneck: bool
    num_channels_init_block: int
    init_kernel_size: int
    init_stride: int
    init_maxpool: bool
    num_layers_per_block: list[int]
    num_channels: list[int]
    first_batch_norm: list[bool]
    strides: list[int]


class LSTMHParams(ModelHParams, InitializerHParams, Protocol):
    """t2t.models.lstm: lstm_seq2seq and lstm_seq2seq_bidirectional_encoder."""

    hidden_size: int
    num_hidden_layers: int
    dropout: float


class LSTMAttentionHParams(LSTMHParams, Protocol):
    """t2t.models.lstm: the lstm_seq2seq_attention models."""

    num_heads: int
    attention_mechanism: str
    attention_layer_size: int
    output_attention: bool


class SublayerHParams(NormHParams, Protocol):
    """t2t.models.transformer.Sublayer: pre/post-processing around a block."""

    layer_preprocess_sequence: str
    layer_postprocess_sequence: str
    layer_prepostprocess_dropout: float


class TransformerLayerHParams(SublayerHParams, InitializerHParams, Protocol):
    """t2t.models.transformer: EncoderLayer, DecoderLayer and Stack."""

    hidden_size: int
    num_heads: int
    attention_dropout: float
    attention_key_channels: int  # 0: hidden_size
    attention_value_channels: int  # 0: hidden_size
    self_attention_type: Annotated[str, ReadWhen("defined (default dot_product)")]
    max_relative_position: Annotated[int, ReadWhen("self_attention_type is dot_product_relative")]
    ffn_layer: str
    filter_size: int
    relu_dropout: float
    layer_preprocess_sequence: str
    layer_postprocess_sequence: str
    layer_prepostprocess_dropout: float
    attention_use_bias: Annotated[bool, ReadWhen("defined (default False)")]
    attention_scale_queries: Annotated[bool, ReadWhen("defined (default True)")]
    ffn_activation: Annotated[str, ReadWhen("defined (default relu)")]
    ffn_use_bias: Annotated[bool, ReadWhen("defined (default True)")]
    relative_attention_num_buckets: Annotated[int, ReadWhen("pos is relative_buckets")]
    relative_attention_max_distance: Annotated[int, ReadWhen("pos is relative_buckets")]


class TransformerHParams(TransformerLayerHParams, ModelHParams, Protocol):
    """t2t.models.transformer.Transformer (image inputs also read ImageEncoderHParams)."""

    num_hidden_layers: int
    num_encoder_layers: int  # 0: num_hidden_layers
    num_decoder_layers: int  # 0: num_hidden_layers
    use_target_space_embedding: bool
    pos: str | None
    decoder_start_embedding: Annotated[str, ReadWhen("defined (default zeros)")]
    ctc_loss_weight: Annotated[float, ReadWhen("defined (default 0.0)")]


class ImageEncoderHParams(InitializerHParams, Protocol):
    """t2t.models.image_encoder.ImageEncoder: image inputs -> positions."""

    hidden_size: int
    image_encoder: str
    image_encoder_flatten: str
    image_encoder_channels: int
    image_encoder_width_layers: int
    image_encoder_layers: int
    image_encoder_convs: int
    image_encoder_xception_blocks: int
    image_encoder_resnet_blocks: list[int]


class UniversalTransformerHParams(TransformerLayerHParams, ModelHParams, Protocol):
    """t2t.models.research.universal_transformer: one layer applied recurrently."""

    hidden_size: int
    use_target_space_embedding: bool
    pos: str | None
    recurrence_type: str
    act_type: str
    act_max_steps: int
    num_rec_steps: int
    act_epsilon: float
    act_halting_bias_init: float
    act_loss_weight: float
    add_position_timing_signal: bool
    add_step_timing_signal: bool
    step_timing_signal_type: str


class TransformerMoeHParams(ModelHParams, InitializerHParams, SublayerHParams, Protocol):
    """t2t.models.research.transformer_moe.TransformerMoe."""

    hidden_size: int
    num_hidden_layers: int
    num_heads: int
    attention_dropout: float
    attention_key_channels: int
    attention_value_channels: int
    filter_size: int
    relu_dropout: float
    layer_preprocess_sequence: str
    layer_prepostprocess_dropout: float
    pos: str | None
    proximity_bias: bool
    layer_types: str
    default_att: str
    default_ff: str
    moe_hidden_sizes: str
    moe_num_experts: int
    moe_k: int
    moe_loss_coef: float


class ImagetransformerHParams(ModelHParams, InitializerHParams, NormHParams,
                              LocalAttentionHParams, Protocol):
    """t2t.models.image_transformer.Imagetransformer."""

    hidden_size: int
    num_hidden_layers: int
    num_decoder_layers: int  # 0: num_hidden_layers
    num_heads: int
    attention_dropout: float
    filter_size: int
    relu_dropout: float
    layer_preprocess_sequence: str
    layer_postprocess_sequence: str
    layer_prepostprocess_dropout: float
    pos: str | None
    unconditional: bool


class DenseModalityHParams(ModalityHParams, InitializerHParams, Protocol):
    """t2t.layers.modalities: RealModality and ImageTargetModality (a dense layer)."""


_MODALITY_VIEWS: dict[str, type] = {
    Modality.SYMBOL: SymbolModalityHParams,
    Modality.AUDIO: AudioModalityHParams,
    Modality.REAL: DenseModalityHParams,
}


def modality_view(kind: str, feature: str) -> type:
    """The view of the hparams the modality `kind` (a t2t.features.Modality) reads for
    `feature` ("inputs", "targets", ...)."""
    if kind == Modality.IMAGE and feature == "targets":
        return DenseModalityHParams
    return _MODALITY_VIEWS.get(kind, ModalityHParams)


# ------------------------------------------------------------------ the check
@dataclasses.dataclass(frozen=True)
class Field:
    """One key of a view: its name, declared type, and when it is read (None: always)."""

    name: str
    type: Any
    read_when: str | None


def fields(view: type) -> dict[str, Field]:
    """Every key of `view`, its bases' included: name -> Field."""
    found = {}
    for name, hint in typing.get_type_hints(view, include_extras=True).items():
        read_when = None
        if typing.get_origin(hint) is Annotated:
            hint, *extras = typing.get_args(hint)
            read_when = next((e.condition for e in extras if isinstance(e, ReadWhen)), None)
        found[name] = Field(name, hint, read_when)
    return found


def own_keys(view: type) -> set[str]:
    """The keys `view` declares itself (not through its bases)."""
    return set(view.__dict__.get("__annotations__", {}))


def matches(value: Any, hint: Any) -> bool:
    """Whether the plain hparam `value` has the type `hint` (int, float, bool, str, None,
    list[T] or a union of them). An int is a float; a bool is neither."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arg) for arg in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(matches(v, item) for v in value)
    if hint is None or hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(
        hint).replace("NoneType", "None")


def sets_defining(name: str, model: str | None = None) -> list[str]:
    """Registered hparams sets that define hparam `name`, those named most like `model`
    first (lstm_* for lstm_seq2seq_attention)."""
    found = []
    for set_name in registry.list_hparams():
        try:
            if name in registry.hparams(set_name)():
                found.append(set_name)
        except Exception:  # a user's set that fails to build is not our concern here
            continue
    prefix = model or ""
    return sorted(found, key=lambda s: (-len(os.path.commonprefix([s, prefix])), s))


def problems(hparams: HParams, *views: type) -> tuple[list[str], list[tuple[str, Any, Any]]]:
    """(missing required keys, [(key, value, declared type)] of wrong-typed values) of
    `hparams` against every key of `views`, each key once, in declaration order."""
    missing, wrong, seen = [], [], set()
    for view in views:
        for field in fields(view).values():
            if field.name in seen:
                continue
            seen.add(field.name)
            if field.name not in hparams:
                if field.read_when is None:
                    missing.append(field.name)
            elif not matches(hparams.get(field.name), field.type):
                wrong.append((field.name, hparams.get(field.name), field.type))
    return missing, wrong


def check(hparams: HParams, *views: type, model: str | None = None) -> None:
    """HParamsError, one line naming each key of `views` that `hparams` lacks (with the
    registered sets that define it) and each value of the wrong type; None when the
    hparams satisfy every view. `model` names the reader in the message."""
    views = tuple(dict.fromkeys(views))  # each view once, in order
    missing, wrong = problems(hparams, *views)
    if not missing and not wrong:
        return
    parts = []
    for name in missing:
        sets = sets_defining(name, model)
        where = (f"sets that have it: {', '.join(sets[:8])}{' ...' if len(sets) > 8 else ''}"
                 if sets else "no registered set has it")
        parts.append(f"missing {name!r} ({where})")
    parts += [f"{name!r} is {type(value).__name__} {value!r}, not {_type_name(hint)}"
              for name, value, hint in wrong]
    reader = f"Model {model!r}" if model else "This model"
    names = ", ".join(view.__name__ for view in views)
    raise HParamsError(
        f"{reader} cannot use these hparams ({names}): {'; '.join(parts)}. Use an hparams "
        f"set built for it (e.g. its base set), or add/fix these keys in your set "
        f"(hparams.add_hparam / --hparams).")
