"""Hyperparameter sets of the `neural_gpu` model (Tensor2Tensor's neural_gpu.py, v1.15).

`neural_gpu` has T2T's values. T2T's `daisy_chain_variables` and `num_sampled_classes`
are left out (t2t has neither feature). `neural_gpu_tiny` is a t2t addition for tests
and CPU demos.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


@registry.register_hparams
def neural_gpu() -> HParams:
    """T2T's neural_gpu: one conv-GRU layer of 256 channels, kernel 3x1, dropout 0.1.

    The learning rate is T2T's legacy schedule, which t2t implements formula for formula:
    learning_rate_decay_scheme "exp" with basic_params1's decay rate 1.0, so after the
    3000 exponential warmup steps the rate is constant at learning_rate 0.02 times the
    legacy Adam correction 0.002, i.e. 4e-5 (the same figure T2T trained with).
    """
    hparams = basic_params1()
    hparams.batch_size = 1024
    hparams.num_hidden_layers = 1
    hparams.hidden_size = 256
    hparams.dropout = 0.1
    hparams.label_smoothing = 0.0
    hparams.clip_grad_norm = 10.0
    hparams.kernel_height = 3
    hparams.kernel_width = 1
    hparams.learning_rate_decay_scheme = "exp"
    hparams.learning_rate = 0.02
    hparams.learning_rate_warmup_steps = 3000
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 0.0
    hparams.sampling_method = "argmax"
    hparams.optimizer_adam_epsilon = 1e-6
    hparams.optimizer_adam_beta1 = 0.85
    hparams.optimizer_adam_beta2 = 0.997
    return hparams


@registry.register_hparams
def neural_gpu_tiny() -> HParams:
    """A t2t addition (not in Tensor2Tensor): a small Neural GPU that trains on a CPU.

    neural_gpu with 2 conv-GRU layers of 32 channels, no dropout, batches of 256
    tokens, Adam (beta1 0.9, beta2 0.999) at a constant 0.005 after 100 linear warmup
    steps. Measured on a 2-core CPU (~20-27 steps/s) on algorithmic_reverse_binary40_test
    (lengths 1..10): dev accuracy_per_sequence 1.0 from step 500; a 5000-step t2t-trainer
    run takes ~3.5 min. Greedy t2t-decoder output of that run reversed 10/10 inputs of
    length 20 and 4/10 of length 40.
    """
    hparams = neural_gpu()
    hparams.num_hidden_layers = 2
    hparams.hidden_size = 32
    hparams.dropout = 0.0
    hparams.batch_size = 256
    hparams.optimizer_adam_beta1 = 0.9
    hparams.optimizer_adam_beta2 = 0.999
    hparams.learning_rate_schedule = "constant*linear_warmup"
    hparams.learning_rate_constant = 0.005
    hparams.learning_rate_warmup_steps = 100
    hparams.learning_rate_decay_scheme = "none"
    return hparams
