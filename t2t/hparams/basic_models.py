"""Hyperparameter sets of the basic models (Tensor2Tensor's models/basic.py, v1.15).

T2T registers no set named `basic_fc_relu`; the `basic_fc_relu` model trains with
`basic_fc_small`.
"""

from __future__ import annotations

from t2t import registry
from t2t.hparams.basic import basic_params1
from t2t.hparams.hparams import HParams


@registry.register_hparams
def basic_fc_small() -> HParams:
    """Small fully connected model: 2 layers of 256, no dropout or weight decay."""
    hparams = basic_params1()
    hparams.learning_rate = 0.1
    hparams.batch_size = 128
    hparams.hidden_size = 256
    hparams.num_hidden_layers = 2
    hparams.initializer = "uniform_unit_scaling"
    hparams.initializer_gain = 1.0
    hparams.weight_decay = 0.0
    hparams.dropout = 0.0
    return hparams
