"""Flags naming a finished training run, shared by t2t-decoder and t2t-exporter: the
TaskConfig fields (t2t.config), each defaulting to what the run recorded
(OUTPUT_DIR/run.json, hparams.json; see `common_flags.resolve_run`)."""

from __future__ import annotations

from absl import flags

from t2t import config
from t2t.bin import config_flags, flag_help

config_flags.define(config.TaskConfig, help={
    "problem": "Registered problem name (default: the run's, from OUTPUT_DIR/run.json).",
    "model": "Registered model name (default: the run's).",
    "hparams_set": "Registered hparams set (default: the run's resolved hparams, "
                   "OUTPUT_DIR/hparams.json).",
    "hparams": "Overrides, e.g. 'num_heads=2' (as at training).",
    "data_dir": "Prepared data: the vocabulary (and the dev examples of --eval_steps or the "
                "parity check) (default: the data_dir the run recorded in run.json, else "
                "$T2T_DATA_DIR or ~/t2t_data).",
    "output_dir": "The training run (default: ~/t2t_train/PROBLEM/MODEL-HPARAMS_SET).",
})
flags.DEFINE_string("checkpoint_path", None, "Checkpoint prefix (DIR/ckpt-1000) or directory "
                    "(its latest), or 'best': the run's best checkpoint by its eval metric "
                    "(t2t-trainer --keep_best, --best_metric); A:B:C decodes with an "
                    "ensemble of them (--ensemble_combine); default: the latest in "
                    "--output_dir.")
flags.DEFINE_alias("checkpoint", "checkpoint_path")
flags.DEFINE_string("decode_hparams", "", "Decoding settings (DecodeHParams of t2t.config), "
                    f"e.g. 'beam_size=4,alpha=0.6'; all, with their defaults: "
                    f"'{config.DecodeHParams.help_string()}'.")
flags.DEFINE_string("decode_task", None, "A multi-problem's task to decode or export (one "
                    "of the names joined by + in --problem); required for a multi-problem.")
flag_help.group("Decoding", "decode_hparams", "decode_task")
flag_help.group("Problem, model and run", "checkpoint_path")
