"""Flags naming a finished training run, shared by t2t-decoder and t2t-exporter.

Each defaults to what the run recorded (OUTPUT_DIR/run.json, hparams.json); see
`common_flags.resolve_run`.
"""

from __future__ import annotations

from absl import flags

flags.DEFINE_string("problem", None, "Registered problem name (default: the run's, from "
                    "OUTPUT_DIR/run.json).")
flags.DEFINE_string("model", None, "Registered model name (default: the run's).")
flags.DEFINE_string("hparams_set", None, "Registered hparams set (default: the run's "
                    "resolved hparams, OUTPUT_DIR/hparams.json).")
flags.DEFINE_string("hparams", "", "Overrides, e.g. 'num_heads=2' (as at training).")
flags.DEFINE_string("checkpoint_path", None, "Checkpoint prefix (DIR/ckpt-1000) or directory "
                    "(its latest); default: the latest in --output_dir.")
