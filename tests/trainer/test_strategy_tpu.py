"""Tests of t2t.trainer.strategy_tpu: a TPU that cannot be reached is a one-line error
at once, not minutes of retries."""

import pytest

from t2t.trainer import strategy as strategy_lib
from t2t.trainer import strategy_tpu


def _config(**kwargs):
    return strategy_lib.StrategyConfig(tf_config=kwargs.pop("tf_config", ""), **kwargs)


@pytest.mark.parametrize("tpu, message", [
    (None, "--use_tpu needs --tpu=NAME_OR_GRPC_ADDRESS"),
    ("grpc://nowhere", "a TPU address looks like grpc://10.0.0.2:8470"),
    ("grpc://127.0.0.1:1", "nothing answers on 127.0.0.1:1"),
    ("local", "no TPU devices"),
    ("my-tpu", "metadata server is unreachable"),
])
def test_tpu_errors_are_immediate_and_say_what_to_do(monkeypatch, tpu, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setattr(strategy_tpu.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(strategy_tpu, "_can_connect", lambda host, port, timeout_s=3.0: False)
    with pytest.raises(strategy_lib.StrategyError, match=message):
        strategy_lib.create_strategy(_config(use_tpu=True, tpu=tpu))
