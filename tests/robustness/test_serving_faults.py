"""Injected faults in export and serving, and what t2t-serve tells its clients.

* t2t-serve given a corrupted newer version (saved_model.pb truncated, the variables data
  bit-flipped or truncated) while it serves: the old version keeps serving, the new one
  is reported failed (state END, with the reason) and logged once; a later good version
  is picked up.
* A staging folder (temp-VERSION-PID) left by a killed exporter is never loaded, and
  t2t-serve says once that it can be deleted.
* t2t-exporter SIGKILLed while it writes the SavedModel and while it runs the parity
  check (slow): no version folder appears, t2t-serve serves the complete versions, and a
  re-run exports.
* Security: t2t-serve listens on 127.0.0.1 unless told, refuses large bodies (413), and
  no answer (model errors in TF, unknown names, a failed version's status, metadata)
  holds a server path or a stack trace.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import tensorflow as tf

from tests.helpers.serving import ServerThread, save_image_toy, save_toy
from tests.robustness import support
from tests.robustness.support import FAST_DECODE

SERVE = [sys.executable, "-m", "t2t.bin.t2t_serve"]
EXPORTER = [sys.executable, "-m", "t2t.bin.t2t_exporter"]
TIMEOUT_S = 300
WHEN = {"saving": "while it writes the SavedModel (staging folder)",
        "parity": "during its parity check (SavedModel written, not yet renamed)"}


def _wait_for(predicate, seconds: float = 60) -> bool:
    return support.wait_for(predicate, seconds)


class _Logged(logging.Handler):
    """absl's log records (t2t-serve logs through absl) as text lines."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self):
        logging.getLogger("absl").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("absl").removeHandler(self)


def _dead_pid() -> int:
    """The pid of a process that has ended (what a SIGKILLed exporter leaves)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# ------------------------------------------------------- corrupted newer version
def _truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def _flip(path: str) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))


def _data_file(version_dir: str) -> str:
    folder = os.path.join(version_dir, "variables")
    return os.path.join(folder, next(n for n in os.listdir(folder) if ".data-" in n))


CORRUPTIONS = {  # name: (damage of a version folder, words of the reason in the status)
    "saved_model.pb truncated": (lambda d: _truncate(os.path.join(d, "saved_model.pb")),
                                 "saved_model.pb"),
    "variables data bit-flipped": (lambda d: _flip(_data_file(d)), "Checksum does not match"),
    "variables data truncated": (lambda d: _truncate(_data_file(d)), "Read less bytes"),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_corrupted_newer_version_keeps_the_old_one_serving(robustness, tmp_path, corruption):
    damage, reason = CORRUPTIONS[corruption]
    base = str(tmp_path / "export")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    ask = {"instances": ["a"]}
    with _Logged() as log, ServerThread({"toy": base}, policy="latest:1") as server:
        assert server.call("/v1/models/toy:predict", ask)[1]["predictions"][0]["outputs"] == "v1:A"
        # The damaged version appears whole (a rename), as an exporter or a copy would put it.
        staged = save_toy(str(tmp_path), 2, "v2:")
        damage(staged)
        robustness.fault(f"t2t-serve: a newer version with its {corruption}")
        os.replace(staged, os.path.join(base, "2"))

        def status():
            return {s["version"]: s for s in server.call("/v1/models/toy")[1][
                "model_version_status"]}

        assert _wait_for(lambda: status().get("2", {}).get("state") == "END")
        failed = status()["2"]["status"]
        assert failed["error_code"] == "UNKNOWN" and reason in failed["error_message"], failed
        assert base not in failed["error_message"] and "/tmp" not in failed["error_message"]
        assert status()["1"]["state"] == "AVAILABLE"
        for _ in range(5):  # several polls (0.2 s) later: still v1, and logged only once
            assert server.call("/v1/models/toy:predict", ask)[1]["predictions"][0][
                "outputs"] == "v1:A"
            time.sleep(0.2)
        logged = [line for line in log.lines if "version 2" in line and "failed" in line]
        assert len(logged) == 1 and reason in logged[0], log.lines
        assert os.path.join(base, "2") in logged[0]  # the server's log names the folder
        save_toy(base, 3, "v3:")
        assert _wait_for(lambda: server.call("/v1/models/toy:predict", ask)[1].get(
            "predictions", [{}])[0].get("outputs") == "v3:A")
        assert status()["2"]["state"] == "END"
    robustness.run_completed(f"t2t-serve kept version 1 past a version with its {corruption}, "
                             "then served version 3")


def test_stale_staging_folder_is_never_loaded(robustness, tmp_path):
    """A killed exporter's temp-VERSION-PID holds a whole SavedModel (killed during the
    parity check) or part of one: neither is served, and the log says it once."""
    base = str(tmp_path / "export")
    os.makedirs(base)
    save_toy(base, 1, "v1:")
    pid = _dead_pid()
    shutil.copytree(save_toy(str(tmp_path), 9, "stale:"), os.path.join(base, f"temp-9-{pid}"))
    os.makedirs(os.path.join(base, f"temp-8-{pid}", "variables"))
    robustness.fault("t2t-serve: a killed exporter's staging folders in the base path")
    with _Logged() as log, ServerThread({"toy": base}) as server:
        time.sleep(1.0)  # five polls
        status = server.call("/v1/models/toy")[1]["model_version_status"]
        assert [s["version"] for s in status] == ["1"], status
        assert server.call("/v1/models/toy:predict", {"instances": ["a"]})[1][
            "predictions"][0]["outputs"] == "v1:A"
        assert server.call("/v1/models/toy/versions/9:predict", {"instances": ["a"]})[0] == 404
    warned = [line for line in log.lines if "temp-" in line]
    for name in (f"temp-9-{pid}", f"temp-8-{pid}"):
        assert sum(f"{name}," in line for line in warned) == 1, warned
    assert any("2 unfinished exports" in line for line in warned), warned
    robustness.run_completed("t2t-serve served version 1 beside two stale staging folders")


# ------------------------------------------------------- exporter killed mid-write
def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _parity_children(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"parity_worker" in f.read():
                    found.append(child)
        except OSError:
            pass
    return found


def _export_killed(run: str, data_dir: str, when: str, log_path: str) -> int:
    """Starts t2t-exporter on `run` and SIGKILLs it `when` ("saving": its staging folder
    appeared; "parity": its parity check's process started); returns its pid."""
    export = os.path.join(run, "export")
    before = set(os.listdir(export)) if os.path.isdir(export) else set()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*EXPORTER, f"--output_dir={run}", f"--data_dir={data_dir}",
                                 f"--decode_hparams={FAST_DECODE}"],
                                stdout=log, stderr=subprocess.STDOUT)
    watchdog = threading.Timer(TIMEOUT_S, lambda: proc.poll() is None and proc.kill())
    watchdog.start()

    def reached():
        names = set(os.listdir(export)) - before if os.path.isdir(export) else set()
        if when == "saving":
            return any(n.startswith("temp-") for n in names)
        return bool(_parity_children(proc.pid))

    try:
        assert _wait_for(lambda: reached() or proc.poll() is not None, TIMEOUT_S)
        children = _parity_children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for child in children:  # the parity process it started would finish alone
            os.kill(child, signal.SIGKILL)
    finally:
        watchdog.cancel()
    assert proc.returncode == -signal.SIGKILL, open(log_path).read()[-3000:]
    return proc.pid


class _Serve:
    """The t2t-serve binary on a free port (default host), until stopped."""

    def __init__(self, *flags: str):
        self.process = subprocess.Popen([*SERVE, "--rest_api_port=0", "--port=0", *flags],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        self.lines = []
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("Serving on "):
                self.url = line.split()[2]
                return
        raise AssertionError("t2t-serve did not start:\n" + "".join(self.lines)
                             + self.process.stderr.read()[-3000:])

    def call(self, path: str, body=None, headers=None) -> tuple[int, str]:
        """(status, body text); `body`: bytes, or an iterable of chunks (sent chunked)."""
        request = urllib.request.Request(self.url + path, data=body, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


@pytest.mark.slow
def test_exporter_killed_mid_write_leaves_no_version(robustness, trained_run, data_dir,
                                                     tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(trained_run, run)
    export = os.path.join(run, "export")
    result = subprocess.run([*EXPORTER, f"--output_dir={run}", f"--data_dir={data_dir}",
                             f"--decode_hparams={FAST_DECODE}", "--skip_parity_check"],
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    (good,) = os.listdir(export)
    kept = support.snapshot(export)
    pids = {}
    for when in ("saving", "parity"):
        robustness.fault(f"SIGKILL t2t-exporter {WHEN[when]}")
        pids[when] = _export_killed(run, data_dir, when, str(tmp_path / f"export_{when}.log"))
        names = os.listdir(export)
        assert [n for n in names if n.isdigit()] == [good], names  # no new version folder
    staging = sorted(n for n in os.listdir(export) if n.startswith("temp-"))
    assert len(staging) == 2, staging  # one per killed exporter, left for the server to ignore
    (in_parity,) = [n for n in staging if n.endswith(f"-{pids['parity']}")]
    assert os.path.isfile(os.path.join(export, in_parity, "saved_model.pb"))  # a whole model
    support.assert_kept(robustness, export, kept)  # the good version, byte for byte

    server = _Serve(f"--model_base_path={export}", "--model_name=m")
    try:
        assert server.url.startswith("http://127.0.0.1:"), server.url  # the default host
        status = json.loads(server.call("/v1/models/m")[1])["model_version_status"]
        assert [s["version"] for s in status] == [good], status
    finally:
        code, err = server.stop()
    assert code == 0, err[-3000:]
    assert all(f"ignoring {os.path.join(export, n)}" in err for n in staging), err[-3000:]

    result = subprocess.run([*EXPORTER, f"--output_dir={run}", f"--data_dir={data_dir}",
                             f"--decode_hparams={FAST_DECODE}"],
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    versions = sorted(n for n in os.listdir(export) if n.isdigit())
    assert len(versions) == 2 and versions[0] == good, versions
    assert os.path.isfile(os.path.join(export, versions[1], "saved_model.pb"))
    # The re-run leaves the dead exporters' staging folders as they were (it does not
    # clean them: t2t-serve names them, see above).
    assert sorted(n for n in os.listdir(export) if n.startswith("temp-")) == staging
    support.assert_kept(robustness, export, kept)  # the good version, byte for byte
    robustness.run_completed("t2t-exporter re-run after two kills exported a new version")


# ------------------------------------------------------------------- security
class _Reader(tf.Module):
    """Reads the file named by its input: a model whose op fails with the path in TF's
    message (NotFoundError)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def read(self, inputs):
        return {"outputs": tf.map_fn(tf.io.read_file, inputs)}


LEAKS = ("Traceback", 'File "', "/tmp", "(most recent call last)", "{{node", "[[", "[Op:",
         ".py\", line")


def _assert_no_leak(body: str, *paths: str) -> None:
    for word in (*LEAKS, *paths):
        assert word not in body, (word, body)


def test_no_answer_leaks_a_path_or_a_stack_trace(robustness, tmp_path):
    text, image, reader = (str(tmp_path / n) for n in ("text", "image", "reader"))
    for folder in (text, image, reader):
        os.makedirs(folder)
    save_toy(text, 1, "v1:")
    save_image_toy(image, 1)
    info_path = os.path.join(image, "1", "assets.extra", "t2t_export.json")
    with open(info_path) as f:  # as t2t-exporter writes it: absolute paths inside
        info = json.load(f)
    with open(info_path, "w") as f:
        json.dump({**info, "checkpoint": str(tmp_path / "run" / "ckpt-5"),
                   "ids_only_export": str(tmp_path / "run" / "export_ids_only" / "1")}, f)
    module = _Reader()
    tf.saved_model.save(module, os.path.join(reader, "1"),
                        signatures={"serving_default": module.read})
    server = _Serve(f"--models=text={text},image={image},reader={reader}",
                    "--max_request_bytes=100000", "--file_system_poll_wait_seconds=0.2")
    try:
        robustness.bad_input("t2t-serve default host")
        assert server.url.startswith("http://127.0.0.1:"), server.url
        # A newer version that fails to load (damaged before it appears): its status says why.
        os.makedirs(tmp_path / "stage")
        staged = save_toy(str(tmp_path / "stage"), 2, "v2:")
        _truncate(os.path.join(staged, "saved_model.pb"))
        os.replace(staged, os.path.join(text, "2"))
        predict = "/v1/models/{}:predict"
        requests = [  # (what, path, body, status)
            ("a string TF cannot parse as a number", predict.format("text"),
             {"signature_name": "parse", "instances": ["abc"]}, 400),
            ("an undecodable image", predict.format("image"),
             {"instances": [{"b64": base64.b64encode(b"not an image").decode()}]}, 400),
            ("a file name the model's op fails on", predict.format("reader"),
             {"instances": [str(tmp_path / "missing.txt")]}, 400),
            ("a wrong dtype", predict.format("text"),
             {"signature_name": "scale", "instances": [["a", "b"]]}, 400),
            ("a wrong shape", predict.format("text"),
             {"signature_name": "scale", "instances": [[1, 2, 3]]}, 400),
            ("an unknown model", predict.format("txet"), {"instances": ["a"]}, 404),
            ("an unknown version", "/v1/models/text/versions/7:predict",
             {"instances": ["a"]}, 404),
            ("a version that failed to load", "/v1/models/text/versions/2:predict",
             {"instances": ["a"]}, 404),
            ("a version name that is not a number", "/v1/models/text/versions/..%2F..:predict",
             {"instances": ["a"]}, 404),
            ("a body over --max_request_bytes", predict.format("text"),
             {"instances": ["x" * 200_000]}, 413),
        ]
        for what, path, body, want in requests:
            robustness.bad_input(f"t2t-serve: {what}")
            status, reply = server.call(path, json.dumps(body).encode(),
                                        {"Content-Type": "application/json"})
            assert status == want, (what, status, reply)
            assert json.loads(reply)["error"], reply
            _assert_no_leak(reply, text, image, reader, str(tmp_path))
        robustness.bad_input("t2t-serve: a chunked body over --max_request_bytes")
        chunks = iter([b'{"instances": ["'] + [b"y" * 50_000] * 3 + [b'"]}'])
        status, reply = server.call(predict.format("text"), chunks)
        assert status == 413 and "--max_request_bytes" in reply, (status, reply)
        _assert_no_leak(reply, text, image, reader, str(tmp_path))
        assert _wait_for(lambda: '"END"' in server.call("/v1/models/text")[1])
        for path in ("/v1/models", "/v1/models/text", "/v1/models/image/metadata",
                     "/v1/models/text/metadata", "/healthz"):
            status, reply = server.call(path)
            assert status == 200, (path, reply)
            _assert_no_leak(reply, text, image, reader, str(tmp_path))
        status_reply = json.loads(server.call("/v1/models/text")[1])["model_version_status"]
        assert "saved_model.pb" in status_reply[0]["status"]["error_message"], status_reply
        meta = json.loads(server.call("/v1/models/image/metadata")[1])["t2t_export"]
        assert meta["checkpoint"] == "ckpt-5" and meta["problem"] == "toy_image"
        # ... and it still serves.
        status, reply = server.call(predict.format("text"), b'{"instances": ["ok"]}')
        assert status == 200 and json.loads(reply)["predictions"][0]["outputs"] == "v1:OK"
    finally:
        code, err = server.stop()
    assert code == 0, err[-3000:]
    # The server's own log keeps the details the clients did not get.
    assert os.path.join(text, "2") in err, err[-3000:]
    assert re.search(r"version 2 \(.*\) failed to load", err), err[-3000:]


def test_internal_error_names_no_path(robustness, tmp_path, monkeypatch):
    """An unexpected exception inside a request (here: writing the answer fails with an
    OSError naming a file) is a 500 with one line, its path cut to the base name."""
    from t2t.serving import rest_api

    base = str(tmp_path / "export")
    os.makedirs(base)
    save_toy(base, 1, "v1:")

    def broken(outputs, row_format):
        raise OSError(28, "No space left on device", str(tmp_path / "spool" / "answer.json"))

    robustness.fault("t2t-serve: an unexpected OSError (with a path) while answering")
    with _Logged() as log, ServerThread({"toy": base}) as server:
        monkeypatch.setattr(rest_api, "predict_response", broken)
        status, reply = server.call("/v1/models/toy:predict", {"instances": ["a"]})
        assert status == 500, reply
        assert "No space left on device" in reply["error"] and "answer.json" in reply["error"]
        _assert_no_leak(json.dumps(reply), str(tmp_path))
        monkeypatch.undo()
        assert server.call("/v1/models/toy:predict", {"instances": ["a"]})[0] == 200
    assert any("internal error" in line for line in log.lines), log.lines
    robustness.run_completed("t2t-serve answered 500 without the path, then served again")
