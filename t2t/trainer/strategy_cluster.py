"""A process's place in a cluster: its TF_CONFIG, its role, and what a lost peer says.

    tf_config = cluster_config(config)   # {"cluster": ..., "task": ...} or None
    task_of(strategy), is_chief(strategy)
    peer_error_summary(error, tf_config) # one line naming the lost task

The TF_CONFIG comes from --worker_hosts/--worker_id, else config.tf_config, else the
environment; it is checked here and never written back. t2t.cluster writes the
TF_CONFIGs of a launched job; this module reads them inside each process.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import tensorflow as tf

from t2t.trainer.strategy_config import StrategyConfig, StrategyError

__all__ = ["cluster_config", "is_chief", "peer_error_summary", "resolver", "task_of"]


def cluster_config(config: StrategyConfig) -> dict[str, Any] | None:
    """The run's TF_CONFIG as a dict ({"cluster": ..., "task": ...}), or None.

    worker_hosts builds one; otherwise config.tf_config or $TF_CONFIG is parsed and
    checked. The environment is never changed."""
    if config.worker_hosts:
        hosts = [h.strip() for h in config.worker_hosts.split(",") if h.strip()]
        if config.worker_replicas and config.worker_replicas != len(hosts):
            raise StrategyError(
                f"--worker_replicas={config.worker_replicas} but --worker_hosts lists "
                f"{len(hosts)} host(s); give one host:port per worker."
            )
        if not 0 <= config.worker_id < len(hosts):
            raise StrategyError(
                f"--worker_id={config.worker_id} is not an index of the {len(hosts)} "
                f"--worker_hosts (0..{len(hosts) - 1})."
            )
        return {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": config.worker_id}}
    if config.worker_replicas > 1:
        raise StrategyError(
            f"--worker_replicas={config.worker_replicas} needs --worker_hosts (one host:port "
            f"per worker) or a TF_CONFIG in the environment (t2t-launch writes them)."
        )
    raw = config.tf_config if config.tf_config is not None else os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({e}): {raw[:200]!r}") from e
    cluster = parsed.get("cluster") if isinstance(parsed, dict) else None
    if not cluster:
        return None  # a TF_CONFIG without a cluster (e.g. only "environment") is local
    task = parsed.get("task") or {}
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in cluster or not 0 <= int(index) < len(cluster[task_type]):
        raise StrategyError(
            f"TF_CONFIG's task {task!r} is not in its cluster {sorted(cluster)}: set "
            f'"task": {{"type": one of {sorted(cluster)}, "index": i}}.'
        )
    return parsed


def resolver(tf_config: dict[str, Any]) -> tf.distribute.cluster_resolver.ClusterResolver:
    """A resolver of the checked cluster dict (not of the environment)."""
    task = tf_config.get("task") or {}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(tf_config["cluster"]), task_type=task.get("type"),
        task_id=int(task.get("index", 0)), rpc_layer=tf_config.get("rpc_layer", "grpc"),
    )


# --------------------------------------------------------------- roles
def task_of(strategy: tf.distribute.Strategy) -> tuple[str | None, int]:
    """(task type, index) of this process in its cluster; (None, 0) when not in one."""
    cluster_resolver = getattr(strategy, "cluster_resolver", None)
    if cluster_resolver is None or not getattr(cluster_resolver, "task_type", None):
        return None, 0
    return cluster_resolver.task_type, int(cluster_resolver.task_id or 0)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, summaries and results: the "chief" task,
    else worker 0 of a cluster without one, else the only process."""
    task_type, index = task_of(strategy)
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    has_chief = "chief" in strategy.cluster_resolver.cluster_spec().as_dict()
    return task_type == "worker" and index == 0 and not has_chief


# ------------------------------------------------------------ lost peers
# Lines of a TensorFlow error that say where, not what: the graph's traceback, op names,
# gRPC plumbing and generic advice.
_NOISE = re.compile(r"^(Graph execution error:|Detected at node|File \"|\[\[|Additional GRPC|"
                    r":UNKNOWN:|The error could be from a previous|\[Op:)")


def peer_error_summary(error: BaseException, tf_config: dict[str, Any] | None = None,
                       limit: int = 300) -> str:
    """What a cluster error (a collective or remote call failing because a peer is gone,
    stalled or slow) says, in one line of at most `limit` characters: TensorFlow's
    `Graph execution error:` header and the op's traceback are dropped, so the cause
    (e.g. "The following tasks are unhealthy (stopped sending heartbeats):
    /job:worker/replica:0/task:1") is what remains. With the run's `tf_config` (see
    cluster_config), the other tasks that the error names come first ("ps:0 at
    127.0.0.1:2224, UnavailableError: ..."): those it names by address (the unreachable
    ones), else those it names by TensorFlow device (e.g. the stalled one above)."""
    text = str(getattr(error, "message", None) or error)
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and not _NOISE.match(line.strip())]
    summary = f"{type(error).__name__}: {' '.join(kept) or text.strip()}"
    if tf_config:
        task = tf_config.get("task") or {}
        own = (task.get("type"), int(task.get("index", 0)))
        others = [(job, index, address)
                  for job, addresses in sorted(tf_config["cluster"].items())
                  for index, address in enumerate(addresses) if (job, index) != own]
        named = ([f"{j}:{i} at {a}" for j, i, a in others
                  if re.search(rf"{re.escape(a)}(?!\d)", text)]
                 or [f"{j}:{i} at {a}" for j, i, a in others
                     if re.search(rf"/job:{j}/(replica:\d+/)?task:{i}(?!\d)", text)])
        summary = ", ".join(named + [summary])
    return summary if len(summary) <= limit else summary[:limit - 3] + "..."
