"""Tests of t2t.cluster.tfjob: TFJob manifests, name validation, hand-written YAML."""

from __future__ import annotations

import json
import re

import pytest

from t2t.cluster import tfjob
from t2t.cluster.tf_config import Layout
from t2t.cluster.tfjob import ManifestError

yaml = pytest.importorskip("yaml")  # only to read the hand-written YAML back

COMMAND = ["t2t-trainer", "--problem=translate_ende_wmt32k", "--model=transformer",
           "--hparams=batch_size=4096,learning_rate_constant=2.0", "--output_dir=gs://b/run"]


def _container(manifest, replica_type):
    spec = manifest["spec"]["tfReplicaSpecs"][replica_type]
    (container,) = spec["template"]["spec"]["containers"]
    return container


def _gpus(manifest, replica_type):
    return _container(manifest, replica_type).get("resources", {}).get("limits", {}).get(
        "nvidia.com/gpu")


def test_multi_worker_manifest():
    manifest = tfjob.tfjob_manifest("t2t-run", "gcr.io/p/t2t:1", COMMAND, Layout(4))
    assert manifest["apiVersion"] == "kubeflow.org/v1"
    assert manifest["kind"] == "TFJob"
    assert manifest["metadata"] == {"name": "t2t-run"}
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Worker"]
    assert specs["Worker"]["replicas"] == 4
    assert specs["Worker"]["restartPolicy"] == "OnFailure"
    container = _container(manifest, "Worker")
    assert container == {"name": "tensorflow", "image": "gcr.io/p/t2t:1", "command": COMMAND}


def test_chief_manifest_with_gpus():
    manifest = tfjob.tfjob_manifest("t2t-run", "img", COMMAND, Layout(2, chief=True),
                                    gpus_per_worker=8, namespace="ml")
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Chief", "Worker"]
    assert specs["Chief"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    assert _gpus(manifest, "Chief") == 8  # the MultiWorkerMirroredStrategy chief trains
    assert _gpus(manifest, "Worker") == 8
    assert manifest["metadata"] == {"name": "t2t-run", "namespace": "ml"}


def test_parameter_server_manifest():
    manifest = tfjob.tfjob_manifest("ps-run", "img", COMMAND, Layout(3, num_ps=2),
                                    gpus_per_worker=1)
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Chief", "Worker", "PS"]
    assert [specs[t]["replicas"] for t in specs] == [1, 3, 2]
    for replica_type in specs:
        assert specs[replica_type]["restartPolicy"] == "OnFailure"
        container = _container(manifest, replica_type)
        assert container["name"] == "tensorflow"
        assert container["image"] == "img"
        assert container["command"] == COMMAND
    assert _gpus(manifest, "Chief") is None  # the coordinator does not compute
    assert _gpus(manifest, "PS") is None
    assert _gpus(manifest, "Worker") == 1


@pytest.mark.parametrize("layout", [Layout(1), Layout(2, chief=True), Layout(2, num_ps=1)])
@pytest.mark.parametrize("gpus", [0, 2])
def test_yaml_and_json_read_back(layout, gpus):
    manifest = tfjob.tfjob_manifest("job-1", "registry.example.com:5000/t2t:v1.2",
                                    COMMAND, layout, gpus_per_worker=gpus, namespace="team-a")
    text = tfjob.to_yaml(manifest, "a comment\nover two lines")
    assert text.startswith("# a comment\n# over two lines\napiVersion: kubeflow.org/v1\n")
    assert yaml.safe_load(text) == manifest
    assert json.loads(tfjob.to_json(manifest)) == manifest
    assert "\t" not in text


TRICKY = ["", "yes", "No", "on", "off", "true", "null", "~", "y", "1", "1.0", "0x1f", "1e3",
          "0o17", "2024-01-01", ".inf", "-", "--", "a: b", "a #c", "#c", "- x", "? x",
          "'", '"', "\\", "a\\nb", "line\nbreak", "tab\there", "\r", "\x00", "\x7f", "é",
          "\u2028", "\U0001f600", " lead", "trail ", "@x", "`x", "*a", "&a", "!t", "%x",
          "{a: 1}", "[a]", "a,b", "|", ">", "--hparams=a='b c',d=\"e\"", "\ufeff", "\x85"]


@pytest.mark.parametrize("text", TRICKY)
def test_yaml_strings_read_back_unchanged(text):
    document = {"key": text, "list": [text, {"inner": text}], text: 1}
    assert yaml.safe_load(tfjob.to_yaml(document)) == document


def test_yaml_scalars_and_empty_containers():
    document = {"a": True, "b": False, "c": None, "d": 0, "e": -3, "f": [], "g": {},
                "h": [[1, 2], [], {"x": [3]}]}
    assert yaml.safe_load(tfjob.to_yaml(document)) == document
    with pytest.raises(TypeError, match="cannot write float"):
        tfjob.to_yaml({"x": 1.5})


@pytest.mark.parametrize("name, message", [
    ("", "--name is required: a DNS label (RFC 1035)"),
    ("T2t-run", "--name='T2t-run' has 'T': only lowercase letters, digits and '-' are "
                "allowed (RFC 1035 label), e.g. 't2t-run'"),
    ("t2t_run", "has '_': only lowercase letters"),
    ("t2t.run", "has '.': only lowercase letters"),
    ("1run", "--name='1run' must start with a letter"),
    ("-run", "must start with a letter"),
    ("run-", "--name='run-' must start and end with a letter or digit"),
    ("a" * 64, "is 64 characters long; at most 63"),
    ("a" * 55, "is too long: the operator names pods and services like "
               f"'{'a' * 55}-worker-10' (65 characters), at most 63; shorten it by 2"),
])
def test_name_errors(name, message):
    with pytest.raises(ManifestError, match=re.escape(message)):
        tfjob.tfjob_manifest(name, "img", COMMAND, Layout(11))


def test_name_limits():
    assert tfjob.validate_name("a" * 63) == "a" * 63
    assert tfjob.validate_name("a" * 54, Layout(10)) == "a" * 54  # a...-worker-9: 63


@pytest.mark.parametrize("kwargs, message", [
    ({"image": ""}, "--image is required: the container image holding t2t"),
    ({"image": "  "}, "--image is required"),
    ({"image": "gcr.io/x y"}, "--image='gcr.io/x y': an image reference has no spaces"),
    ({"command": []}, "no command for the containers: give it after `--`"),
    ({"command": [""]}, "no command for the containers"),
    ({"gpus_per_worker": -1}, "--gpus_per_worker must be an integer >= 0, got -1"),
    ({"gpus_per_worker": True}, "--gpus_per_worker must be an integer >= 0, got True"),
    ({"namespace": "Team"}, "--namespace='Team' has 'T': only lowercase letters, digits "
                            "and '-' are allowed (RFC 1123 label)"),
    ({"namespace": "team-"}, "--namespace='team-' must start and end with a letter or digit"),
])
def test_manifest_argument_errors(kwargs, message):
    arguments = {"name": "run", "image": "img", "command": COMMAND, "layout": Layout(1)}
    arguments.update(kwargs)
    with pytest.raises(ManifestError, match=re.escape(message)):
        tfjob.tfjob_manifest(**arguments)


def test_namespace_may_start_with_a_digit():
    manifest = tfjob.tfjob_manifest("run", "img", COMMAND, Layout(1), namespace="1team")
    assert manifest["metadata"]["namespace"] == "1team"
