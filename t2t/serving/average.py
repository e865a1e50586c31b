"""Checkpoint averaging: the mean of the model weights of a run's last N checkpoints.

    path = average_checkpoints("RUN", "RUN_AVG", n=8)   # RUN_AVG/ckpt-<newest step>

Every floating-point variable of the model (checkpoint keys under "model/") is averaged
(in float64, then cast back to its dtype); other model variables (integer states) are
copied from the newest checkpoint. The result is a model-only checkpoint with the same
object structure as the trainer's, written by a tf.train.CheckpointManager at the newest
checkpoint's step, so t2t-decoder and t2t-exporter read it with --output_dir=RUN_AVG
(or --checkpoint_path); run.json and hparams.json are copied along. The optimizer and
input position are not carried over: the average is for decoding and export, not for
resuming training.

No model is built: the structure is read from the checkpoint's object graph, so any
model (and any problem) can be averaged without its data.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np
from absl import logging

from t2t.models.checkpoints import MODEL_KEY  # the trainer's name for the model object
from t2t.utils import step_files

COPIED_FILES = ("run.json", "hparams.json", "operative_config.gin", "flags.txt")
AVERAGE_INFO_FILE = "averaged.json"


class AverageError(ValueError):
    """Checkpoints that cannot be averaged (none, or not of the same model)."""


def last_checkpoints(model_dir: str, n: int) -> list[str]:
    """The newest `n` checkpoint prefixes of a run, oldest first (fewer, with a warning,
    when fewer exist); AverageError if there are none."""

    if n < 1:
        raise AverageError(f"n={n}: average at least 1 checkpoint.")
    model_dir = os.path.abspath(os.path.expanduser(model_dir))  # TF joins relative paths to it
    paths = [found.path for found in step_files.list_checkpoints(model_dir)]
    if not paths:
        raise AverageError(
            f"no checkpoint in {model_dir}: train first with t2t-trainer "
            f"--output_dir={model_dir} ..., or give the --model_dir of a training run."
        )
    if len(paths) < n:
        logging.warning("%s holds %d checkpoint(s), fewer than n=%d: averaging those.",
                        model_dir, len(paths), n)
    return paths[-n:]


def _model_tree(graph: Any) -> dict[str, Any]:
    """The "model" subtree: {local name: checkpoint key (a variable) or subtree}."""
    nodes = graph.nodes
    model_ids = [c.node_id for c in nodes[0].children if c.local_name == MODEL_KEY]
    if not model_ids:
        raise AverageError("the checkpoint holds no model (no 'model' object).")

    def tree(node_id: int, seen: frozenset) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for child in nodes[node_id].children:
            if child.node_id in seen:
                continue
            node = nodes[child.node_id]
            values = [a.checkpoint_key for a in node.attributes if a.name == "VARIABLE_VALUE"]
            if values:
                out[child.local_name] = values[0]
            elif node.children:
                out[child.local_name] = tree(child.node_id, seen | {child.node_id})
        return out

    return tree(model_ids[0], frozenset(model_ids))


def _keys(tree: dict[str, Any]) -> list[str]:
    keys = []
    for value in tree.values():
        keys.extend(_keys(value) if isinstance(value, dict) else [value])
    return keys


def _same_variable(key: str, name: str | None, tree: dict[str, Any]) -> str | None:
    """The key of variable `name` (whose key is `key` in the newest checkpoint) in another
    checkpoint's model tree: the same name, or its format-1 spelling (a run resumed
    across t2t's checkpoint-name change holds both formats)."""
    from t2t.models import variable_names

    if name is None:  # nested deeper than t2t writes: only the same key
        return key
    for spelled in variable_names.legacy_spellings(name):
        found = tree.get(spelled)
        if found is not None and not isinstance(found, dict):
            return found
    return None


def average_values(paths: list[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(the newest checkpoint's model tree, {checkpoint key: averaged value})."""
    import tensorflow as tf

    from t2t.models import checkpoints

    readers = [tf.train.load_checkpoint(p) for p in paths]
    newest = readers[-1]
    trees = [_model_tree(checkpoints.object_graph(p)) for p in paths]
    tree = trees[-1]
    keys = _keys(tree)
    if not keys:
        raise AverageError(f"{paths[-1]} holds a model without variables.")
    shapes = newest.get_variable_to_shape_map()
    names = {key: name for name, key in tree.items() if not isinstance(key, dict)}
    values: dict[str, np.ndarray] = {}
    for key in keys:
        latest = np.asarray(newest.get_tensor(key))
        if not np.issubdtype(latest.dtype, np.floating) and latest.dtype.name not in (
                "bfloat16", "float16"):
            values[key] = latest
            continue
        total = np.zeros(latest.shape, np.float64)
        for path, reader, older in zip(paths, readers, trees, strict=True):
            key_there = _same_variable(key, names.get(key), older)
            if key_there is None or not reader.has_tensor(key_there):
                raise AverageError(f"{path} lacks {key}: are the checkpoints of one run?")
            value = np.asarray(reader.get_tensor(key_there))
            if list(value.shape) != list(shapes[key]):
                raise AverageError(
                    f"{key} has shape {list(value.shape)} in {path} but {list(shapes[key])} "
                    f"in {paths[-1]}: are the checkpoints of one run?"
                )
            total += value.astype(np.float64)
        values[key] = (total / len(paths)).astype(latest.dtype)
    return tree, values


def average_checkpoints(model_dir: str, output_dir: str, n: int = 8) -> str:
    """Averages the last `n` checkpoints of `model_dir` into `output_dir`; returns the
    written checkpoint prefix (output_dir/ckpt-<newest step>)."""
    import tensorflow as tf

    model_dir = os.path.abspath(os.path.expanduser(model_dir))
    output_dir = os.path.abspath(os.path.expanduser(output_dir))
    if model_dir == output_dir:
        raise AverageError(
            "--output_dir must differ from --model_dir (the trainer resumes from the latest "
            "checkpoint of its run; the average would be taken for one)."
        )
    paths = last_checkpoints(model_dir, n)
    tree, values = average_values(paths)

    def build(subtree: dict[str, Any]):
        # A tf.train.Checkpoint used as a container: its children are exactly these names.
        return tf.train.Checkpoint(**{
            name: build(value) if isinstance(value, dict)
            else tf.Variable(values[value], trainable=False)
            for name, value in subtree.items()
        })

    root = build(tree)
    os.makedirs(output_dir, exist_ok=True)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(**{MODEL_KEY: root}), output_dir,
                                         max_to_keep=1)
    step = step_files.step_of(paths[-1])
    written = manager.save(checkpoint_number=step)
    for name in COPIED_FILES:
        source = os.path.join(model_dir, name)
        if os.path.isfile(source):
            shutil.copyfile(source, os.path.join(output_dir, name))
    with open(os.path.join(output_dir, AVERAGE_INFO_FILE), "w", encoding="utf-8") as f:
        json.dump({"model_dir": model_dir, "checkpoints": paths, "n": len(paths),
                   "variables": len(values)}, f, indent=2)
        f.write("\n")
    logging.info("Averaged %d checkpoints of %s into %s.", len(paths), model_dir, written)
    return written
