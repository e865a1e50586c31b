"""t2t-serve's gRPC server (grpc.aio): TensorFlow Serving's PredictionService and
ModelService over the same ModelStore and batching queues as the REST API, and the runner
of both servers in one event loop.

    tensorflow.serving.PredictionService/Predict            model_spec, inputs, output_filter
    tensorflow.serving.PredictionService/GetModelMetadata   signature_def (a SignatureDefMap in
                                                            an Any, as TF Serving sends it)
    tensorflow.serving.ModelService/GetModelStatus          AVAILABLE, LOADING, UNLOADING, END
    tensorflow.serving.ModelService/HandleReloadConfigRequest   a ModelServerConfig: the
                                                            models served from now on
    Classify, Regress, MultiInference: UNIMPLEMENTED (the message says what t2t exports
    offer instead: predict signatures)

A request's bytes are read by the handler, not by grpc: a message over the request limit
gets RESOURCE_EXHAUSTED naming --max_request_bytes (grpc itself refuses messages over
twice the limit with its own RESOURCE_EXHAUSTED), a malformed one INVALID_ARGUMENT. Every
call is counted in store.metrics (api grpc_predict, grpc_metadata, grpc_status, ...; the
status is the code's name: OK, NOT_FOUND, ...).

`run()` opens both ports first (a liveness probe answers while the models load), then
loads the models, serves until `stop` is set, then stops taking requests on both, lets
those in flight finish (up to shutdown_timeout_s) and unloads the models.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
from absl import logging
from aiohttp import web
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    predict_pb2,
)

from t2t.serving import grpc_api, http_server
from t2t.serving.grpc_api import GrpcError
from t2t.serving.model_config import ServerConfigError
from t2t.serving.model_store import ModelStore, ServableVersion, ServedModel, redact_paths
from t2t.serving.rest_api import RequestError

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"
_NOT_OFFERED = ("t2t exports have predict signatures only (serving_default, and e.g. "
                "attention, serve_tf_example); call Predict with model_spec.signature_name")


@dataclasses.dataclass(frozen=True)
class GrpcOptions:
    """Where and how the gRPC server listens (port 0: a free one)."""

    host: str = "127.0.0.1"
    port: int = 8500
    max_request_bytes: int = 8 * 1024 * 1024
    channel_arguments: tuple[tuple[str, int | str], ...] = ()


class ListenError(OSError):
    """A port the server cannot listen on; the message names the flag to change."""


def parse_channel_arguments(items: Sequence[str]) -> tuple[tuple[str, int | str], ...]:
    """TF Serving's --grpc_channel_arguments (grpc.KEY=VALUE, ...) as grpc server options;
    integer values become ints."""
    parsed = []
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.startswith("grpc.") or not value:
            raise ValueError(f"--grpc_channel_arguments: {item!r} is not grpc.KEY=VALUE (e.g. "
                             "grpc.max_connection_age_ms=60000)")
        if key in ("grpc.max_receive_message_length", "grpc.max_message_length"):
            raise ValueError(f"--grpc_channel_arguments: {key} is set by t2t-serve from "
                             "--max_request_bytes; set that flag instead")
        with contextlib.suppress(ValueError):
            value = int(value)
        parsed.append((key, value))
    return tuple(parsed)


@dataclasses.dataclass
class CallRecord:
    """What a call resolved so far (the served model's name, the version), for its
    metrics: "" and None until resolved."""

    model: str = ""
    version: int | None = None


class Services:
    """The RPC methods over `store`: each takes the request bytes, returns a message."""

    def __init__(self, store: ModelStore, max_request_bytes: int):
        self.store, self.max_bytes = store, max_request_bytes

    def _model(self, name: str, seen: CallRecord) -> ServedModel:
        model = self.store.model(name)
        seen.model = model.name
        return model

    def _resolve(self, spec: Any, seen: CallRecord) -> tuple[ServedModel, ServableVersion]:
        name, version, label = grpc_api.model_spec_choice(spec)
        model = self._model(name, seen)
        servable = (model.resolve(version, label=label) if label is not None
                    else model.resolve(version))
        seen.version = servable.version
        return model, servable

    async def predict(self, raw: bytes, seen: CallRecord) -> predict_pb2.PredictResponse:
        request = grpc_api.decode(raw, predict_pb2.PredictRequest, self.max_bytes)
        model, servable = self._resolve(request.model_spec, seen)
        with servable.in_use():
            parsed = grpc_api.predict_inputs(request, servable.signatures,
                                             self.store.options.max_batch_size, self.max_bytes)
            outputs = await servable.predict(parsed)
        return grpc_api.predict_response(outputs, list(request.output_filter), model.name,
                                         servable.version, parsed)

    async def metadata(self, raw: bytes, seen: CallRecord
                       ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        request = grpc_api.decode(raw, get_model_metadata_pb2.GetModelMetadataRequest,
                                  self.max_bytes)
        grpc_api.check_metadata_fields(list(request.metadata_field))
        model, servable = self._resolve(request.model_spec, seen)
        return grpc_api.metadata_response(model.name, servable.version, servable.signatures)

    async def reload_config(self, raw: bytes, seen: CallRecord
                            ) -> model_management_pb2.ReloadConfigResponse:
        """Serves the models of the request's ModelServerConfig from now on (as the
        --model_config_file format): returns once the versions to load are loaded."""
        request = grpc_api.decode(raw, model_management_pb2.ReloadConfigRequest, self.max_bytes)
        if request.metric_names:
            raise GrpcError(grpc.StatusCode.INVALID_ARGUMENT, "metric_names: t2t-serve answers "
                            "no metrics here; read GET /monitoring/prometheus/metrics")
        try:
            await self.store.reload_config(request.config)
        except ServerConfigError as e:
            raise GrpcError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        return model_management_pb2.ReloadConfigResponse()

    async def status(self, raw: bytes, seen: CallRecord
                     ) -> get_model_status_pb2.GetModelStatusResponse:
        request = grpc_api.decode(raw, get_model_status_pb2.GetModelStatusRequest,
                                  self.max_bytes)
        name, version, label = grpc_api.model_spec_choice(request.model_spec)
        model = self._model(name, seen)
        if label is not None:
            version = model.resolve(None, label=label).version
        seen.version = version
        return grpc_api.status_response(model.status(version))


def _unimplemented(method: str) -> Callable[[bytes, CallRecord], Awaitable[Any]]:
    async def refuse(raw: bytes, seen: CallRecord) -> Any:
        raise GrpcError(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not offered: {_NOT_OFFERED}")

    return refuse


def failure_status(error: BaseException) -> GrpcError:
    """The status a failed call answers with; unexpected errors are logged."""
    if isinstance(error, GrpcError):
        return error
    if isinstance(error, RequestError):
        return grpc_api.from_request_error(error)
    logging.error("t2t-serve: internal error in a gRPC call", exc_info=error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return GrpcError(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: "
                     f"{redact_paths(first)} (the server's log has the details)")


def _method(store: ModelStore, api: str,
            impl: Callable[[bytes, CallRecord], Awaitable[Any]]) -> grpc.RpcMethodHandler:
    """A unary method reading raw bytes: errors become statuses, every call is counted."""

    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        started, seen = time.perf_counter(), CallRecord()

        def count(code: grpc.StatusCode) -> None:
            store.metrics.observe_request(seen.model, seen.version, api, code.name,
                                          time.perf_counter() - started)

        try:
            reply = await impl(raw, seen)
        except asyncio.CancelledError:
            count(grpc.StatusCode.CANCELLED)
            raise
        except Exception as e:  # noqa: BLE001 - one bad call must not stop the server
            failure = failure_status(e)
            count(failure.code)
            await context.abort(failure.code, failure.message)
        else:
            count(grpc.StatusCode.OK)
            return reply.SerializeToString()

    return grpc.unary_unary_rpc_method_handler(handle)


UNIMPLEMENTED_METHODS = ("Classify", "Regress", "MultiInference")  # PredictionService's


def method_table(store: ModelStore | None, max_request_bytes: int
                 ) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
    """Service name -> method name -> handler: what the server offers (the docs site's
    API reference lists these names)."""
    services = Services(store, max_request_bytes)  # type: ignore[arg-type]
    prediction = {"Predict": _method(store, "grpc_predict", services.predict),
                  "GetModelMetadata": _method(store, "grpc_metadata", services.metadata)}
    for method in UNIMPLEMENTED_METHODS:
        prediction[method] = _method(store, "grpc_" + method.lower(), _unimplemented(method))
    model = {"GetModelStatus": _method(store, "grpc_status", services.status),
             "HandleReloadConfigRequest": _method(store, "grpc_reload_config",
                                                  services.reload_config)}
    return {PREDICTION_SERVICE: prediction, MODEL_SERVICE: model}


def handlers(store: ModelStore, max_request_bytes: int) -> list[grpc.GenericRpcHandler]:
    """PredictionService and ModelService as generic handlers over `store`."""
    return [grpc.method_handlers_generic_handler(service, methods)
            for service, methods in method_table(store, max_request_bytes).items()]


def build_server(store: ModelStore, options: GrpcOptions,
                 extra_handlers: Sequence[grpc.GenericRpcHandler] = ()
                 ) -> tuple[grpc.aio.Server, int]:
    """The gRPC server of `store` bound to its port (not started) and that port."""
    limit = options.max_request_bytes
    server = grpc.aio.server(options=[
        # Up to twice the limit reaches the handler, which names --max_request_bytes.
        ("grpc.max_receive_message_length", min(2 * limit + 1024, 2**31 - 1)),
        ("grpc.max_send_message_length", -1), *options.channel_arguments])
    server.add_generic_rpc_handlers([*handlers(store, limit), *extra_handlers])
    address = f"{options.host}:{options.port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise ListenError(f"cannot listen for gRPC on {address} ({e}); pick another --port "
                          "(0: any free port)") from None
    if not port:
        raise ListenError(f"cannot listen for gRPC on {address}; pick another --port "
                          "(0: any free port)")
    return server, port


async def _start_rest(store: ModelStore, options: http_server.ServerOptions
                      ) -> tuple[web.Application, web.AppRunner, str]:
    app = http_server.build_app(store, options)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=options.shutdown_timeout_s)
    await runner.setup()
    try:
        await web.TCPSite(runner, options.host, options.port).start()
    except OSError as e:
        await runner.cleanup()
        raise ListenError(f"cannot listen on {options.host}:{options.port} ({e}); pick another "
                          "--rest_api_port (0: any free port)") from None
    host, port = runner.addresses[0][:2]
    return app, runner, f"http://{host}:{port}"


async def _load_unless_stopped(store: ModelStore, stop: asyncio.Event) -> bool:
    """Loads the models (raising what store.start raises); False if stopped first."""
    loading = asyncio.ensure_future(store.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([loading, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not loading.done():
        await asyncio.wait([loading])  # the load in its thread finishes before unloading
        with contextlib.suppress(Exception):  # stopping anyway: a failed load changes nothing
            loading.result()
        return False
    loading.result()
    return True


async def run(store: ModelStore, rest: http_server.ServerOptions, grpc_options: GrpcOptions,
              stop: asyncio.Event, on_listening: Callable[[str, str], None] | None = None,
              on_ready: Callable[[str, str], None] | None = None,
              extra_handlers: Sequence[grpc.GenericRpcHandler] = ()) -> None:
    """Serves REST and gRPC until `stop` is set. `on_listening(rest_url, grpc_target)` once
    both ports are open, `on_ready(...)` once the models are loaded."""
    server, port = build_server(store, grpc_options, extra_handlers)
    runner = None
    try:
        await server.start()
        app, runner, url = await _start_rest(store, rest)
        target = f"{grpc_options.host}:{port}"
        if on_listening is not None:
            on_listening(url, target)
        if await _load_unless_stopped(store, stop):
            if on_ready is not None:
                on_ready(url, target)
            await stop.wait()
        app[http_server.STATE_KEY]["shutting_down"] = True
        store.hurry()
    finally:
        # Both stop listening and let the calls in flight finish; then the models unload.
        await asyncio.gather(server.stop(rest.shutdown_timeout_s),
                             runner.cleanup() if runner is not None else asyncio.sleep(0))
        await store.close()
