"""The models t2t-serve serves: version folders found, loaded, swapped and drained.

    store = ModelStore({"reverse": "RUN/export"}, VersionPolicy.parse("latest:2"),
                       BatchingOptions(), poll_seconds=1.0)
    await store.start()                       # loads what the policy selects, or fails
    version = store.model("reverse").resolve(None)     # the newest available version
    with version.in_use():
        outputs = await version.predict(request)

A model's base path holds one folder per version, named by an integer (TF Serving's
layout, as t2t-exporter writes it: RUN/export/<unix time>/); a run folder (RUN, holding
export/) is accepted too. Every `poll_seconds` the base path is listed again: a new
version the policy selects is loaded (in a thread; the others keep serving) and becomes
the default as soon as it is ready; a version the policy drops, or whose folder is
deleted, stops taking new requests, finishes those it has (drained), then is unloaded.
A version that fails to load is reported in the model's status (state END with the
error) and is tried again only when its files change; the older versions keep serving.
A staging folder (temp-VERSION-PID, an export being written) is never loaded; one whose
exporter is no longer running is logged once. What clients see (errors, the status of a
failed version) names no server path: redact_paths (t2t.serving.model_folders).

With TF Serving's model config file (t2t.serving.model_config) each model has its own
policy and version labels: resolve(None, "stable"). A label moves to a new version only
once that version is loaded (and warmed up), and a version a label points at stays loaded
until the label moves. `reload_config` (HandleReloadConfigRequest; the config file's
poller calls it too) adds models, removes them (they finish their requests, then unload)
and changes policies and labels without dropping a request: a request resolves its
version once, on arrival, and `in_use` keeps that version until it is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np
from absl import logging

from t2t.serving.batching import Batcher, BatchingOptions, ShuttingDownError
from t2t.serving.input_check import InputCheck
from t2t.serving.lm_settings import check_generate_request
from t2t.serving.metrics import ServerMetrics
from t2t.serving.model_config import (
    ModelConfig,
    ModelConfigFile,
    ServerConfigError,
    VersionPolicy,
    check_labels,
    configs_from_proto,
    watch_model_config_file,
)
from t2t.serving.model_folders import (
    folder_stamp,
    note_staging,
    redact_paths,
    resolve_base_path,
    version_folders,
)
from t2t.serving.rest_api import PredictRequest, RequestError, SignatureSpec
from t2t.serving.warmup import run_warmup

EXPORT_INFO = os.path.join("assets.extra", "t2t_export.json")


class ServableVersion:
    """One loaded SavedModel version and a Batcher per signature."""

    def __init__(self, model_name: str, version: int, path: str, loaded: Any,
                 options: BatchingOptions, executor: Executor,
                 metrics: ServerMetrics | None = None):
        self.model_name, self.version, self.path = model_name, version, path
        self.loaded = loaded
        self.functions = dict(loaded.signatures)
        self.signatures = {name: SignatureSpec.from_function(name, fn)
                           for name, fn in self.functions.items()}
        self.state = "AVAILABLE"
        self.info = _read_json(os.path.join(path, EXPORT_INFO))
        self.input_check = InputCheck.for_export(self.info)  # text the model cannot read
        self._options, self._executor = options, executor
        self._metrics = metrics  # batch sizes and queue depth per signature
        self._batchers: dict[str, Batcher] = {}
        self._hurried = False
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def in_use(self) -> Iterator[ServableVersion]:
        """Counts a request while it runs, so that unloading waits for it."""
        self._active += 1
        self._idle.clear()
        try:
            yield self
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    def _run(self, signature: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import tensorflow as tf

        fn = self.functions[signature]
        try:
            outputs = fn(**{name: tf.constant(value) for name, value in inputs.items()})
        except tf.errors.OpError as e:
            # The client gets the op's one-line reason: no node names, stack, or paths.
            if isinstance(e, _input_errors()):
                raise RequestError("the model rejected the input: "
                                   f"{op_error_message(e.message)}") from None
            logging.warning("t2t-serve: model %r version %d, signature %r failed: %s: %s",
                            self.model_name, self.version, signature, type(e).__name__,
                            e.message)
            raise RequestError(f"the model failed ({type(e).__name__}): "
                               f"{op_error_message(e.message)}", 500) from None
        except UnicodeDecodeError:
            # TensorFlow could not read the op's error as UTF-8: it quotes the input's bytes
            # (tf.strings.to_number of b"\x80" does), so the input is what is wrong.
            raise RequestError("the model rejected the input, and its error message quotes "
                               "bytes that are not UTF-8; send UTF-8 text") from None
        return {name: value.numpy() for name, value in outputs.items()}

    def batcher(self, signature: str) -> Batcher:
        """The signature's queue: batched (requests with scalar inputs batch only with
        equal scalars, see t2t.serving.batching), or, for a signature with a scalar output
        (one value for the whole batch, which no request could be handed alone), one
        request at a time through the same threads and queue bound."""
        if signature not in self._batchers:
            observer = (None if self._metrics is None else
                        self._metrics.batch_observer(self.model_name, self.version, signature))
            options = self._options
            if any(info.is_scalar for info in self.signatures[signature].outputs.values()):
                options = dataclasses.replace(options, enable_batching=False)
            self._batchers[signature] = Batcher(
                lambda inputs: self._run(signature, inputs), options, self._executor,
                observer)
            if self._hurried:
                self._batchers[signature].hurry()
        return self._batchers[signature]

    async def predict(self, request: PredictRequest) -> dict[str, np.ndarray]:
        # A request resolved before the drain began (in_use) still runs: drain() waits
        # for it before closing the batchers.
        if self.state == "END" or (self.state != "AVAILABLE" and not self._active):
            raise ShuttingDownError(f"version {self.version} of {self.model_name!r} is "
                                    "unloading; send the request without a version")
        if self.input_check is not None:  # 400 naming tokens/bytes outside the vocabulary
            self.input_check.check(request)
        check_generate_request(request, self.info)  # an LM's settings: 400 outside their range
        return await self.batcher(request.signature.name).predict(request.inputs,
                                                                  request.batch_size)

    def hurry(self) -> None:
        self._hurried = True
        for batcher in self._batchers.values():
            batcher.hurry()

    def batcher_signatures(self) -> list[str]:
        """The signatures that have a Batcher (those requests reached)."""
        return sorted(self._batchers)

    def stats(self) -> dict[str, Any]:
        return {name: b.stats.as_dict() for name, b in sorted(self._batchers.items())}

    async def drain(self) -> None:
        """Stops taking requests, waits for those running, then closes the batchers."""
        self.state = "UNLOADING"
        await self._idle.wait()
        for batcher in self._batchers.values():
            await batcher.close()
        self.state = "END"


def _input_errors() -> tuple[type, ...]:
    """TensorFlow's op errors that a bad input causes: 400, and batch mates run alone."""
    import tensorflow as tf

    e = tf.errors
    return (e.InvalidArgumentError, e.OutOfRangeError, e.NotFoundError, e.UnimplementedError,
            e.FailedPreconditionError)


def op_error_message(message: str) -> str:
    """The line of a TensorFlow op error that says what went wrong, fit for a client:
    without the graph execution preamble, the stack trace (File "..." lines), node names
    and filesystem paths."""
    skip = ("Graph execution error", "Detected at node", "<stack traces", "[[", "File \"",
            "(most recent call last)")
    lines = [line.strip() for line in (message or "").splitlines()]
    useful = [line for line in lines if line and not line.startswith(skip)
              and not line.endswith("(most recent call last):")]
    text = useful[-1] if useful else ""
    text = re.sub(r"\s*\[\[.*?\]\]|\s*\[Op:[^\]]*\]|\{\{[^}]*\}\}", "", text).strip()
    return redact_paths(text) or "no reason given"


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


@dataclasses.dataclass
class ServedModel:
    """One model name: its base path and its versions by state."""

    name: str
    base_path: str
    versions: dict[int, ServableVersion] = dataclasses.field(default_factory=dict)
    loading: set[int] = dataclasses.field(default_factory=set)
    unloading: dict[int, ServableVersion] = dataclasses.field(default_factory=dict)
    # version -> (its folder's stamp when it failed, the reason, fit for a client)
    failed: dict[int, tuple[Any, str]] = dataclasses.field(default_factory=dict)
    staging_seen: set[str] = dataclasses.field(default_factory=set)  # warned about once
    policy: VersionPolicy | None = None  # None: the store's (--model_version_policy)
    # {label: version} that requests resolve, and {label: version} the config asks for: a
    # label moves once its new version is loaded (move_labels).
    labels: dict[str, int] = dataclasses.field(default_factory=dict)
    configured_labels: dict[str, int] = dataclasses.field(default_factory=dict)

    def resolve(self, version: int | None, label: str | None = None) -> ServableVersion:
        """The version asked for (by number, or by version label), or the newest available."""
        if label is not None:
            if version is not None:
                raise RequestError(f"give a version ({version}) or a version label ({label!r}), "
                                   "not both", 400)
            version = self.label_version(label)
        if version is None:
            if not self.versions:
                # No base path: a client never sees the server's folders.
                raise RequestError(f"model {self.name!r} has no version loaded yet; GET "
                                   f"/v1/models/{self.name} shows why", 503)
            return self.versions[max(self.versions)]
        if version in self.versions:
            return self.versions[version]
        if version in self.unloading:
            raise RequestError(f"version {version} of model {self.name!r} is unloading; "
                               f"served versions: {sorted(self.versions)}", 503)
        raise RequestError(f"model {self.name!r} has no version {version}; served versions: "
                           f"{sorted(self.versions)} (t2t-serve --model_version_policy picks "
                           "which are served)", 404)

    def label_version(self, label: str) -> int:
        """The version `label` points at: 404 for an unknown label, 503 for one whose
        version is not loaded (yet)."""
        if label not in self.labels:
            if label in self.configured_labels:
                raise RequestError(
                    f"version label {label!r} of model {self.name!r} will point at version "
                    f"{self.configured_labels[label]} once it is loaded; GET "
                    f"/v1/models/{self.name} shows its state", 503)
            close = difflib.get_close_matches(label, list(self.labels), n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise RequestError(f"model {self.name!r} has no version label {label!r}{hint} "
                               f"Labels: {sorted(self.labels)} (the model config file's "
                               "version_labels set them)", 404)
        version = self.labels[label]
        if version not in self.versions:
            state = ("LOADING" if version in self.loading else "UNLOADING"
                     if version in self.unloading else "END" if version in self.failed
                     else "not loaded")
            raise RequestError(f"version label {label!r} of model {self.name!r} points at "
                               f"version {version}, which is not available ({state}); GET "
                               f"/v1/models/{self.name} shows its state", 503)
        return version

    def move_labels(self, allow_unavailable: bool) -> None:
        """Points each configured label at its version once that version is loaded (a
        request resolves a label once, on arrival); with `allow_unavailable`, a label not
        in use at once. Labels the config no longer has are dropped."""
        for label, version in self.configured_labels.items():
            if self.labels.get(label) != version and (
                    version in self.versions or (allow_unavailable and label not in self.labels)):
                logging.info("t2t-serve: model %r: version label %r now points at version %d.",
                             self.name, label, version)
                self.labels[label] = version
        for label in set(self.labels) - set(self.configured_labels):
            del self.labels[label]

    def status(self, version: int | None = None) -> list[dict[str, Any]]:
        """TF Serving's model_version_status list."""
        rows = [(v, "AVAILABLE", "") for v in self.versions]
        rows += [(v, "LOADING", "") for v in self.loading]
        rows += [(v, "UNLOADING", "") for v in self.unloading]
        rows += [(v, "END", message) for v, (_, message) in self.failed.items()]
        if version is not None:
            rows = [r for r in rows if r[0] == version]
            if not rows:
                self.resolve(version)
        return [{"version": str(v), "state": state,
                 "status": {"error_code": "UNKNOWN" if message else "OK",
                            "error_message": message}}
                for v, state, message in sorted(rows, reverse=True)]


class ModelStore:
    """All served models; `poll()` keeps each in step with its base path."""

    # TF Serving's --enable_model_warmup: a version is AVAILABLE only after its warm-up
    # requests ran (t2t.serving.warmup); a failed warm-up is a failed load.
    enable_model_warmup: bool = True

    def __init__(self, models: Mapping[str, str | ModelConfig], policy: VersionPolicy,
                 options: BatchingOptions, poll_seconds: float = 1.0, *,
                 config_file: ModelConfigFile | None = None, config_file_poll_seconds: float = 0,
                 allow_version_labels_for_unavailable_models: bool = False):
        """`models`: {name: base path} (`policy` applies), or {name: ModelConfig} of
        `config_file`, which is re-read every `config_file_poll_seconds` (0: never)."""
        if not models:
            raise ServerConfigError("no model to serve: give --output_dir=RUN, "
                                    "--model_base_path=DIR or --models=NAME=DIR")
        options.check()
        self.allow_unavailable_labels = allow_version_labels_for_unavailable_models
        self.models = {name: self._served_model(name, spec) for name, spec in models.items()}
        self.removed: list[ServedModel] = []  # removed from the config, still draining
        self.config_file, self.config_file_poll_seconds = config_file, config_file_poll_seconds
        self._lock = asyncio.Lock()  # one poll or config change at a time
        self._watcher: asyncio.Task | None = None
        self.policy, self.options, self.poll_seconds = policy, options, poll_seconds
        self.metrics = ServerMetrics()  # GET /monitoring/prometheus/metrics
        self.executor = ThreadPoolExecutor(options.num_batch_threads, "t2t-serve-batch")
        self._loader = ThreadPoolExecutor(1, "t2t-serve-load")
        self._poller: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()

    def _served_model(self, name: str, spec: str | ModelConfig) -> ServedModel:
        """A model of a base path (--models), or of a config entry (its labels checked
        against its folder)."""
        if isinstance(spec, str):
            return ServedModel(name, resolve_base_path(spec))
        try:
            base_path = resolve_base_path(spec.base_path)
        except ServerConfigError as e:
            raise ServerConfigError(f"{spec.where}: {e}") from None
        check_labels(spec, version_folders(base_path), {}, self.allow_unavailable_labels)
        return ServedModel(name, base_path, policy=spec.policy,
                           configured_labels=dict(spec.labels))

    async def reload_config(self, config: Any) -> None:
        """TF Serving's HandleReloadConfigRequest: serves the models of `config` (a
        ModelServerConfig message, or {name: ModelConfig}) from now on. Added models load,
        removed ones finish their requests and unload, policies and labels apply as in
        poll(); returns once the versions to load are loaded (or failed). A config that
        cannot be applied raises ServerConfigError and changes nothing."""
        if not isinstance(config, Mapping):
            config = configs_from_proto(config, "the ReloadConfig request")
        async with self._lock:
            self._apply_config(config)
            await self._poll_models()

    def _apply_config(self, configs: Mapping[str, ModelConfig]) -> None:
        """Checks every entry first (raising changes nothing), then swaps the config in."""
        added = {}
        for name, spec in configs.items():
            if name not in self.models:
                added[name] = self._served_model(name, spec)
                continue
            model = self.models[name]
            try:
                base_path = resolve_base_path(spec.base_path)
            except ServerConfigError as e:
                raise ServerConfigError(f"{spec.where}: {e}") from None
            if base_path != model.base_path:
                raise ServerConfigError(
                    f"{spec.where}: base_path {base_path} differs from the one {name!r} is "
                    f"served from ({model.base_path}); give the new folder a new model name, "
                    "or remove the model from the config first and add it back after")
            check_labels(spec, version_folders(base_path), model.labels,
                         self.allow_unavailable_labels)
        for name in [n for n in self.models if n not in configs]:
            model = self.models.pop(name)
            logging.info("t2t-serve: model %r left the config: it finishes its requests, then "
                         "unloads.", name)
            for version in list(model.versions):
                self._unload(model, version)
            self.removed.append(model)
        for name, spec in configs.items():
            if name in added:
                self.models[name] = added[name]
            else:
                self.models[name].policy = spec.policy
                self.models[name].configured_labels = dict(spec.labels)

    def model(self, name: str) -> ServedModel:
        if name in self.models:
            return self.models[name]
        close = difflib.get_close_matches(name, list(self.models), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise RequestError(f"unknown model {name!r}{hint} Served models: {sorted(self.models)}",
                           404)

    async def start(self) -> None:
        """Loads every model's selected versions; fails unless each has one."""
        await self.poll()
        for model in self.models.values():
            if not model.versions:
                reasons = "; ".join(f"version {v}: {m}" for v, (_, m) in model.failed.items())
                raise ServerConfigError(
                    f"model {model.name!r}: no version could be loaded from {model.base_path}"
                    + (f" ({reasons})" if reasons else
                       " (no version folders: run t2t-exporter --output_dir=RUN first)"))
            _check_labels_moved(model)
        self._poller = asyncio.create_task(self._poll_forever())
        if self.config_file is not None and self.config_file_poll_seconds > 0:
            self._watcher = asyncio.create_task(watch_model_config_file(
                self.config_file, self.config_file_poll_seconds, self.reload_config))

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.poll()
            except Exception:  # noqa: BLE001 - a bad poll must not stop serving
                logging.exception("t2t-serve: polling the model folders failed")

    async def poll(self) -> None:
        """Loads new selected versions, moves labels to those loaded, then drains and
        unloads dropped ones. A version that failed to load does not count: the policy
        picks among the loadable ones, so the version it would have replaced keeps serving.
        A version a label points at stays loaded until the label moves."""
        async with self._lock:
            await self._poll_models()

    async def _poll_models(self) -> None:
        self.removed = [model for model in self.removed if model.unloading]
        for model in list(self.models.values()):
            model.staging_seen = note_staging(model.name, model.base_path, model.staging_seen)
            on_disk = version_folders(model.base_path)
            for version in [v for v in model.failed if v not in on_disk]:
                del model.failed[version]
            stamps = {v: folder_stamp(path) for v, path in on_disk.items()}
            policy = model.policy or self.policy
            for version in sorted(policy.select(_loadable(model, stamps))
                                  - set(model.versions), reverse=True):
                await self._load(model, version, on_disk[version], stamps[version])
            model.move_labels(self.allow_unavailable_labels)
            wanted = (policy.select(_loadable(model, stamps))
                      | (set(model.labels.values()) & set(on_disk)))
            if wanted & set(model.versions):  # never leave the model with no version
                for version in [v for v in model.versions if v not in wanted]:
                    self._unload(model, version)

    async def _load(self, model: ServedModel, version: int, path: str, stamp: Any) -> None:
        model.loading.add(version)
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._loader, _load_saved_model, path)
            servable = ServableVersion(model.name, version, path, loaded, self.options,
                                       self.executor, self.metrics)
            if self.enable_model_warmup:
                await asyncio.get_running_loop().run_in_executor(
                    self._loader, run_warmup, path, servable.signatures, servable.info,
                    servable._run)
        except Exception as e:  # noqa: BLE001 - reported in the status, others keep serving
            first = str(e).strip().splitlines()[0] if str(e).strip() else "no reason given"
            # The status (sent to clients) names files inside the version folder only;
            # logged once: the version is tried again only when its files change.
            model.failed[version] = (stamp, f"{type(e).__name__}: {redact_paths(first, path)}")
            self.metrics.model_event(model.name, version, "load_failed")
            logging.error("t2t-serve: model %r version %d (%s) failed to load, the other "
                          "versions keep serving; it is tried again when its files change: "
                          "%s: %s", model.name, version, path, type(e).__name__, first)
            return
        finally:
            model.loading.discard(version)
        model.failed.pop(version, None)
        model.versions[version] = servable
        self.metrics.model_event(model.name, version, "load")
        logging.info("t2t-serve: model %r version %d is available (%s).", model.name, version,
                     path)

    def _unload(self, model: ServedModel, version: int) -> None:
        servable = model.versions.pop(version)
        model.unloading[version] = servable
        servable.state = "UNLOADING"  # at once: new requests go elsewhere (drain() waits)

        async def drain() -> None:
            await servable.drain()
            model.unloading.pop(version, None)
            self.metrics.model_event(model.name, version, "unload")
            self.metrics.forget_version(model.name, version, servable.batcher_signatures())
            logging.info("t2t-serve: model %r version %d unloaded.", model.name, version)

        task = asyncio.create_task(drain())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def ready(self, names: list[str] | None = None) -> tuple[bool, list[str]]:
        """(whether every model (of `names`; None: all) has an AVAILABLE version: loaded
        and warmed up, one reason per model that has none), for readiness probes."""
        models = [self.models[n] for n in names] if names is not None else self.models.values()
        reasons = [unready_reason(m, self._poller is not None) for m in models]
        reasons = [r for r in reasons if r]
        return not reasons, reasons

    def hurry(self) -> None:
        """Queued requests run at once, without waiting to fill batches (shutdown)."""
        for model in [*self.models.values(), *self.removed]:
            for servable in [*model.versions.values(), *model.unloading.values()]:
                servable.hurry()

    async def close(self) -> None:
        """Stops polling, drains every version, and stops the threads."""
        for task in (self._poller, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for model in self.models.values():
            for version in list(model.versions):
                self._unload(model, version)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        self.executor.shutdown(wait=True)
        self._loader.shutdown(wait=True)


def _check_labels_moved(model: ServedModel) -> None:
    """At start: every configured label points at a loaded version (TF Serving's rule
    without --allow_version_labels_for_unavailable_models)."""
    for label, version in sorted(model.configured_labels.items()):
        if model.labels.get(label) != version:
            reason = model.failed.get(version, (None, "not loaded"))[1]
            raise ServerConfigError(
                f"model {model.name!r}: version label {label!r} points at version {version}, "
                f"which could not be loaded ({reason}); fix that version, point the label at "
                "a loaded one, or pass --allow_version_labels_for_unavailable_models")


def unready_reason(model: ServedModel, started: bool) -> str:
    """Why `model` cannot answer (no AVAILABLE version), fit for a client; "" when it can.
    `started`: the store's first load of every model is done."""
    if model.versions:
        return ""
    if model.loading or not (started or model.failed):
        loading = f" (loading version {max(model.loading)})" if model.loading else ""
        return f"model {model.name!r} is still loading{loading}"
    if model.failed:
        version, (_, reason) = max(model.failed.items())
        return f"model {model.name!r} has no version loaded: version {version} failed: {reason}"
    return f"model {model.name!r} has no version folder to serve (run t2t-exporter)"


def _loadable(model: ServedModel, stamps: dict[int, Any]) -> list[int]:
    """The versions on disk (`stamps`: version -> folder_stamp) that did not fail to
    load as they are now."""
    return [v for v, stamp in stamps.items()
            if v not in model.failed or model.failed[v][0] != stamp]


def _load_saved_model(path: str) -> Any:
    import tensorflow as tf

    info = _read_json(os.path.join(path, EXPORT_INFO))
    if info.get("needs_tensorflow_text"):
        import tensorflow_text  # noqa: F401 - registers the SentencePiece ops the graph uses
    return tf.saved_model.load(path)
