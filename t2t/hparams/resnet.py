"""Hyperparameter sets of the `resnet` model (Tensor2Tensor's resnet.py, v1.15).

Values are T2T's, with two changes of form: optimizer names are t2t's lower-case ones
("momentum" for T2T's "Momentum"), and `use_nchw`, `use_td`, `targeting_rate` and
`keep_prob` are left out (t2t always runs NHWC and has no targeted dropout).
`resnet_tiny_cpu` is a t2t addition for tests and CPU demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, REVERSE_LOG_SCALE, RangedHParams


def resnet_base() -> HParams:
    """ResNet-50 on ImageNet (T2T's resnet_base; not registered itself).

    T2T notes: for ImageNet on TPU train 120k steps; learning_rate 0.4 is base 0.1
    scaled by an effective batch of 1024 / 256.
    """
    hparams = basic_params1()
    # Model structure.
    hparams.add_hparam("layer_sizes", [3, 4, 6, 3])
    hparams.add_hparam("bottleneck_ratios", [4, 4, 4, 4])
    hparams.add_hparam("filter_sizes", [64, 64, 128, 256, 512])
    hparams.add_hparam("block_fn", "bottleneck")
    hparams.add_hparam("is_cifar", False)
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
def resnet_50() -> HParams:
    """ResNet-50: bottleneck blocks, layer_sizes [3, 4, 6, 3]."""
    return resnet_base()


@registry.register_hparams
def resnet_18() -> HParams:
    """ResNet-18: residual blocks, layer_sizes [2, 2, 2, 2]."""
    hp = resnet_base()
    hp.block_fn = "residual"
    hp.layer_sizes = [2, 2, 2, 2]
    return hp


@registry.register_hparams
def resnet_34() -> HParams:
    """ResNet-34: residual blocks, layer_sizes [3, 4, 6, 3]."""
    hp = resnet_base()
    hp.block_fn = "residual"
    return hp


@registry.register_hparams
def resnet_imagenet_34() -> HParams:
    """T2T's resnet_imagenet_34: residual blocks, layer_sizes [2, 4, 8, 2]."""
    hp = resnet_base()
    hp.block_fn = "residual"
    hp.layer_sizes = [2, 4, 8, 2]
    return hp


@registry.register_hparams
def resnet_imagenet_102() -> HParams:
    """T2T's resnet_imagenet_102: residual blocks, layer_sizes [3, 8, 36, 3]."""
    hp = resnet_imagenet_34()
    hp.layer_sizes = [3, 8, 36, 3]
    return hp


@registry.register_hparams
def resnet_101() -> HParams:
    """ResNet-101: bottleneck blocks, layer_sizes [3, 4, 23, 3]."""
    hp = resnet_base()
    hp.layer_sizes = [3, 4, 23, 3]
    return hp


@registry.register_hparams
def resnet_152() -> HParams:
    """ResNet-152: bottleneck blocks, layer_sizes [3, 8, 36, 3]."""
    hp = resnet_base()
    hp.layer_sizes = [3, 8, 36, 3]
    return hp


@registry.register_hparams
def resnet_200() -> HParams:
    """ResNet-200: bottleneck blocks, layer_sizes [3, 24, 36, 3]."""
    hp = resnet_base()
    hp.layer_sizes = [3, 24, 36, 3]
    return hp


@registry.register_hparams
def resnet_cifar_15() -> HParams:
    """CIFAR layout (no stem stride or max pool, 3 layers): residual, [2, 2, 2]."""
    hp = resnet_base()
    hp.block_fn = "residual"
    hp.is_cifar = True
    hp.layer_sizes = [2, 2, 2]
    hp.filter_sizes = [16, 32, 64, 128]
    return hp


@registry.register_hparams
def resnet_cifar_32() -> HParams:
    """resnet_cifar_15 with layer_sizes [5, 5, 5]."""
    hp = resnet_cifar_15()
    hp.layer_sizes = [5, 5, 5]
    return hp


@registry.register_hparams
def resnet_tiny_cpu() -> HParams:
    """A t2t addition (not in Tensor2Tensor): a ~20k-parameter CIFAR-layout ResNet.

    For tests and CPU demos on MNIST-sized images: resnet_cifar_15 with one residual block
    per layer and filters [8, 8, 16, 32]; Adam (beta2 0.999) at a constant 0.01 after 100
    linear warmup steps; no weight decay, clipping or label smoothing. Measured on a
    2-core CPU: Fashion-MNIST test accuracy 80% after one epoch and 85% after two
    (batch 64, ~50 s an epoch); a 64-image synthetic task is fitted in ~60 steps.
    """
    hp = resnet_cifar_15()
    hp.layer_sizes = [1, 1, 1]
    hp.filter_sizes = [8, 8, 16, 32]
    hp.batch_size = 64
    hp.optimizer = "adam"
    hp.optimizer_adam_beta1 = 0.9
    hp.optimizer_adam_beta2 = 0.999
    hp.learning_rate_schedule = "constant*linear_warmup"
    hp.learning_rate_constant = 0.01
    hp.learning_rate_warmup_steps = 100
    hp.learning_rate_decay_scheme = "none"
    hp.weight_decay = 0.0
    hp.label_smoothing = 0.0
    return hp


@registry.register_ranged_hparams
def resnet_range(rhp: RangedHParams) -> None:
    """A search space around the momentum ResNets (resnet_18 ... resnet_cifar_32):
    rate, regularization and momentum; the architecture (layer_sizes) stays the set's."""
    rhp.set_float("learning_rate", 0.05, 1.6, scale=LOG_SCALE)
    rhp.set_float("weight_decay", 1e-5, 1e-3, scale=LOG_SCALE)
    rhp.set_float("optimizer_momentum_momentum", 0.8, 0.99, scale=REVERSE_LOG_SCALE)
    rhp.set_categorical("optimizer_momentum_nesterov", [True, False])
    rhp.set_float("initializer_gain", 1.0, 3.0)
    rhp.set_float("label_smoothing", 0.0, 0.2)
    rhp.set_discrete("batch_size", [64, 128, 256], scale=LOG_SCALE)
