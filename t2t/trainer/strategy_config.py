"""What every strategy family reads and raises: the settings and the one error.

`StrategyConfig` is the RuntimeConfig (t2t.config: one declaration of the settings);
`StrategyError` is a hardware or cluster setting this machine cannot honour. The
families (t2t.trainer.strategy_cluster, strategy_parameter_servers, strategy_tpu) and
the selection (t2t.trainer.strategy) share them from here.
"""

from __future__ import annotations

from t2t.config import RuntimeConfig

__all__ = ["StrategyConfig", "StrategyError"]

# The strategy's settings are the RuntimeConfig's (t2t.config): one declaration.
StrategyConfig = RuntimeConfig


class StrategyError(ValueError):
    """A hardware flag that cannot be honoured on this machine."""
