"""A served toy SavedModel for t2t-serve's tests (the model, and the server in a thread),
and an exported image-to-text run called with image bytes from a fresh process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import tensorflow as tf

from t2t.serving import grpc_server, http_server
from t2t.serving.batching import BatchingOptions
from t2t.serving.model_store import ModelStore, VersionPolicy


class Toy(tf.Module):
    """outputs = TAG + upper(inputs) (ASCII letters only); "parse": strings to numbers; "scale": x * 2."""

    def __init__(self, tag: str):
        super().__init__()
        self.tag = tf.Variable(tag)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def text(self, inputs):
        return {"outputs": tf.strings.join([self.tag, tf.strings.upper(inputs)]),
                "lengths": tf.strings.length(inputs, unit="UTF8_CHAR")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def parse(self, inputs):
        return {"value": tf.strings.to_number(inputs)}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def scale(self, x):
        return {"y": x * 2.0}


def save_toy(base: str, version: int, tag: str) -> str:
    """Writes version `version` as t2t-exporter does: a staging folder, then a rename."""
    toy = Toy(tag)
    staging = os.path.join(base, f"temp-{version}")
    tf.saved_model.save(toy, staging, signatures={"serving_default": toy.text,
                                                  "parse": toy.parse, "scale": toy.scale})
    final = os.path.join(base, str(version))
    os.replace(staging, final)
    return final


class ServerThread:
    """t2t-serve's servers (REST and gRPC) on free ports, in a thread with its own event loop.

    .url is the REST base URL, .grpc_target the gRPC "host:port". `__enter__` returns once
    the models are loaded, or (wait_for_models=False) once both ports are open."""

    def __init__(self, models, policy="latest:2", max_request_bytes=1 << 20, extra_handlers=(),
                 wait_for_models=True, **batching):
        self.store = ModelStore(models, VersionPolicy.parse(policy), BatchingOptions(**batching),
                                poll_seconds=0.2)
        self.options = http_server.ServerOptions(port=0, max_request_bytes=max_request_bytes)
        self.grpc_options = grpc_server.GrpcOptions(port=0, max_request_bytes=max_request_bytes)
        self.extra_handlers, self.wait_for_models = tuple(extra_handlers), wait_for_models
        self.listening, self.ready = threading.Event(), threading.Event()
        self.error = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self):
        self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()

        def on_listening(url, grpc_target):
            self.url, self.grpc_target = url, grpc_target
            self.listening.set()

        try:
            await grpc_server.run(self.store, self.options, self.grpc_options, self.stop,
                                  on_listening, lambda *_: self.ready.set(), self.extra_handlers)
        except Exception as e:  # noqa: BLE001 - reported to the test
            self.error = e
        finally:
            self.listening.set()
            self.ready.set()

    def __enter__(self):
        self.thread.start()
        assert (self.ready if self.wait_for_models else self.listening).wait(60)
        if self.error:
            raise self.error
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(60)

    def call(self, path, body=None, raw=None):
        """(status, JSON reply) of GET path, or POST with the JSON `body` (or bytes `raw`)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        request = urllib.request.Request(self.url + path, data=data)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


class ImageToy(tf.Module):
    """An image "classifier": encoded PNG/JPEG bytes in, "HEIGHTxWIDTH" out."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def shape(self, inputs):
        def one(data):
            image = tf.io.decode_image(data, channels=3, expand_animations=False)
            return tf.strings.format("{}x{}", (tf.shape(image)[0], tf.shape(image)[1]))

        return {"outputs": tf.map_fn(one, inputs, fn_output_signature=tf.string)}


def save_image_toy(base: str, version: int) -> str:
    """ImageToy as version `version`, with the t2t_export.json fields the page reads."""
    toy = ImageToy()
    final = os.path.join(base, str(version))
    tf.saved_model.save(toy, final, signatures={"serving_default": toy.shape})
    os.makedirs(os.path.join(final, "assets.extra"), exist_ok=True)
    with open(os.path.join(final, "assets.extra", "t2t_export.json"), "w") as f:
        json.dump({"problem": "toy_image", "model": "image_toy",
                   "encoders": {"inputs": {"type": "image"}, "targets": None}}, f)
    return final


def export_and_caption(output_dir: str, data_dir: str, export_dir: str, decode_hparams: str,
                       images: list[str]) -> list[str]:
    """Exports the run (t2t-exporter, whose parity gate must pass), then has a plain
    TensorFlow script in a fresh process send the files `images` as encoded bytes to
    the SavedModel's serving_default; returns the texts it printed."""
    from tests.helpers.binaries import run_binary

    exported = run_binary("t2t-exporter", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                          f"--export_dir={export_dir}", f"--decode_hparams={decode_hparams}")
    assert exported.code == 0, exported.err[-3000:]
    assert "Parity check passed on " in exported.out
    path = next(line.removeprefix("Exported: ") for line in exported.out.splitlines()
                if line.startswith("Exported: "))
    client = (
        "import sys, json, tensorflow as tf\n"
        "import tensorflow_text  # SentencePiece ops, for exports that detokenize with them\n"
        "model = tf.saved_model.load(sys.argv[1])\n"
        "images = [open(p, 'rb').read() for p in sys.argv[2:]]\n"
        "out = model.signatures['serving_default'](inputs=tf.constant(images))\n"
        "print(json.dumps([t.decode() for t in out['outputs'].numpy()]))\n")
    run = subprocess.run([sys.executable, "-c", client, path, *images], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])
