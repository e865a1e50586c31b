"""Hyperparameter sets of the `slicenet` model (Tensor2Tensor's slicenet.py, v1.15).

`slicenet_params1` (also registered as T2T's name for it, `slicenet_1`),
`slicenet_1noam`, `slicenet_1tiny` and the ranged set `slicenet1` have T2T's values.
T2T's `audio_compression` and `sim_loss_mult` (which T2T's slicenet never read) and
`num_sampled_classes` (t2t has no sampled softmax) are left out. `slicenet_tiny_cpu` is a
t2t addition for tests and CPU demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, RangedHParams


@registry.register_hparams
def slicenet_params1() -> HParams:
    """T2T's slicenet_1: 768 channels, 4 decoder / 6 encoder layers of sub-separable convs.

    Kernels 3, 7, 15, 31 (kernel_scheme) at dilation 1 (dilation_scheme), separability -2
    (groups of separable convs), simple attention. The learning rate is T2T's legacy
    schedule: decay scheme "exp" with decay rate 1.0, i.e. constant after the 3000
    exponential warmup steps at 0.05 times the legacy Adam correction 0.002 (1e-4).
    """
    hparams = basic_params1()
    hparams.batch_size = 1024
    hparams.hidden_size = 768
    hparams.dropout = 0.5
    hparams.symbol_dropout = 0.2
    hparams.label_smoothing = 0.1
    hparams.clip_grad_norm = 2.0
    hparams.num_hidden_layers = 4
    hparams.kernel_height = 3
    hparams.kernel_width = 1
    hparams.norm_type = "layer"
    hparams.learning_rate_decay_scheme = "exp"
    hparams.learning_rate = 0.05
    hparams.learning_rate_warmup_steps = 3000
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 3.0
    hparams.sampling_method = "argmax"
    hparams.optimizer_adam_epsilon = 1e-6
    hparams.optimizer_adam_beta1 = 0.85
    hparams.optimizer_adam_beta2 = 0.997
    hparams.add_hparam("large_kernel_size", 15)  # the kernels when kernel_scheme is "none"
    hparams.add_hparam("separability", -2)
    hparams.add_hparam("dilation_scheme", "1.1.1.1")  # a key of slicenet.DILATION_SCHEMES
    hparams.add_hparam("kernel_scheme", "3.7.15.31")  # a key of slicenet.KERNEL_SCHEMES
    hparams.add_hparam("attention_type", "simple")  # "simple", "transformer" or "none"
    hparams.add_hparam("num_heads", 8)  # the "transformer" attention's
    hparams.add_hparam("attention_key_channels", 0)  # 0: hidden_size
    hparams.add_hparam("attention_value_channels", 0)
    hparams.add_hparam("attention_dropout", 0.2)
    hparams.shared_embedding_and_softmax_weights = True
    return hparams


registry.register_hparams(slicenet_params1, name="slicenet_1")  # Tensor2Tensor's name


@registry.register_hparams(name="slicenet_1noam")
def slicenet_params1_noam() -> HParams:
    """T2T's slicenet_1noam: slicenet_1 with the Noam schedule (warmup 4000) and Adam
    (0.9, 0.98, epsilon 1e-9), uniform unit scaling initialization."""
    hparams = slicenet_params1()
    hparams.learning_rate_decay_scheme = "noam"
    hparams.learning_rate = 1.0
    hparams.learning_rate_warmup_steps = 4000
    hparams.initializer = "uniform_unit_scaling"
    hparams.optimizer_adam_epsilon = 1e-9
    hparams.optimizer_adam_beta1 = 0.9
    hparams.optimizer_adam_beta2 = 0.98
    return hparams


@registry.register_hparams(name="slicenet_1tiny")
def slicenet_params1_tiny() -> HParams:
    """T2T's slicenet_1tiny: 128 channels, 2 decoder / 3 encoder layers, separable convs
    (separability 0), batches of 512 tokens, 200 warmup steps."""
    hparams = slicenet_params1()
    hparams.attention_type = "simple"
    hparams.separability = 0
    hparams.hidden_size = 128
    hparams.num_hidden_layers = 2
    hparams.batch_size = 512
    hparams.learning_rate_warmup_steps = 200
    return hparams


@registry.register_hparams
def slicenet_tiny_cpu() -> HParams:
    """A t2t addition (not in Tensor2Tensor): a small SliceNet that trains on a CPU.

    slicenet_1tiny with 64 channels, no dropout, symbol dropout, label smoothing or
    weight decay, batches of 256 tokens, Adam (beta1 0.9, beta2 0.999) at a constant
    0.003 after 100 linear warmup steps. On algorithmic_reverse_binary40_test (lengths
    1..10; a 2-core CPU, ~15-25 steps/s) dev accuracy_per_sequence was 1.0 at steps 500,
    1000 and 2000. slicenet_1tiny itself ran at ~13-16 steps/s there, but with its weight
    decay 3.0 (an L2 term near 1e4 at the start), dropout 0.5 and legacy rate (1e-4) dev
    accuracy_per_sequence was 0.10 after 600 steps.
    """
    hparams = slicenet_params1_tiny()
    hparams.hidden_size = 64
    hparams.dropout = 0.0
    hparams.symbol_dropout = 0.0
    hparams.label_smoothing = 0.0
    hparams.weight_decay = 0.0
    hparams.batch_size = 256
    hparams.optimizer_adam_beta1 = 0.9
    hparams.optimizer_adam_beta2 = 0.999
    hparams.learning_rate_schedule = "constant*linear_warmup"
    hparams.learning_rate_constant = 0.003
    hparams.learning_rate_warmup_steps = 100
    hparams.learning_rate_decay_scheme = "none"
    return hparams


@registry.register_ranged_hparams(name="slicenet1")
def slicenet_range1(rhp: RangedHParams) -> None:
    """T2T's slicenet1 search space: clipping, learning rate, Adam beta2, weight decay."""
    rhp.set_float("clip_grad_norm", 1.0, 10.0, scale=LOG_SCALE)
    rhp.set_float("learning_rate", 0.02, 1.0, scale=LOG_SCALE)
    rhp.set_float("optimizer_adam_beta2", 0.995, 0.998)
    rhp.set_float("weight_decay", 1.0, 5.0)
