"""A Hugging Face checkpoint folder -> a t2t run folder (what `t2t-import` does).

    summary = import_checkpoint("opus-mt-en-de", "runs/opus_en_de")

RUN/ then holds what a training run holds, so the binaries use it unchanged:
  run.json       problem text2text_pretrained (data_dir = RUN), model transformer,
                 hparams_set (transformer_opus_mt / transformer_t5 / transformer_t5_v1_1)
                 and the overrides of the checkpoint's sizes, and "imported": where from
  hparams.json   the resolved hparams
  ckpt-0.*       the weights under t2t's names (no optimizer: fine-tuning starts it)
  vocab.pretrained.json, vocab.pretrained.{inputs,targets}.model   the tokenizer as t2t
                 SentencePiece models (t2t.pretrained.vocab)
Nothing is fetched: the folder must hold config.json, the weights and the tokenizer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from t2t.pretrained import checkpoint_files, marian, t5, vocab
from t2t.pretrained.weight_mapping import UnsupportedCheckpointError

PROBLEM = "text2text_pretrained"  # the problem an imported run records (t2t.problems.text.pretrained)
IMPORTED_KEY = "imported"  # run.json's record of the import
IMPORTED_CHECKPOINT = "ckpt-0"
HPARAMS_SETS = {"marian": "transformer_opus_mt", "t5": "transformer_t5",
                "t5_v1_1": "transformer_t5_v1_1"}
SUPPORTED = (*marian.ARCHITECTURES, *t5.ARCHITECTURES)


@dataclass
class ImportSummary:
    """What import_checkpoint wrote: the run folder, its architecture and sizes."""

    output_dir: str
    architecture: str
    hparams_set: str
    hparams: str
    vocab_size: int
    weights: int  # variables assigned
    parameters: int


def architecture_of(config: dict[str, Any]) -> str:
    """The Hugging Face class config.json names (its "architectures", else model_type);
    UnsupportedCheckpointError listing the supported ones."""
    names = config.get("architectures") or []
    if not names:
        by_type = {"marian": "MarianMTModel", "t5": "T5ForConditionalGeneration",
                   "mt5": "MT5ForConditionalGeneration"}
        names = [by_type.get(config.get("model_type", ""), config.get("model_type") or "?")]
    if names[0] not in SUPPORTED:
        raise UnsupportedCheckpointError(
            f"architecture {names[0]!r} is not supported: t2t-import reads {list(SUPPORTED)}.")
    return names[0]


def overrides_string(overrides: dict[str, Any]) -> str:
    """{name: value} -> "name=value,..." as --hparams takes it (sorted, so stable)."""
    return ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                    for k, v in sorted(overrides.items()))


def _plan(folder: str, config: dict[str, Any], tensors: dict[str, Any]
          ) -> tuple[str, Any, dict[str, Any], vocab.PretrainedVocab]:
    """(kind, architecture module, hparams overrides, vocabulary) of the checkpoint."""
    if architecture_of(config) in marian.ARCHITECTURES:
        overrides = marian.hparams_overrides(config)
        pretrained_vocab = vocab.read_marian_vocab(folder)
        if pretrained_vocab.vocab_size != config["vocab_size"]:
            raise UnsupportedCheckpointError(
                f"the tokenizer has {pretrained_vocab.vocab_size} ids but config.json's "
                f"vocab_size is {config['vocab_size']}: not one model's files.")
        return "marian", marian, overrides, pretrained_vocab
    overrides = t5.hparams_overrides(config, tensors)
    kind = "t5_v1_1" if overrides["ffn_layer"] == "dense_gated_dense" else "t5"
    return kind, t5, overrides, vocab.read_t5_vocab(folder, config["vocab_size"])


def _refuse_existing_run(output_dir: str) -> None:
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise FileExistsError(
            f"--output_dir={output_dir!r} is not empty (it holds "
            f"{sorted(os.listdir(output_dir))[:6]}): give a new or empty folder; nothing "
            f"was written.")


def build_model(hparams_set: str, overrides: str, vocab_size: int) -> tuple[Any, Any]:
    """(t2t transformer with built weights, its problem hparams) for a text2text problem
    of `vocab_size` ids."""
    from t2t.features import Modality, ProblemHParams
    from t2t.hparams.basic import create_hparams
    from t2t.models import t2t_model

    hparams = create_hparams(hparams_set, overrides)
    problem_hparams = ProblemHParams(
        modality={"inputs": Modality.SYMBOL, "targets": Modality.SYMBOL},
        vocab_size={"inputs": vocab_size, "targets": vocab_size})
    model = t2t_model.create_model("transformer", hparams, t2t_model.PREDICT, problem_hparams)
    model.build_weights()
    return model, problem_hparams


def import_checkpoint(folder: str, output_dir: str) -> ImportSummary:
    """Reads the Hugging Face checkpoint in `folder` and writes a t2t run to `output_dir`
    (which must be new or empty). Raises CheckpointFolderError, UnsupportedCheckpointError
    or vocab.PretrainedTokenizerError before anything is written."""
    import tensorflow as tf

    import t2t
    from t2t.models import checkpoints
    from t2t.trainer import run_dir

    folder, output_dir = os.path.abspath(folder), os.path.abspath(output_dir)
    _refuse_existing_run(output_dir)
    config = checkpoint_files.read_config(folder)
    architecture = architecture_of(config)
    tensors = checkpoint_files.read_weights(folder)
    kind, module, overrides, pretrained_vocab = _plan(folder, config, tensors)
    hparams_set, hparams = HPARAMS_SETS[kind], overrides_string(overrides)
    model, problem_hparams = build_model(hparams_set, hparams, pretrained_vocab.vocab_size)
    assigned = module.assignments(model, tensors, config, pretrained_vocab.checkpoint_ids
                                  ).apply(model)
    os.makedirs(output_dir, exist_ok=True)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=checkpoints.model_trackable(model)), output_dir, max_to_keep=None)
    manager.save(checkpoint_number=0)
    vocab.write_vocab(pretrained_vocab, output_dir, source=folder)
    parameters = int(sum(v.numpy().size for v in model.trainable_weights))
    imported = {"from": folder, "architecture": architecture, "kind": kind,
                "checkpoint": IMPORTED_CHECKPOINT, "vocab_size": pretrained_vocab.vocab_size,
                "parameters": parameters}
    run = {"problem": PROBLEM, "model": "transformer", "data_dir": output_dir,
           "data_dir_given": True, "hparams_set": hparams_set, "hparams": hparams,
           "problem_hparams": problem_hparams.to_dict(), "t2t_version": t2t.__version__,
           IMPORTED_KEY: imported}
    run_dir.record_run(output_dir, run, model.hparams, has_checkpoint=False)
    return ImportSummary(output_dir, architecture, hparams_set, hparams,
                         pretrained_vocab.vocab_size, assigned, parameters)
