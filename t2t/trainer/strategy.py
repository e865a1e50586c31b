"""Choosing the tf.distribute strategy a run trains under.

- default: the one local device (the first GPU if there is one, else the CPU);
- worker_gpu=N (N > 1, or -1 for all visible GPUs): MirroredStrategy over N GPUs;
- cpu_devices=N (N > 1): MirroredStrategy over N logical CPU devices, for trying
  multi-replica training (and testing it) on a machine without GPUs. It must be chosen
  before TensorFlow initializes its devices, i.e. first thing in the process;
- a TF_CONFIG (environment, or built from worker_hosts + worker_id) whose cluster has
  no "ps" job: MultiWorkerMirroredStrategy, synchronous all-reduce between processes
  (all_reduce auto|ring|nccl), each collective bounded by collective_timeout_s so a
  lost worker ends the job with an error instead of a hang;
- a TF_CONFIG with "ps" tasks and sync=False: ParameterServerStrategy, asynchronous
  training driven by the chief through a ClusterCoordinator; the "ps" and "worker"
  tasks only serve (`serve_if_cluster_member`);
- use_tpu (tpu=name or grpc address): TPUStrategy through TPUClusterResolver.
`batch_size` stays per replica (as in Tensor2Tensor), so the global batch is
batch_size * num_replicas: scale the learning rate (or warmup) with the replica count
if a larger global batch needs it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.config import ALL_REDUCE_CHOICES, RuntimeConfig

__all__ = ["ALL_REDUCE_CHOICES", "StrategyConfig", "StrategyError", "create_strategy",
           "describe", "is_chief", "is_parameter_server", "is_tpu", "peer_error_summary",
           "serve_if_cluster_member", "split_cpu", "split_variables", "task_of",
           "variable_partitioner"]

# The strategy's settings are the RuntimeConfig's (t2t.config): one declaration.
StrategyConfig = RuntimeConfig


class StrategyError(ValueError):
    """A hardware flag that cannot be honoured on this machine."""


def split_cpu(num_devices: int) -> list[str]:
    """Splits the first physical CPU into `num_devices` logical devices; returns their names."""
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current is None or len(current) != num_devices:
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices
            )
        except RuntimeError as e:
            raise StrategyError(
                f"cannot split the CPU into {num_devices} devices after TensorFlow started "
                f"using it ({e}); choose the strategy first thing in the process."
            ) from e
    return [d.name for d in tf.config.list_logical_devices("CPU")][:num_devices]


# ------------------------------------------------------------------ cluster
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


def _uses_parameter_servers(tf_config: dict[str, Any] | None, config: StrategyConfig) -> bool:
    has_ps = bool(tf_config and tf_config["cluster"].get("ps"))
    if config.ps_replicas > 0 or has_ps:
        if config.sync:
            raise StrategyError(
                "synchronous training with parameter servers does not exist in TF2: use "
                "--sync=false for asynchronous ParameterServerStrategy, or drop the ps "
                "tasks for synchronous MultiWorkerMirroredStrategy."
            )
        if not has_ps:
            raise StrategyError(
                f"--ps_replicas={config.ps_replicas} needs a TF_CONFIG whose cluster has "
                f'"chief", "worker" and "ps" tasks: start the job with '
                f"t2t-launch --num_workers=N --num_ps=M -- t2t-trainer ..."
            )
        if config.ps_replicas and config.ps_replicas != len(tf_config["cluster"]["ps"]):
            raise StrategyError(
                f"--ps_replicas={config.ps_replicas} but TF_CONFIG lists "
                f"{len(tf_config['cluster']['ps'])} ps task(s)."
            )
        if "chief" not in tf_config["cluster"]:
            raise StrategyError('parameter-server training needs a "chief" task in TF_CONFIG.')
        return True
    return False


def serve_if_cluster_member(config: StrategyConfig) -> bool:
    """In parameter-server training the "ps" and "worker" tasks only run a server:
    starts it and blocks (until killed) when this process is one; False otherwise."""
    tf_config = cluster_config(config)
    if not _uses_parameter_servers(tf_config, config):
        return False
    task = tf_config["task"]
    if task["type"] not in ("ps", "worker"):
        return False
    resolver = _resolver(tf_config)
    # Workers run the chief's functions; keep their inter-op pools from starving.
    if task["type"] == "worker":
        tf.config.threading.set_inter_op_parallelism_threads(4)
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=task["type"], task_index=int(task.get("index", 0)),
        protocol=resolver.rpc_layer or "grpc", start=True,
    )
    logging.info("Serving as %s %s for parameter-server training.", task["type"], task.get("index", 0))
    server.join()
    return True


def _resolver(tf_config: dict[str, Any]) -> tf.distribute.cluster_resolver.ClusterResolver:
    """A resolver of the checked cluster dict (not of the environment)."""
    task = tf_config.get("task") or {}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(tf_config["cluster"]), task_type=task.get("type"),
        task_id=int(task.get("index", 0)), rpc_layer=tf_config.get("rpc_layer", "grpc"),
    )


def _multi_worker(config: StrategyConfig, tf_config: dict[str, Any] | None = None
                  ) -> tf.distribute.Strategy:
    if config.all_reduce not in ALL_REDUCE_CHOICES:
        raise StrategyError(
            f"--all_reduce={config.all_reduce!r}: choose one of {', '.join(ALL_REDUCE_CHOICES)}."
        )
    if config.all_reduce == "nccl" and not tf.config.list_physical_devices("GPU"):
        raise StrategyError("--all_reduce=nccl needs GPUs; use ring or auto on CPUs.")
    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[config.all_reduce]
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation,
        timeout_seconds=config.collective_timeout_s or None,
    )
    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=options, cluster_resolver=_resolver(tf_config) if tf_config else None
    )


def variable_partitioner(config: StrategyConfig, num_ps: int) -> Any:
    """The partitioner of --ps_min_shard_bytes / --ps_max_shard_bytes (None: none), at
    most --ps_max_shards (default: one shard per ps task) shards per variable."""
    if config.ps_min_shard_bytes and config.ps_max_shard_bytes:
        raise StrategyError(
            f"--ps_min_shard_bytes={config.ps_min_shard_bytes} and --ps_max_shard_bytes="
            f"{config.ps_max_shard_bytes}: choose one way to split variables.")
    for name in ("ps_min_shard_bytes", "ps_max_shard_bytes", "ps_max_shards"):
        if getattr(config, name) < 0:
            raise StrategyError(f"--{name}={getattr(config, name)}: use a size >= 0.")
    shards = config.ps_max_shards or num_ps
    partitioners = tf.distribute.experimental.partitioners
    if config.ps_min_shard_bytes:
        return partitioners.MinSizePartitioner(config.ps_min_shard_bytes, max_shards=shards)
    if config.ps_max_shard_bytes:
        return partitioners.MaxSizePartitioner(config.ps_max_shard_bytes, max_shards=shards)
    if config.ps_max_shards:
        raise StrategyError(f"--ps_max_shards={config.ps_max_shards} needs "
                            f"--ps_min_shard_bytes or --ps_max_shard_bytes.")
    return None


def split_variables(variables: Any) -> list[str]:
    """One line per variable split over parameter servers (a ShardedVariable behind a
    Keras variable): its path, shape, and the shards' shapes and tasks."""
    from tensorflow.python.distribute import sharded_variable

    lines = []
    for variable in variables:
        value = variable.value  # the TensorFlow variable behind the Keras one
        if isinstance(value, sharded_variable.ShardedVariable):
            shards = ", ".join(
                f"{list(shard.shape)} on {re.sub(r'^/job:|/replica:0|/device:CPU:0$', '', shard.device).replace('/task:', ':')}"
                for shard in value.variables)
            lines.append(f"{variable.path} {list(variable.shape)} split in "
                         f"{len(value.variables)}: {shards}")
    return lines


def _parameter_server(tf_config: dict[str, Any], config: StrategyConfig
                      ) -> tf.distribute.Strategy:
    partitioner = variable_partitioner(config, len(tf_config["cluster"]["ps"]))
    return tf.distribute.experimental.ParameterServerStrategy(
        _resolver(tf_config), variable_partitioner=partitioner)


def _can_connect(host: str, port: int, timeout_s: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _check_tpu_reachable(tpu: str) -> None:
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


def _tpu(config: StrategyConfig) -> tf.distribute.Strategy:
    if not config.tpu:
        raise StrategyError(
            "--use_tpu needs --tpu=NAME_OR_GRPC_ADDRESS (aliases: --master, --cloud_tpu_name), "
            "e.g. --tpu=my-tpu or --tpu=grpc://10.0.0.2:8470; 'local' for a TPU VM."
        )
    _check_tpu_reachable(config.tpu)
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


def create_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    """The strategy `config` asks for; StrategyError when the machine cannot do it."""
    tf_config = cluster_config(config)
    wants_gpus = config.worker_gpu > 1 or config.worker_gpu == -1
    chosen = [name for name, on in (
        ("--use_tpu", config.use_tpu),
        ("--cpu_devices", config.cpu_devices > 1),
        # A multi-worker cluster mirrors over each worker's local GPUs by itself.
        ("--worker_gpu", wants_gpus and tf_config is None),
        ("a cluster (TF_CONFIG / --worker_hosts)", tf_config is not None),
    ) if on]
    if len(chosen) > 1:
        raise StrategyError(f"{' and '.join(chosen)} cannot be combined; choose one.")
    parameter_servers = _uses_parameter_servers(tf_config, config)
    if config.use_tpu:
        strategy = _tpu(config)
    elif tf_config is not None:
        strategy = (_parameter_server(tf_config, config) if parameter_servers
                    else _multi_worker(config, tf_config))
    elif config.cpu_devices and config.cpu_devices > 1:
        devices = split_cpu(config.cpu_devices)
        strategy = tf.distribute.MirroredStrategy(
            devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    elif config.worker_gpu and (config.worker_gpu > 1 or config.worker_gpu == -1):
        gpus = tf.config.list_logical_devices("GPU")
        wanted = len(gpus) if config.worker_gpu == -1 else config.worker_gpu
        if not gpus or wanted > len(gpus):
            raise StrategyError(
                f"--worker_gpu={config.worker_gpu} but this machine has {len(gpus)} visible "
                f"GPU(s). Use --worker_gpu=-1 for all of them, or --cpu_devices=N to try "
                f"multi-replica training on the CPU."
            )
        strategy = tf.distribute.MirroredStrategy([g.name for g in gpus[:wanted]])
    else:
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            strategy = tf.distribute.OneDeviceStrategy(gpus[0].name)
        else:
            strategy = tf.distribute.get_strategy()  # the default: the CPU, no distribution
    logging.info("Strategy: %s.", describe(strategy))
    return strategy


# --------------------------------------------------------------- roles
def is_parameter_server(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def is_tpu(strategy: tf.distribute.Strategy) -> bool:
    return isinstance(strategy, tf.distribute.TPUStrategy)


def task_of(strategy: tf.distribute.Strategy) -> tuple[str | None, int]:
    """(task type, index) of this process in its cluster; (None, 0) when not in one."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return None, 0
    return resolver.task_type, int(resolver.task_id or 0)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, summaries and results: the "chief" task,
    else worker 0 of a cluster without one, else the only process."""
    task_type, index = task_of(strategy)
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    resolver = strategy.cluster_resolver
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and index == 0 and not has_chief


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


def describe(strategy: tf.distribute.Strategy) -> str:
    name = type(strategy).__name__
    if name == "_DefaultDistributionStrategy":
        name = "default (one device)"
    text = f"{name}, {strategy.num_replicas_in_sync} replica(s)"
    task_type, index = task_of(strategy)
    if task_type is not None:
        spec = strategy.cluster_resolver.cluster_spec().as_dict()
        jobs = ", ".join(f"{len(v)} {k}" for k, v in sorted(spec.items()))
        text += f", cluster of {jobs}; this is {task_type} {index}"
        text += " (chief)" if is_chief(strategy) else ""
    return text
