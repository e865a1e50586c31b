"""Tests of t2t.hparams.speech: Tensor2Tensor's LibriSpeech sets in samples."""

from __future__ import annotations

from t2t.hparams.basic import create_hparams
from t2t.layers import audio


def test_the_librispeech_sets_have_tensor2tensors_sizes():
    v1, v2 = create_hparams("transformer_librispeech_v1"), create_hparams("transformer_librispeech_v2")
    assert (v1.hidden_size, v1.filter_size, v1.num_heads) == (256, 1024, 4)
    assert (v1.num_encoder_layers, v1.num_decoder_layers, v1.learning_rate) == (5, 3, 0.15)
    assert (v2.hidden_size, v2.filter_size, v2.num_heads) == (384, 1536, 2)
    assert (v2.num_encoder_layers, v2.num_decoder_layers) == (6, 4)
    assert v2.layer_prepostprocess_dropout == v2.relu_dropout == 0.2 and v2.weight_decay == 0
    assert create_hparams("transformer_librispeech").values() == v2.values()
    tpu = create_hparams("transformer_librispeech_tpu")
    assert tpu.batch_size == 16 and tpu.use_fixed_batch_size


def test_lengths_are_tensor2tensors_seconds_in_samples():
    v1 = create_hparams("transformer_librispeech_v1")
    # 1650 frames of 10 ms = 16.5 s = 264,000 samples at 16 kHz; 350 characters
    assert v1.max_length == v1.max_input_seq_length == 264_000 and v1.max_target_seq_length == 350
    assert v1.batch_size == 12_000_000  # T2T's 6,000,000 feature values: 750 s


def test_every_speech_set_has_the_audio_hparams():
    for name in ("transformer_librispeech_v1", "transformer_librispeech_v2",
                 "transformer_librispeech_tpu_v1", "transformer_librispeech_tpu_v2",
                 "transformer_speech_tiny"):
        audio.check_audio_hparams(create_hparams(name))


def test_only_the_cpu_set_adds_a_ctc_loss_and_audio_batches_shuffle_in_a_small_buffer():
    for name in ("transformer_librispeech_v1", "transformer_librispeech_v2",
                 "transformer_librispeech_tpu_v2"):
        hp = create_hparams(name)
        assert hp.ctc_loss_weight == 0.0, name  # Tensor2Tensor trained attention alone
        assert hp.batch_shuffle_size * hp.batch_size * 4 < 2 * 2**30 or hp.use_fixed_batch_size
    assert create_hparams("transformer_speech_tiny").ctc_loss_weight == 0.3
