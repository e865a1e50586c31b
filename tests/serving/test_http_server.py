"""t2t-serve's HTTP server in-process, on toy SavedModels: TF Serving's REST API, errors as
JSON (and the server keeps serving), versions picked up and unloaded without a restart,
a broken version reported, and concurrent requests batched with each answer its own."""

import asyncio
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from t2t.serving.batching import BatchingOptions
from t2t.serving.model_store import ModelStore, ServerConfigError, VersionPolicy, resolve_base_path
from tests.helpers.serving import ServerThread, save_toy
from tests.robustness.support import wait_for


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("toy") / "export")
    os.makedirs(folder)
    save_toy(folder, 1, "v1:")
    return folder


def test_predict_status_metadata_and_errors(base):
    with ServerThread({"toy": base}) as server:
        assert server.call("/v1/models/toy:predict", {"instances": ["abc", "dé"]}) == (
            200, {"predictions": [{"lengths": 3, "outputs": "v1:ABC"},
                                  {"lengths": 2, "outputs": "v1:Dé"}]})
        assert server.call("/v1/models/toy/versions/1:predict",
                           {"signature_name": "scale", "inputs": {"x": [[1, 2]]}}) == (
            200, {"outputs": [[2.0, 4.0]]})
        status, reply = server.call("/v1/models/toy")
        assert reply["model_version_status"] == [{"version": "1", "state": "AVAILABLE", "status": {
            "error_code": "OK", "error_message": ""}}]
        status, meta = server.call("/v1/models/toy/metadata")
        sigs = meta["metadata"]["signature_def"]["signature_def"]
        assert sorted(sigs) == ["parse", "scale", "serving_default"]
        assert sigs["scale"]["inputs"]["x"]["dtype"] == "DT_FLOAT"
        assert meta["model_spec"] == {"name": "toy", "signature_name": "", "version": "1"}
        assert server.call("/healthz") == (200, {"status": "ok", "models": {"toy": ["1"]}})
        bad = [
            ("/v1/models/toy:predict", {"raw": b'{"instances": ['}, 400, "malformed JSON"),
            ("/v1/models/toy:predict", {"body": {"instances": []}}, 400, "empty"),
            ("/v1/models/toy:predict", {"body": {"instances": [{"input": "a"}]}}, 400,
             "unknown input name(s) ['input']"),
            ("/v1/models/toy:predict", {"body": {"instances": [7]}}, 400, "wants a string"),
            ("/v1/models/toy:predict", {"raw": json.dumps(
                {"instances": ["x" * 2_000_000]}).encode()}, 413, "--max_request_bytes"),
            ("/v1/models/tyo:predict", {"body": {"instances": ["a"]}}, 404, "did you mean 'toy'"),
            ("/v1/models/toy/versions/9:predict", {"body": {"instances": ["a"]}}, 404,
             "no version 9; served versions: [1]"),
            ("/v1/models/toy/versions/x:predict", {"body": {"instances": ["a"]}}, 404,
             "not a number"),
            ("/v1/models/toy:classify", {"body": {"instances": ["a"]}}, 400, ":predict"),
            ("/v1/models/toy:predict", {"body": {"signature_name": "parse",
                                                 "instances": ["abc"]}}, 400,
             "could not correctly convert string: abc"),
            ("/v1/models/toy:predict", {}, 405, "needs POST"),
            ("/nowhere", {}, 404, "no such path /nowhere"),
        ]
        for path, kwargs, want_status, words in bad:
            if path == "/v1/models/toy:predict" and not kwargs:
                status, reply = server.call(path)
            else:
                status, reply = server.call(path, kwargs.get("body"), kwargs.get("raw"))
            assert status == want_status, (path, kwargs, reply)
            assert words in reply["error"], (words, reply)
        # ... and it still serves.
        assert server.call("/v1/models/toy:predict", {"inputs": ["ok"]})[1] == {
            "outputs": {"lengths": [2], "outputs": ["v1:OK"]}}


def test_concurrent_requests_are_batched_and_each_gets_its_answer(base):
    words = [f"word{i}" * (1 + i % 3) for i in range(48)]
    with ServerThread({"toy": base}, max_batch_size=16, batch_timeout_micros=20_000,
                      num_batch_threads=1) as server:
        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(
                lambda w: server.call("/v1/models/toy:predict", {"instances": [w, w + "!"]}),
                words))
        for word, (status, reply) in zip(words, replies, strict=True):
            assert status == 200
            assert [p["outputs"] for p in reply["predictions"]] == [
                "v1:" + word.upper(), "v1:" + word.upper() + "!"]
        # one bad input among good ones fails alone
        with ThreadPoolExecutor(4) as pool:
            mixed = list(pool.map(lambda text: server.call(
                "/v1/models/toy:predict", {"signature_name": "parse", "instances": [text]}),
                ["1.5", "abc", "2", "3"]))
        assert [s for s, _ in mixed] == [200, 400, 200, 200]
        assert mixed[0][1] == {"predictions": [1.5]}
        _, stats = server.call("/v1/models/toy?stats")
        batching = stats["batching"]["1"]["serving_default"]
        assert batching["examples"] == 96 and batching["mean_batch_size"] > 2


def test_new_versions_are_served_without_a_restart(tmp_path):
    folder = str(tmp_path / "export")
    os.makedirs(folder)
    save_toy(folder, 1, "v1:")
    with ServerThread({"toy": folder}, policy="latest:1") as server:
        ask = lambda path="/v1/models/toy:predict": server.call(path, {"instances": ["a"]})  # noqa: E731
        assert ask()[1]["predictions"][0]["outputs"] == "v1:A"
        save_toy(folder, 2, "v2:")
        assert wait_for(lambda: ask()[1].get("predictions", [{}])[0].get("outputs") == "v2:A", 60)
        assert wait_for(lambda: ask("/v1/models/toy/versions/1:predict")[0] == 404, 60)
        # a broken version is reported; version 2 keeps serving
        os.makedirs(os.path.join(folder, "3", "variables"))
        with open(os.path.join(folder, "3", "saved_model.pb"), "wb") as f:
            f.write(b"not a SavedModel")
        assert wait_for(lambda: any(
            s["version"] == "3" and s["state"] == "END"
            for s in server.call("/v1/models/toy")[1]["model_version_status"]), 60)
        status = server.call("/v1/models/toy")[1]["model_version_status"]
        assert status[0]["status"]["error_code"] == "UNKNOWN" and status[0]["status"]["error_message"]
        assert ask()[1]["predictions"][0]["outputs"] == "v2:A"
        # deleting the served version's folder unloads it... after the next is loaded
        shutil.rmtree(os.path.join(folder, "3"))
        save_toy(folder, 4, "v4:")
        assert wait_for(lambda: ask()[1]["predictions"][0]["outputs"] == "v4:A", 60)


def test_store_refuses_bad_paths_and_policies(tmp_path, base):
    with pytest.raises(ServerConfigError, match="does not exist"):
        resolve_base_path(str(tmp_path / "missing"))
    with pytest.raises(ServerConfigError, match="one version of a model; give the folder"):
        resolve_base_path(os.path.join(base, "1"))
    run = tmp_path / "run"
    os.makedirs(run / "export")
    assert resolve_base_path(str(run)) == str(run / "export")
    with pytest.raises(ServerConfigError, match="latest:N"):
        VersionPolicy.parse("newest")
    assert VersionPolicy.parse("specific:3,1").select([1, 2, 3]) == {1, 3}
    assert VersionPolicy.parse("latest:2").select([5, 1, 9]) == {5, 9}
    empty = tmp_path / "empty"
    os.makedirs(empty)
    with pytest.raises(ServerConfigError, match="no version folders"):
        asyncio.run(ModelStore({"m": str(empty)}, VersionPolicy(), BatchingOptions()).start())
