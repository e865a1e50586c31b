"""TPUStrategy, and the checks that fail fast where TensorFlow's resolver would retry.

--use_tpu with --tpu=local (a TPU VM), --tpu=grpc://ADDRESS:8470, or --tpu=NAME (looked
up through Google Cloud's metadata server): each is checked for reachability first, so
a wrong name or address is a one-line StrategyError instead of minutes of retries.
"""

from __future__ import annotations

import glob
import socket

import tensorflow as tf

from t2t.trainer.strategy_config import StrategyConfig, StrategyError

__all__ = ["check_tpu_reachable", "is_tpu", "tpu_strategy"]


def _can_connect(host: str, port: int, timeout_s: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def check_tpu_reachable(tpu: str) -> None:
    """Fails fast where TensorFlow's TPU resolver would retry for minutes."""
    if tpu == "local":
        if not glob.glob("/dev/accel*") and not glob.glob("/dev/vfio/*"):
            raise StrategyError(
                "--tpu=local but this machine has no TPU devices (/dev/accel*): run on a "
                "TPU VM, or give --tpu=NAME / grpc://ADDRESS:8470."
            )
        return
    if tpu.startswith("grpc://"):
        host, _, port = tpu[len("grpc://"):].rpartition(":")
        if not host or not port.isdigit():
            raise StrategyError(f"--tpu={tpu!r}: a TPU address looks like grpc://10.0.0.2:8470.")
        if not _can_connect(host, int(port)):
            raise StrategyError(
                f"no TPU reachable at --tpu={tpu!r}: nothing answers on {host}:{port}. Check "
                f"the address and the firewall, or drop --use_tpu."
            )
        return
    # A TPU name is resolved through Google Cloud, starting with the metadata server.
    if not _can_connect("metadata.google.internal", 80):
        raise StrategyError(
            f"cannot resolve --tpu={tpu!r}: TPU names are looked up through Google Cloud and "
            f"its metadata server is unreachable from here. Run on a Google Cloud VM, or "
            f"give the TPU's address: --tpu=grpc://ADDRESS:8470."
        )


def tpu_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    """TPUStrategy on config.tpu, its system initialized; StrategyError when unreachable."""
    if not config.tpu:
        raise StrategyError(
            "--use_tpu needs --tpu=NAME_OR_GRPC_ADDRESS (aliases: --master, --cloud_tpu_name), "
            "e.g. --tpu=my-tpu or --tpu=grpc://10.0.0.2:8470; 'local' for a TPU VM."
        )
    check_tpu_reachable(config.tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=config.tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as e:  # resolver/connection errors have many types; all mean "no TPU"
        raise StrategyError(
            f"no TPU reachable at --tpu={config.tpu!r} ({type(e).__name__}: "
            f"{str(e).strip()[:300]}). Check the name/address and that this machine may "
            f"reach it, or drop --use_tpu."
        ) from e
    return tf.distribute.TPUStrategy(resolver)


def is_tpu(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.TPUStrategy)
