"""Hyperparameter sets of the `shake_shake` model (Tensor2Tensor's shake_shake.py, v1.15).

Values are T2T's; optimizer names are t2t's lower-case ones ("momentum", "adam").
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams
from t2t.hparams.ranged import LOG_SCALE, REVERSE_LOG_SCALE, RangedHParams


@registry.register_hparams
def shakeshake_small() -> HParams:
    """CIFAR-10 "26 2x32d": T2T reports ~96% accuracy after 700k steps on one GPU."""
    hparams = basic_params1()
    hparams.batch_size = 128
    hparams.hidden_size = 32
    hparams.layer_prepostprocess_dropout = 0.0
    hparams.dropout = 0.0
    hparams.label_smoothing = 0.0
    hparams.clip_grad_norm = 0.0  # T2T: no clipping for now; one can also try 2.0.
    hparams.num_hidden_layers = 26
    hparams.learning_rate_decay_scheme = "cosine"
    # Run for 700000 steps at batch size 128 (~1800 epochs).
    hparams.learning_rate_cosine_cycle_steps = 700000
    hparams.learning_rate = 0.2
    hparams.learning_rate_warmup_steps = 100  # T2T: "basically unused".
    hparams.initializer = "uniform_unit_scaling"
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 1e-4
    hparams.optimizer = "momentum"
    hparams.optimizer_momentum_momentum = 0.9
    hparams.add_hparam("shake_shake_num_branches", 2)
    hparams.add_hparam("shake_shake_concat", 0)  # T2T: int(False)
    return hparams


@registry.register_hparams
def shake_shake_quick() -> HParams:
    """shakeshake_small with Adam, a 1000-step cosine cycle, lr 0.5, batch 100."""
    hparams = shakeshake_small()
    hparams.optimizer = "adam"
    hparams.learning_rate_cosine_cycle_steps = 1000
    hparams.learning_rate = 0.5
    hparams.batch_size = 100
    return hparams


@registry.register_hparams
def shakeshake_big() -> HParams:
    """CIFAR-10 "26 2x96d": shakeshake_small with hidden_size 96."""
    hparams = shakeshake_small()
    hparams.layer_prepostprocess_dropout = 0.0
    hparams.hidden_size = 96
    return hparams


@registry.register_hparams
def shakeshake_tpu() -> HParams:
    """shakeshake_big with a 180k-step cosine cycle and lr 0.6."""
    hparams = shakeshake_big()
    hparams.learning_rate_cosine_cycle_steps = 180000
    hparams.learning_rate = 0.6
    return hparams


@registry.register_ranged_hparams
def shake_shake_range(rhp: RangedHParams) -> None:
    """A search space around shakeshake_small. The model needs num_hidden_layers = 6n + 2
    and hidden_size a multiple of 16, hence the discrete choices."""
    rhp.set_float("learning_rate", 0.05, 0.8, scale=LOG_SCALE)
    rhp.set_float("weight_decay", 1e-5, 1e-3, scale=LOG_SCALE)
    rhp.set_float("optimizer_momentum_momentum", 0.8, 0.99, scale=REVERSE_LOG_SCALE)
    rhp.set_discrete("num_hidden_layers", [8, 14, 20, 26])
    rhp.set_discrete("hidden_size", [32, 64, 96])
    rhp.set_int("shake_shake_num_branches", 2, 3)
