"""SavedModel export of a trained model, checked against t2t's own decoding.

    version_dir = export(problem, "transformer", hparams, data_dir, "RUN",
                         "RUN/export", DecodeHParams.parse("beam_size=4,alpha=0.6"))

writes RUN/export/<unix timestamp>/ (TF Serving's layout) holding

  saved_model.pb, variables/     the model's weights and two signatures:
    serving_default   {"inputs": string [B]} raw text (image problems: encoded PNG/JPEG
                      bytes) -> {"outputs": string [B] decoded text (or class name),
                      "scores": float32 [B]} (+ "beams" string [B, K], "beam_scores"
                      float32 [B, K] with return_beams). Tokenization is in the graph.
    serve_tf_example  {"examples": string [B]} serialized tf.train.Examples with int64
                      "inputs" token ids as t2t-datagen writes them (image problems:
                      "image/encoded") -> {"outputs": int64 [B, L] ids (0 after EOS),
                      "scores"} (+ "beams" int64 [B, K, L], "beam_scores"). Stock ops only.
  assets/                        the vocabulary files (token/character/class lists,
                                 SentencePiece model), for reference
  assets.extra/t2t_export.json   problem, model, checkpoint, decode settings, encoders,
                                 signatures, versions; assets.extra/hparams.json

The decode settings (beam_size, alpha, extra_length, temperature, top_k, top_p,
return_beams, max_input_length) are fixed at export time; as in t2t's Decoder, the
decode length is the longest input of a request (EOS included) + extra_length.

How the weights are held: the module tracks the model's *underlying* `tf.Variable`s
(`keras.Variable.value`) in a list, and the signatures are closures over the model, so
the Keras model itself is not part of the saved object graph. Tracking the Keras model
(or its `keras.Variable`s) saves a SavedModel that `saved_model_cli show` accepts but
that fails in `saved_model_cli run` / TF Serving with "Could not find variable".

The parity gate: before the export is moved to its version directory, a fresh Python
process that imports only TensorFlow (and tensorflow_text for SentencePiece) loads it,
decodes dev examples through both signatures, and the results must equal t2t's Decoder
on the same checkpoint and settings (texts exactly, scores to 1e-3); otherwise the
export is deleted and ParityError lists the differing examples.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging as std_logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from absl import logging

from t2t.decoding import decoder as decoder_lib
from t2t.hparams.hparams import HParams
from t2t.problems import problem as problem_lib
from t2t.problems import text_encoder

TEXT_SIGNATURE = "serving_default"
EXAMPLES_SIGNATURE = "serve_tf_example"
EXPORT_INFO_FILE = "t2t_export.json"
HPARAMS_FILE = "hparams.json"
PARITY_EXAMPLES = 6  # dev examples decoded by the parity gate
SCORE_TOLERANCE = 1e-3


class ExportError(ValueError):
    """A model or problem that cannot be exported as asked."""


class ParityError(ExportError):
    """The SavedModel, loaded in a fresh process, decodes differently from t2t."""


# ---------------------------------------------------------------- settings
def serving_settings(decode_hparams: decoder_lib.DecodeHParams, model: Any) -> dict[str, Any]:
    """The decode settings baked into the serving graph (as t2t's Decoder resolves them)."""
    dhp = decode_hparams
    php = model.problem_hparams
    is_class_label = php.modality.get("targets") == problem_lib.Modality.CLASS_LABEL
    top_beams = dhp.beam_size if dhp.return_beams else 1
    if is_class_label:
        top_beams = min(top_beams, php.vocab_size.get("targets") or 1)
    hparams = getattr(model, "hparams", None)
    model_max = hparams.get("max_length", 0) if hparams is not None else 0
    return {
        "beam_size": dhp.beam_size,
        "top_beams": top_beams,
        "alpha": dhp.alpha,
        "extra_length": dhp.extra_length,
        "temperature": dhp.temperature,
        "top_k": dhp.top_k,
        "top_p": dhp.top_p,
        "return_beams": dhp.return_beams,
        "max_input_length": (dhp.max_input_length or model_max
                             or decoder_lib.DEFAULT_MAX_INPUT_LENGTH),
    }


def _underlying_variables(model: Any) -> list:
    """The tf.Variables that hold the model's weights (what its graph reads)."""
    import tensorflow as tf

    from t2t.models import variable_tracking

    found, seen = [], set()
    everything = [*model.variables, *variable_tracking.named_variables(model).values()]
    for variable in everything:
        inner = variable if isinstance(variable, tf.Variable) else getattr(variable, "value", None)
        if not isinstance(inner, tf.Variable):
            inner = getattr(variable, "_value", None)
        if not isinstance(inner, tf.Variable):
            raise ExportError(f"cannot find the tf.Variable of {getattr(variable, 'path', variable)}")
        if id(inner) not in seen:
            seen.add(id(inner))
            found.append(inner)
    return found


# ------------------------------------------------------------ the module
def build_serving_module(
    model: Any,
    problem: problem_lib.Problem,
    encoders: dict[str, Any],
    settings: dict[str, Any],
    *,
    text_signature: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """(tf.Module to save, {signature name: concrete function})."""
    import tensorflow as tf

    from t2t.serving import tokenizers

    php = model.problem_hparams
    modality = php.modality
    if "inputs" not in modality:
        raise ExportError(
            f"{problem.name} has no inputs (a language model): the exporter serves models "
            f"that decode inputs into targets."
        )
    inputs_kind = modality["inputs"]
    if inputs_kind not in (problem_lib.Modality.SYMBOL, problem_lib.Modality.IMAGE):
        raise ExportError(f"{problem.name}: cannot serve {inputs_kind} inputs.")
    is_image = inputs_kind == problem_lib.Modality.IMAGE
    is_class_label = modality.get("targets") == problem_lib.Modality.CLASS_LABEL

    module = tf.Module(name="t2t_serving")
    # Plain tf.Variables (not the Keras model): see the module docstring.
    module.model_variables = _underlying_variables(model)
    if text_signature:
        if not is_image:
            module.inputs_tokenizer = tokenizers.from_encoder(encoders.get("inputs"))
        module.targets_tokenizer = tokenizers.from_encoder(encoders.get("targets"))

    s = settings
    top_beams = s["top_beams"]
    max_input_length = int(s["max_input_length"])

    image_shape = list(php.image_shape or [])
    if is_image:
        if len(image_shape) != 3 or any(d is None for d in image_shape):
            raise ExportError(
                f"{problem.name}: images of varying size ({image_shape}); serving needs a "
                f"fixed image_size."
            )
        height, width, channels = image_shape
        model_input = tf.TensorSpec([None, *image_shape], tf.uint8)
    else:
        model_input = tf.TensorSpec([None, None], tf.int32)

    # One trace of the decoder, called by both signatures.
    @tf.function(input_signature=[model_input])
    def run_model(inputs):
        """The model's decode of prepared inputs -> (best [B, L], score [B], beams
        [B, K, L], beam scores [B, K]) as model.infer gives them."""
        decode_length = (tf.shape(inputs)[1] if not is_image else 0) + s["extra_length"]
        result = model.infer(
            {"inputs": inputs}, decode_length, beam_size=s["beam_size"], top_beams=top_beams,
            alpha=s["alpha"], temperature=s["temperature"], top_k=s["top_k"], top_p=s["top_p"],
        )
        outputs, scores = result["outputs"], result["scores"]
        if top_beams > 1:
            return outputs[:, 0], scores[:, 0], outputs, scores
        return outputs, scores, outputs[:, None], scores[:, None]

    def decode_images(encoded):
        """Encoded PNG/JPEG/GIF/BMP bytes [B] -> uint8 [B, H, W, C], resized if needed."""

        def one(data):
            image = tf.io.decode_image(data, channels=channels if channels in (1, 3, 4) else 0,
                                       dtype=tf.uint8, expand_animations=False)
            same = tf.reduce_all(tf.equal(tf.shape(image)[:2], [height, width]))
            image = tf.cond(
                same, lambda: image,
                lambda: tf.cast(tf.clip_by_value(tf.round(
                    tf.image.resize(image, [height, width])), 0, 255), tf.uint8),
            )
            return tf.ensure_shape(image, image_shape)

        return tf.map_fn(one, encoded, fn_output_signature=tf.TensorSpec(image_shape, tf.uint8))

    def prepare_ids(ragged):
        """Stored ids (ragged, EOS included) -> cut at EOS, cut to max_input_length, EOS."""
        return tokenizers.append_eos(
            tokenizers.strip_ids(tf.cast(ragged, tf.int32).to_tensor(0)), max_input_length
        )

    signatures = {}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_tf_example(examples):
        if is_image:
            parsed = tf.io.parse_example(
                examples, {"image/encoded": tf.io.FixedLenFeature((), tf.string)})
            inputs = decode_images(parsed["image/encoded"])
        else:
            parsed = tf.io.parse_example(examples, {"inputs": tf.io.RaggedFeature(tf.int64)})
            inputs = prepare_ids(parsed["inputs"])
        best, score, beams, beam_scores = run_model(inputs)
        out = {"outputs": tf.cast(best, tf.int64), "scores": score}
        if s["return_beams"]:
            out["beams"] = tf.cast(beams, tf.int64)
            out["beam_scores"] = beam_scores
        return out

    signatures[EXAMPLES_SIGNATURE] = serve_tf_example.get_concrete_function()

    if text_signature:

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def serve_text(inputs):
            if is_image:
                prepared = decode_images(inputs)
            else:
                # As t2t's Decoder reads lines: invalid UTF-8 replaced by U+FFFD.
                text = tf.strings.unicode_transcode(
                    inputs, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
                prepared = module.inputs_tokenizer.encode_for_model(text, max_input_length)
            best, score, beams, beam_scores = run_model(prepared)
            target_tok = module.targets_tokenizer
            out = {"outputs": target_tok.decode(best if not is_class_label else best[:, 0]),
                   "scores": score}
            if s["return_beams"]:
                if is_class_label:
                    out["beams"] = target_tok.decode(beams[:, :, 0])
                else:
                    shape = tf.shape(beams)
                    flat = tf.reshape(beams, [shape[0] * shape[1], shape[2]])
                    out["beams"] = tf.reshape(target_tok.decode(flat), shape[:2])
                out["beam_scores"] = beam_scores
            return out

        signatures[TEXT_SIGNATURE] = serve_text.get_concrete_function()
    else:
        signatures[TEXT_SIGNATURE] = signatures.pop(EXAMPLES_SIGNATURE)
        signatures[EXAMPLES_SIGNATURE] = signatures[TEXT_SIGNATURE]
    return module, signatures


def _signature_info(signatures: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf

    info = {}
    for name, fn in signatures.items():
        inputs = {spec.name: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                  for spec in tf.nest.flatten(fn.structured_input_signature)}
        outputs = {key: {"dtype": spec.dtype.name, "shape": spec.shape.as_list()}
                   for key, spec in fn.structured_outputs.items()}
        info[name] = {"inputs": inputs, "outputs": outputs}
    return info


# ----------------------------------------------------------------- assets
def _write_vocab_assets(encoders: dict[str, Any], folder: str) -> list[str]:
    """Writes each feature's vocabulary file into folder; returns the paths."""
    paths = []
    for feature, encoder in sorted(encoders.items()):
        if encoder is None:
            continue
        kind = getattr(encoder, "type_name", "")
        if kind == "sentencepiece":
            path = os.path.join(folder, f"{feature}.sentencepiece.model")
            with open(path, "wb") as f:
                f.write(encoder.model_proto)
        elif kind in ("token", "character", "class_label"):
            path = os.path.join(folder, f"{feature}.{kind}.txt")
            encoder.save(path)
        else:
            continue
        paths.append(path)
    return paths


def _describe(encoder: Any) -> dict[str, Any] | None:
    if encoder is None:
        return None
    try:
        return encoder.describe()
    except ValueError:  # a SentencePiece model never saved to a file
        return {"type": encoder.type_name, "vocab_size": encoder.vocab_size}


def _versions() -> dict[str, str]:
    import tensorflow as tf

    import t2t

    versions = {"t2t": t2t.__version__, "tensorflow": tf.__version__}
    try:
        import tensorflow_text

        versions["tensorflow_text"] = tensorflow_text.__version__
    except ImportError:
        pass
    return versions


@contextlib.contextmanager
def _quiet(name: str, level: int = std_logging.ERROR):
    """Raises the level of the Python logger `name` for a while."""
    logger = std_logging.getLogger(name)
    previous = logger.level
    logger.setLevel(max(level, previous))
    try:
        yield
    finally:
        logger.setLevel(previous)


def _new_version(export_dir: str) -> str:
    version = int(time.time())
    while os.path.exists(os.path.join(export_dir, str(version))):
        version += 1
    return str(version)


# ------------------------------------------------------------------ export
def export(
    problem: problem_lib.Problem,
    model_name: str,
    hparams: HParams,
    data_dir: str | None,
    checkpoint_path: str,
    export_dir: str | None = None,
    decode_hparams: decoder_lib.DecodeHParams | str | None = None,
    *,
    parity_check: bool = True,
    parity_examples: int = PARITY_EXAMPLES,
    text_signature: bool = True,
    model: Any = None,
) -> str:
    """Exports the checkpoint as a SavedModel in export_dir/<timestamp>; returns that path.

    `checkpoint_path`: a checkpoint prefix or a run directory (its latest checkpoint);
    `export_dir` defaults to RUN/export. `decode_hparams`: DecodeHParams or their string.
    `text_signature=False` leaves out the in-graph tokenizers (serving_default is then
    the tf.Example signature): no tensorflow_text ops even for SentencePiece problems.
    `model`: an already loaded model (load_model) to reuse. With `parity_check` (the
    default) the export is verified in a fresh process (see the module docstring).
    """
    import tensorflow as tf

    dhp = decode_hparams
    if dhp is None or isinstance(dhp, str):
        dhp = decoder_lib.DecodeHParams.parse(dhp or "")
    dhp.validate()
    checkpoint = decoder_lib.resolve_checkpoint(checkpoint_path)
    if export_dir is None:
        run = checkpoint_path if os.path.isdir(checkpoint_path) else os.path.dirname(checkpoint)
        export_dir = os.path.join(run, "export")
    export_dir = os.path.abspath(os.path.expanduser(export_dir))
    if model is None:
        model = decoder_lib.load_model(problem, model_name, hparams, data_dir, checkpoint)
    encoders = problem.feature_encoders(data_dir)
    settings = serving_settings(dhp, model)
    module, signatures = build_serving_module(model, problem, encoders, settings,
                                              text_signature=text_signature)
    needs_tensorflow_text = any(
        getattr(getattr(module, name, None), "needs_tensorflow_text", False)
        for name in ("inputs_tokenizer", "targets_tokenizer")
    )

    os.makedirs(export_dir, exist_ok=True)
    version = _new_version(export_dir)
    staging = os.path.join(export_dir, f"temp-{version}-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory() as vocab_dir:
            module.vocabulary = {
                os.path.basename(p): tf.saved_model.Asset(p)
                for p in _write_vocab_assets(encoders, vocab_dir)
            }
            with _quiet("tensorflow", std_logging.WARNING):  # renamed-capture chatter
                tf.saved_model.save(module, staging, signatures=signatures)
        info = {
            "problem": problem.name,
            "model": model_name,
            "checkpoint": os.path.abspath(checkpoint),
            "decode_hparams": dataclasses.asdict(dhp),
            "serving_settings": settings,
            "problem_hparams": model.problem_hparams.to_dict(),
            "encoders": {k: _describe(v) for k, v in sorted(encoders.items())},
            "signatures": _signature_info(signatures),
            "needs_tensorflow_text": needs_tensorflow_text,
            "text_signature": text_signature,
            "versions": _versions(),
            "exported_at": int(version),
        }
        extra = os.path.join(staging, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with open(os.path.join(extra, EXPORT_INFO_FILE), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
        with open(os.path.join(extra, HPARAMS_FILE), "w", encoding="utf-8") as f:
            json.dump(model.hparams.values(), f, indent=2, sort_keys=True, default=str)
            f.write("\n")
        if parity_check:
            report = check_parity(staging, problem, model, data_dir, dhp, parity_examples)
            info["parity"] = report
            with open(os.path.join(extra, EXPORT_INFO_FILE), "w", encoding="utf-8") as f:
                json.dump(info, f, indent=2, sort_keys=True, default=str)
                f.write("\n")
        version_dir = os.path.join(export_dir, version)
        os.replace(staging, version_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logging.info("Exported %s to %s.", checkpoint, version_dir)
    return version_dir


# ------------------------------------------------------------ parity gate
# Runs in a fresh interpreter: TensorFlow (+ tensorflow_text) only, never t2t.
_PARITY_SCRIPT = r'''
import base64, json, sys
request_path, result_path = sys.argv[1], sys.argv[2]
with open(request_path, encoding="utf-8") as f:
    request = json.load(f)
import tensorflow as tf
if request["needs_tensorflow_text"]:
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
loaded = tf.saved_model.load(request["export_dir"])

def listify(out):
    result = {}
    for key, value in out.items():
        value = value.numpy()
        if value.dtype == object:
            value = [[b.decode("utf-8", "replace") for b in row] if hasattr(row, "__len__")
                     and not isinstance(row, bytes) else row.decode("utf-8", "replace")
                     for row in value.tolist()]
        else:
            value = value.tolist()
        result[key] = value
    return result

def example(entry):
    feature = {}
    if "ids" in entry:
        feature["inputs"] = tf.train.Feature(int64_list=tf.train.Int64List(value=entry["ids"]))
    else:
        data = base64.b64decode(entry["image"])
        feature["image/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

result = {"text": [], "examples": []}
if request["text_signature"]:
    text_fn = loaded.signatures["serving_default"]
    for batch in request["text_batches"]:
        values = [base64.b64decode(x) for x in batch]
        result["text"].append(listify(text_fn(inputs=tf.constant(values, tf.string))))
examples_fn = loaded.signatures["serve_tf_example"]
for batch in request["example_batches"]:
    serialized = tf.constant([example(entry) for entry in batch], tf.string)
    result["examples"].append(listify(examples_fn(examples=serialized)))
result["t2t_modules"] = sorted(m for m in sys.modules if m == "t2t" or m.startswith("t2t."))
with open(result_path, "w", encoding="utf-8") as f:
    json.dump(result, f)
'''


def _dev_examples(problem: problem_lib.Problem, data_dir: str | None, count: int,
                  is_image: bool) -> list[dict[str, Any]]:
    """The first `count` dev examples: {"ids": stored input ids} or {"image": PNG bytes}."""
    import tensorflow as tf

    files = problem.data_files(data_dir, problem_lib.DEV_SPLIT)
    examples = []
    for record in tf.data.TFRecordDataset(files).take(count):
        parsed = tf.train.Example.FromString(record.numpy()).features.feature
        if is_image:
            examples.append({"image": parsed["image/encoded"].bytes_list.value[0]})
        else:
            ids = list(parsed["inputs"].int64_list.value)
            if problem.was_reversed:
                ids = list(parsed["targets"].int64_list.value)
            examples.append({"ids": ids})
    return examples


def _target_text(decoder: decoder_lib.Decoder, ids: Any) -> str:
    """Output ids as text, the way t2t's Decoder turns them into its results."""
    encoder = decoder.encoders.get("targets")
    if decoder.is_class_label:
        label = int(np.asarray(ids).reshape(-1)[0])
        return encoder.decode([label]) if encoder is not None else str(label)
    if encoder is None:
        return " ".join(str(i) for i in text_encoder.strip_extraneous(ids))
    return encoder.decode(ids, strip_extraneous=True)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= SCORE_TOLERANCE * max(1.0, abs(b))


def check_parity(
    export_path: str,
    problem: problem_lib.Problem,
    model: Any,
    data_dir: str | None,
    decode_hparams: decoder_lib.DecodeHParams,
    num_examples: int = PARITY_EXAMPLES,
    extra_texts: Sequence[str] = ("",),
) -> dict[str, Any]:
    """Decodes dev examples with the SavedModel in a fresh process (TensorFlow only) and
    with t2t's Decoder; ParityError naming the differences unless they agree.

    Returns a report {"examples": decodes compared, "sampling": whether outputs were
    only checked to run (temperature > 0 samples), "samples": a few (input, output) pairs
    of the text signature}."""
    with open(os.path.join(export_path, "assets.extra", EXPORT_INFO_FILE), encoding="utf-8") as f:
        info = json.load(f)
    php = model.problem_hparams
    is_image = php.modality.get("inputs") == problem_lib.Modality.IMAGE
    dev = _dev_examples(problem, data_dir, num_examples, is_image)
    batch_size = max(1, min(decode_hparams.batch_size, 4))
    decoder = decoder_lib.Decoder(problem, model, data_dir,
                                  dataclasses.replace(decode_hparams, batch_size=batch_size))
    encoders = problem.feature_encoders(data_dir)

    # The same inputs for both: raw texts (dev inputs decoded, plus edge cases) and
    # stored ids; batches of the same composition on both sides.
    if is_image:
        texts = []
        text_values = [e["image"] for e in dev]
    else:
        inputs_encoder = encoders.get("inputs")
        texts = []
        for e in dev:
            stripped = text_encoder.strip_extraneous(e["ids"])
            texts.append(inputs_encoder.decode(stripped) if inputs_encoder is not None
                         else " ".join(map(str, stripped)))
        texts.extend(extra_texts)
        text_values = [t.encode("utf-8") for t in texts]
    chunks = lambda items: [items[i:i + batch_size] for i in range(0, len(items), batch_size)]  # noqa: E731
    text_batches = chunks(text_values) if info["text_signature"] else []
    example_batches = chunks(dev)

    request = {
        "export_dir": os.path.abspath(export_path),
        "needs_tensorflow_text": info["needs_tensorflow_text"],
        "text_signature": info["text_signature"],
        "text_batches": [[base64.b64encode(v).decode("ascii") for v in b] for b in text_batches],
        "example_batches": [
            [{"ids": e["ids"]} if "ids" in e else {"image": base64.b64encode(e["image"]).decode("ascii")}
             for e in b] for b in example_batches],
    }
    with tempfile.TemporaryDirectory() as tmp:
        request_path, result_path = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(request_path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        process = subprocess.run(
            [sys.executable, "-c", _PARITY_SCRIPT, request_path, result_path],
            capture_output=True, text=True, env=env, timeout=1800, cwd=tmp,
        )
        if process.returncode != 0 or not os.path.exists(result_path):
            raise ParityError(
                f"The SavedModel at {export_path} failed to load or run in a fresh process "
                f"(exit {process.returncode}); the export was deleted. Its error:\n"
                f"{process.stderr[-4000:]}"
            )
        with open(result_path, encoding="utf-8") as f:
            served = json.load(f)
    if served["t2t_modules"]:
        raise ParityError(f"the parity process imported t2t ({served['t2t_modules'][:3]})")

    sampling = decode_hparams.temperature > 0 and decode_hparams.beam_size == 1
    differences: list[str] = []
    samples: list[dict[str, str]] = []
    compared = 0

    def compare(kind: str, label: str, want: decoder_lib.DecodeResult, got_text: str,
                got_score: float, got_beams: list[tuple[str, float]] | None) -> None:
        nonlocal compared
        compared += 1
        if kind == TEXT_SIGNATURE and len(samples) < 5:
            samples.append({"input": label, "output": got_text})
        if sampling:
            return
        problems = []
        if got_text != want.text:
            problems.append(f"output {got_text!r} != t2t {want.text!r}")
        if not _close(got_score, want.score):
            problems.append(f"score {got_score:.5f} != t2t {want.score:.5f}")
        if got_beams is not None:
            want_beams = want.beams
            if [t for t, _ in got_beams] != [t for t, _ in want_beams] or not all(
                _close(a, b) for (_, a), (_, b) in zip(got_beams, want_beams, strict=True)
            ):
                problems.append(f"beams {got_beams} != t2t {want_beams}")
        if problems:
            differences.append(f"[{kind}] input {label}: " + "; ".join(problems))

    return_beams = decode_hparams.return_beams
    if info["text_signature"]:
        for batch_values, out in zip(text_batches, served["text"], strict=True):
            if is_image:
                arrays = [problem.decode_image(v).numpy() for v in batch_values]
                wants = decoder.decode_features(arrays)
                labels = ["<image>"] * len(arrays)
            else:
                batch_texts = [v.decode("utf-8") for v in batch_values]
                with _quiet("absl"):  # "line N is empty" for the edge-case lines
                    wants = decoder.decode_texts(batch_texts)
                labels = [repr(t) for t in batch_texts]
            for row, want in enumerate(wants):
                beams = None
                if return_beams:
                    beams = list(zip(out["beams"][row], out["beam_scores"][row], strict=True))
                compare(TEXT_SIGNATURE, labels[row], want, out["outputs"][row],
                        out["scores"][row], beams)
    for batch, out in zip(example_batches, served["examples"], strict=True):
        if is_image:
            prepared = [problem.decode_image(e["image"]).numpy() for e in batch]
            labels = ["<image>"] * len(batch)
        else:
            prepared = []
            for e in batch:
                ids = text_encoder.strip_extraneous(e["ids"])[: decoder.max_input_length]
                prepared.append(np.asarray([*ids, text_encoder.EOS_ID], np.int32))
            labels = [str(e["ids"]) for e in batch]
        wants = decoder.decode_features(prepared)
        for row, want in enumerate(wants):
            beams = None
            if return_beams:
                beams = [(_target_text(decoder, ids), score) for ids, score in
                         zip(out["beams"][row], out["beam_scores"][row], strict=True)]
            compare(EXAMPLES_SIGNATURE, labels[row], want,
                    _target_text(decoder, out["outputs"][row]), out["scores"][row], beams)
    if differences:
        shown = "\n  ".join(differences[:10])
        more = f"\n  ... and {len(differences) - 10} more" if len(differences) > 10 else ""
        raise ParityError(
            f"PARITY CHECK FAILED: the SavedModel decodes {len(differences)} of {compared} "
            f"examples differently from t2t's Decoder on the same checkpoint; the export "
            f"at {export_path} was deleted.\n  {shown}{more}"
        )
    if sampling:
        logging.warning("temperature > 0 samples: the parity check only ran the signatures.")
    return {"examples": compared, "sampling": sampling, "samples": samples}
