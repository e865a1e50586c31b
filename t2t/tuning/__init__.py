"""Hyperparameter tuning with Optuna: ranged hparams sets as search spaces, each trial a
t2t-trainer run in OUTPUT_DIR/trial_N, studies resumable and shared by many processes.

  search_space  RangedHParams -> Optuna distributions; trial values -> --hparams strings
  study         TunerConfig, run_study (trials as trainer subprocesses, pruning, resume)
  report        the table of trials, best_hparams.{txt,json}, objective.png, importance.png

The command line is `t2t-tuner` (t2t/bin/t2t_tuner.py). Optuna is imported lazily.
"""
