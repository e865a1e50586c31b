"""Hyperparameter sets of the `bytenet` model (Tensor2Tensor's bytenet.py, v1.15).

`bytenet_base` has T2T's values; T2T's `num_sampled_classes` is left out (t2t has no
sampled softmax). `bytenet_tiny` is a t2t addition for tests and CPU demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


@registry.register_hparams
def bytenet_base() -> HParams:
    """T2T's bytenet_base: 4 repeats of 4 dilated 3x1 convs (dilations 1-8), 768 channels.

    The learning rate is T2T's legacy schedule: decay scheme "exp" with basic_params1's
    decay rate 1.0, so after the 3000 exponential warmup steps the rate is constant at
    learning_rate 0.05 times the legacy Adam correction 0.002, i.e. 1e-4.
    """
    hparams = basic_params1()
    hparams.batch_size = 2048
    hparams.hidden_size = 768
    hparams.dropout = 0.2
    hparams.symbol_dropout = 0.2
    hparams.label_smoothing = 0.1
    hparams.clip_grad_norm = 2.0
    hparams.num_hidden_layers = 4
    hparams.kernel_height = 3
    hparams.kernel_width = 1
    hparams.learning_rate_decay_scheme = "exp"
    hparams.learning_rate = 0.05
    hparams.learning_rate_warmup_steps = 3000
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 3.0
    hparams.sampling_method = "argmax"
    hparams.optimizer_adam_epsilon = 1e-6
    hparams.optimizer_adam_beta1 = 0.85
    hparams.optimizer_adam_beta2 = 0.997
    hparams.add_hparam("num_block_repeat", 4)
    return hparams


@registry.register_hparams
def bytenet_tiny() -> HParams:
    """A t2t addition (not in Tensor2Tensor): a small ByteNet that trains on a CPU.

    bytenet_base with 64 channels, 2 repeats of 4 dilated convs (dilations 1, 2, 4, 8:
    each side of an encoder position sees 30 positions), dropout 0.1, no symbol dropout,
    label smoothing or weight decay, batches of 256 tokens, Adam (beta1 0.9, beta2 0.999)
    at a constant 0.003 after 100 linear warmup steps. On algorithmic_reverse_binary40_test
    (lengths 1..10; a 2-core CPU, ~15-20 steps/s) dev accuracy_per_sequence was 0.94 at
    step 1250 and 0.97 at step 2500 (with 3 convs per repeat and no dropout: 0.91).
    """
    hparams = bytenet_base()
    hparams.hidden_size = 64
    hparams.num_hidden_layers = 4
    hparams.num_block_repeat = 2
    hparams.dropout = 0.1
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
