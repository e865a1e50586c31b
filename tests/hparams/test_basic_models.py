"""basic_fc_small has Tensor2Tensor's values."""

from t2t import registry


def test_basic_fc_small():
    hp = registry.hparams("basic_fc_small")()
    assert (hp.learning_rate, hp.batch_size, hp.hidden_size, hp.num_hidden_layers) == (0.1, 128, 256, 2)
    assert (hp.initializer, hp.initializer_gain, hp.weight_decay, hp.dropout) == (
        "uniform_unit_scaling", 1.0, 0.0, 0.0)
