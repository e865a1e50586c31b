"""LiteRT (TFLite) export of a trained model: ids in, ids out, checked against t2t.

    version_dir = export_tflite(problem, "transformer", hparams, data_dir, "RUN",
                                "RUN/export_tflite", DecodeHParams.parse("beam_size=1"),
                                parity_check=True, parity_examples=6)

writes EXPORT_DIR/<unix timestamp>/ holding

  model.tflite       one signature, "serving_default", batch 1, fixed shapes:
    seq2seq          {"inputs": int32 [1, N]} token ids + EOS (1), 0-padded, N =
                     max_input_length + 1 -> {"outputs": int32 [1, T] greedy ids, 0 after
                     EOS, "scores": float32 [1] log-probability}. T = N + extra_length
                     (or max_new_tokens); decoding stops, as t2t's Decoder does, after
                     (input length with EOS) + extra_length tokens or at EOS.
    classifier       {"inputs": int32 [1, N] ids (text) or uint8 [1, H, W, C] (images)}
                     -> {"outputs": int32 [1, 1] class id, "scores": float32 [1] its
                     log-probability, "log_probs": float32 [1, classes]}.
                     Feed exactly these shapes (`prepare_ids` pads, and names the fix
                     for an input that is too long): a signature runner would resize
                     the input, and the fixed-shape graph then fails or decodes wrongly.
  assets/            the vocabulary files: tokenization stays outside the model (encode
                     text to ids, cut to max_input_length, append EOS, pad with 0; decode
                     the output ids up to EOS; a class id indexes the class list).
  t2t_tflite.json    problem, model, checkpoint, decode settings, signature, the ops
                     (TFLite builtins), size, parity (runtime) and latency.

Greedy decoding only (beam search and sampling are rejected). The decode loop is
t2t.decoding.greedy's (a fixed output buffer, a run-time stop, static loop shapes),
which converts to a TFLite WHILE over the model's cached step (decode_init_cached /
decode_step_cached):
while tracing it, the key/value cache is created with `tf.fill` and written with a
dynamic-update-slice (TFLite builtins) instead of t2t's `Empty` / `InplaceUpdate` (TF
kernels that would need select TF ops); the variables are frozen into constants. So
transformer (incl. relative attention) and the image/text classifiers convert to builtin
ops only. No select TF ops, ever: LiteRT 2.x (ai-edge-litert) has no Flex delegate, and
TF 2.21's tf.lite.Interpreter does not run them either, so a model that needs them (the
lstm_seq2seq* models: TensorList ops; bytenet's uncached step: Conv2D/StridedSlice on
shapes the loop leaves dynamic) gets a TFLiteExportError naming the ops and the fix
(--format=saved_model).

The parity gate runs the .tflite with the `ai-edge-litert` interpreter (tf.lite's, with
a warning, where it is not installed) on dev examples (one at a time, plus an empty
input) and t2t's Decoder (batch_size 1) on the same inputs: output ids must be equal
and scores within 1e-3, else ParityError and the export is deleted. Per-example
latency (the interpreter's invoke) is measured on those examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from absl import logging

from t2t.config import DecodeHParams
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import decoder as decoder_lib
from t2t.decoding import settings as settings_lib
from t2t.features import EOS_ID, Modality
from t2t.hparams.hparams import HParams
from t2t.serving import export as export_lib
from t2t.serving import parity as parity_lib
from t2t.utils import optional_deps

TFLITE_FILE = "model.tflite"
INFO_FILE = "t2t_tflite.json"
SIGNATURE = "serving_default"
ASSETS_DIR = "assets"
PARITY_EXAMPLES = export_lib.PARITY_EXAMPLES
SCORE_TOLERANCE = parity_lib.SCORE_TOLERANCE


class TFLiteExportError(export_lib.ExportError):
    """A model, problem or setting the LiteRT export cannot serve."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the .tflite computes: `kind` "seq2seq" or "classifier"; input shape
    (batch 1) and dtype; for seq2seq the decode buffer length and stop rule."""

    kind: str
    input_shape: tuple[int, ...]
    input_dtype: str  # "int32" ids or "uint8" images
    decode_length: int = 0  # output length T (seq2seq)
    extra_length: int = 0  # stop after input length + extra_length tokens...
    max_new_tokens: int = 0  # ...or after exactly this many, when set

    @property
    def max_input_tokens(self) -> int:
        """Tokens an input may have before its EOS (text inputs)."""
        return self.input_shape[1] - 1


# ----------------------------------------------------------------- settings
def plan_for(model: Any, problem_name: str, settings: settings_lib.DecodeSettings) -> Plan:
    """The export's plan; TFLiteExportError for what LiteRT export does not do."""
    php = model.problem_hparams
    inputs, targets = php.modality.get("inputs"), php.modality.get("targets")
    if php.is_language_model or inputs is None:
        raise TFLiteExportError(
            f"{problem_name} is a language model (no inputs): --format=tflite exports "
            f"seq2seq and classifier models; use --format=saved_model.")
    if inputs not in (Modality.SYMBOL, Modality.IMAGE):
        raise TFLiteExportError(f"{problem_name}: cannot export {inputs} inputs to LiteRT "
                                f"(ids or images only); use --format=saved_model.")
    if settings.return_beams:
        raise TFLiteExportError("--decode_hparams return_beams=True: the LiteRT export "
                                "returns one output; drop return_beams.")
    if php.is_classifier:
        if inputs == Modality.IMAGE:
            shape = list(php.image_shape or [])
            if len(shape) != 3 or any(d is None for d in shape):
                raise TFLiteExportError(f"{problem_name}: images of varying size ({shape}); "
                                        f"LiteRT needs a fixed image_size.")
            return Plan("classifier", (1, *shape), "uint8")
        return Plan("classifier", (1, settings.max_input_length + 1), "int32")
    if targets != Modality.SYMBOL or inputs != Modality.SYMBOL:
        raise TFLiteExportError(f"{problem_name}: {inputs} -> {targets} is neither seq2seq "
                                f"(ids -> ids) nor a classifier; use --format=saved_model.")
    if settings.beam_size > 1:
        raise TFLiteExportError(
            f"--decode_hparams beam_size={settings.beam_size}: the LiteRT export decodes "
            f"greedily; pass --decode_hparams=beam_size=1 (beam search: --format=saved_model).")
    if settings.sampling or settings.num_samples > 1:
        raise TFLiteExportError(
            f"--decode_hparams temperature={settings.temperature}, num_samples="
            f"{settings.num_samples}: the LiteRT export decodes greedily; pass "
            f"temperature=0,num_samples=1 (sampling: --format=saved_model).")
    length = settings.max_input_length + 1
    decode_length = settings.max_new_tokens or length + settings.extra_length
    return Plan("seq2seq", (1, length), "int32", decode_length, settings.extra_length,
                settings.max_new_tokens)


def prepare_ids(ids: Sequence[int], plan: Plan) -> np.ndarray:
    """Token ids ending in EOS -> the model's input int32 [1, N], 0-padded; ValueError
    naming the fix when they do not fit."""
    length = plan.input_shape[1]
    if len(ids) > length:
        raise ValueError(
            f"{len(ids)} ids (EOS included) do not fit the LiteRT model's input of {length}: "
            f"cut the input to {plan.max_input_tokens} tokens + EOS, or export again with "
            f"--decode_hparams=max_input_length=N (N >= {len(ids) - 1}).")
    out = np.zeros([1, length], np.int32)
    out[0, :len(ids)] = ids
    return out


# -------------------------------------------------------------- the graph
@contextlib.contextmanager
def _builtin_cache_ops(zero: Any) -> Iterator[None]:
    """While tracing: the attention cache made with tf.fill of a run-time zero (a
    constant-shaped tf.zeros would be folded into the file) and written with a
    dynamic-update-slice, both TFLite builtins (t2t's Empty/InplaceUpdate are not).
    The swap is process-wide for the trace's duration: trace nothing else meanwhile."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    from t2t.layers import attention

    def empty_cache(shape, dtype):
        return tf.fill(tf.cast(shape, tf.int32), tf.cast(zero, dtype))

    def write_position(buffer, value, index):
        at = tf.stack([0, 0, tf.cast(index, tf.int32), 0])
        return xla.dynamic_update_slice(buffer, tf.cast(value, buffer.dtype), at)

    saved = attention.empty_cache, attention.write_position
    attention.empty_cache, attention.write_position = empty_cache, write_position
    try:
        yield
    finally:
        attention.empty_cache, attention.write_position = saved


def _greedy(model: Any, inputs: Any, plan: Plan) -> dict[str, Any]:
    """t2t.decoding.greedy's loop at batch 1 with a fixed buffer of plan.decode_length,
    t2t's stop rule and static loop shapes (relaxed ones add ops to the .tflite): ids
    [1, T] (0 after EOS), log-probability [1]."""
    import tensorflow as tf

    from t2t.decoding import greedy

    if plan.max_new_tokens:
        stop = tf.constant(plan.max_new_tokens)
    else:  # the Decoder decodes (input length with EOS) + extra_length tokens
        stop = tf.reduce_sum(tf.cast(inputs != 0, tf.int32)) + plan.extra_length
    cached = model.has_decode_cache
    init = model.decode_init_cached if cached else model.decode_init
    step = model.decode_step_cached if cached else model.decode_step
    ids, score = greedy.greedy_or_sample(
        step, init({"inputs": inputs}, plan.decode_length), 1, plan.decode_length,
        eos_id=EOS_ID, max_steps=stop, dynamic_batch=False)
    return {"outputs": ids, "scores": score}


def _classify(model: Any, inputs: Any) -> dict[str, Any]:
    import tensorflow as tf

    logits, _ = model({"inputs": inputs}, training=False)
    log_probs = tf.nn.log_softmax(tf.cast(tf.reshape(logits, [1, -1]), tf.float32))
    outputs = tf.argmax(log_probs, axis=-1, output_type=tf.int32)[:, None]
    return {"outputs": outputs, "scores": tf.reduce_max(log_probs, axis=-1),
            "log_probs": log_probs}


def trace(model: Any, plan: Plan) -> Any:
    """The decode (or classification) as a concrete function of "inputs"."""
    import tensorflow as tf

    spec = tf.TensorSpec(plan.input_shape, plan.input_dtype, name="inputs")

    @tf.function(input_signature=[spec])
    def serve(inputs):
        if plan.kind == "classifier":
            return _classify(model, inputs)
        # ids are never negative: a zero the converter cannot fold into a constant.
        zero = tf.cast(tf.reduce_min(inputs) < 0, tf.float32)
        with _builtin_cache_ops(zero):
            return _greedy(model, inputs, plan)

    return serve.get_concrete_function()


def _frozen_with_names(concrete: Any) -> Any:
    """The function with its variables as constants and its outputs still named (the
    converter cannot freeze variables read inside a WHILE body)."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(concrete)
    names = sorted(concrete.structured_outputs)  # tf.nest.flatten's order of a dict
    spec = concrete.structured_input_signature[0][0]

    @tf.function(input_signature=[spec])
    def serving_default(inputs):
        return dict(zip(names, frozen(inputs), strict=True))

    return serving_default.get_concrete_function()


def model_ops(content: bytes) -> tuple[list[str], list[str]]:
    """(builtin op names, select TF op names) a .tflite uses, sorted."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.python import schema_util

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    flat = schema.Model.GetRootAs(content, 0)
    builtin, select = set(), set()
    for i in range(flat.OperatorCodesLength()):
        code = flat.OperatorCodes(i)
        custom = code.CustomCode()
        if custom:
            name = custom.decode()
            (select if name.startswith("Flex") else builtin).add(name.removeprefix("Flex"))
        else:
            builtin.add(names.get(schema_util.get_builtin_code_from_operator_code(code), "?"))
    return sorted(builtin), sorted(select)


def convert(model: Any, plan: Plan) -> bytes:
    """The .tflite bytes, builtin ops only. TFLiteExportError naming the select TF ops a
    model would need: LiteRT 2.x (ai-edge-litert) has no Flex delegate to run them, nor
    has TF 2.21's tf.lite.Interpreter, so such a file could be neither used nor checked."""
    import tensorflow as tf

    function = _frozen_with_names(trace(model, plan))

    def run(select: bool) -> bytes:
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if select:  # TF kernels for what has no builtin (tensor lists kept as TF ops)
            converter.target_spec.supported_ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
            converter._experimental_lower_tensor_list_ops = False
        with parity_lib.quiet("absl"):
            return converter.convert()

    try:
        return run(select=False)
    except Exception as e:  # noqa: BLE001 - the converter raises ConverterError and others
        error = e
    if not any(hint in str(error) for hint in ("ERROR_NEEDS_FLEX_OPS", "flex op",
                                               "Select TF ops")):
        raise TFLiteExportError(f"LiteRT conversion failed: {str(error)[-2000:]}") from error
    try:  # only to name the TF ops that have no builtin
        select = model_ops(run(select=True))[1]
    except Exception:  # noqa: BLE001
        select = []
    raise TFLiteExportError(
        f"{type(model).__name__} does not convert to TFLite builtin ops"
        f"{' (it needs the TF ops ' + ', '.join(select) + ')' if select else ''}; "
        f"LiteRT 2.x (ai-edge-litert) has no Flex delegate to run select TF ops. Use "
        f"--format=saved_model for this model. Converter: {str(error)[-600:]}") from error


# ------------------------------------------------------------ interpreter
def interpreter(path: str | None = None, content: bytes | None = None) -> tuple[Any, str]:
    """(interpreter, runtime name): ai-edge-litert's, else (with a warning) tf.lite's."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter(model_path=path, model_content=content), "ai-edge-litert"
    except ImportError:
        import tensorflow as tf

        logging.warning("ai-edge-litert is not installed (%s): running the model with "
                        "tf.lite.Interpreter.", optional_deps.install_hint("tflite"))
        return tf.lite.Interpreter(model_path=path, model_content=content), "tf.lite"


class Runner:
    """A .tflite's serving_default, timed."""

    def __init__(self, path: str):
        found, self.runtime = interpreter(path=path)
        self.runner = found.get_signature_runner(SIGNATURE)

    def __call__(self, inputs: np.ndarray) -> tuple[dict[str, np.ndarray], float]:
        """(outputs, seconds the invoke took)."""
        start = time.perf_counter()
        out = self.runner(inputs=inputs)
        return out, time.perf_counter() - start


# ----------------------------------------------------------------- parity
def _parity_inputs(problem: Any, data_dir: str | None, count: int, plan: Plan,
                   max_input_length: int) -> list[np.ndarray]:
    """Dev inputs as the Decoder takes them: ids cut to max_input_length + EOS (and an
    empty input), or uint8 images."""
    is_image = plan.input_dtype == "uint8"
    dev = parity_lib.dev_examples(problem, data_dir, count, is_image)
    if is_image:
        return [problem.decode_image(e["image"]).numpy() for e in dev]
    prepared = [np.asarray([*text_encoder.strip_extraneous(e["ids"])[:max_input_length],
                            EOS_ID], np.int32) for e in dev]
    return [*prepared, np.asarray([EOS_ID], np.int32)]


def check_tflite_parity(path: str, problem: Any, model: Any, data_dir: str | None,
                        dhp: DecodeHParams, plan: Plan, num_examples: int) -> dict[str, Any]:
    """Runs the .tflite and t2t's Decoder on dev examples; ParityError naming the
    differences unless outputs are equal and scores within SCORE_TOLERANCE. Returns
    {"examples", "runtime", "latency_ms": {"median", "mean", "max"}, "samples"}."""
    decoder = decoder_lib.Decoder(problem, model, data_dir,
                                  dataclasses.replace(dhp, batch_size=1))
    inputs = _parity_inputs(problem, data_dir, num_examples, plan, decoder.max_input_length)
    runner = Runner(path)
    wants = decoder.decode_features(inputs)
    runner(inputs[0][None] if plan.input_dtype == "uint8" else prepare_ids(inputs[0], plan))
    differences, seconds, samples = [], [], []
    for x, want in zip(inputs, wants, strict=True):
        feed = x[None] if plan.input_dtype == "uint8" else prepare_ids(x, plan)
        out, took = runner(feed)
        seconds.append(took)
        text = decoder.target_text(out["outputs"][0])
        score = float(out["scores"][0])
        label = "<image>" if plan.input_dtype == "uint8" else str(x.tolist())
        if len(samples) < 5:
            samples.append({"input": label, "output": text})
        problems = []
        if text != want.text:
            problems.append(f"output {text!r} != t2t {want.text!r}")
        if abs(score - want.score) > SCORE_TOLERANCE * max(1.0, abs(want.score)):
            problems.append(f"score {score:.5f} != t2t {want.score:.5f}")
        if problems:
            differences.append(f"input {label}: " + "; ".join(problems))
    if differences:
        shown = "\n  ".join(differences[:10])
        raise parity_lib.ParityError(
            f"PARITY CHECK FAILED: the LiteRT model decodes {len(differences)} of "
            f"{len(inputs)} examples differently from t2t's Decoder on the same checkpoint; "
            f"the export at {os.path.dirname(path)} was deleted.\n  {shown}")
    ms = np.asarray(seconds) * 1000.0
    return {"examples": len(inputs), "runtime": runner.runtime, "samples": samples,
            "latency_ms": {"median": float(np.median(ms)), "mean": float(ms.mean()),
                           "max": float(ms.max())}}


# ------------------------------------------------------------------ export
def _signature_info(content: bytes) -> dict[str, Any]:
    """The serving_default signature's inputs/outputs {name: {dtype, shape}}."""
    runner = interpreter(content=content)[0].get_signature_runner(SIGNATURE)
    show = lambda details: {  # noqa: E731
        name: {"dtype": np.dtype(d["dtype"]).name, "shape": [int(v) for v in d["shape"]]}
        for name, d in sorted(details.items())}
    return {"inputs": show(runner.get_input_details()),
            "outputs": show(runner.get_output_details())}


def _write_info(staging: str, info: dict[str, Any]) -> None:
    export_lib.write_json(os.path.join(staging, INFO_FILE), info)


def export_tflite(
    problem: problem_lib.Problem,
    model_name: str,
    hparams: HParams,
    data_dir: str | None,
    checkpoint: str,
    export_dir: str,
    dhp: DecodeHParams,
    *,
    parity_check: bool = True,
    parity_examples: int = PARITY_EXAMPLES,
    model: Any = None,
) -> str:
    """Writes EXPORT_DIR/<timestamp>/ (model.tflite, assets/, t2t_tflite.json) and
    returns it; with `parity_check`, only once the gate passed (else it is deleted).
    `model`: an already loaded model (decoder.load_model) to reuse."""
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    settings = settings_lib.resolve(dhp, model)
    plan = plan_for(model, problem.name, settings)
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    os.makedirs(export_dir, exist_ok=True)
    version = export_lib.new_version(export_dir)
    staging = os.path.join(export_dir, f"temp-{version}-{os.getpid()}")
    try:
        content = convert(model, plan)
        os.makedirs(os.path.join(staging, ASSETS_DIR))
        path = os.path.join(staging, TFLITE_FILE)
        with open(path, "wb") as f:
            f.write(content)
        encoders = problem.feature_encoders(data_dir)
        export_lib.write_vocab_assets(encoders, os.path.join(staging, ASSETS_DIR))
        info = {
            "problem": problem.name, "model": model_name,
            "checkpoint": os.path.abspath(getattr(model, "checkpoint_path", checkpoint)),
            "decode_hparams": dataclasses.asdict(dhp), "plan": dataclasses.asdict(plan),
            "signature": _signature_info(content), "ops": model_ops(content)[0],
            "size_bytes": len(content),
            "encoders": {k: export_lib.describe(v) for k, v in sorted(encoders.items())},
            "versions": export_lib.versions(), "exported_at": int(version), "parity": None,
        }
        _write_info(staging, info)
        if parity_check:
            info["parity"] = check_tflite_parity(path, problem, model, data_dir, dhp, plan,
                                                 parity_examples)
            _write_info(staging, info)
        version_dir = os.path.join(export_dir, version)
        os.replace(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logging.info("Exported %s to %s as LiteRT.", checkpoint, version_dir)
    return version_dir


def report_lines(version_dir: str) -> list[str]:
    """What t2t-exporter prints about a LiteRT export: size, signature, ops, parity and
    per-example latency."""
    with open(os.path.join(version_dir, INFO_FILE), encoding="utf-8") as f:
        info = json.load(f)
    show = lambda specs: ", ".join(  # noqa: E731
        f"{k}: {v['dtype']}{v['shape']}" for k, v in sorted(specs.items()))
    signature = info["signature"]
    lines = [
        f"LiteRT model: {os.path.join(version_dir, TFLITE_FILE)} "
        f"({info['size_bytes'] / 1024:.1f} KiB); vocabulary in {ASSETS_DIR}/ "
        f"(tokenization stays outside the model: ids in, ids out)",
        "Signature:",
        f"  {SIGNATURE}: ({show(signature['inputs'])}) -> ({show(signature['outputs'])})",
        f"Ops: {len(info['ops'])} TFLite builtins, no select TF ops "
        f"({', '.join(info['ops'])})",
    ]
    parity = info.get("parity")
    if parity:
        latency = parity["latency_ms"]
        lines += [
            f"Parity check passed on {parity['examples']} decodes ({parity['runtime']} "
            f"interpreter against t2t's Decoder).",
            f"Latency per example: {latency['median']:.2f} ms median, {latency['mean']:.2f} ms "
            f"mean, {latency['max']:.2f} ms max (batch 1, {parity['runtime']}).",
        ]
    else:
        lines.append("Parity check skipped (no latency measured).")
    return lines
