"""The serving side of the export parity gate: runs in a fresh Python process that
imports TensorFlow (and tensorflow_text for SentencePiece exports), never t2t.

    python .../t2t/serving/parity_worker.py REQUEST.json RESULT.json

REQUEST: {"export_dir", "needs_tensorflow_text", "text_signature", "text_batches":
[[base64 input bytes]], "example_batches": [[{"ids": [...]}, {"targets": [...]} (a
language model's prompt) or {"image": base64}]], and for language models
"generate_calls": [{"settings": {temperature, top_k, top_p, max_new_tokens, seed},
"batches": [[base64 prompt]]}], "score_batches": [[base64 text]]}.
RESULT: {"text": [signature outputs per batch], "examples": [...], "generate": [per
call, per batch], "score": [...], "t2t_modules":
the t2t modules this process imported (must be none)}. Started by path (see
t2t.serving.parity), so importing it imports no package.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(
        os.path.abspath(__file__)):
    del sys.path[0]  # run by path: keep t2t/serving's modules from shadowing others


# The generate signature's settings (t2t.serving.lm_serving) and their dtypes.
GENERATE_SETTINGS = [("temperature", "float32"), ("top_k", "int32"), ("top_p", "float32"),
                     ("max_new_tokens", "int32"), ("seed", "int64")]


def to_lists(outputs: dict[str, Any]) -> dict[str, Any]:
    """A signature's outputs as JSON values (strings decoded as UTF-8)."""
    result = {}
    for key, value in outputs.items():
        value = value.numpy()
        if value.dtype == object:
            value = [[b.decode("utf-8", "replace") for b in row] if hasattr(row, "__len__")
                     and not isinstance(row, bytes) else row.decode("utf-8", "replace")
                     for row in value.tolist()]
        else:
            value = value.tolist()
        result[key] = value
    return result


def serialized_example(entry: dict[str, Any]) -> bytes:
    """A tf.train.Example as t2t-datagen writes it: int64 "inputs", "image/encoded" or
    "audio/encoded"."""
    import tensorflow as tf

    feature = {}
    if "ids" in entry or "targets" in entry:
        key = "inputs" if "ids" in entry else "targets"  # a language model's prompt ids
        ids = entry["ids"] if "ids" in entry else entry["targets"]
        feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
    else:
        key = "image" if "image" in entry else "audio"
        data = base64.b64decode(entry[key])
        feature[f"{key}/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def serve(request: dict[str, Any]) -> dict[str, Any]:
    """Loads the SavedModel and runs every batch of the request through its signatures."""
    import tensorflow as tf

    if request["needs_tensorflow_text"]:
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    loaded = tf.saved_model.load(request["export_dir"])
    result: dict[str, Any] = {"text": [], "examples": []}
    if request["text_signature"]:
        text_fn = loaded.signatures["serving_default"]
        for batch in request["text_batches"]:
            values = [base64.b64decode(x) for x in batch]
            result["text"].append(to_lists(text_fn(inputs=tf.constant(values, tf.string))))
    result["generate"] = []
    for call in request.get("generate_calls", []):  # a language model's generate signature
        fn, settings = loaded.signatures["generate"], call["settings"]
        arguments = {name: tf.constant(value, dtype) for (name, dtype), value in zip(
            GENERATE_SETTINGS, [settings[name] for name, _ in GENERATE_SETTINGS], strict=True)}
        result["generate"].append([
            to_lists(fn(inputs=tf.constant([base64.b64decode(x) for x in batch], tf.string),
                        **arguments)) for batch in call["batches"]])
    result["score"] = [
        to_lists(loaded.signatures["score"](inputs=tf.constant(
            [base64.b64decode(x) for x in batch], tf.string)))
        for batch in request.get("score_batches", [])]
    examples_fn = loaded.signatures["serve_tf_example"]
    for batch in request["example_batches"]:
        serialized = tf.constant([serialized_example(entry) for entry in batch], tf.string)
        result["examples"].append(to_lists(examples_fn(examples=serialized)))
    result["t2t_modules"] = sorted(m for m in sys.modules if m == "t2t" or m.startswith("t2t."))
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: parity_worker.py REQUEST.json RESULT.json\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    result = serve(request)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
