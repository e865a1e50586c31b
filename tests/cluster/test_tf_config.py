"""Tests of t2t.cluster.tf_config: layouts, cluster specs, TF_CONFIGs, addresses, ports."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest

from t2t.cluster import tf_config as tfc
from t2t.cluster.tf_config import ClusterError, Layout


@pytest.mark.parametrize("layout, counts, strategy", [
    (Layout(2), {"worker": 2}, "MultiWorkerMirroredStrategy"),
    (Layout(1, chief=True), {"chief": 1, "worker": 1}, "MultiWorkerMirroredStrategy"),
    (Layout(3, num_ps=2), {"chief": 1, "worker": 3, "ps": 2}, "ParameterServerStrategy"),
    (Layout(2, num_ps=1, chief=True), {"chief": 1, "worker": 2, "ps": 1},
     "ParameterServerStrategy"),
])
def test_layout_counts(layout, counts, strategy):
    assert layout.counts() == counts
    assert list(layout.counts()) == [t for t in ("chief", "worker", "ps") if t in counts]
    assert layout.num_tasks == sum(counts.values())
    assert layout.strategy == strategy


@pytest.mark.parametrize("kwargs, message", [
    ({"num_workers": 0}, "--num_workers must be at least 1, got 0"),
    ({"num_workers": -2}, "--num_workers must be at least 1, got -2"),
    ({"num_workers": 1, "num_ps": -1}, "--num_ps must be 0 or more, got -1"),
    ({"num_workers": "2"}, "--num_workers must be an integer, got '2'"),
    ({"num_workers": True}, "--num_workers must be an integer"),
])
def test_layout_errors(kwargs, message):
    with pytest.raises(ClusterError, match=re.escape(message)):
        Layout(**kwargs)


def test_cluster_spec_gives_addresses_in_chief_worker_ps_order():
    cluster = tfc.cluster_spec(Layout(2, num_ps=2), ["a:1", "b:2", "c:3", "d:4", "e:5"])
    assert cluster == {"chief": ["a:1"], "worker": ["b:2", "c:3"], "ps": ["d:4", "e:5"]}
    assert list(cluster) == ["chief", "worker", "ps"]
    assert tfc.tasks(cluster) == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0),
                                  ("ps", 1)]


def test_cluster_spec_address_count_mismatch():
    with pytest.raises(ClusterError, match=r"3 addresses needed .* got 2"):
        tfc.cluster_spec(Layout(2, chief=True), ["a:1", "b:2"])


def test_tasks_lists_other_types_last():
    cluster = {"evaluator": ["e:1"], "ps": ["p:1"], "worker": ["w:1"], "chief": ["c:1"]}
    assert tfc.tasks(cluster) == [("chief", 0), ("worker", 0), ("ps", 0), ("evaluator", 0)]


def test_tf_config_per_task():
    cluster = tfc.cluster_spec(Layout(2), ["h:1", "h:2"])
    config = tfc.tf_config(cluster, "worker", 1)
    assert config == {"cluster": {"worker": ["h:1", "h:2"]},
                      "task": {"type": "worker", "index": 1}}
    assert json.loads(json.dumps(config)) == config
    config["cluster"]["worker"].append("x:9")  # a copy: the cluster is untouched
    assert cluster == {"worker": ["h:1", "h:2"]}
    assert tfc.tf_config(cluster, "worker", 0, "cloud")["environment"] == "cloud"


@pytest.mark.parametrize("task_type, index, message", [
    ("chief", 0, "no task type 'chief' in the cluster ['worker']"),
    ("worker", 2, "worker index 2 out of range: the cluster has 2 worker task(s)"),
    ("worker", -1, "worker index -1 out of range"),
])
def test_tf_config_errors(task_type, index, message):
    with pytest.raises(ClusterError, match=re.escape(message)):
        tfc.tf_config({"worker": ["h:1", "h:2"]}, task_type, index)


def test_task_roles():
    mwms = {"worker": ["a:1", "b:1"]}
    assert "chief" in tfc.task_role(mwms, "worker", 0)
    assert "chief" not in tfc.task_role(mwms, "worker", 1)
    with_chief = {"chief": ["c:1"], "worker": ["a:1"]}
    assert "chief" not in tfc.task_role(with_chief, "worker", 0)
    ps = {"chief": ["c:1"], "worker": ["a:1"], "ps": ["p:1"]}
    assert "coordinator" in tfc.task_role(ps, "chief", 0)
    assert "parameter server" in tfc.task_role(ps, "ps", 0)


@pytest.mark.parametrize("text, expected", [
    ("host:2222", "host:2222"),
    ("  10.0.0.1:1  ", "10.0.0.1:1"),
    ("[::1]:65535", "[::1]:65535"),
    ("my-host.example.com:8470", "my-host.example.com:8470"),
])
def test_parse_address(text, expected):
    assert tfc.parse_address(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "--masters: empty address; expected host:port"),
    ("   ", "--masters: empty address"),
    ("host", "has no port; expected host:port"),
    ("host:", "bad port ''"),
    (":2222", "bad host ''"),
    ("host:0", "bad port '0'; expected a number in 1..65535"),
    ("host:65536", "bad port '65536'"),
    ("host:22x", "bad port '22x'"),
    ("host:-1", "bad port '-1'"),
    ("grpc://host:2222", "has a scheme; give host:port"),
    ("::1:2222", "put an IPv6 host in brackets"),
    ("[::1]2222", "has no port"),
    ("my host:2222", "bad host 'my host'"),
    ("a/b:1", "bad host 'a/b'"),
])
def test_parse_address_errors(text, message):
    with pytest.raises(ClusterError, match=re.escape(message)) as e:
        tfc.parse_address(text, "--masters")
    assert str(e.value).startswith("--masters")


def test_parse_addresses():
    assert tfc.parse_addresses("", "--ps") == []
    assert tfc.parse_addresses("a:1, b:2", "--ps") == ["a:1", "b:2"]


@pytest.mark.parametrize("text, message", [
    ("a:1,,b:2", "--ps: empty address at position 2 of 'a:1,,b:2' (stray comma?)"),
    ("a:1,", "--ps: empty address at position 2"),
    (",a:1", "--ps: empty address at position 1"),
    ("a:1,b", "--ps: 'b' has no port"),
    ("a:1,b:2,a:1", "--ps: address(es) listed twice: a:1"),
])
def test_parse_addresses_errors(text, message):
    with pytest.raises(ClusterError, match=re.escape(message)):
        tfc.parse_addresses(text, "--ps")


def test_masters_cluster_mapping():
    assert tfc.masters_cluster(["m:1"]) == {"chief": ["m:1"]}
    assert tfc.masters_cluster(["m:1", "m:2", "m:3"]) == {"chief": ["m:1"],
                                                          "worker": ["m:2", "m:3"]}
    assert tfc.masters_cluster(["m:1", "m:2"], ["p:1"]) == {
        "chief": ["m:1"], "worker": ["m:2"], "ps": ["p:1"]}


@pytest.mark.parametrize("masters, ps, message", [
    ([], [], "give at least one address in --masters (or --workers)"),
    (["m:1"], ["p:1"], "with --ps, give at least 2 --masters"),
    (["m:1", "m:2"], ["m:2"], "address(es) in both --masters and --ps: m:2"),
])
def test_masters_cluster_errors(masters, ps, message):
    with pytest.raises(ClusterError, match=re.escape(message)):
        tfc.masters_cluster(masters, ps)


def test_make_tf_configs_lines():
    cluster = tfc.masters_cluster(["m1:1", "m2:1", "m3:1"], ["p1:1"])
    lines = tfc.make_tf_configs(cluster)
    assert len(lines) == 4
    seen = []
    for line in lines:
        match = re.fullmatch(r"'(\{.*\})'\t(.+)", line)
        assert match, line
        config = json.loads(match.group(1))
        assert config["cluster"] == cluster
        assert config["environment"] == "cloud"
        task = config["task"]
        assert set(task) == {"type", "index"}
        address = cluster[task["type"]][task["index"]]
        assert match.group(2).startswith(f"{task['type']}:{task['index']} {address} (")
        seen.append((task["type"], task["index"]))
    assert seen == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]


def test_free_ports_are_distinct_and_bindable():
    ports = tfc.free_ports(4)
    assert len(set(ports)) == 4
    for port in ports:
        assert 1 <= port <= 65535
        assert not tfc.port_in_use(tfc.LOCALHOST, port)


def test_local_cluster_free_ports():
    cluster = tfc.local_cluster(Layout(2, num_ps=1))
    addresses = [a for t in ("chief", "worker", "ps") for a in cluster[t]]
    assert len(addresses) == 4 and len(set(addresses)) == 4
    assert all(a.startswith("127.0.0.1:") for a in addresses)


def test_local_cluster_port_base():
    for base in [p for p in tfc.free_ports(10) if p < 65000]:
        try:
            cluster = tfc.local_cluster(Layout(2, chief=True), port_base=base)
            break
        except ClusterError:  # base + 1 or base + 2 taken: try another
            continue
    else:
        pytest.fail("no 3 consecutive free ports found")
    assert cluster == {"chief": [f"127.0.0.1:{base}"],
                       "worker": [f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"]}


@pytest.mark.parametrize("port_base", [0, -5, 65535])
def test_local_cluster_port_base_out_of_range(port_base):
    with pytest.raises(ClusterError, match=re.escape(
            f"--port_base={port_base}: the 2 ports from it must lie in 1..65535")):
        tfc.local_cluster(Layout(2), port_base=port_base)


def test_local_cluster_port_base_in_use():
    with socket.socket() as s:
        s.bind((tfc.LOCALHOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ClusterError, match=re.escape(
                f"port(s) in use: worker:0 at 127.0.0.1:{port}; choose another --port_base")):
            tfc.local_cluster(Layout(1), port_base=port)


def test_cluster_package_imports_no_tensorflow():
    code = ("import sys\n"
            "import t2t.cluster.launch, t2t.cluster.tfjob, t2t.cluster.tf_config\n"
            "import t2t.bin.t2t_launch\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "assert 'keras' not in sys.modules, 'keras imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
