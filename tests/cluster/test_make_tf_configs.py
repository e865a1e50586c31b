"""End-to-end tests of the t2t-make-tf-configs binary (run as a process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")  # only to read the YAML manifest back

BINARY = [sys.executable, "-m", "t2t.bin.t2t_make_tf_configs"]
TRAINER = ["t2t-trainer", "--problem=translate_ende_wmt32k", "--model=transformer",
           "--hparams_set=transformer_big", "--hparams=a='b c'"]


def _run(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*BINARY, *flags], capture_output=True, text=True, timeout=60)


def _parse(stdout: str) -> list[tuple[dict, str]]:
    """(TF_CONFIG, description) per output line, checking the line format."""
    rows = []
    for line in stdout.splitlines():
        match = re.fullmatch(r"'(\{.*\})'\t(.+)", line)
        assert match, f"not '<json>'<TAB><description>: {line!r}"
        rows.append((json.loads(match.group(1)), match.group(2)))
    return rows


def test_masters_and_ps():
    result = _run("--masters=m1:2222,m2:2222,m3:2222", "--ps=p1:2222,p2:2222")
    assert result.returncode == 0, result.stderr
    rows = _parse(result.stdout)
    cluster = {"chief": ["m1:2222"], "worker": ["m2:2222", "m3:2222"],
               "ps": ["p1:2222", "p2:2222"]}
    assert [config["task"] for config, _ in rows] == [
        {"type": "chief", "index": 0}, {"type": "worker", "index": 0},
        {"type": "worker", "index": 1}, {"type": "ps", "index": 0}, {"type": "ps", "index": 1}]
    for config, _ in rows:
        assert config == {"cluster": cluster, "task": config["task"], "environment": "cloud"}
    assert rows[0][1] == ("chief:0 m1:2222 (ParameterServerStrategy coordinator: runs the "
                          "training loop, writes checkpoints)")
    assert rows[4][1].startswith("ps:1 p2:2222 (parameter server")
    # The summary goes to stderr, so stdout is one line per task.
    assert "ParameterServerStrategy: 1 chief (coordinator), 2 worker(s), 2 parameter " \
           "server(s)" in result.stderr


def test_workers_alias_without_ps():
    by_masters = _run("--masters=a:1,b:1")
    by_workers = _run("--workers=a:1,b:1")
    assert by_masters.returncode == by_workers.returncode == 0, by_workers.stderr
    assert by_masters.stdout == by_workers.stdout
    rows = _parse(by_workers.stdout)
    assert [c["cluster"] for c, _ in rows] == [{"chief": ["a:1"], "worker": ["b:1"]}] * 2
    assert "MultiWorkerMirroredStrategy" in rows[0][1]
    assert "MultiWorkerMirroredStrategy: 1 chief and 1 worker(s)" in by_workers.stderr


@pytest.mark.parametrize("flags, message", [
    ([], "--masters (or --workers) is required: comma-separated host:port"),
    (["--ps=p:1"], "--masters (or --workers) is required"),
    (["--masters=a:1", "--workers=b:1"], "give --masters or its alias --workers, not both"),
    (["--masters=a:1,,b:1"], "--masters: empty address at position 2 of 'a:1,,b:1'"),
    (["--workers=a:1,b"], "--workers: 'b' has no port"),
    (["--masters=a:99999"], "--masters: 'a:99999': bad port '99999'"),
    (["--masters=a:1,b:1", "--ps=p:x"], "--ps: 'p:x': bad port 'x'"),
    (["--masters=a:1", "--ps=p:1"], "with --ps, give at least 2 --masters"),
    (["--masters=a:1,b:1", "--ps=b:1"], "address(es) in both --masters and --ps: b:1"),
    (["--masters=a:1", "--name=x"], "--name can only be used with --tfjob"),
    (["--masters=a:1", "--num_workers=2", "--image=i"],
     "--image, --num_workers can only be used with --tfjob"),
    (["--masters=a:1", "--", "t2t-trainer"], "a command after `--` (t2t-trainer) can only be "
                                             "used with --tfjob"),
    (["--masters=a:1", "extra"], "unexpected arguments ['extra']"),
])
def test_tf_config_errors(flags, message):
    result = _run(*flags)
    assert result.returncode == 1
    assert f"error: {message}" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def test_tfjob_yaml():
    result = _run("--tfjob", "--name=wmt-big", "--image=gcr.io/p/t2t:1", "--num_workers=4",
                  "--num_ps=2", "--gpus_per_worker=8", "--namespace=ml", "--", *TRAINER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# TFJob for the Kubeflow training operator")
    manifest = yaml.safe_load(result.stdout)
    assert manifest["apiVersion"] == "kubeflow.org/v1"
    assert manifest["kind"] == "TFJob"
    assert manifest["metadata"] == {"name": "wmt-big", "namespace": "ml"}
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {"Chief": 1, "Worker": 4, "PS": 2}
    for replica_type, spec in specs.items():
        assert spec["restartPolicy"] == "OnFailure"
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"
        assert container["image"] == "gcr.io/p/t2t:1"
        assert container["command"] == TRAINER
        gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        assert gpus == (8 if replica_type == "Worker" else None)


def test_tfjob_json_multi_worker():
    result = _run("--tfjob", "--name=run", "--image=img", "--num_workers=2", "--format=json",
                  "--", *TRAINER)
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert list(specs) == ["Worker"]
    assert specs["Worker"]["replicas"] == 2
    assert "resources" not in specs["Worker"]["template"]["spec"]["containers"][0]
    with_chief = json.loads(_run("--tfjob", "--name=run", "--image=img", "--chief",
                                 "--format=json", "--", "t2t-trainer").stdout)
    assert list(with_chief["spec"]["tfReplicaSpecs"]) == ["Chief", "Worker"]


@pytest.mark.parametrize("flags, message", [
    (["--image=i", "--", "t"], "--name is required: a DNS label (RFC 1035)"),
    (["--name=Big_Run", "--image=i", "--", "t"],
     "--name='Big_Run' has 'BR_': only lowercase letters, digits and '-' are allowed"),
    (["--name=9run", "--image=i", "--", "t"], "--name='9run' must start with a letter"),
    (["--name=run", "--", "t"], "--image is required"),
    (["--name=run", "--image=a b", "--", "t"], "--image='a b': an image reference has no spaces"),
    (["--name=run", "--image=i"], "no command for the containers: give it after `--`"),
    (["--name=run", "--image=i", "--num_workers=0", "--", "t"],
     "--num_workers must be at least 1, got 0"),
    (["--name=run", "--image=i", "--num_ps=-2", "--", "t"], "--num_ps must be 0 or more"),
    (["--name=run", "--image=i", "--gpus_per_worker=-1", "--", "t"],
     "--gpus_per_worker must be an integer >= 0, got -1"),
    (["--name=run", "--image=i", "--namespace=Prod", "--", "t"],
     "--namespace='Prod' has 'P'"),
    (["--name=run", "--image=i", "--masters=a:1", "--", "t"],
     "--masters cannot be used with --tfjob: the training operator assigns addresses"),
])
def test_tfjob_errors(flags, message):
    result = _run("--tfjob", *flags)
    assert result.returncode == 1
    assert f"error: {message}" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
