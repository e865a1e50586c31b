"""Model checkpoints: finding them, checking their files, and the model's part of them.

The trainer's checkpoints hold a "model" object whose children are the model's
variables under their stable names (`variable_names.named_variables`), next to the
optimizer (and the input position):

    root = tf.train.Checkpoint(model=model_trackable(model), optimizer=optimizer)

`restore` reads the model (and whatever else is given) from a checkpoint written by
any t2t version: a checkpoint of format 1 (before issue #18, names from Keras' private
attributes) is read through the names that format used.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")  # finding a checkpoint's files needs no TensorFlow

MODEL_KEY = "model"
BEST_DIR = "best"  # a run's best checkpoints by an eval metric (t2t.trainer.best_checkpoints)
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, or does not fit the model."""


class NoCheckpointError(CheckpointError, FileNotFoundError):
    """No checkpoint where one was expected."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint with missing or unreadable files; the message says how to recover."""


# ---------------------------------------------------------------- finding
def checkpoint_location(checkpoint_path: str | None, output_dir: str) -> str:
    """What a --checkpoint_path names: "best" -> OUTPUT_DIR/best (the run's best
    checkpoint by its eval metric), nothing -> output_dir (its latest), else itself."""
    if checkpoint_path == BEST_DIR:
        return os.path.join(output_dir, BEST_DIR)
    return checkpoint_path or output_dir


def _no_checkpoint(path: str, why: str = "") -> NoCheckpointError:
    if os.path.basename(os.path.normpath(path)) == BEST_DIR:
        run = os.path.dirname(os.path.normpath(path))
        return NoCheckpointError(
            f"no best checkpoint in {run}: t2t-trainer keeps one (--keep_best=N, by "
            f"--best_metric) at each evaluation; this run has none yet (or was trained with "
            f"--keep_best=0): give --checkpoint_path=DIR/ckpt-N or the run directory")
    return NoCheckpointError(
        f"no checkpoint in {path}{why}: train first with t2t-trainer --output_dir={path} ... "
        f"or pass --checkpoint_path (a run directory or a prefix such as DIR/ckpt-1000)"
    )


def resolve_checkpoint(checkpoint_path: str) -> str:
    """A checkpoint prefix from a prefix or a run directory (its latest checkpoint)."""
    path = os.path.expanduser(checkpoint_path)
    if "://" not in path:  # a local path: say what is missing
        if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "checkpoint")):
            raise _no_checkpoint(path)
        if not os.path.exists(path) and not os.path.exists(path + ".index"):
            raise _no_checkpoint(path, " (no such directory or checkpoint prefix)")
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if not latest:
            raise _no_checkpoint(path)
        return latest
    if not tf.io.gfile.exists(path + ".index"):
        raise _no_checkpoint(path, f" (no {os.path.basename(path)}.index)")
    return path


def missing_checkpoint_files(path: str) -> list[str]:
    """The files of checkpoint prefix `path` (DIR/ckpt-N) that are absent.

    A checkpoint is an index file and data shards named PREFIX.data-IIIII-of-NNNNN; an
    interrupted copy or a full disk can leave some of them out.
    """
    index = path + ".index"
    if not os.path.exists(index):
        return [index]
    shards = glob.glob(glob.escape(path) + ".data-*-of-*")
    counts = {int(m.group(1)) for s in shards if (m := re.search(r"-of-(\d+)$", s))}
    count = max(counts) if counts else 1
    expected = [f"{path}.data-{i:05d}-of-{count:05d}" for i in range(count)]
    return [f for f in expected if not os.path.exists(f)]


def _complete_earlier_checkpoints(path: str) -> list[str]:
    directory = os.path.dirname(path)
    earlier = []
    try:
        with open(os.path.join(directory, "checkpoint"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("all_model_checkpoint_paths:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    candidate = name if os.path.isabs(name) else os.path.join(directory, name)
                    if candidate != path and not missing_checkpoint_files(candidate):
                        earlier.append(candidate)
    except OSError:
        pass
    return earlier


def damaged_checkpoint_message(path: str) -> str | None:
    """A message saying how to recover when checkpoint `path` lacks files, else None."""
    missing = missing_checkpoint_files(path)
    if not missing:
        return None
    directory = os.path.dirname(path)
    earlier = _complete_earlier_checkpoints(path)
    fix = (f"the last complete one is {earlier[-1]}: delete {path}.* and point "
           f"{os.path.join(directory, 'checkpoint')} at {os.path.basename(earlier[-1])!r} "
           f"(model_checkpoint_path) to resume from it" if earlier else
           "no earlier complete checkpoint is listed: restore the missing files")
    return (f"The checkpoint {path} is incomplete: {', '.join(missing)} is missing (an "
            f"interrupted copy or a full disk?). Nothing was changed; {fix}.")


def checkpoint_damage(path: str) -> str | None:
    """What is wrong with checkpoint prefix `path`, or None when every file is there and
    every tensor reads back: TensorFlow checks each tensor against the crc32c its index
    records, so a bit flip in a data shard fails, and a truncated shard reads short."""
    missing = missing_checkpoint_files(path)
    if missing:
        return f"{', '.join(missing)} is missing"
    try:
        reader = tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as e:
        return (f"{path}.index cannot be read ({type(e).__name__}: "
                f"{' '.join(str(e).split())[:200]})")
    try:
        for name, dtype in sorted(reader.get_variable_to_dtype_map().items()):
            if dtype != tf.variant:  # the input position: no numpy value to read back
                reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError) as e:
        text = " ".join(str(e).split())
        shards = sorted(glob.glob(glob.escape(path) + ".data-*-of-*"))
        shard = re.search(r"shard (\d+)", text)
        where = (shards[int(shard[1])] if shard and int(shard[1]) < len(shards) else
                 shards[0] if len(shards) == 1 else f"{path}.index or {path}.data-*")
        if "less bytes than requested" in text or "truncated" in text.lower():
            return f"{where} is truncated (shorter than {path}.index says)"
        if "checksum" in text.lower():
            return (f"{where} fails its checksum (flipped or overwritten bytes): "
                    f"{text[text.lower().find('checksum'):][:120]}")
        return f"{where} cannot be read ({type(e).__name__}: {text[:200]})"
    return None



def _readable_earlier_checkpoint(path: str) -> str | None:
    """The newest checkpoint listed before `path` in its directory that reads back."""
    for candidate in reversed(_complete_earlier_checkpoints(path)):
        if checkpoint_damage(candidate) is None:
            return candidate
    return None


def _unreadable(path: str, error: Exception) -> DamagedCheckpointError:
    """The error for checkpoint `path` whose files fail to read (a truncated shard, a bit
    flip): names the file and an earlier checkpoint that reads back."""
    damage = checkpoint_damage(path) or (
        f"it cannot be read ({type(error).__name__}: "
        f"{' '.join(str(error).split())[:200]})")
    earlier = _readable_earlier_checkpoint(path)
    fix = (f"an earlier checkpoint that reads back is {earlier} "
           f"(--checkpoint_path={earlier})" if earlier else
           "no earlier checkpoint of the run reads back: restore the files from a copy")
    return DamagedCheckpointError(
        f"The checkpoint {path} is damaged: {damage}. Nothing was changed; {fix}.")


# ------------------------------------------------------------ the model part
def model_trackable(model: Any, names: dict[str, Any] | None = None) -> Any:
    """The model's part of a checkpoint (a tf.train.Checkpoint used as a container): its
    variables under their stable names, or under `names` ({checkpoint name: variable}).
    Build the model first: variables created later are not in it."""
    from t2t.models import variable_names

    named = names or variable_names.named_variables(model)
    return tf.train.Checkpoint(**{name: _saved(v) for name, v in named.items()})


def _saved(variable: Any) -> Any:
    """What a checkpoint holds for a variable: itself, or for a Keras variable split over
    parameter servers, its ShardedVariable, which TensorFlow writes as one full tensor
    in slices (restorable split or whole; Keras cannot serialize it)."""
    from tensorflow.python.distribute import sharded_variable

    value = getattr(variable, "value", None)  # a Keras variable's TensorFlow variable
    return value if isinstance(value, sharded_variable.ShardedVariable) else variable


def object_graph(path: str) -> Any:
    """The TrackableObjectGraph proto of checkpoint `path` (what it holds, by name)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(path).get_tensor(_OBJECT_GRAPH_KEY))
    return graph


def saved_model_names(path: str) -> set[str]:
    """The names of the variables under "model" in checkpoint `path`."""
    nodes = object_graph(path).nodes
    model_ids = [c.node_id for c in nodes[0].children if c.local_name == MODEL_KEY]
    if not model_ids:
        raise CheckpointError(f"{path} holds no model (no {MODEL_KEY!r} object).")
    return {child.local_name for child in nodes[model_ids[0]].children}


def names_in_checkpoint(model: Any, path: str) -> dict[str, Any]:
    """{name in checkpoint `path`: variable}: the stable names when the checkpoint uses
    them, else the format-1 names it holds. A variable the checkpoint lacks keeps its
    stable name (the restore's match check then names it)."""
    from t2t.models import variable_names

    saved = saved_model_names(path)
    variables = variable_names.named_variables(model)
    if set(variables) <= saved:
        return variables
    legacy = variable_names.legacy_names(model)
    chosen = {}
    for name, variable in variables.items():
        spelled = next((n for n in (name, *legacy[name]) if n in saved), name)
        chosen[spelled] = variable
    return chosen


def restore(path: str, model: Any, **others: Any) -> Any:
    """Reads the model (and `others`: optimizer=..., train_iterator=...) from checkpoint
    `path`; returns the load status. DamagedCheckpointError when files are missing or
    unreadable; CheckpointError when a variable of the model (or a part of `others`) is
    not in the checkpoint."""
    damaged = damaged_checkpoint_message(path)
    if damaged:
        raise DamagedCheckpointError(damaged)
    try:
        names = names_in_checkpoint(model, path)
    except (tf.errors.OpError, IndexError) as e:  # IndexError: a shard that reads short
        raise _unreadable(path, e) from e
    root = tf.train.Checkpoint(model=model_trackable(model, names), **others)
    try:
        status = root.read(path)
        # Completeness is checked here: every variable of the model (and of `others`)
        # got its value. What the checkpoint holds beyond them (the input position, the
        # save counter) is left out on purpose, so TensorFlow's warnings about it are not.
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        if isinstance(e, tf.errors.OpError) and checkpoint_damage(path):
            raise _unreadable(path, e) from e  # a checksum that fails, a short shard
        raise CheckpointError(f"The checkpoint {path} does not match ({str(e)[:300]})") from e
    return status.expect_partial()
