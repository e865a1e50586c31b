"""t2t-serve: serve exported models over TensorFlow Serving's REST API, with batching.

  t2t-exporter --output_dir=RUN
  t2t-serve --output_dir=RUN --model_name=reverse --rest_api_port=8501
  curl -d '{"instances": ["1 0 1 1"]}' localhost:8501/v1/models/reverse:predict

Serves the versions in RUN/export/<version>/ (or --model_base_path=DIR, or several models
with --models=NAME=DIR,NAME2=DIR2): the newest version answers requests without a
version, /versions/N a given one; a version written later is loaded without a restart
and the one it replaces finishes its requests before it is unloaded
(--model_version_policy says which versions are kept). Requests arriving within
--batch_timeout_micros run as one batch of up to --max_batch_size examples on
--num_batch_threads threads; beyond --max_enqueued_batches full batches waiting, requests
get HTTP 429. SIGTERM (or Ctrl-C) stops listening, finishes the requests in flight and
exits. Flags named like TF Serving's (tensorflow_model_server) mean the same.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from absl import flags

from t2t.bin import common_flags, flag_help

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "A training run: serves its exports (RUN/export).")
flags.DEFINE_string("model_name", "default", "The model's name in the URL "
                    "(/v1/models/NAME), for --output_dir or --model_base_path.")
flags.DEFINE_string("model_base_path", None, "The folder of version folders (as "
                    "t2t-exporter's --export_dir), or a run folder holding export/.")
flags.DEFINE_list("models", [], "Several models: NAME=DIR,NAME2=DIR2 (DIR as "
                  "--model_base_path).")
flags.DEFINE_string("model_version_policy", "latest:2", "Which versions are served: "
                    "latest:N (the newest N), all, or specific:V1,V2. TF Serving's default "
                    "is latest:1; 2 keeps the previous version reachable by number during "
                    "a roll-out.")
flags.DEFINE_string("rest_api_host", "127.0.0.1", "Address to listen on (0.0.0.0: every "
                    "interface, e.g. in a container).")
flags.DEFINE_integer("rest_api_port", 8501, "Port to listen on (0: a free one, printed).")
flags.DEFINE_bool("enable_batching", True, "Batch requests that arrive close together.")
flags.DEFINE_integer("max_batch_size", 32, "The most examples in one batch (and in one "
                     "request).")
flags.DEFINE_integer("batch_timeout_micros", 2000, "How long a batch waits for more "
                     "requests after its first arrived (microseconds).")
flags.DEFINE_integer("num_batch_threads", min(4, os.cpu_count() or 1), "Batches run at "
                     "the same time.")
flags.DEFINE_integer("max_enqueued_batches", 16, "Queue bound, in full batches; beyond it "
                     "requests are refused with HTTP 429.")
flags.DEFINE_list("allowed_batch_sizes", [], "Batch sizes a batch is padded up to "
                  "(ascending, ending with --max_batch_size); default: powers of 2.")
flags.DEFINE_float("file_system_poll_wait_seconds", 1.0, "How often the model folders are "
                   "checked for new versions.")
flags.DEFINE_integer("max_request_bytes", 8 * 1024 * 1024, "Larger request bodies get "
                     "HTTP 413.")
flags.DEFINE_float("shutdown_timeout_seconds", 30.0, "On SIGTERM, how long requests in "
                   "flight may take to finish.")


def _models() -> dict[str, str]:
    models: dict[str, str] = {}
    for item in FLAGS.models:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            common_flags.fail(f"--models: {item!r} is not NAME=DIR (e.g. "
                              "--models=reverse=t2t_train/reverse/export)")
        if name in models:
            common_flags.fail(f"--models: the name {name!r} is given twice")
        models[name] = path
    single = FLAGS.model_base_path or FLAGS.output_dir
    if FLAGS.model_base_path and FLAGS.output_dir:
        common_flags.fail("give --output_dir=RUN or --model_base_path=DIR, not both")
    if single:
        if FLAGS.model_name in models:
            common_flags.fail(f"--model_name={FLAGS.model_name} is also in --models")
        models[FLAGS.model_name] = (os.path.join(single, "export") if FLAGS.output_dir
                                    else single)
    if not models:
        common_flags.fail("nothing to serve: give --output_dir=RUN (a run exported with "
                          "t2t-exporter), --model_base_path=DIR or --models=NAME=DIR")
    return models


def _batching():
    from t2t.serving.batching import BatchingOptions

    try:
        sizes = tuple(int(s) for s in FLAGS.allowed_batch_sizes)
    except ValueError:
        common_flags.fail(f"--allowed_batch_sizes={','.join(FLAGS.allowed_batch_sizes)}: "
                          "not a list of integers")
    options = BatchingOptions(FLAGS.enable_batching, FLAGS.max_batch_size,
                              FLAGS.batch_timeout_micros, FLAGS.num_batch_threads,
                              FLAGS.max_enqueued_batches, sizes)
    try:
        options.check()
    except ValueError as e:
        common_flags.fail(str(e))
    return options


async def _serve(store, options) -> None:
    from t2t.serving import http_server

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def ready(url: str) -> None:
        for model in store.models.values():
            versions = ", ".join(map(str, sorted(model.versions, reverse=True)))
            print(f"Model {model.name!r}: version(s) {versions} from {model.base_path}")
            print(f"  POST {url}/v1/models/{model.name}:predict")
        print(f"Serving on {url} (SIGTERM or Ctrl-C stops)", flush=True)

    await http_server.run(store, options, stop, ready)
    print("Stopped: requests in flight finished, models unloaded.", flush=True)


def main(argv: list[str]) -> None:
    if not common_flags.start(argv):
        return
    from t2t.utils import optional_deps

    optional_deps.require("aiohttp", "serve", "t2t-serve")
    from t2t.serving.http_server import ServerOptions
    from t2t.serving.model_store import ModelStore, ServerConfigError, VersionPolicy

    try:
        policy = VersionPolicy.parse(FLAGS.model_version_policy)
        store = ModelStore(_models(), policy, _batching(), FLAGS.file_system_poll_wait_seconds)
    except ServerConfigError as e:
        common_flags.fail(str(e))
    options = ServerOptions(FLAGS.rest_api_host, FLAGS.rest_api_port, FLAGS.max_request_bytes,
                            FLAGS.shutdown_timeout_seconds)
    try:
        asyncio.run(_serve(store, options))
    except ServerConfigError as e:
        common_flags.fail(str(e))
    except OSError as e:  # the port is taken, the host does not exist, ...
        common_flags.fail(f"cannot listen on {FLAGS.rest_api_host}:{FLAGS.rest_api_port} ({e}); "
                          "pick another --rest_api_port (0: any free port)")


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-serve")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    sys.exit(run())
