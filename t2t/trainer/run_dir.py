"""The run directory: what a run records about itself, and resume-compatibility checks.

output_dir/
  run.json              problem, model, hparams set and overrides, t2t version, the
                        problem's resolved hparams (first run); data_dir and
                        t2t_usr_dir (absolute; updated on resume)
  hparams.json          the resolved hyperparameters
  operative_config.gin  what gin bound
  ckpt-N.*, checkpoint  checkpoints (tf.train.CheckpointManager)
  eval_results.jsonl    one JSON line per evaluation (of the dev split)
  train/, eval/         TensorBoard summaries
  eval_results_SPLIT.jsonl, eval_SPLIT/   the same for evaluations of another split
                        (--eval_split=test: eval_results_test.jsonl, eval_test/)
"""

from __future__ import annotations

import json
import os
from typing import Any

from t2t.hparams.hparams import HParams

RUN_FILE = "run.json"
HPARAMS_FILE = "hparams.json"
EVAL_RESULTS_FILE = "eval_results.jsonl"
# run.json's fields that say where the run's data and code are (a resume updates them).
LOCATION_KEYS = ("data_dir", "data_dir_given", "t2t_usr_dir")
# run.json's record of variables split over parameter servers ("" or absent: whole).
PS_SPLIT_KEY = "ps_variable_split"
DEV_SPLIT = "dev"  # the split whose results keep the plain names (problem.DEV_SPLIT)

# Hyperparameters that change variable shapes or the graph's structure: a run cannot
# resume from a checkpoint written with other values. These are the ones of the shared
# layers, modalities and optimizer; a model adds its own (T2TModel.STRUCTURAL_HPARAMS).
STRUCTURAL_HPARAMS = frozenset({
    "hidden_size", "num_hidden_layers", "num_encoder_layers", "num_decoder_layers",
    "filter_size", "num_heads", "attention_key_channels", "attention_value_channels",
    "shared_embedding_and_softmax_weights", "shared_embedding", "ffn_layer", "norm_type",
    "use_target_space_embedding", "optimizer", "kernel_height", "kernel_width",
    "weight_dtype",
})


def absolute_path(path: str) -> str:
    """`path` made absolute (~ expanded), so a run's record holds wherever it was started
    from; URLs (gs://...) are kept as they are."""
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


class IncompatibleRunError(ValueError):
    """output_dir holds a run that the current settings cannot resume."""


def _write_json(path: str, value: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_and_record(output_dir: str, run: dict[str, Any], hparams: HParams, *,
                     has_checkpoint: bool, record: bool = True,
                     model_structural: frozenset[str] = frozenset()) -> list[str]:
    """Refuses to resume a run with another problem/model or structural hparams
    (STRUCTURAL_HPARAMS and the model's own, `model_structural`).

    Returns warnings about non-structural hparams that changed (e.g. dropout), which
    take effect from the resumed step. Records run.json and hparams.json unless
    `record` is False (the non-chief processes of a cluster only check).
    """
    os.makedirs(output_dir, exist_ok=True)
    run_path, hparams_path = os.path.join(output_dir, RUN_FILE), os.path.join(output_dir, HPARAMS_FILE)
    warnings = []
    if has_checkpoint and os.path.exists(run_path):
        previous = _read_json(run_path)
        for key in ("problem", "model"):
            if previous.get(key) != run.get(key):
                raise IncompatibleRunError(
                    f"{output_dir!r} holds a run of {key} {previous.get(key)!r}, not "
                    f"{run.get(key)!r}: use another --output_dir, or the same --{key}."
                )
        split, was = run.get(PS_SPLIT_KEY, ""), previous.get(PS_SPLIT_KEY, "")
        if split != was:
            raise IncompatibleRunError(
                f"{output_dir!r} was trained with its variables "
                f"{f'split over parameter servers ({was})' if was else 'whole'}, and this "
                f"run would have them {f'split ({split})' if split else 'whole'}: the "
                f"optimizer's slots follow the split. Resume it with the same ps tasks and "
                f"--ps_*_shard_bytes/--ps_max_shards flags, or start a new --output_dir with "
                f"--warm_start_from={output_dir} (its weights are saved whole).")
    if has_checkpoint and os.path.exists(hparams_path):
        previous_hp = HParams(**_read_json(hparams_path))
        diff = previous_hp.diff(hparams)
        # A structural hparam the run's hparams.json lacks was added to t2t after the run
        # started; its default keeps the model the run built, so only a warning follows.
        structural = {k: v for k, v in diff.items()
                      if k in STRUCTURAL_HPARAMS | model_structural and k in previous_hp}
        if structural:
            changes = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in sorted(structural.items()))
            raise IncompatibleRunError(
                f"Cannot resume the run in {output_dir!r}: these hparams differ from its "
                f"checkpoint and would break it: {changes}. Use the original --hparams_set/"
                f"--hparams to continue it, or a new --output_dir (--warm_start_from can "
                f"load its weights)."
            )
        warnings = [
            f"hparam {k} changed from {old!r} to {new!r} on resume" if k in previous_hp
            else f"hparam {k} is new since the run started (not in its hparams.json): {new!r}"
            for k, (old, new) in sorted(diff.items())
        ]
    if record:
        record_run(output_dir, run, hparams, has_checkpoint=has_checkpoint)
    return warnings


def record_run(output_dir: str, run: dict[str, Any], hparams: HParams, *,
               has_checkpoint: bool, update_locations: bool = True) -> None:
    """Writes hparams.json, and run.json: whole for a new run; a resumed run keeps the
    record of its start and updates only where its data and code now are
    (LOCATION_KEYS, the ones given), so the decoder finds them after a move; an
    evaluation (`update_locations=False`) leaves them.

    Call it once the run is known to be compatible (after `check_and_record(...,
    record=False)` and a successful restore), so a refused run leaves no records.
    """
    run_path = os.path.join(output_dir, RUN_FILE)
    previous = _read_json(run_path) if has_checkpoint and os.path.exists(run_path) else None
    if previous is None:
        _write_json(run_path, run)
    else:
        moved = {k: run[k] for k in LOCATION_KEYS if update_locations
                 and run.get(k) is not None and run[k] != previous.get(k)}
        if moved:
            _write_json(run_path, {**previous, **moved})
    _write_json(os.path.join(output_dir, HPARAMS_FILE), hparams.values())


IMPORTED_KEY = "imported"  # run.json's record of a t2t-import (t2t.pretrained.import_run)


def imported_checkpoint(output_dir: str, latest: str | None) -> dict[str, Any] | None:
    """run.json's import record when `latest` (a checkpoint path or None) is the
    checkpoint t2t-import wrote and no training has saved one since: the run starts
    fine-tuning from those weights (on any problem), not resuming. None otherwise."""
    if latest is None:
        return None
    run_path = os.path.join(output_dir, RUN_FILE)
    imported = _read_json(run_path).get(IMPORTED_KEY) if os.path.exists(run_path) else None
    if imported and os.path.basename(latest) == imported.get("checkpoint"):
        return imported
    return None


def check_imported_vocab(imported: dict[str, Any], vocab_size: dict[str, int | None],
                         problem_name: str, output_dir: str) -> None:
    """IncompatibleRunError unless the problem's symbol vocabularies have the imported
    model's size (its data was made with the imported vocabulary)."""
    sizes = {feature: size for feature, size in vocab_size.items() if size is not None}
    if any(size != imported["vocab_size"] for size in sizes.values()):
        raise IncompatibleRunError(
            f"{output_dir!r} holds a model imported from {imported.get('from')!r} with "
            f"{imported['vocab_size']} ids, but {problem_name}'s vocabulary has {sizes}: make "
            f"its data with the imported vocabulary, `t2t-datagen --problem={problem_name} "
            f"--use_vocab_from={output_dir} --data_dir=NEW_DATA_DIR`, and train with "
            f"--data_dir=NEW_DATA_DIR.")


def read_run_record(output_dir: str) -> dict[str, Any]:
    """run.json's contents ({} when the run has none yet)."""
    path = os.path.join(output_dir, RUN_FILE)
    return _read_json(path) if os.path.exists(path) else {}


def update_run_record(output_dir: str, key: str, value: Any) -> None:
    """Sets run.json's `key` to `value`, the rest kept (written whole, atomically)."""
    _write_json(os.path.join(output_dir, RUN_FILE), {**read_run_record(output_dir), key: value})


def eval_name(split: str = DEV_SPLIT) -> str:
    """What a split's evaluations are recorded under: "eval" for dev, else "eval_SPLIT"
    (the TensorBoard folder; the results file adds "_results.jsonl" after it)."""
    return "eval" if split == DEV_SPLIT else f"eval_{split}"


def eval_results_file(split: str = DEV_SPLIT) -> str:
    """eval_results.jsonl for dev, eval_results_SPLIT.jsonl for another split."""
    return EVAL_RESULTS_FILE if split == DEV_SPLIT else f"eval_results_{split}.jsonl"


def append_eval_results(output_dir: str, step: int, metrics: dict[str, float],
                        split: str = DEV_SPLIT) -> None:
    """Appends {"step": step, **metrics} as one JSON line to the split's results file."""
    with open(os.path.join(output_dir, eval_results_file(split)), "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": int(step), **{k: float(v) for k, v in metrics.items()}}) + "\n")


def read_eval_results(output_dir: str, split: str = DEV_SPLIT) -> list[dict[str, float]]:
    """The recorded evaluations of `split`, oldest first."""
    path = os.path.join(output_dir, eval_results_file(split))
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
