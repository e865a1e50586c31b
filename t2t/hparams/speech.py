"""Speech recognition: Tensor2Tensor's transformer_librispeech family, with the audio front end.

transformer_speech_tiny is a small set for CPU runs (a t2t addition).

Units differ from Tensor2Tensor's: here speech inputs are 16-bit samples, so
`batch_size`, `max_length` and `max_input_seq_length` count samples (16,000 per second
at 16 kHz), where Tensor2Tensor counted stored feature values (frames x 80 mel bins,
100 frames per second). The values below are Tensor2Tensor's converted at 16 kHz
(one frame of 80 values = 160 samples: x2), so they mean the same seconds of audio.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.hparams import HParams
from t2t.hparams.transformer import transformer_base

SAMPLES_PER_T2T_UNIT = 2  # 160 samples per 10 ms frame at 16 kHz / 80 values per frame


def add_audio_hparams(hp: HParams) -> HParams:
    """Adds the audio modality's hparams (t2t.layers.audio) with their defaults:
    80 log-mel bins of 25 ms frames every 10 ms, with deltas, normalized per utterance,
    2 stride-2 convolutions (40 ms per encoder position), SpecAugment off."""
    hp.add_hparam("audio_num_mel_bins", 80)
    hp.add_hparam("audio_frame_length", 25.0)  # ms
    hp.add_hparam("audio_frame_step", 10.0)  # ms
    hp.add_hparam("audio_lower_edge_hertz", 20.0)
    hp.add_hparam("audio_upper_edge_hertz", 0.0)  # 0: the Nyquist frequency
    hp.add_hparam("audio_preemphasis", 0.97)
    hp.add_hparam("audio_add_delta_deltas", True)
    hp.add_hparam("audio_normalization", "per_utterance")  # or "global", "none"
    hp.add_hparam("audio_frontend_layers", 2)  # stride-2 3x3 convolutions
    hp.add_hparam("audio_frontend_channels", 64)
    # SpecAugment (Park et al. 2019) without time warping; training only. LibriSpeech's
    # "LD" policy: 2 frequency masks of up to 27 bins, 2 time masks of up to 100 frames.
    hp.add_hparam("specaugment_freq_masks", 0)
    hp.add_hparam("specaugment_freq_mask_max_bins", 27)
    hp.add_hparam("specaugment_time_masks", 0)
    hp.add_hparam("specaugment_time_mask_max_frames", 100)
    # Joint CTC-attention training (t2t.layers.ctc): 0 keeps Tensor2Tensor's attention only.
    hp.add_hparam("ctc_loss_weight", 0.0)
    # Length buckets count samples: the first at 0.5 s (16 kHz). The text default (8)
    # would put batch_size / 8 utterances in one batch window: gigabytes.
    hp.min_length_bucket = 8000
    # Batches of audio are large (transformer_librispeech_v1's 750 s: 48 MB of int32
    # samples): the text default of 512 shuffled batches would hold 24 GB.
    hp.batch_shuffle_size = 32
    return hp


def set_librispeech_length_hparams(hp: HParams) -> HParams:
    """Tensor2Tensor's librispeech lengths: inputs up to 1650 frames (16.5 s), targets
    up to 350 characters."""
    hp.max_length = 1650 * 80 * SAMPLES_PER_T2T_UNIT
    hp.max_input_seq_length = 1650 * 80 * SAMPLES_PER_T2T_UNIT
    hp.max_target_seq_length = 350
    return hp


@registry.register_hparams
def transformer_librispeech_v1() -> HParams:
    """Tensor2Tensor's LibriSpeech v1: 5 encoder / 3 decoder layers, hidden 256, filter 1024."""
    hp = add_audio_hparams(transformer_base())
    hp.num_heads = 4
    hp.filter_size = 1024
    hp.hidden_size = 256
    hp.num_encoder_layers = 5
    hp.num_decoder_layers = 3
    hp.learning_rate = 0.15
    hp.batch_size = 6_000_000 * SAMPLES_PER_T2T_UNIT  # 750 s of audio per batch
    return set_librispeech_length_hparams(hp)


@registry.register_hparams
def transformer_librispeech_v2() -> HParams:
    """Tensor2Tensor's LibriSpeech v2: 6 encoder / 4 decoder layers, hidden 384, filter
    1536, 2 heads, dropout 0.2, 16 utterances per batch (dense feed-forward layers here:
    Tensor2Tensor's conv_relu_conv is not in t2t)."""
    hp = add_audio_hparams(transformer_base())
    hp.max_length = 1_240_000 * SAMPLES_PER_T2T_UNIT
    hp.max_input_seq_length = 1550 * 80 * SAMPLES_PER_T2T_UNIT
    hp.max_target_seq_length = 350
    hp.batch_size = 16
    hp.use_fixed_batch_size = True  # 16 utterances (Tensor2Tensor ran v2 on TPUs)
    hp.num_decoder_layers = 4
    hp.num_encoder_layers = 6
    hp.hidden_size = 384
    hp.learning_rate = 0.15
    hp.filter_size = 1536
    hp.num_heads = 2
    hp.weight_decay = 0.0
    hp.layer_prepostprocess_dropout = 0.2
    hp.relu_dropout = 0.2
    return hp


@registry.register_hparams
def transformer_librispeech() -> HParams:
    """Tensor2Tensor's default LibriSpeech set: transformer_librispeech_v2."""
    return transformer_librispeech_v2()


def _for_tpu(hp: HParams) -> HParams:
    """Tensor2Tensor's TPU variant: 16 utterances per core, librispeech lengths."""
    hp.batch_size = 16
    hp.use_fixed_batch_size = True
    return set_librispeech_length_hparams(hp)


@registry.register_hparams
def transformer_librispeech_tpu_v1() -> HParams:
    """v1 for TPUs: 16 utterances per core (fixed batches)."""
    return _for_tpu(transformer_librispeech_v1())


@registry.register_hparams
def transformer_librispeech_tpu_v2() -> HParams:
    """v2 for TPUs: 16 utterances per core (fixed batches)."""
    return _for_tpu(transformer_librispeech_v2())


@registry.register_hparams
def transformer_librispeech_tpu() -> HParams:
    """Tensor2Tensor's default LibriSpeech TPU set: transformer_librispeech_tpu_v2."""
    return transformer_librispeech_tpu_v2()


@registry.register_hparams
def transformer_speech_tiny() -> HParams:
    """A t2t addition: a small speech Transformer for CPUs (the espeak-ng corpus).

    3 encoder / 2 decoder layers, hidden 128, 40 mel bins, light SpecAugment."""
    hp = add_audio_hparams(transformer_base())
    hp.num_encoder_layers = 3
    hp.num_decoder_layers = 2
    hp.hidden_size = 128
    hp.filter_size = 512
    hp.num_heads = 4
    hp.audio_num_mel_bins = 40
    hp.audio_frontend_channels = 32
    hp.specaugment_freq_masks = 1
    hp.specaugment_freq_mask_max_bins = 8
    hp.specaugment_time_masks = 1
    hp.specaugment_time_mask_max_frames = 20
    hp.batch_size = 16000 * 60  # a minute of audio per batch
    hp.max_length = 16000 * 8  # utterances up to 8 s
    hp.learning_rate_warmup_steps = 1000
    hp.ctc_loss_weight = 0.3
    return hp
