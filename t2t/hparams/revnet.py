"""Hyperparameter sets of the `revnet` model (Tensor2Tensor's revnet.py, v1.15).

Values are T2T's, with one change of form: the optimizer name is t2t's lower-case
"momentum" (T2T's "Momentum"). `initializer` / `initializer_gain` keep T2T's values
but no revnet weight reads them: the convolutions have T2T's own He initializer (as in
T2T) and t2t's class-label top its Keras default.
T2T's `dim` is kept; only "2d" is implemented. `revnet_base` and `revnet_cifar_base`
are not registered, as in T2T. `revnet_tiny_cpu` is a t2t addition for tests and CPU
demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, RangedHParams


def revnet_base() -> HParams:
    """RevNet-104 on ImageNet (T2T's revnet_base; not registered itself).

    Bottleneck units of [64, 128, 256, 416] channels with [1, 1, 10, 1] reversible layers
    after each downsampling layer. T2T notes: learning_rate 0.4 is base 0.1 scaled by an
    effective batch of 1024 / 256; 120k steps on image_imagenet224 at batch 128.
    """
    hparams = basic_params1()
    hparams.add_hparam("num_channels", [64, 128, 256, 416])
    hparams.add_hparam("num_layers_per_block", [1, 1, 10, 1])
    hparams.add_hparam("bottleneck", True)
    hparams.add_hparam("first_batch_norm", [False, True, True, True])
    hparams.add_hparam("init_stride", 2)
    hparams.add_hparam("init_kernel_size", 7)
    hparams.add_hparam("init_maxpool", True)
    hparams.add_hparam("strides", [1, 2, 2, 2])
    hparams.add_hparam("num_channels_init_block", 64)
    hparams.add_hparam("dim", "2d")
    # Variable init.
    hparams.initializer = "normal_unit_scaling"
    hparams.initializer_gain = 2.0
    # Optimization.
    hparams.optimizer = "momentum"
    hparams.optimizer_momentum_momentum = 0.9
    hparams.optimizer_momentum_nesterov = True
    hparams.weight_decay = 1e-4
    hparams.clip_grad_norm = 0.0
    hparams.learning_rate = 0.4
    hparams.learning_rate_decay_scheme = "cosine"
    hparams.learning_rate_cosine_cycle_steps = 120000
    hparams.batch_size = 128
    return hparams


@registry.register_hparams
def revnet_104() -> HParams:
    """RevNet-104 on ImageNet: T2T's revnet_base."""
    return revnet_base()


def revnet_cifar_base() -> HParams:
    """T2T's revnet_cifar_base (not registered): CIFAR layout, a 3x3 stride-1 init conv of
    32 channels without max pool, 3 units with strides [1, 2, 2], learning rate 0.1 on a
    5000-step cosine."""
    hparams = revnet_base()
    hparams.num_channels_init_block = 32
    hparams.first_batch_norm = [False, True, True]
    hparams.init_stride = 1
    hparams.init_kernel_size = 3
    hparams.init_maxpool = False
    hparams.strides = [1, 2, 2]
    hparams.batch_size = 128
    hparams.weight_decay = 1e-4
    hparams.learning_rate = 0.1
    hparams.learning_rate_cosine_cycle_steps = 5000
    return hparams


@registry.register_hparams
def revnet_38_cifar() -> HParams:
    """RevNet-38 on CIFAR: residual units of [16, 32, 56] channels a half, [2, 2, 2]
    reversible layers each (paper: 3-3-3 units, 32-32-64-112 channels)."""
    hparams = revnet_cifar_base()
    hparams.bottleneck = False
    hparams.num_channels = [16, 32, 56]
    hparams.num_layers_per_block = [2, 2, 2]
    hparams.initializer = "normal_unit_scaling"
    hparams.initializer_gain = 1.5
    return hparams


@registry.register_hparams
def revnet_110_cifar() -> HParams:
    """RevNet-110 on CIFAR: residual units of [16, 32, 64] channels a half, [8, 8, 8]
    reversible layers each (paper: 9-9-9 units, 32-32-64-128 channels)."""
    hparams = revnet_cifar_base()
    hparams.bottleneck = False
    hparams.num_channels = [16, 32, 64]
    hparams.num_layers_per_block = [8, 8, 8]
    return hparams


@registry.register_hparams
def revnet_164_cifar() -> HParams:
    """RevNet-164 on CIFAR: bottleneck units of [16, 32, 64] channels a half (x4 out),
    [8, 8, 8] reversible layers each."""
    hparams = revnet_cifar_base()
    hparams.bottleneck = True
    hparams.num_channels = [16, 32, 64]
    hparams.num_layers_per_block = [8, 8, 8]
    return hparams


@registry.register_hparams
def revnet_tiny_cpu() -> HParams:
    """A t2t addition (not in Tensor2Tensor): a 93k-parameter CIFAR-layout RevNet for a CPU.

    For tests and CPU demos on MNIST-sized images: revnet_cifar_base with residual
    units of [8, 16, 32] channels a half after a 16-channel init conv, one reversible
    layer after each downsampling layer; batch 64, Adam (beta2 0.999) at 0.01 after 100
    linear warmup steps, then a cosine decay to zero at train_steps; no weight decay or
    label smoothing. The decay matters: batch norm keeps T2T's momentum 0.99, whose
    moving averages lag weights that a constant rate keeps moving (Fashion-MNIST, first
    2000 test images, after 1000 steps: accuracy 0.80 with the moving averages against
    0.88 with batch statistics at a constant 0.01; 0.90 both ways with the decay).
    t2t-trainer on a shared 2-core CPU: ~7 steps/s; after only 300 steps the moving
    averages still lag (eval accuracy 0.30, 0.84 with batch statistics).
    """
    hparams = revnet_cifar_base()
    hparams.bottleneck = False
    hparams.num_channels_init_block = 16
    hparams.num_channels = [8, 16, 32]
    hparams.num_layers_per_block = [1, 1, 1]
    hparams.batch_size = 64
    hparams.optimizer = "adam"
    hparams.optimizer_adam_beta1 = 0.9
    hparams.optimizer_adam_beta2 = 0.999
    hparams.learning_rate_schedule = "constant*linear_warmup*single_cycle_cos_decay"
    hparams.learning_rate_constant = 0.01
    hparams.learning_rate_warmup_steps = 100
    hparams.learning_rate_decay_scheme = "none"
    hparams.weight_decay = 0.0
    hparams.label_smoothing = 0.0
    return hparams


@registry.register_ranged_hparams
def revnet_range(rhp: RangedHParams) -> None:
    """T2T's revnet_range: learning rate, weight decay and the init block's width."""
    rhp.set_float("learning_rate", 0.05, 0.2, scale=LOG_SCALE)
    rhp.set_float("weight_decay", 1e-5, 1e-3, scale=LOG_SCALE)
    rhp.set_discrete("num_channels_init_block", [64, 128])
