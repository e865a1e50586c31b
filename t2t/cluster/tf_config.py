"""Cluster specs and TF_CONFIGs: layouts, host:port lists, free local ports.

A TF_CONFIG is the JSON that tells each TensorFlow process the whole cluster and its own
place in it, e.g. for the second worker of a two-worker MultiWorkerMirroredStrategy job:

  {"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]},
   "task": {"type": "worker", "index": 1}}

Task types are TF2's: "chief" (the one task that writes checkpoints and summaries; the
coordinator under ParameterServerStrategy), "worker" and "ps". Without a "chief" task,
worker 0 is the chief (TensorFlow's convention for MultiWorkerMirroredStrategy).
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Sequence

CHIEF, WORKER, PS = "chief", "worker", "ps"
# The order tasks are listed, numbered and given addresses in.
TASK_TYPE_ORDER = (CHIEF, WORKER, PS)
LOCALHOST = "127.0.0.1"

Cluster = dict[str, list[str]]


class ClusterError(ValueError):
    """A bad cluster description (flag value, address, layout); the message says which."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """How many tasks of each type: `num_workers` workers, `num_ps` parameter servers and a
    separate chief when `chief` is set or `num_ps` > 0 (ParameterServerStrategy needs a
    coordinator)."""

    num_workers: int
    num_ps: int = 0
    chief: bool = False

    def __post_init__(self) -> None:
        for name in ("num_workers", "num_ps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ClusterError(f"--{name} must be an integer, got {value!r}.")
        if self.num_workers < 1:
            raise ClusterError(f"--num_workers must be at least 1, got {self.num_workers}.")
        if self.num_ps < 0:
            raise ClusterError(f"--num_ps must be 0 or more, got {self.num_ps}.")

    @property
    def has_chief(self) -> bool:
        return self.chief or self.num_ps > 0

    @property
    def strategy(self) -> str:
        """The tf.distribute strategy this layout is meant for."""
        return "ParameterServerStrategy" if self.num_ps else "MultiWorkerMirroredStrategy"

    def counts(self) -> dict[str, int]:
        """Tasks per type, in TASK_TYPE_ORDER, types with no task left out."""
        counts = {CHIEF: int(self.has_chief), WORKER: self.num_workers, PS: self.num_ps}
        return {t: n for t, n in counts.items() if n}

    @property
    def num_tasks(self) -> int:
        return sum(self.counts().values())


def cluster_spec(layout: Layout, addresses: Sequence[str]) -> Cluster:
    """The cluster dict of `layout`, giving `addresses` to tasks in chief, worker, ps order."""
    if len(addresses) != layout.num_tasks:
        raise ClusterError(f"{layout.num_tasks} addresses needed for {layout.counts()}, "
                           f"got {len(addresses)}.")
    cluster, start = {}, 0
    for task_type, n in layout.counts().items():
        cluster[task_type] = list(addresses[start:start + n])
        start += n
    return cluster


def tasks(cluster: Cluster) -> list[tuple[str, int]]:
    """Every (type, index) of `cluster`: chief, worker, ps first, other types after."""
    order = [t for t in TASK_TYPE_ORDER if t in cluster]
    order += sorted(t for t in cluster if t not in TASK_TYPE_ORDER)
    return [(t, i) for t in order for i in range(len(cluster[t]))]


def task_name(task_type: str, index: int) -> str:
    """`type:index`, the name logs and messages use for a task."""
    return f"{task_type}:{index}"


def tf_config(cluster: Cluster, task_type: str, index: int,
              environment: str | None = None) -> dict:
    """The TF_CONFIG dict of task (`task_type`, `index`) of `cluster`."""
    if task_type not in cluster:
        raise ClusterError(f"no task type {task_type!r} in the cluster {sorted(cluster)}.")
    if not 0 <= index < len(cluster[task_type]):
        raise ClusterError(f"{task_type} index {index} out of range: the cluster has "
                           f"{len(cluster[task_type])} {task_type} task(s).")
    config = {"cluster": {t: list(a) for t, a in cluster.items()},
              "task": {"type": task_type, "index": index}}
    if environment:
        config["environment"] = environment
    return config


def task_role(cluster: Cluster, task_type: str, index: int) -> str:
    """A few words on what the task does under the strategy its cluster implies."""
    if PS in cluster:
        return {CHIEF: "ParameterServerStrategy coordinator: runs the training loop, "
                       "writes checkpoints",
                WORKER: "ParameterServerStrategy worker: runs the steps the chief sends",
                PS: "parameter server: holds the variables"}.get(task_type, task_type)
    chief = task_type == CHIEF or (task_type == WORKER and index == 0 and CHIEF not in cluster)
    if chief:
        return "MultiWorkerMirroredStrategy chief: trains, writes checkpoints and summaries"
    return {WORKER: "MultiWorkerMirroredStrategy worker: trains"}.get(task_type, task_type)


def parse_address(text: str, flag: str = "address") -> str:
    """`host:port` (or `[ipv6]:port`) checked and stripped; ClusterError naming `flag`."""
    address = text.strip()
    where = f"{flag}: {text!r}"
    if not address:
        raise ClusterError(f"{flag}: empty address; expected host:port.")
    if "://" in address:
        raise ClusterError(f"{where} has a scheme; give host:port, e.g. 10.0.0.1:2222.")
    if address.startswith("["):
        host, sep, port = address[1:].partition("]:")
        host_ok = bool(sep) and bool(host) and "]" not in host
    else:
        host, sep, port = address.rpartition(":")
        host_ok = bool(sep) and bool(host) and ":" not in host
        if sep and ":" in host:
            raise ClusterError(f"{where}: put an IPv6 host in brackets, e.g. [::1]:2222.")
    if not sep:
        raise ClusterError(f"{where} has no port; expected host:port, e.g. 10.0.0.1:2222.")
    if not host_ok or any(c.isspace() or c in ",/'\"" for c in host):
        raise ClusterError(f"{where}: bad host {host!r}; expected host:port.")
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ClusterError(f"{where}: bad port {port!r}; expected a number in 1..65535.")
    return address


def parse_addresses(text: str, flag: str) -> list[str]:
    """A comma-separated host:port list (`flag` names it in errors); "" gives []."""
    if not text or not text.strip():
        return []
    items = text.split(",")
    addresses = []
    for i, item in enumerate(items):
        if not item.strip():
            raise ClusterError(f"{flag}: empty address at position {i + 1} of {text!r} "
                               f"(stray comma?).")
        addresses.append(parse_address(item, flag))
    duplicates = sorted({a for a in addresses if addresses.count(a) > 1})
    if duplicates:
        raise ClusterError(f"{flag}: address(es) listed twice: {', '.join(duplicates)}.")
    return addresses


def masters_cluster(masters: Sequence[str], ps: Sequence[str] = ()) -> Cluster:
    """Tensor2Tensor's --masters/--ps in TF2 terms: the first master is the "chief", the
    others are "worker"s, the ps are "ps" (a parameter-server cluster when there are any,
    else a MultiWorkerMirroredStrategy one)."""
    if not masters:
        raise ClusterError("give at least one address in --masters (or --workers).")
    both = sorted(set(masters) & set(ps))
    if both:
        raise ClusterError(f"address(es) in both --masters and --ps: {', '.join(both)}.")
    if ps and len(masters) < 2:
        raise ClusterError("with --ps, give at least 2 --masters: the first is the chief "
                           "(the coordinator), and ParameterServerStrategy needs at least "
                           "one worker besides it.")
    cluster = {CHIEF: [masters[0]]}
    if len(masters) > 1:
        cluster[WORKER] = list(masters[1:])
    if ps:
        cluster[PS] = list(ps)
    return cluster


def make_tf_configs(cluster: Cluster, environment: str = "cloud") -> list[str]:
    """Tensor2Tensor's make_tf_configs output: per task, `'<TF_CONFIG JSON>'\\t<task>`."""
    lines = []
    for task_type, index in tasks(cluster):
        config = json.dumps(tf_config(cluster, task_type, index, environment))
        address = cluster[task_type][index]
        description = (f"{task_name(task_type, index)} {address} "
                       f"({task_role(cluster, task_type, index)})")
        lines.append(f"'{config}'\t{description}")
    return lines


def free_ports(n: int, host: str = LOCALHOST) -> list[int]:
    """`n` distinct ports on `host` that nothing listens on now (the OS picks them: bind to
    port 0). Another process may still take one before the task binds it; rare."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_in_use(host: str, port: int) -> bool:
    """Whether binding `host:port` fails now (something listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def local_cluster(layout: Layout, port_base: int | None = None,
                  host: str = LOCALHOST) -> Cluster:
    """`layout` on `host`: ports port_base, port_base+1, ... in task order, or free ports
    the OS picks when `port_base` is None."""
    n = layout.num_tasks
    if port_base is None:
        ports = free_ports(n, host)
    else:
        if port_base < 1 or port_base + n - 1 > 65535:
            raise ClusterError(f"--port_base={port_base}: the {n} ports from it must lie in "
                               f"1..65535.")
        ports = list(range(port_base, port_base + n))
    cluster = cluster_spec(layout, [f"{host}:{p}" for p in ports])
    if port_base is not None:
        busy = [f"{task_name(t, i)} at {cluster[t][i]}" for t, i in tasks(cluster)
                if port_in_use(host, int(cluster[t][i].rpartition(":")[2]))]
        if busy:
            raise ClusterError(f"--port_base={port_base}: port(s) in use: {', '.join(busy)}; "
                               f"choose another --port_base, or leave it out to pick free "
                               f"ports.")
    return cluster
