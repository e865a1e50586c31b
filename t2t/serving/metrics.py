"""t2t-serve's metrics in Prometheus' text format (GET /monitoring/prometheus/metrics, as
TensorFlow Serving's --monitoring_config_file exposes them).

    t2t_serve_requests_total{model, version, api, status}     requests answered
    t2t_serve_request_latency_seconds{model, api}             time from arrival to answer
    t2t_serve_batch_size{model, version, signature}           examples per batch run
    t2t_serve_queue_depth{model, version, signature}          examples waiting for a batch
    t2t_serve_model_events_total{model, version, event}       load, load_failed, unload

`api` is where the request came in (rest_predict, grpc_predict, v2_infer, ...); `status` is
the HTTP status code (REST) or the gRPC status name (OK, INVALID_ARGUMENT, ...); `version`
is "" where no version was resolved (an unknown model). Each server has its own registry:
two servers in one process (tests) count apart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS_S", "BATCH_SIZE_BUCKETS", "ServerMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# 1 ms .. 60 s: a cached greedy step to a long beam search on CPU.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                     10.0, 30.0, 60.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


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

    def exposition(self) -> bytes:
        """The Prometheus text format (version 0.0.4) of every metric."""
        return generate_latest(self.registry)
