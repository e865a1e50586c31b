"""t2t-serve's metrics in Prometheus' text format (GET /monitoring/prometheus/metrics, as
TensorFlow Serving's --monitoring_config_file exposes them).

    t2t_serve_requests_total{model, version, api, status}     requests answered
    t2t_serve_request_latency_seconds{model, api}             time from arrival to answer
    t2t_serve_batch_size{model, version, signature}           examples per batch run
    t2t_serve_queue_depth{model, version, signature}          examples waiting for a batch
    t2t_serve_model_events_total{model, version, event}       load, load_failed, unload
    process_*                                                 the server process (CPU, memory)

`api` is where the request came in (rest_predict, rest_status, rest_metadata, grpc_predict,
v2_infer, ...); `status` is the HTTP status code (REST; 499: the client went away first)
or the gRPC status name (OK, INVALID_ARGUMENT, ...). `model` and `version` are those the
request was answered by: "" where none was resolved (an unknown model or version), so that
clients cannot add label sets by sending made-up names. Each server has its own registry:
two servers in one process (tests) count apart.

Counting an aiohttp route: the app has `request_counter(metrics)` as its outermost
middleware, and the handler calls `note_request(request, API)` first, then sets `.model`
and `.version` of what it returns as soon as it has resolved them:

    labels = note_request(request, "v2_infer")
    model = store.model(name); labels.model = model.name
    servable = model.resolve(version); labels.version = servable.version

A request whose handler never calls note_request (GET /healthz, the page) is not counted.
Other transports (gRPC) call `ServerMetrics.observe_request` themselves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import re
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS_S", "BATCH_SIZE_BUCKETS", "PROMETHEUS_PATH",
           "BatchMetrics", "RequestLabels", "ServerMetrics", "note_request",
           "prometheus_path_from_config", "request_counter"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# TF Serving's PrometheusExporter::kPrometheusPath.
PROMETHEUS_PATH = "/monitoring/prometheus/metrics"
# 1 ms .. 60 s: a cached greedy step to a long beam search on CPU.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                     10.0, 30.0, 60.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The HTTP status of a request whose client disconnected before the answer (as nginx logs).
CLIENT_CLOSED_REQUEST = 499


class ServerMetrics:
    """The metrics of one server (its own CollectorRegistry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "t2t_serve_requests", "Requests answered, by model, version, API and status.",
            ["model", "version", "api", "status"], registry=self.registry)
        self.latency = Histogram(
            "t2t_serve_request_latency_seconds", "Seconds from a request's arrival to its "
            "answer.", ["model", "api"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.batch_size = Histogram(
            "t2t_serve_batch_size", "Examples in each batch run (before padding).",
            ["model", "version", "signature"], buckets=BATCH_SIZE_BUCKETS,
            registry=self.registry)
        self.queue_depth = Gauge(
            "t2t_serve_queue_depth", "Examples waiting for a batch.",
            ["model", "version", "signature"], registry=self.registry)
        self.model_events = Counter(
            "t2t_serve_model_events", "Model version loads, failed loads and unloads.",
            ["model", "version", "event"], registry=self.registry)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, ..._memory_bytes

    def observe_request(self, model: str, version: str | int | None, api: str, status: str | int,
                        seconds: float) -> None:
        """One answered request: `seconds` from arrival to answer."""
        version = "" if version is None else str(version)
        self.requests.labels(model, version, api, str(status)).inc()
        self.latency.labels(model, api).observe(seconds)

    def observe_batch(self, model: str, version: int, signature: str, size: int) -> None:
        """One batch of `size` examples (before padding) run."""
        self.batch_size.labels(model, str(version), signature).observe(size)

    def set_queue_depth(self, model: str, version: int, signature: str, examples: int) -> None:
        self.queue_depth.labels(model, str(version), signature).set(examples)

    def model_event(self, model: str, version: int, event: str) -> None:
        """event: load, load_failed or unload."""
        self.model_events.labels(model, str(version), event).inc()

    def forget_version(self, model: str, version: int, signatures: list[str]) -> None:
        """Drops the queue depth series of an unloaded version (its counts stay)."""
        for signature in signatures:
            try:
                self.queue_depth.remove(model, str(version), signature)
            except KeyError:  # no request ever reached that signature
                pass

    def batch_observer(self, model: str, version: int, signature: str) -> BatchMetrics:
        """What a Batcher of that signature reports its batches and queue to."""
        return BatchMetrics(self, model, version, signature)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (content type: CONTENT_TYPE)."""
        return generate_latest(self.registry)

    def exposition_for(self, accept: str | None) -> tuple[bytes, str]:
        """(body, content type) for a scrape's Accept header: OpenMetrics when asked for,
        else the Prometheus text format."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


@dataclasses.dataclass(frozen=True)
class BatchMetrics:
    """The metrics one Batcher (one signature of one model version) updates."""

    metrics: ServerMetrics
    model: str
    version: int
    signature: str

    def batch_run(self, size: int) -> None:
        self.metrics.observe_batch(self.model, self.version, self.signature, size)

    def queue_changed(self, examples: int) -> None:
        self.metrics.set_queue_depth(self.model, self.version, self.signature, examples)


# --------------------------------------------------------------- counting aiohttp requests
REQUEST_LABELS_KEY = "t2t_serve_request_labels"  # where note_request keeps them in a request


@dataclasses.dataclass
class RequestLabels:
    """The labels a request is counted under; the handler fills model and version in as
    it resolves them ("" until then)."""

    api: str
    model: str = ""
    version: str | int = ""


def note_request(request: web.Request, api: str) -> RequestLabels:
    """Has the request counted under `api` when it is answered; returns its labels."""
    labels = RequestLabels(api)
    request[REQUEST_LABELS_KEY] = labels
    return labels


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def request_counter(metrics: ServerMetrics) -> Callable:
    """An aiohttp middleware counting each request whose handler called note_request: its
    status (the error middleware's answer when it runs inside this one) and its seconds
    from arrival to answer (to the stream's end for a streamed answer)."""

    @web.middleware
    async def count_request(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        status: int = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            status = CLIENT_CLOSED_REQUEST
            raise
        finally:
            labels = request.get(REQUEST_LABELS_KEY)
            if labels is not None:
                metrics.observe_request(labels.model, labels.version, labels.api, status,
                                        time.perf_counter() - start)

    return count_request


# --------------------------------------------------------------- --monitoring_config_file
def _monitoring_config_class() -> type:
    """TF Serving's tensorflow.serving.MonitoringConfig (monitoring_config.proto; the
    tensorflow-serving-api wheel does not ship it), in a pool of its own."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/config/monitoring_config.proto",
        package="tensorflow.serving", syntax="proto3")
    prometheus = proto.message_type.add(name="PrometheusConfig")
    field = descriptor_pb2.FieldDescriptorProto
    prometheus.field.add(name="enable", number=1, type=field.TYPE_BOOL, label=field.LABEL_OPTIONAL)
    prometheus.field.add(name="path", number=2, type=field.TYPE_STRING,
                         label=field.LABEL_OPTIONAL)
    monitoring = proto.message_type.add(name="MonitoringConfig")
    monitoring.field.add(name="prometheus_config", number=1, type=field.TYPE_MESSAGE,
                         label=field.LABEL_OPTIONAL,
                         type_name=".tensorflow.serving.PrometheusConfig")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.MonitoringConfig"))


# Paths t2t-serve's own routes use: a metrics path there would shadow them.
_TAKEN_PREFIXES = ("/v1/", "/v2/")
_TAKEN_PATHS = ("/", "/healthz", "/v1/models", "/v2")

_EXAMPLE = 'prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }'


def _field_hint(parse_error: str) -> str:
    """The hint (" Did you mean 'enable'?") for a misspelt field in a parse error, or ""."""
    match = re.search(r'has no field named "([^"]+)"', parse_error)
    fields = ["prometheus_config", "enable", "path"]
    close = difflib.get_close_matches(match[1], fields, n=1, cutoff=0.5) if match else []
    return f" Did you mean {close[0]!r}?" if close else ""


def prometheus_path_from_config(config_file: str | None) -> str | None:
    """The path metrics are served at, from TF Serving's --monitoring_config_file (text
    MonitoringConfig); None: metrics off. Without a file: PROMETHEUS_PATH (TF Serving
    needs the file to turn them on; t2t-serve has them on by default). Raises ValueError
    naming the file and the fix."""
    if not config_file:
        return PROMETHEUS_PATH
    try:
        with open(config_file, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--monitoring_config_file={config_file}: cannot read it ({e}); give "
                         f"a text MonitoringConfig file such as: {_EXAMPLE}") from None
    config = _monitoring_config_class()()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as e:
        raise ValueError(f"--monitoring_config_file={config_file}: not a text MonitoringConfig "
                         f"({e}{_field_hint(str(e))}); write e.g. {_EXAMPLE}") from None
    prometheus = config.prometheus_config
    if not prometheus.enable:
        return None
    path = prometheus.path or PROMETHEUS_PATH
    if (not path.startswith("/") or any(c.isspace() or c in "?#{}" for c in path)
            or path.rstrip("/") in _TAKEN_PATHS or path.startswith(_TAKEN_PREFIXES)):
        raise ValueError(f"--monitoring_config_file={config_file}: prometheus_config.path "
                         f"{path!r} must be a URL path starting with '/', outside "
                         f"t2t-serve's own routes (/, /healthz, /v1/..., /v2/...); e.g. "
                         f"{PROMETHEUS_PATH!r} or '/metrics'")
    return path
