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
failed version) names no server path: redact_paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np
from absl import logging

from t2t.serving.batching import Batcher, BatchingOptions, ShuttingDownError
from t2t.serving.metrics import ServerMetrics
from t2t.serving.rest_api import PredictRequest, RequestError, SignatureSpec

EXPORT_INFO = os.path.join("assets.extra", "t2t_export.json")


class ServerConfigError(ValueError):
    """A model path or policy the server cannot start with; the message says the fix."""


@dataclasses.dataclass(frozen=True)
class VersionPolicy:
    """Which versions are served: the newest `count` ("latest:N"), "all", or
    "specific:V1,V2"."""

    kind: str = "latest"
    count: int = 2
    versions: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> VersionPolicy:
        kind, _, arg = text.strip().partition(":")
        try:
            if kind == "latest":
                policy = cls("latest", int(arg) if arg else 1)
                if policy.count >= 1:
                    return policy
            elif kind == "all" and not arg:
                return cls("all")
            elif kind == "specific" and arg:
                return cls("specific", 0, tuple(sorted(int(v) for v in arg.split(","))))
        except ValueError:
            pass
        raise ServerConfigError(f"--model_version_policy={text!r}: use latest, latest:N (N >= 1), "
                                "all, or specific:V1,V2")

    def select(self, available: list[int]) -> set[int]:
        if self.kind == "all":
            return set(available)
        if self.kind == "specific":
            return set(self.versions) & set(available)
        return set(sorted(available)[-self.count:])

    def __str__(self) -> str:
        if self.kind == "specific":
            return "specific:" + ",".join(map(str, self.versions))
        return "all" if self.kind == "all" else f"latest:{self.count}"


def resolve_base_path(path: str) -> str:
    """The folder holding `path`'s version folders (`path` itself, or RUN/export)."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        raise ServerConfigError(f"model base path {path} does not exist; give the folder that "
                                "t2t-exporter wrote (RUN/export) or the run folder RUN")
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        raise ServerConfigError(f"{path} is one version of a model; give the folder holding the "
                                f"version folders: {os.path.dirname(path)}")
    if not version_folders(path) and os.path.isdir(os.path.join(path, "export")):
        return os.path.join(path, "export")
    return path


# t2t-exporter's staging folder (temp-VERSION-PID): renamed to VERSION once complete.
_STAGING = re.compile(r"temp-\d+(-\d+)?")
# An absolute path in an error message (not a URL: no ':' or '/' just before it).
_ABS_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"/:;,()\[\]{}<>]+/)+([^\s'\"/:;,()\[\]{}<>]*)")


def redact_paths(text: str, folder: str | None = None) -> str:
    """`text` without the server's filesystem paths, for a client: paths inside
    `folder` become relative to it, any other absolute path becomes .../its base name."""
    if folder:
        folder = folder.rstrip(os.sep)
        text = text.replace(folder + os.sep, "").replace(folder, ".")
    return _ABS_PATH.sub(lambda m: ".../" + m[1], text)


def staging_folders(base_path: str) -> list[str]:
    """Names of the export staging folders (temp-VERSION-PID) under `base_path`: exports
    being written, or left by an exporter that was killed. Never loaded."""
    try:
        return sorted(n for n in os.listdir(base_path) if _STAGING.fullmatch(n))
    except OSError:
        return []


def version_folders(base_path: str) -> dict[int, str]:
    """{version: folder} of the integer-named folders holding a saved_model.pb (a staging
    folder, temp-VERSION-PID, is not a version: t2t-exporter renames it when complete)."""
    found = {}
    try:
        names = os.listdir(base_path)
    except OSError:
        return found
    for name in names:
        folder = os.path.join(base_path, name)
        if name.isdigit() and os.path.isfile(os.path.join(folder, "saved_model.pb")):
            found[int(name)] = folder
    return found


def _folder_stamp(folder: str) -> tuple[tuple[str, float, int], ...]:
    """(name, mtime, size) of saved_model.pb and the variables files: a version that
    failed to load is tried again when any of them changes (e.g. a copy that finished)."""
    names = ["saved_model.pb"]
    with contextlib.suppress(OSError):
        names += [os.path.join("variables", n)
                  for n in sorted(os.listdir(os.path.join(folder, "variables")))]
    stamp = []
    for name in names:
        with contextlib.suppress(OSError):
            stat = os.stat(os.path.join(folder, name))
            stamp.append((name, stat.st_mtime, stat.st_size))
    return tuple(stamp)


class ServableVersion:
    """One loaded SavedModel version and a Batcher per signature."""

    def __init__(self, model_name: str, version: int, path: str, loaded: Any,
                 options: BatchingOptions, executor: Executor):
        self.model_name, self.version, self.path = model_name, version, path
        self.loaded = loaded
        self.functions = dict(loaded.signatures)
        self.signatures = {name: SignatureSpec.from_function(name, fn)
                           for name, fn in self.functions.items()}
        self.state = "AVAILABLE"
        self.info = _read_json(os.path.join(path, EXPORT_INFO))
        self._options, self._executor = options, executor
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
        return {name: value.numpy() for name, value in outputs.items()}

    def batcher(self, signature: str) -> Batcher:
        if signature not in self._batchers:
            self._batchers[signature] = Batcher(
                lambda inputs: self._run(signature, inputs), self._options, self._executor)
            if self._hurried:
                self._batchers[signature].hurry()
        return self._batchers[signature]

    async def predict(self, request: PredictRequest) -> dict[str, np.ndarray]:
        if self.state != "AVAILABLE":
            raise ShuttingDownError(f"version {self.version} of {self.model_name!r} is "
                                    "unloading; send the request without a version")
        return await self.batcher(request.signature.name).predict(request.inputs,
                                                                  request.batch_size)

    def hurry(self) -> None:
        self._hurried = True
        for batcher in self._batchers.values():
            batcher.hurry()

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

    def resolve(self, version: int | None) -> ServableVersion:
        """The version asked for, or the newest available one."""
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

    def __init__(self, models: dict[str, str], policy: VersionPolicy, options: BatchingOptions,
                 poll_seconds: float = 1.0):
        if not models:
            raise ServerConfigError("no model to serve: give --output_dir=RUN, "
                                    "--model_base_path=DIR or --models=NAME=DIR")
        options.check()
        self.models = {name: ServedModel(name, resolve_base_path(path))
                       for name, path in models.items()}
        self.policy, self.options, self.poll_seconds = policy, options, poll_seconds
        self.metrics = ServerMetrics()  # GET /monitoring/prometheus/metrics
        self.executor = ThreadPoolExecutor(options.num_batch_threads, "t2t-serve-batch")
        self._loader = ThreadPoolExecutor(1, "t2t-serve-load")
        self._poller: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()

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
        self._poller = asyncio.create_task(self._poll_forever())

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.poll()
            except Exception:  # noqa: BLE001 - a bad poll must not stop serving
                logging.exception("t2t-serve: polling the model folders failed")

    async def poll(self) -> None:
        """Loads new selected versions, then drains and unloads dropped ones. A version that
        failed to load does not count: the policy picks among the loadable ones, so the
        version it would have replaced keeps serving."""
        for model in self.models.values():
            _note_staging(model)
            on_disk = version_folders(model.base_path)
            for version in [v for v in model.failed if v not in on_disk]:
                del model.failed[version]
            stamps = {v: _folder_stamp(path) for v, path in on_disk.items()}
            for version in sorted(self.policy.select(_loadable(model, stamps))
                                  - set(model.versions), reverse=True):
                await self._load(model, version, on_disk[version], stamps[version])
            wanted = self.policy.select(_loadable(model, stamps))
            if wanted & set(model.versions):  # never leave the model with no version
                for version in [v for v in model.versions if v not in wanted]:
                    self._unload(model, version)

    async def _load(self, model: ServedModel, version: int, path: str, stamp: Any) -> None:
        model.loading.add(version)
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._loader, _load_saved_model, path)
            servable = ServableVersion(model.name, version, path, loaded, self.options,
                                       self.executor)
        except Exception as e:  # noqa: BLE001 - reported in the status, others keep serving
            first = str(e).strip().splitlines()[0] if str(e).strip() else "no reason given"
            # The status (sent to clients) names files inside the version folder only;
            # logged once: the version is tried again only when its files change.
            model.failed[version] = (stamp, f"{type(e).__name__}: {redact_paths(first, path)}")
            logging.error("t2t-serve: model %r version %d (%s) failed to load, the other "
                          "versions keep serving; it is tried again when its files change: "
                          "%s: %s", model.name, version, path, type(e).__name__, first)
            return
        finally:
            model.loading.discard(version)
        model.failed.pop(version, None)
        model.versions[version] = servable
        logging.info("t2t-serve: model %r version %d is available (%s).", model.name, version,
                     path)

    def _unload(self, model: ServedModel, version: int) -> None:
        servable = model.versions.pop(version)
        model.unloading[version] = servable

        async def drain() -> None:
            await servable.drain()
            model.unloading.pop(version, None)
            logging.info("t2t-serve: model %r version %d unloaded.", model.name, version)

        task = asyncio.create_task(drain())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def hurry(self) -> None:
        """Queued requests run at once, without waiting to fill batches (shutdown)."""
        for model in self.models.values():
            for servable in [*model.versions.values(), *model.unloading.values()]:
                servable.hurry()

    async def close(self) -> None:
        """Stops polling, drains every version, and stops the threads."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for model in self.models.values():
            for version in list(model.versions):
                self._unload(model, version)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        self.executor.shutdown(wait=True)
        self._loader.shutdown(wait=True)


def _note_staging(model: ServedModel) -> None:
    """Warns once per stale staging folder (temp-VERSION-PID whose exporter process is
    not running on this host): never loaded, it only takes disk space."""
    stale = [n for n in staging_folders(model.base_path) if not _pid_running(n)]
    for name in stale:
        if name not in model.staging_seen:
            logging.warning(
                "t2t-serve: model %r: ignoring %s, left by an exporter that was killed (its "
                "process %s is not running; t2t-exporter renames a finished export to its "
                "version number); delete it to free the space.", model.name,
                os.path.join(model.base_path, name), name.rsplit("-", 1)[-1])
    if len(stale) > 1 and not set(stale) <= model.staging_seen:
        logging.warning("t2t-serve: model %r: %d unfinished exports (temp-*) in %s; delete "
                        "them.", model.name, len(stale), model.base_path)
    model.staging_seen = set(stale)


def _pid_running(staging_name: str) -> bool:
    """Whether the exporter of temp-VERSION-PID still runs (on this host); True when the
    name has no PID (it cannot be told)."""
    parts = staging_name.split("-")
    if len(parts) < 3:
        return True
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True
    return True


def _loadable(model: ServedModel, stamps: dict[int, Any]) -> list[int]:
    """The versions on disk (`stamps`: version -> _folder_stamp) that did not fail to
    load as they are now."""
    return [v for v, stamp in stamps.items()
            if v not in model.failed or model.failed[v][0] != stamp]


def _load_saved_model(path: str) -> Any:
    import tensorflow as tf

    info = _read_json(os.path.join(path, EXPORT_INFO))
    if info.get("needs_tensorflow_text"):
        import tensorflow_text  # noqa: F401 - registers the SentencePiece ops the graph uses
    return tf.saved_model.load(path)
