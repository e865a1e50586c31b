"""t2t-serve: serve exported models over TensorFlow Serving's gRPC and REST APIs, with batching.

  t2t-exporter --output_dir=RUN
  t2t-serve --output_dir=RUN --model_name=reverse --port=8500 --rest_api_port=8501
  curl -d '{"instances": ["1 0 1 1"]}' localhost:8501/v1/models/reverse:predict

gRPC (--port) answers tensorflow.serving.PredictionService (Predict, GetModelMetadata) and
ModelService (GetModelStatus) with tensorflow-serving-api's stubs; REST (--rest_api_port)
answers TF Serving's /v1/models URLs. Both go through the same batching queues. The ports
open first, then the models load (calls meanwhile get UNAVAILABLE / HTTP 503).

Serves the versions in RUN/export/<version>/ (or --model_base_path=DIR, or several models
with --models=NAME=DIR,NAME2=DIR2): the newest version answers requests without a
version, /versions/N a given one; a version written later is loaded without a restart
and the one it replaces finishes its requests before it is unloaded
(--model_version_policy says which versions are kept). Requests arriving within
--batch_timeout_micros run as one batch of up to --max_batch_size examples on
--num_batch_threads threads; beyond --max_enqueued_batches full batches waiting, requests
get HTTP 429. SIGTERM (or Ctrl-C) stops listening, finishes the requests in flight and
exits. Flags named like TF Serving's (tensorflow_model_server) mean the same.

--model_config_file=F instead names the models in TF Serving's text-format ModelServerConfig
(name, base_path, model_version_policy, version_labels such as stable/canary, served at
/v1/models/NAME/labels/stable:predict); it is re-read every
--model_config_file_poll_wait_seconds and applied without dropping requests.
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
flags.DEFINE_string("rest_api_host", "127.0.0.1", "Address both servers (REST and gRPC) "
                    "listen on (0.0.0.0: every interface, e.g. in a container).")
flags.DEFINE_integer("rest_api_port", 8501, "Port of the REST API (0: a free one, printed).")
flags.DEFINE_integer("port", 8500, "Port of the gRPC API, tensorflow.serving."
                     "PredictionService and ModelService (0: a free one, printed).")
flags.DEFINE_list("grpc_channel_arguments", [], "gRPC server arguments, as TF Serving's: "
                  "grpc.KEY=VALUE,... (e.g. grpc.max_connection_age_ms=60000).")
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
flags.DEFINE_string("model_config_file", None, "TF Serving's model config file (text-format "
                    "ModelServerConfig: model_config_list { config { name base_path "
                    "model_version_policy version_labels } }), instead of --models, "
                    "--model_base_path or --output_dir.")
flags.DEFINE_float("model_config_file_poll_wait_seconds", 0, "How often --model_config_file "
                   "is re-read and a change applied while serving (0: read once, at start).")
flags.DEFINE_bool("allow_version_labels_for_unavailable_models", False, "Let a new version "
                  "label point at a version not loaded (yet); without it a label points only "
                  "at a loaded version, and a label in use always moves only to a loaded one.")
flags.DEFINE_bool("enable_model_warmup", True, "Run warm-up requests before a version "
                  "answers (TF Serving's assets.extra/tf_serving_warmup_requests, else one "
                  "small request per signature of a t2t export).")
flags.DEFINE_integer("max_request_bytes", 8 * 1024 * 1024, "Larger request bodies get "
                     "HTTP 413, larger gRPC messages RESOURCE_EXHAUSTED.")
flags.DEFINE_string("monitoring_config_file", None, "TF Serving's MonitoringConfig (text "
                    "proto): prometheus_config { enable: true, path: \"/metrics\" }. "
                    "Without it, Prometheus metrics are at /monitoring/prometheus/metrics.")
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


def _store(policy, batching):
    """The ModelStore of --model_config_file, or of --models/--model_base_path/--output_dir."""
    from t2t.serving.model_config import ModelConfigFile
    from t2t.serving.model_store import ModelStore

    if not FLAGS.model_config_file:
        return ModelStore(_models(), policy, batching, FLAGS.file_system_poll_wait_seconds)
    given = [f"--{name}" for name in ("output_dir", "model_base_path", "models", "model_name",
                                      "model_version_policy") if FLAGS[name].present]
    if given:
        common_flags.fail(f"--model_config_file names the models, their base paths and version "
                          f"policies: drop {', '.join(given)}, or drop --model_config_file")
    if FLAGS.model_config_file_poll_wait_seconds < 0:
        common_flags.fail(f"--model_config_file_poll_wait_seconds="
                          f"{FLAGS.model_config_file_poll_wait_seconds}: give seconds >= 0 "
                          "(0: read the file once)")
    config_file = ModelConfigFile(FLAGS.model_config_file)
    return ModelStore(config_file.read(), policy, batching, FLAGS.file_system_poll_wait_seconds,
                      config_file=config_file,
                      config_file_poll_seconds=FLAGS.model_config_file_poll_wait_seconds,
                      allow_version_labels_for_unavailable_models=(
                          FLAGS.allow_version_labels_for_unavailable_models))


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


def _grpc_options():
    from t2t.serving.grpc_server import GrpcOptions, parse_channel_arguments

    try:
        arguments = parse_channel_arguments(FLAGS.grpc_channel_arguments)
    except ValueError as e:
        common_flags.fail(str(e))
    return GrpcOptions(FLAGS.rest_api_host, FLAGS.port, FLAGS.max_request_bytes, arguments)


async def _serve(store, options, grpc_options) -> None:
    from t2t.serving import grpc_server, grpc_streaming

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def listening(url: str, grpc_target: str) -> None:
        print(f"Listening: gRPC on {grpc_target}, REST on {url}; loading the models", flush=True)

    def ready(url: str, grpc_target: str) -> None:
        for model in store.models.values():
            versions = ", ".join(map(str, sorted(model.versions, reverse=True)))
            print(f"Model {model.name!r}: version(s) {versions} from {model.base_path}")
            print(f"  POST {url}/v1/models/{model.name}:predict")
            print(f"  gRPC {grpc_target} PredictionService/Predict model_spec.name={model.name!r}")
        print(f"Serving gRPC on {grpc_target}")
        print(f"Serving on {url} (SIGTERM or Ctrl-C stops)", flush=True)

    # Beyond TF Serving's methods: a language model's tokens as they are made.
    streaming = grpc_streaming.handler(store, grpc_options.max_request_bytes)
    await grpc_server.run(store, options, grpc_options, stop, listening, ready, [streaming])
    print("Stopped: requests in flight finished, models unloaded.", flush=True)


def main(argv: list[str]) -> None:
    if not common_flags.start(argv):
        return
    if FLAGS["verbosity"].value < 1:  # else its first request prints TF's oneDNN notice
        common_flags.settle_onednn_notice()
    from t2t.utils import optional_deps

    optional_deps.require("aiohttp", "serve", "t2t-serve")
    optional_deps.require("grpc", "serve", "t2t-serve")
    optional_deps.require("tensorflow_serving.apis.predict_pb2", "serve", "t2t-serve")
    from t2t.serving.http_server import ServerOptions
    from t2t.serving.model_store import ServerConfigError, VersionPolicy

    try:
        policy = VersionPolicy.parse(FLAGS.model_version_policy)
        store = _store(policy, _batching())
        store.enable_model_warmup = FLAGS.enable_model_warmup
    except ServerConfigError as e:
        common_flags.fail(str(e))
    from t2t.serving.metrics import prometheus_path_from_config

    try:
        prometheus_path = prometheus_path_from_config(FLAGS.monitoring_config_file)
    except ValueError as e:
        common_flags.fail(str(e))
    options = ServerOptions(FLAGS.rest_api_host, FLAGS.rest_api_port, FLAGS.max_request_bytes,
                            FLAGS.shutdown_timeout_seconds, prometheus_path=prometheus_path)
    grpc_options = _grpc_options()
    from t2t.serving.grpc_server import ListenError

    try:
        asyncio.run(_serve(store, options, grpc_options))
    except ServerConfigError as e:
        common_flags.fail(str(e))
    except ListenError as e:  # the port is taken, the host does not exist, ...
        common_flags.fail(str(e))
    except OSError as e:
        common_flags.fail(f"cannot listen on {FLAGS.rest_api_host}:{FLAGS.rest_api_port} ({e}); "
                          "pick another --rest_api_port (0: any free port)")


def run() -> None:
    """Console-script entry point."""
    common_flags.accept_shared_flags("t2t-serve")
    flag_help.run(main, __doc__, hidden=common_flags.SETUP_FLAGS)


if __name__ == "__main__":
    sys.exit(run())
