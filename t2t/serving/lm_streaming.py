"""Streaming a language model's tokens as they are made (t2t-serve): REST server-sent
events and the loop that gRPC's GenerateStream shares (t2t.serving.grpc_streaming).

    POST /v1/models/NAME[/versions/N]:generateStream
    {"instances": [{"inputs": "Return the", "temperature": 0.8, "top_k": 40, "top_p": 0.95,
                    "max_new_tokens": 40, "seed": 7}]}
    -> text/event-stream:
    event: token
    data: {"index": 0, "token_id": 17, "outputs": "Return the n", "piece": "n", "replaced": 0}
    ...
    event: result
    data: {"predictions": [{"outputs": "Return the number of", "scores": -12.5}], "tokens": 9}

The request is generate's (t2t.serving.lm_serving): one prompt, "inputs" (text, or
{"b64": ...}) with any of the settings; an unset one is the export's own
(--decode_hparams; max_new_tokens 0: the export's). The instance may be the bare prompt,
and the columnar form {"inputs": ...} works too. Each "token" event carries the text so
far ("outputs", as generate would return it now), what this token added ("piece", after
removing the last "replaced" characters of the text before: a byte-level tokenizer may
complete a character it had shown as U+FFFD). "result" is exactly :predict's row-format
answer of the generate signature for the same prompt and settings (seeded sampling and
greedy alike; seed -1 draws one), then the stream ends. A bad request is answered before
any event, as JSON with its status, like :predict; a model failure mid-stream is an
"error" event {"error": message}.

The server drives the export's generate_start / generate_step signatures, one step a
token, keeping the decoding state (the key/value cache) in TensorFlow between steps, in
the store's executor threads. A client that disconnects stops the loop before its next
step. Exports made before these signatures existed are refused with NoStreamSignatures
(re-export them with t2t-exporter); so are models that are not language models.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import json
import math
import time
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from typing import Any

import numpy as np
from absl import logging
from aiohttp import web

from t2t.serving import lm_settings, rest_api
from t2t.serving.lm_serving import GENERATE_SIGNATURE, STREAM_START_SIGNATURE, STREAM_STEP_SIGNATURE
from t2t.serving.model_store import ServableVersion, op_error_message, redact_paths
from t2t.serving.rest_api import RequestError, TensorInfo

STREAM_METHOD = ":generateStream"
MAX_NEW_TOKENS = lm_settings.MAX_NEW_TOKENS  # its key/value cache is allocated up front
SETTINGS = ("temperature", "top_k", "top_p", "max_new_tokens", "seed")
PROMPT = "inputs"


class NoStreamSignatures(RequestError):
    """The served version cannot stream (an old export, or not a language model)."""


@dataclasses.dataclass(frozen=True)
class StreamRequest:
    """One prompt (UTF-8 bytes) and generate's settings."""

    prompt: bytes
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    max_new_tokens: int = 0
    seed: int = -1


@dataclasses.dataclass(frozen=True)
class TokenEvent:
    """A new token: its number (from 0), id, generate's text so far (bytes), and what it
    added: `piece` after removing the last `replaced` characters of the text before."""

    index: int
    token_id: int
    outputs: bytes
    piece: str
    replaced: int

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "token_id": self.token_id,
                "outputs": self.outputs.decode("utf-8", "replace"), "piece": self.piece,
                "replaced": self.replaced}


@dataclasses.dataclass(frozen=True)
class StreamResult:
    """The end: generate's "outputs" and "scores" for the prompt, and the new tokens."""

    outputs: bytes
    score: np.float32
    tokens: int

    def arrays(self) -> dict[str, np.ndarray]:
        """As the generate signature's outputs for one prompt."""
        return {"outputs": np.array([self.outputs], dtype=object),
                "scores": np.array([self.score], dtype=np.float32)}


# ----------------------------------------------------------------- requests
def export_defaults(info: dict[str, Any]) -> dict[str, Any]:
    """The export's own settings (t2t_export.json's serving_settings) for unset ones."""
    served = info.get("serving_settings") or {}
    return {"temperature": float(served.get("temperature", 0.0)),
            "top_k": int(served.get("top_k", 0)), "top_p": float(served.get("top_p", 1.0)),
            "max_new_tokens": 0, "seed": int(served.get("seed", -1))}


def _close(name: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=2, cutoff=0.5)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def _number(value: Any, name: str, integer: bool) -> float | int:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if ok and integer:
        ok = math.isfinite(float(value)) and float(value) == int(value)
    if not ok:
        kind = "an integer" if integer else "a number"
        raise RequestError(f"{name}={json.dumps(value, default=str)}: wants {kind}")
    return int(value) if integer else float(value)


def check_request(prompt: bytes, settings: dict[str, Any], defaults: dict[str, Any]
                  ) -> StreamRequest:
    """A StreamRequest from the prompt and the given settings (others: `defaults`); every
    bad value raises RequestError naming it and the valid range."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise RequestError(f"unknown setting {unknown[0]!r}{_close(unknown[0], SETTINGS)}; a "
                           f"stream takes {PROMPT!r} and {', '.join(SETTINGS)}")
    values = {**defaults, **settings}
    temperature = _number(values["temperature"], "temperature", False)
    top_k = _number(values["top_k"], "top_k", True)
    top_p = _number(values["top_p"], "top_p", False)
    new_tokens = _number(values["max_new_tokens"], "max_new_tokens", True)
    seed = _number(values["seed"], "seed", True)
    lm_settings.check_settings(temperature, top_k, top_p, new_tokens, seed)
    return StreamRequest(prompt, temperature, top_k, top_p, new_tokens, seed)


def _instance(body: dict[str, Any]) -> Any:
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RequestError(f"unknown request field(s) {unknown}; a stream request has "
                           "\"instances\" (one) or \"inputs\"")
    signature = body.get("signature_name", GENERATE_SIGNATURE)
    if signature != GENERATE_SIGNATURE:
        raise RequestError(f"signature_name {signature!r}: a stream decodes as the "
                           f"{GENERATE_SIGNATURE!r} signature; leave signature_name out")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError("a stream request needs exactly one of \"instances\" (a list of one "
                           "prompt) or \"inputs\"")
    if "inputs" in body:
        return body["inputs"]
    instances = body["instances"]
    if not isinstance(instances, list) or len(instances) != 1:
        count = len(instances) if isinstance(instances, list) else "not a list"
        raise RequestError(f"\"instances\" must be a list of one prompt (got {count}); a "
                           "stream continues one prompt: send one request per prompt")
    return instances[0]


def parse_rest(body: bytes, defaults: dict[str, Any]) -> StreamRequest:
    """A :generateStream request body -> StreamRequest."""
    instance = _instance(rest_api.parse_body(body))
    if isinstance(instance, dict) and set(instance) != {"b64"}:
        if PROMPT not in instance:
            raise RequestError(f"the instance has no {PROMPT!r} (the prompt); it has "
                               f"{sorted(instance)}")
        settings = {k: v for k, v in instance.items() if k != PROMPT}
        instance = instance[PROMPT]
    else:
        settings = {}
    if isinstance(instance, list) and len(instance) == 1:
        instance = instance[0]
    prompt = rest_api.to_array(instance, TensorInfo("string", (None,)), PROMPT, batched=False)
    return check_request(prompt.item(), settings, defaults)


# ----------------------------------------------------------------- the loop
def stream_functions(servable: ServableVersion) -> tuple[Any, Any, list[str]]:
    """(generate_start, generate_step, the STATE names) of a version that can stream."""
    names = servable.signatures
    if STREAM_START_SIGNATURE in names and STREAM_STEP_SIGNATURE in names:
        return (servable.functions[STREAM_START_SIGNATURE],
                servable.functions[STREAM_STEP_SIGNATURE],
                sorted(names[STREAM_STEP_SIGNATURE].inputs))
    which = f"model {servable.model_name!r} version {servable.version}"
    if GENERATE_SIGNATURE in names:
        raise NoStreamSignatures(
            f"{which} cannot stream: it was exported before streaming (no "
            f"{STREAM_START_SIGNATURE!r}/{STREAM_STEP_SIGNATURE!r} signatures); export it "
            "again with t2t-exporter --output_dir=RUN, or call :predict (not streamed)")
    modality = (servable.info.get("problem_hparams") or {}).get("modality") or {}
    if servable.info.get("text_signature") is False and "inputs" not in modality:
        raise NoStreamSignatures(
            f"{which} cannot stream: it is an ids-only export (no in-graph tokenizer); stream "
            "from the language model's text export")
    raise NoStreamSignatures(
        f"{which} cannot stream: streaming is for language-model exports (a problem without "
        f"inputs); its signatures are {sorted(names)}: call :predict")


def _model_errors() -> tuple[type, ...]:
    import tensorflow as tf

    e = tf.errors
    return (e.InvalidArgumentError, e.OutOfRangeError, e.NotFoundError, e.UnimplementedError,
            e.FailedPreconditionError)


def _call(servable: ServableVersion, fn: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """`fn`'s outputs (tensors, kept in TensorFlow); op errors as RequestError."""
    import tensorflow as tf

    try:
        return fn(**inputs)
    except tf.errors.OpError as e:
        if isinstance(e, _model_errors()):
            raise RequestError(f"the model rejected the input: {op_error_message(e.message)}"
                               ) from None
        logging.warning("t2t-serve: model %r version %d failed while streaming: %s: %s",
                        servable.model_name, servable.version, type(e).__name__, e.message)
        raise RequestError(f"the model failed ({type(e).__name__}): "
                           f"{op_error_message(e.message)}", 500) from None


def _piece(before: str, after: str) -> tuple[str, int]:
    """(what `after` adds to `before`, characters of `before` it replaces)."""
    common = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        common += 1
    return after[common:], len(before) - common


async def generate(servable: ServableVersion, request: StreamRequest, executor: Executor
                   ) -> AsyncIterator[TokenEvent | StreamResult]:
    """Each new token of `request` as it is made, then the StreamResult. Closing the
    iterator (a client gone) stops before the next model step."""
    import tensorflow as tf

    start, step, names = stream_functions(servable)
    if servable.input_check is not None:  # text the model cannot read: 400, as :predict's
        servable.input_check.check(rest_api.PredictRequest(
            servable.signatures[STREAM_START_SIGNATURE],
            {PROMPT: np.array([request.prompt], dtype=object)}, 1, row_format=True))
    loop = asyncio.get_running_loop()
    settings = {"inputs": tf.constant([request.prompt]),
                "temperature": tf.constant(request.temperature, tf.float32),
                "top_k": tf.constant(request.top_k, tf.int32),
                "top_p": tf.constant(request.top_p, tf.float32),
                "max_new_tokens": tf.constant(request.max_new_tokens, tf.int32),
                "seed": tf.constant(request.seed, tf.int64)}
    out = await loop.run_in_executor(executor, _call, servable, start, settings)
    text = out["outputs"].numpy()[0].decode("utf-8", "replace")
    count = 0
    while not bool(out["finished"].numpy()[0]):  # row 0: the prompt's first sample
        state = {name: out[name] for name in names}
        out = await loop.run_in_executor(executor, _call, servable, step, state)
        if bool(out["generated"].numpy()[0]):
            outputs = out["outputs"].numpy()[0]
            after = outputs.decode("utf-8", "replace")
            piece, replaced = _piece(text, after)
            yield TokenEvent(count, int(out["token"].numpy()[0]), outputs, piece, replaced)
            text, count = after, count + 1
    yield StreamResult(out["outputs"].numpy()[0], out["scores"].numpy()[0], count)


# ----------------------------------------------------------------- REST
def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def rest_stream(request: web.Request, servable: ServableVersion, executor: Executor
                      ) -> web.StreamResponse:
    """The :generateStream answer (server-sent events) of `servable`. Errors before the
    first event raise RequestError (answered as JSON, as :predict's); the prompt is fed
    by then, so a model that rejects it answers with a status too."""
    stream_functions(servable)
    parsed = parse_rest(await request.read(), export_defaults(servable.info))
    if servable.state != "AVAILABLE":
        raise RequestError(f"version {servable.version} of {servable.model_name!r} is "
                           "unloading; send the request without a version", 503)
    with servable.in_use():
        events = generate(servable, parsed, executor)
        try:
            first = await anext(events)
            response = web.StreamResponse(headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            await response.prepare(request)
            await _send_events(request, response, first, events, servable)
        finally:
            await events.aclose()
    await response.write_eof()
    return response


async def _send_events(request: web.Request, response: web.StreamResponse,
                       event: TokenEvent | StreamResult | None,
                       events: AsyncIterator[TokenEvent | StreamResult],
                       servable: ServableVersion) -> None:
    """Writes `event` and the rest of `events`. A model failure is an "error" event; a
    client that disconnected ends the handler as aiohttp ends a cancelled one
    (asyncio.CancelledError: counted with status 499), before the next model step."""
    started, tokens = time.perf_counter(), 0
    try:
        while event is not None:
            if request.transport is None or request.transport.is_closing():
                raise ConnectionResetError("the client disconnected")
            if isinstance(event, TokenEvent):
                await response.write(_event("token", event.as_json()))
                tokens += 1
                event = await anext(events, None)
            else:
                await response.write(_event("result", {
                    **rest_api.predict_response(event.arrays(), True), "tokens": event.tokens}))
                event = None
    except RequestError as e:
        with contextlib.suppress(ConnectionResetError):
            await response.write(_event("error", {"error": str(e)}))
    except ConnectionResetError:
        logging.info("t2t-serve: model %r version %d: the client left a stream after %d "
                     "tokens (%.2f s); generation stopped.", servable.model_name,
                     servable.version, tokens, time.perf_counter() - started)
        raise asyncio.CancelledError from None
    except Exception as e:  # noqa: BLE001 - the headers are sent: end with an error event
        logging.exception("t2t-serve: internal error in a stream of model %r version %d",
                          servable.model_name, servable.version)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        with contextlib.suppress(ConnectionResetError):
            await response.write(_event("error", {
                "error": f"internal error: {type(e).__name__}: {redact_paths(first)} (the "
                         "server's log has the details)"}))
