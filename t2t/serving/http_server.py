"""t2t-serve's HTTP server (aiohttp): TensorFlow Serving's REST API over a ModelStore.

    POST /v1/models/NAME[/versions/N]:predict   {"instances": [...]} or {"inputs": ...}
    POST /v1/models/NAME[/versions/N]:generateStream   a language model's tokens as they are
                                                 made: server-sent events (lm_streaming.py)
    GET  /v1/models/NAME[/versions/N]           {"model_version_status": [...]}
    GET  /v1/models/NAME[/versions/N]/metadata  {"model_spec": ..., "metadata":
                                                 {"signature_def": ...}}
    .../NAME/labels/LABEL[:predict|/metadata]   the same, for the version LABEL points at
                                                 (the model config file's version_labels)
    GET  /v1/models                             t2t's list of models and versions
    GET  /healthz                               {"status": "ok"} (503 while shutting down)
    GET  /monitoring/prometheus/metrics         Prometheus metrics (t2t/serving/metrics.py)
    /v2/health/live|ready, /v2/models/NAME...   KServe's V2 protocol (t2t/serving/v2_api.py)
    GET  /                                      the try-it page (t2t/serving/web/index.html)

Every error is a JSON body {"error": message} with a 4xx/5xx status, as TF Serving sends;
the message names the bad value and the fix, never a server path or a stack trace (those
go to the log). `build_app` makes the application; t2t.serving.grpc_server.run serves it
beside the gRPC server (ports first, then the models) and shuts both down gracefully.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from typing import Any

from absl import logging
from aiohttp import web

from t2t.serving import lm_streaming, rest_api, v2_api
from t2t.serving.metrics import PROMETHEUS_PATH, note_request, request_counter
from t2t.serving.model_store import ModelStore, redact_paths
from t2t.serving.rest_api import RequestError

STORE_KEY = web.AppKey("store", ModelStore)
OPTIONS_KEY = web.AppKey("options", object)
STATE_KEY = web.AppKey("state", dict)

_MODEL_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|"
                         r"/labels/(?P<label>[^/:]+))?(?P<rest>/metadata|:[A-Za-z]+)?$")


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """Where and how the HTTP server listens."""

    host: str = "127.0.0.1"
    port: int = 8501
    max_request_bytes: int = 8 * 1024 * 1024
    shutdown_timeout_s: float = 30.0
    prometheus_path: str | None = PROMETHEUS_PATH  # None: no metrics page


def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status,
                             dumps=lambda v: json.dumps(v, ensure_ascii=False))


@web.middleware
async def _errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Every failure as {"error": message}; the server keeps serving."""
    try:
        return await handler(request)
    except RequestError as e:
        return _json({"error": str(e)}, e.status)
    except web.HTTPRequestEntityTooLarge as e:
        limit = request.app[OPTIONS_KEY].max_request_bytes
        return _json({"error": f"request body too large ({e.text.strip()}); the limit is "
                      f"{limit} bytes (t2t-serve --max_request_bytes)"}, 413)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = {404: f"no such path {request.path}; see GET /v1/models for the models",
                   405: f"{request.method} is not allowed on {request.path}"}.get(
            e.status, e.text or e.reason)
        return _json({"error": message}, e.status)
    except Exception as e:  # noqa: BLE001 - one bad request must not stop the server
        # The log has the stack trace; the client gets one line without paths.
        logging.exception("t2t-serve: internal error on %s %s", request.method, request.path)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return _json({"error": f"internal error: {type(e).__name__}: {redact_paths(first)} "
                      "(the server's log has the details)"}, 500)


def _parse_model_path(tail: str) -> tuple[str, int | None, str | None, str]:
    """(name, version, version label, rest: "", "/metadata" or ":method") of NAME[/versions/N
    or /labels/LABEL][/metadata or :method]."""
    match = _MODEL_PATH.match(tail)
    if not match:
        raise RequestError(f"no such path /v1/models/{tail}; use /v1/models/NAME[/versions/N"
                           "|/labels/LABEL][:predict|/metadata]", 404)
    version = match["version"]
    if version is not None and not version.isdigit():
        raise RequestError(f"version {version!r} is not a number; versions are the integer "
                           "names of the export folders", 404)
    return (match["name"], int(version) if version is not None else None, match["label"],
            match["rest"] or "")


async def _model_get(request: web.Request) -> web.Response:
    """GET /v1/models/NAME[/versions/N|/labels/LABEL][/metadata]: the model's version
    status (TF Serving's GetModelStatus; `?stats` adds batching statistics), or with
    /metadata its signatures (GetModelMetadata)."""
    store = request.app[STORE_KEY]
    tail = request.match_info["tail"]
    labels = note_request(request, "rest_metadata" if tail.endswith("/metadata")
                          else "rest_status")
    name, version, label, rest = _parse_model_path(tail)
    model = store.model(name)
    labels.model = model.name
    if label is not None:  # TF Serving's /labels/LABEL: the version it points at now
        version = model.label_version(label)
    if rest.startswith(":"):
        raise RequestError(f"{rest} needs POST", 405)
    if rest == "/metadata":
        servable = model.resolve(version)
        labels.version = servable.version
        signatures = {name: rest_api.signature_def_json(spec)
                      for name, spec in sorted(servable.signatures.items())}
        return _json({"model_spec": {"name": model.name, "signature_name": "",
                                     "version": str(servable.version)},
                      "metadata": {"signature_def": {"signature_def": signatures}},
                      "t2t_export": _public(servable.info)})
    body: dict[str, Any] = {"model_version_status": model.status(version)}
    if label is None and version is None:
        body["version_labels"] = {k: str(v) for k, v in sorted(model.labels.items())}
        pending = {k: str(v) for k, v in sorted(model.configured_labels.items())
                   if model.labels.get(k) != v}
        if pending:  # moved once their version is loaded
            body["pending_version_labels"] = pending
    labels.version = "" if version is None else version
    if "stats" in request.query:
        body["batching"] = {str(v): s.stats() for v, s in sorted(model.versions.items())}
    return _json(body)


async def _model_post(request: web.Request) -> web.Response:
    """POST /v1/models/NAME[/versions/N|/labels/LABEL]:predict (TF Serving's REST
    Predict: {"instances": [...]} or {"inputs": ...}), or :generateStream for a language
    model's tokens as server-sent events."""
    store = request.app[STORE_KEY]
    labels = note_request(request, "rest_predict")
    name, version, label, rest = _parse_model_path(request.match_info["tail"])
    if rest == lm_streaming.STREAM_METHOD:
        labels.api = "rest_stream"
    elif rest != ":predict":
        method = rest or "(none)"
        raise RequestError(f"unsupported method {method}: t2t exports have predict "
                           f"signatures; POST /v1/models/{name}:predict (or "
                           f"{lm_streaming.STREAM_METHOD} for a language model)", 400)
    if request.app[STATE_KEY]["shutting_down"]:
        raise RequestError("the server is shutting down", 503)
    model = store.model(name)
    labels.model = model.name
    servable = model.resolve(version, label)  # once, on arrival: a label moved later,
    labels.version = servable.version         # or an unload, does not change it
    if rest == lm_streaming.STREAM_METHOD:
        return await lm_streaming.rest_stream(request, servable, store.executor)
    with servable.in_use():
        body = await request.read()
        parsed = rest_api.parse_predict(body, servable.signatures,
                                        store.options.max_batch_size)
        outputs = await servable.predict(parsed)
    return _json(rest_api.predict_response(outputs, parsed.row_format))


def _public(value: Any) -> Any:
    """t2t_export.json as clients see it: absolute paths (the checkpoint, the sibling
    export) cut to their base names."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_public(v) for v in value]
    if isinstance(value, str) and os.path.isabs(value):
        return os.path.basename(value.rstrip("/"))
    return value


async def _models(request: web.Request) -> web.Response:
    """GET /v1/models: every served model, its versions, policy and labels."""
    store = request.app[STORE_KEY]
    # No base_path (TF Serving's config has one): clients never see the server's folders.
    return _json({"models": [{"name": m.name, "model_version_status": m.status(),
                              "version_policy": str(m.policy or store.policy),
                              "version_labels": {k: str(v) for k, v in sorted(m.labels.items())}}
                             for m in store.models.values()],
                  "version_policy": str(store.policy)})


async def _healthz(request: web.Request) -> web.Response:
    """GET /healthz: 200 with the loaded versions while serving, 503 while shutting
    down."""
    if request.app[STATE_KEY]["shutting_down"]:
        return _json({"status": "shutting down"}, 503)
    store = request.app[STORE_KEY]
    return _json({"status": "ok",
                  "models": {m.name: sorted(map(str, m.versions)) for m in store.models.values()}})


PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web", "index.html")


async def _prometheus(request: web.Request) -> web.Response:
    """Every metric, in the format the scraper's Accept header asks for (Prometheus text
    by default, OpenMetrics when asked)."""
    body, content_type = request.app[STORE_KEY].metrics.exposition_for(
        request.headers.get("Accept"))
    return web.Response(body=body, headers={"Content-Type": content_type})


async def _page(request: web.Request) -> web.Response:
    """The try-it page: pick a model, type text (or choose an image), see the output."""
    with open(PAGE, encoding="utf-8") as f:
        return web.Response(text=f.read(), content_type="text/html")


def build_app(store: ModelStore, options: ServerOptions) -> web.Application:
    """The aiohttp application of `store`."""
    # Outermost: request_counter sees the status _errors answered with.
    app = web.Application(middlewares=[request_counter(store.metrics), _errors],
                          client_max_size=options.max_request_bytes)
    app[STORE_KEY] = store
    app[OPTIONS_KEY] = options
    app[STATE_KEY] = {"shutting_down": False}
    app.router.add_get("/", _page)
    app.router.add_get("/healthz", _healthz)
    if options.prometheus_path:
        app.router.add_get(options.prometheus_path, _prometheus)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/v1/models/{tail:.+}", _model_get)
    app.router.add_post("/v1/models/{tail:.+}", _model_post)
    v2_api.add_routes(app, store, lambda: app[STATE_KEY]["shutting_down"])  # /v2/...
    return app

