"""What problems and models agree on, and nothing else: feature modalities, reserved
token ids, modes, and `ProblemHParams` (a problem's description of its features).

Problems and models never import each other; both import this module (no TensorFlow,
no registry). A problem fills a `ProblemHParams`; the Task, decoder or exporter hands
it to the model, which builds its modalities from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Reserved token ids of every text vocabulary: 0 pads, 1 ends a sequence.
PAD = "<pad>"
EOS = "<EOS>"
RESERVED_TOKENS = (PAD, EOS)
NUM_RESERVED_TOKENS = len(RESERVED_TOKENS)
PAD_ID = 0
EOS_ID = 1
# Audio samples travel as ids: a 16-bit sample s is s + PCM_OFFSET, in [1, 65536], so
# that 0 pads audio as it pads tokens (t2t.layers.audio, t2t.data.bases.speech).
PCM_OFFSET = 32769

# Modes, as tf.estimator's ModeKeys spelled them.
TRAIN = "train"
EVAL = "eval"
PREDICT = "infer"
MODES = (TRAIN, EVAL, PREDICT)


class Modality:
    """Names of the per-feature modalities a model builds bottom/top/loss from."""

    SYMBOL = "symbol"  # token ids -> embeddings; logits over the vocabulary
    CLASS_LABEL = "class_label"  # one label id per example
    IMAGE = "image"  # uint8 [H, W, C]
    REAL = "real"  # float vectors
    IDENTITY = "identity"  # passed through unchanged
    AUDIO = "audio"  # 16-bit PCM samples as ids (sample + 32769; 0 pads)

    ALL = (SYMBOL, CLASS_LABEL, IMAGE, REAL, IDENTITY, AUDIO)


class SpaceID:
    """Tensor2Tensor's input/target space ids (a hint some models embed)."""

    GENERIC = 0
    IMAGE_LABEL = 1
    EN_CHR = 2
    EN_TOK = 3
    EN_BPE_TOK = 4
    FR_CHR = 5
    FR_TOK = 6
    DE_CHR = 7
    DE_TOK = 8
    DE_BPE_TOK = 9
    DIGIT_0 = 10
    DIGIT_1 = 11
    AUDIO_WAV = 12
    AUDIO_SPECTRAL = 13
    PARSE_CHR = 14
    PARSE_TOK = 15
    ZH_TOK = 16
    ICE_CHAR = 17
    ICE_TOK = 18
    ICE_PARSE_TOK = 19
    MK_TOK = 20
    CS_TOK = 21
    CS_CHR = 22
    DNA = 23
    REAL = 24
    IMAGE = 25
    PEPTIDE = 26
    PY_TOK = 27
    CPP_TOK = 28
    STROKES = 29
    PICKLED_PYTHON = 30


@dataclasses.dataclass
class ProblemHParams:
    """What a model needs to know about a problem's features.

    modality: feature name ("inputs", "targets") -> a Modality name.
    vocab_size: feature name -> vocabulary size (or number of classes), None if n/a.
    batch_size_means_tokens: whether hparams.batch_size counts tokens (text) or
      examples (images, classification).
    image_shape: [height, width, channels] of image features.
    audio_sample_rate: Hz of audio features (their ids are 16-bit PCM samples).
    """

    modality: dict[str, str]
    vocab_size: dict[str, int | None]
    input_space_id: int = SpaceID.GENERIC
    target_space_id: int = SpaceID.GENERIC
    loss_multiplier: float = 1.0
    batch_size_multiplier: int = 1
    stop_at_eos: bool = False
    was_reversed: bool = False
    batch_size_means_tokens: bool = True
    image_shape: list[int] | None = None
    audio_sample_rate: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ProblemHParams:
        return cls(**values)

    def reversed(self) -> ProblemHParams:
        """The hparams with inputs and targets swapped."""
        swap = {"inputs": "targets", "targets": "inputs"}
        return dataclasses.replace(
            self,
            modality={swap.get(k, k): v for k, v in self.modality.items()},
            vocab_size={swap.get(k, k): v for k, v in self.vocab_size.items()},
            input_space_id=self.target_space_id,
            target_space_id=self.input_space_id,
            was_reversed=not self.was_reversed,
        )

    @property
    def has_inputs(self) -> bool:
        return "inputs" in self.modality

    @property
    def is_language_model(self) -> bool:
        """Whether the model predicts symbol targets from their own prefix (no inputs)."""
        return self.modality.get("targets") == Modality.SYMBOL and not self.has_inputs

    @property
    def is_classifier(self) -> bool:
        """Whether the targets are one class label per example."""
        return self.modality.get("targets") == Modality.CLASS_LABEL


class ModalityType:
    """Tensor2Tensor's modality names (`modalities.ModalityType`). The ones t2t
    implements map to a `Modality` (see `T2T_MODALITIES`); a problem naming another one
    gets an error saying which t2t offers."""

    AUDIO = "audio"
    AUDIO_SPECTRAL = "audio_spectral"
    CLASS_LABEL = "class_label"
    CTC_SYMBOL = "ctc_symbol"
    GENERIC_L2_LOSS = "generic_l2"
    IDENTITY = "identity"
    IDENTITY_SYMBOL = "identity_symbol"
    IMAGE = "image"
    IMAGE_CHANNEL_BOTTOM_IDENTITY = "image_channel_bottom_identity"
    IMAGE_CHANNEL_COMPRESS = "image_channel_compress"
    IMAGE_CHANNEL_EMBEDDINGS_BOTTOM = "image_channel_embeddings_bottom"
    MULTI_LABEL = "multi_label"
    ONE_HOT_CLASS_LABEL = "one_hot_class_label"
    REAL = "real"
    REAL_L2_LOSS = "real_l2"
    REAL_LOG_POISSON_LOSS = "real_log_poisson"
    SIGMOID_CLASS_LABEL = "sigmoid_class_label"
    SIGMOID_MAX_POOLING_CLASS_LABEL = "sigmoid_max_pooling_class_label"
    SOFTMAX_AVERAGE_POOLING_CLASS_LABEL = "softmax_average_pooling_class_label"
    SOFTMAX_LAST_TIMESTEP_CLASS_LABEL = "softmax_last_timestep_class_label"
    SOFTMAX_MAX_POOLING_CLASS_LABEL = "softmax_max_pooling_class_label"
    SPEECH_RECOGNITION = "speech_recognition"
    SYMBOL = "symbol"
    SYMBOL_WEIGHTS_ALL = "symbol_weights_all"
    SYMBOL_ONE_HOT = "symbol_one_hot"
    VIDEO = "video"
    VIDEO_BITWISE = "video_bitwise"
    VIDEO_IDENTITY = "video_identity"
    VIDEO_L1 = "video_l1"
    VIDEO_L2 = "video_l2"
    VIDEO_L1_RAW = "video_l1_raw"
    VIDEO_L2_RAW = "video_l2_raw"
    VIDEO_PIXEL_NOISE = "video_pixel_noise"

    @staticmethod
    def get_choices() -> list[str]:
        return [v for k, v in vars(ModalityType).items() if k.isupper()]


# Tensor2Tensor modality name -> t2t Modality, where t2t has the same bottom/top/loss:
# T2T's "real" and "real_l2" are both dense in, dense out, L2 loss (t2t's real).
T2T_MODALITIES = {
    ModalityType.SYMBOL: Modality.SYMBOL,
    ModalityType.CLASS_LABEL: Modality.CLASS_LABEL,
    ModalityType.IMAGE: Modality.IMAGE,
    ModalityType.REAL: Modality.REAL,
    ModalityType.REAL_L2_LOSS: Modality.REAL,
    ModalityType.IDENTITY: Modality.IDENTITY,
    ModalityType.AUDIO: Modality.AUDIO,
}


def t2t_modality(name: Any, feature: str) -> str:
    """The t2t Modality for a Tensor2Tensor modality name of `feature`; ValueError
    naming the modalities t2t has when there is none."""
    if name in T2T_MODALITIES:
        return T2T_MODALITIES[name]
    raise ValueError(
        f"Feature {feature!r} has modality {name!r}, which t2t does not implement. t2t "
        f"has: {', '.join(sorted(T2T_MODALITIES))} (modalities.ModalityType.SYMBOL, "
        f"CLASS_LABEL, IMAGE, REAL / REAL_L2_LOSS, IDENTITY, AUDIO); use one of them, or "
        f"give a model of your own a bottom/top for this feature.")
