"""Hyperparameter sets of the `xception` model (Tensor2Tensor's xception.py, v1.15).

Values are T2T's, with these notes:
  - T2T's xception_base sets `num_sampled_classes = 0` (sampled softmax, off); t2t has no
    sampled softmax, so the hparam is left out.
  - `symbol_dropout` (0.2) is kept for comparison but does nothing here: it applies to
    symbol (token) inputs, and xception reads images.
  - The 2017 T2T sets had `imagenet_use_2d` (for that era's ImageNet inputs); v1.15
    dropped it, and t2t images are always [B, H, W, C], so it is left out too.
  - `xception_tiny_tpu` keeps T2T's optimizer name "true_adam", which t2t reads as Adam
    (T2T's TrueAdam is tf.train.AdamOptimizer; its "adam" was LazyAdam).
  - `xception_entry_flow` is a t2t addition ("auto": T2T's choice by image height; see
    t2t.models.xception).
`xception_tiny_cpu` is a t2t addition for tests and CPU demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


@registry.register_hparams
def xception_base() -> HParams:
    """T2T's xception_base: hidden_size 768, 8 middle-flow blocks, 3x3 kernels.

    Legacy schedule: exp warmup over 3000 steps to 0.05 * 0.002 (Adam), then the "exp"
    decay with basic_params1's rate 1.0 (constant); L2 weight decay 3.0 as in T2T.
    """
    hparams = basic_params1()
    hparams.batch_size = 128
    hparams.hidden_size = 768
    hparams.dropout = 0.2
    hparams.symbol_dropout = 0.2
    hparams.label_smoothing = 0.1
    hparams.clip_grad_norm = 2.0
    hparams.num_hidden_layers = 8
    hparams.kernel_height = 3
    hparams.kernel_width = 3
    hparams.learning_rate_decay_scheme = "exp"
    hparams.learning_rate = 0.05
    hparams.learning_rate_warmup_steps = 3000
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 3.0
    hparams.sampling_method = "argmax"
    hparams.optimizer_adam_epsilon = 1e-6
    hparams.optimizer_adam_beta1 = 0.85
    hparams.optimizer_adam_beta2 = 0.997
    hparams.add_hparam("xception_entry_flow", "auto")
    return hparams


@registry.register_hparams
def xception_tiny() -> HParams:
    """T2T's xception_tiny: hidden_size 64, 2 blocks, batch 2, no learning-rate decay."""
    hparams = xception_base()
    hparams.batch_size = 2
    hparams.hidden_size = 64
    hparams.num_hidden_layers = 2
    hparams.learning_rate_decay_scheme = "none"
    return hparams


@registry.register_hparams
def xception_tiny_tpu() -> HParams:
    """T2T's xception_tiny_tpu: hidden_size 128, 2 blocks, batch 2, optimizer true_adam."""
    hparams = xception_base()
    hparams.batch_size = 2
    hparams.num_hidden_layers = 2
    hparams.hidden_size = 128
    hparams.optimizer = "true_adam"
    return hparams


@registry.register_hparams
def xception_tiny_cpu() -> HParams:
    """A t2t addition (not in Tensor2Tensor): xception_tiny with the full entry flow, for a CPU.

    For tests and CPU demos on MNIST-sized images: xception_tiny's widths (hidden_size
    64, 2 middle-flow blocks) with Xception's entry flow forced on (28x28 -> 2x2 before
    the middle flow; T2T's small-image path keeps 28x28 through the middle flow and its
    layer norms, ~7x slower per step here), batch 64, Adam (beta2 0.999) at a constant
    0.003 after 100 linear warmup steps, dropout 0.1, no weight decay or label smoothing.
    Measured on a 2-core CPU (t2t-trainer, whole test set): Fashion-MNIST accuracy 0.83
    after 500 steps, 0.85 after 1000 and 0.88 after 2000-3500 (3500 steps, ~12 steps/s,
    5.1 min including data checks and four evaluations).
    """
    hparams = xception_tiny()
    hparams.xception_entry_flow = "xception"
    hparams.batch_size = 64
    hparams.dropout = 0.1
    hparams.optimizer = "adam"
    hparams.optimizer_adam_beta1 = 0.9
    hparams.optimizer_adam_beta2 = 0.999
    hparams.learning_rate_schedule = "constant*linear_warmup"
    hparams.learning_rate_constant = 0.003
    hparams.learning_rate_warmup_steps = 100
    hparams.learning_rate_decay_scheme = "none"
    hparams.weight_decay = 0.0
    hparams.label_smoothing = 0.0
    return hparams
