"""Version labels and the model config file while t2t-serve serves (issue #51 item 4), on
toy SavedModels whose answers carry their version ("v1:", "v2:"): labels on REST, a soak
of requests to labels/stable and labels/canary while the config file moves the labels and
drops version 1 (0 errors, each answer from the version its label pointed at on arrival),
models added to and removed from the file, a bad file ignored, and the store's
reload_config (TF Serving's HandleReloadConfigRequest) draining a removed model."""

import asyncio
import json
import logging
import os
import shutil
import threading
import time
import urllib.error
import urllib.request

import pytest
from tensorflow_serving.config import model_server_config_pb2

from t2t.serving import model_store, rest_api
from t2t.serving.batching import BatchingOptions
from t2t.serving.model_config import ModelConfigFile, ServerConfigError, VersionPolicy
from t2t.serving.model_store import ModelStore
from tests.helpers.serving import ServerThread, save_toy

POLL_S = 0.1  # --model_config_file_poll_wait_seconds of these servers


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("labelled") / "export")
    os.makedirs(folder)
    save_toy(folder, 1, "v1:")
    save_toy(folder, 2, "v2:")
    return folder


def config_text(*models):
    """A model config file: models are (name, base, [versions], {label: version})."""
    entries = []
    for name, base, versions, labels in models:
        policy = " ".join(f"versions: {v}" for v in versions)
        label_lines = " ".join(f'version_labels {{ key: "{k}" value: {v} }}'
                               for k, v in labels.items())
        entries.append(f'config {{ name: "{name}" base_path: "{base}" model_platform: '
                       f'"tensorflow" model_version_policy {{ specific {{ {policy} }} }} '
                       f"{label_lines} }}")
    return "model_config_list {\n  " + "\n  ".join(entries) + "\n}\n"


def write(path, text):
    """Replaces the file at once (as a config management tool does), never half-written."""
    with open(f"{path}.tmp", "w") as f:
        f.write(text)
    os.replace(f"{path}.tmp", path)


def serve_config(path, text, **batching):
    """A ServerThread serving the model config file `path` (written with `text`)."""
    write(path, text)
    config_file = ModelConfigFile(path)
    # The thread's store of a plain base path is replaced by one of the config file.
    server = ServerThread({"toy": os.path.dirname(path)}, **batching)
    server.store = ModelStore(config_file.read(), VersionPolicy(), BatchingOptions(**batching),
                              poll_seconds=0.2, config_file=config_file,
                              config_file_poll_seconds=POLL_S)
    return server


def wait_for(condition, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_labels_on_rest(base, tmp_path):
    text = config_text(("toy", base, [1, 2], {"stable": 1, "canary": 2}))
    with serve_config(str(tmp_path / "models.config"), text) as server:
        call = server.call
        assert call("/v1/models/toy/labels/stable:predict", {"instances": ["ab"]}) == (
            200, {"predictions": [{"outputs": "v1:AB", "lengths": 2}]})
        assert call("/v1/models/toy/labels/canary:predict", {"instances": ["ab"]})[1][
            "predictions"][0]["outputs"] == "v2:AB"
        status, reply = call("/v1/models/toy/labels/stable")
        assert status == 200 and [s["version"] for s in reply["model_version_status"]] == ["1"]
        status, meta = call("/v1/models/toy/labels/canary/metadata")
        assert status == 200 and meta["model_spec"]["version"] == "2"
        status, reply = call("/v1/models/toy")
        assert reply["version_labels"] == {"canary": "2", "stable": "1"}
        assert "pending_version_labels" not in reply
        listed = call("/v1/models")[1]["models"]
        assert listed[0]["version_labels"] == {"canary": "2", "stable": "1"}
        assert listed[0]["version_policy"] == "specific:1,2"
        assert call("/v1/models/toy/labels/stabel:predict", {"instances": ["a"]}) == (
            404, {"error": "model 'toy' has no version label 'stabel'; did you mean 'stable'? "
                  "Labels: ['canary', 'stable'] (the model config file's version_labels set "
                  "them)"})
        status, reply = call("/v1/models/toy/labels/:predict", {"instances": ["a"]})
        assert status == 404 and "/labels/LABEL" in reply["error"]
        with pytest.raises(Exception, match=r"give a version \(1\) or a version label "
                           r"\('stable'\), not both") as error:
            server.store.models["toy"].resolve(1, "stable")
        assert error.value.status == 400
        assert call("/v1/models/toy/versions/1:predict", {"instances": ["a"]})[0] == 200


class Client(threading.Thread):
    """Sends requests to `path` one after the other until stopped; records (sent, answered,
    HTTP status, the answer's version tag) per request."""

    def __init__(self, url, path):
        super().__init__(daemon=True)
        self.url, self.path, self.records = url, path, []
        self.stop = threading.Event()

    def run(self):
        body = json.dumps({"instances": ["x"]}).encode()
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                with urllib.request.urlopen(urllib.request.Request(
                        self.url + self.path, data=body), timeout=30) as reply:
                    status, tag = reply.status, json.loads(reply.read())["predictions"][0][
                        "outputs"][:3]
            except urllib.error.HTTPError as e:
                status, tag = e.code, e.read().decode()
            self.records.append((sent, time.monotonic(), status, tag))


class LabelWatch(threading.Thread):
    """Notes when the server's `label` starts resolving to `version` (read every ms)."""

    def __init__(self, model, label, version):
        super().__init__(daemon=True)
        self.model, self.label, self.version, self.moved_at = model, label, version, None

    def run(self):
        while self.model.labels.get(self.label) != self.version:
            time.sleep(0.001)
        self.moved_at = time.monotonic()


def check_answers(client, moves):
    """Each answer came from the version its label pointed at when the request arrived:
    `moves` is [(time the label moved, the tag from then on)], starting with (0, tag)."""
    for sent, answered, status, tag in client.records:
        assert status == 200, (status, tag)
        before = [t for moved, t in moves if moved <= sent][-1]  # the label when sent
        after = [t for moved, t in moves if moved <= answered][-1]  # ... when answered
        assert tag in (before, after), (sent, answered, tag, moves)
    tags = [tag for *_, tag in client.records]
    assert tags == sorted(tags), "an answer came from the old version after the new one"


class HeldLoad:
    """Wraps the store's SavedModel loader: the load of `version_folder` starts, then waits
    until released, so a test can watch the server while a version is loading however
    fast or slow the machine is."""

    def __init__(self, load, version_folder):
        self.load, self.version_folder = load, version_folder
        self.started, self.release = threading.Event(), threading.Event()
        self.started_at = None

    def __call__(self, path):
        if os.path.basename(os.path.normpath(path)) == self.version_folder:
            self.started_at = time.monotonic()
            self.started.set()
            assert self.release.wait(60), "the test never released the load"
        return self.load(path)


def test_labels_move_under_a_soak_with_no_error(base, tmp_path, monkeypatch):
    """stable: 1 -> 2 (version 2 loaded by the same change), canary (new): 1 -> 2 while
    version 1 is dropped; 3 clients send requests the whole time."""
    held = HeldLoad(model_store._load_saved_model, "2")
    monkeypatch.setattr(model_store, "_load_saved_model", held)
    path = str(tmp_path / "models.config")
    with serve_config(path, config_text(("toy", base, [1], {"stable": 1})),
                      batch_timeout_micros=20000) as server:
        model = server.store.models["toy"]
        stable = [Client(server.url, "/v1/models/toy/labels/stable:predict") for _ in range(2)]
        for client in stable:
            client.start()
        time.sleep(0.4)
        to_two = LabelWatch(model, "stable", 2)
        to_two.start()
        write(path, config_text(("toy", base, [1, 2], {"stable": 2, "canary": 1})))
        try:  # a failing check must not leave the load held while the server closes
            assert held.started.wait(30), "version 2 never started loading"
            # While version 2 loads, both stable clients are answered by version 1.
            wait_for(lambda: all(any(sent > held.started_at and tag == "v1:"
                                     for sent, _, _, tag in list(client.records))
                                 for client in stable), "v1 answers while v2 loads")
            assert to_two.moved_at is None, "the label moved before version 2 was loaded"
        finally:
            held.release.set()
        to_two.join(30)
        assert model.labels == {"stable": 2, "canary": 1} and sorted(model.versions) == [1, 2]
        canary = Client(server.url, "/v1/models/toy/labels/canary:predict")
        canary.start()
        time.sleep(0.4)
        canary_to_two = LabelWatch(model, "canary", 2)
        canary_to_two.start()
        write(path, config_text(("toy", base, [2], {"stable": 2, "canary": 2})))
        canary_to_two.join(30)
        wait_for(lambda: 1 not in model.unloading and 1 not in model.versions, "v1 unloaded")
        time.sleep(0.3)
        for client in [*stable, canary]:
            client.stop.set()
            client.join(30)
        status = server.call("/v1/models/toy")[1]
    assert to_two.moved_at and canary_to_two.moved_at
    for client in stable:
        check_answers(client, [(0, "v1:"), (to_two.moved_at, "v2:")])
        assert client.records[-1][3] == "v2:"
    check_answers(canary, [(0, "v1:"), (canary_to_two.moved_at, "v2:")])
    assert canary.records[0][3] == "v1:" and canary.records[-1][3] == "v2:"
    assert [s["version"] for s in status["model_version_status"]] == ["2"]
    assert status["version_labels"] == {"canary": "2", "stable": "2"}
    total = sum(len(c.records) for c in [*stable, canary])
    assert total >= 12, total  # about 110 on 2 idle cores


def test_models_added_and_removed_and_a_bad_file_ignored(base, tmp_path, caplog):
    path = str(tmp_path / "models.config")
    toy = ("toy", base, [1], {})
    with serve_config(path, config_text(toy)) as server:
        watcher = Client(server.url, "/v1/models/toy:predict")
        watcher.start()
        write(path, config_text(toy, ("other", base, [2], {"live": 2})))
        wait_for(lambda: server.call("/v1/models/other")[0] == 200
                 and server.call("/v1/models/other")[1]["version_labels"] == {"live": "2"},
                 "the added model")
        assert server.call("/v1/models/other/labels/live:predict", {"instances": ["a"]})[1][
            "predictions"][0]["outputs"] == "v2:A"
        other = server.store.models["other"]
        caplog.set_level(logging.ERROR)
        write(path, "model_config_list { config { name: 'toy' base_path: ")  # cut short
        time.sleep(4 * POLL_S)
        assert server.store.models["other"] is other and sorted(other.versions) == [2]
        errors = [r.getMessage() for r in caplog.records if "was not applied" in r.getMessage()]
        assert len(errors) == 1 and f"{path}: not a text-format ModelServerConfig" in errors[0]
        write(path, config_text(toy))
        wait_for(lambda: server.call("/v1/models/other")[0] == 404, "the removal")
        assert server.call("/v1/models/other:predict", {"instances": ["a"]}) == (
            404, {"error": "unknown model 'other' Served models: ['toy']"})
        wait_for(lambda: not other.unloading and not server.store.removed, "the drain")
        watcher.stop.set()
        watcher.join(30)
    assert watcher.records and all(r[2:] == (200, "v1:") for r in watcher.records)


def test_reload_config_drains_a_removed_model_and_keeps_labels_on_a_failed_load(base, tmp_path):
    """The store's reload_config, as gRPC's HandleReloadConfigRequest calls it."""
    broken = str(tmp_path / "broken")
    for version in ("1", "2"):
        shutil.copytree(os.path.join(base, version), os.path.join(broken, version))
    os.makedirs(os.path.join(broken, "3"))
    with open(os.path.join(broken, "3", "saved_model.pb"), "wb") as f:
        f.write(b"not a SavedModel")

    def proto(*models):
        from google.protobuf import text_format

        return text_format.Parse(config_text(*models), model_server_config_pb2.ModelServerConfig())

    async def scenario():
        toy, other = ("toy", broken, [1], {"stable": 1}), ("other", base, [2], {})
        config = ModelConfigFile(str(tmp_path / "m.config"))
        write(config.path, config_text(toy, other))
        store = ModelStore(config.read(), VersionPolicy(), BatchingOptions())
        await store.start()
        servable = store.model("other").resolve(None)
        request = rest_api.parse_predict(b'{"instances": ["q"]}', servable.signatures, 32)
        with servable.in_use():  # a request in flight on the model about to be removed
            await store.reload_config(proto(toy))
            assert "other" not in store.models and servable.state == "UNLOADING"
            outputs = await servable.predict(request)
        assert outputs["outputs"].tolist() == [b"v2:Q"]
        while servable.state != "END":
            await asyncio.sleep(0.01)
        # stable -> 3, whose files are broken: the label stays on 1, which stays loaded
        # although the new policy drops it; 2 loads.
        await store.reload_config(proto(("toy", broken, [2, 3], {"stable": 3})))
        model = store.model("toy")
        assert model.labels == {"stable": 1} and sorted(model.versions) == [1, 2]
        assert model.status(3)[0]["state"] == "END"
        assert model.resolve(None, "stable").version == 1
        await store.reload_config(proto(("toy", broken, [2, 3], {"stable": 2})))
        assert model.labels == {"stable": 2} and sorted(model.versions) == [2]
        with pytest.raises(ServerConfigError, match=r"the ReloadConfig request, config #1 "
                           r"\('toy'\): version label 'stable' points at version 7, outside"):
            await store.reload_config(proto(("toy", broken, [2], {"stable": 7})))
        with pytest.raises(ServerConfigError, match="differs from the one 'toy' is served from"):
            await store.reload_config(proto(("toy", base, [2], {})))
        assert model.labels == {"stable": 2} and store.model("toy") is model  # unchanged
        await store.close()

    asyncio.run(scenario())
