"""Ensembles in t2t-decoder and t2t-exporter: --checkpoint_path=A:B:C (fairseq's --path
form: checkpoints or run folders, colon-separated) or --ensemble_last=N (a run's last N
checkpoints) decode, or export, with the ensemble of those checkpoints
(t2t.decoding.ensemble), combined as --ensemble_combine says."""

from __future__ import annotations

import sys
from typing import Any

from absl import flags

from t2t.bin import common_flags, flag_help

FLAGS = flags.FLAGS

flags.DEFINE_integer("ensemble_last", 0, "Decode (or export) with the ensemble of the last N "
                     "checkpoints of --output_dir (or of the run folder --checkpoint_path "
                     "names); 0: one checkpoint. --checkpoint_path=A:B:C names an ensemble's "
                     "members directly (checkpoint prefixes or run folders of the same "
                     "problem and vocabulary; sizes may differ).")
flags.DEFINE_enum("ensemble_combine", "log_linear", ["log_linear", "linear"],
                  "How an ensemble combines its members' next-token distributions: "
                  "log_linear, their mean log-probability, renormalized (as OpenNMT-py); "
                  "linear, the log of their mean probability (as fairseq).")
flag_help.group("Problem, model and run", "ensemble_last", "ensemble_combine")

_ENSEMBLE_FLAGS = "--checkpoint_path=A:B or --ensemble_last=N"


def resolve_checkpoints(output_dir: str, write_attention: bool = False
                        ) -> tuple[str, list[str]]:
    """(the checkpoint to name in messages: the members' prefixes joined by ":", the
    members' checkpoint prefixes): one unless --checkpoint_path lists several or
    --ensemble_last=N asks for a run's last N. DecodeError for a missing checkpoint;
    `write_attention` (a decode setting) refuses an ensemble."""
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import ensemble
    from t2t.models import checkpoints

    path, last = FLAGS.checkpoint_path, FLAGS.ensemble_last
    if last < 0:
        common_flags.fail(f"--ensemble_last={last}: give N >= 1 (the run's last N checkpoints "
                          f"decode as an ensemble), or leave it out.")
    named = ensemble.split_members(path) if path else []
    if len(named) > 1:
        if last:
            common_flags.fail("--checkpoint_path=A:B names an ensemble's members and "
                              "--ensemble_last=N takes a run's last N checkpoints: give one.")
        members = [decoder_lib.resolve_checkpoint(checkpoints.checkpoint_location(m, output_dir))
                   for m in named]
    elif last:
        members = ensemble.last_checkpoints(checkpoints.checkpoint_location(path, output_dir),
                                            last)
    else:
        members = [decoder_lib.resolve_checkpoint(
            checkpoints.checkpoint_location(path, output_dir))]
    if len(members) == 1 and FLAGS["ensemble_combine"].present:
        common_flags.fail(f"--ensemble_combine combines an ensemble's members ({_ENSEMBLE_FLAGS}"
                          f" with 2 or more); {members[0]} is one checkpoint.")
    if len(members) > 1 and write_attention:
        common_flags.fail(f"write_attention shows one model's attention: decode with one "
                          f"checkpoint, not an ensemble ({_ENSEMBLE_FLAGS}).")
    return ":".join(members), members


def load_models(problem: Any, members: list[str], model_name: str, hparams: Any,
                data_dir: str) -> Any:
    """The model of the one member (t2t.decoding.decoder.load_model), or the ensemble of
    them: each member with the model and hparams its run recorded, else `model_name` and
    `hparams` (the flags', or --output_dir's run's)."""
    from t2t.decoding import decoder as decoder_lib
    from t2t.decoding import ensemble

    if len(members) == 1:
        return decoder_lib.load_model(problem, model_name, hparams, data_dir, members[0])
    given = [f"--{name}" for name in ("model", "hparams_set", "hparams") if FLAGS[name].present]
    if given:
        print(f"note: each ensemble member decodes with the model and hparams its run "
              f"recorded (run.json, hparams.json); {', '.join(given)} apply only to members "
              f"whose folder records none.", file=sys.stderr, flush=True)
    return ensemble.load_ensemble(problem, members, data_dir, model_name=model_name,
                                  hparams=hparams, combine=FLAGS.ensemble_combine)


def check_export_format(export_format: str, members: list[str]) -> None:
    """Only a SavedModel holds an ensemble (its serving signatures decode with it)."""
    if len(members) > 1 and export_format != "saved_model":
        common_flags.fail(f"--format={export_format} exports one model; an ensemble "
                          f"({_ENSEMBLE_FLAGS}) exports as a SavedModel (--format=saved_model).")
