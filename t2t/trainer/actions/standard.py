"""The actions a TrainerConfig asks for, built for one run (what t2t-trainer registers).

    actions = standard_actions(config, task, model, hooks, output_dir)
    loop = TrainingLoop(..., actions=actions)

In the order the loop runs them: early stopping (--eval_early_stopping_steps), the best
checkpoints (--keep_best), per-layer summaries (--layer_summaries), then the decoded
dev examples or sampled images (--decode_summaries; nothing for real-valued targets,
whose evaluation's rmse says how close the predictions are).
"""

from __future__ import annotations

from typing import Any

from t2t.config import TrainerConfig
from t2t.decoding import image_samples as image_sampling
from t2t.features import Modality
from t2t.trainer.actions.base import LoopAction
from t2t.trainer.actions.decode_summaries import DecodeSummaries
from t2t.trainer.actions.early_stopping import EarlyStopping
from t2t.trainer.actions.image_samples import ImageSamples
from t2t.trainer.actions.keep_best import KeepBest
from t2t.trainer.actions.layer_summaries import LayerSummaries
from t2t.trainer.early_stopping import canonical_name
from t2t.trainer.strategy_hooks import StrategyHooks
from t2t.trainer.task import Task


def best_minimize_flag(config: TrainerConfig) -> bool | None:
    """--eval_early_stopping_metric_minimize where it speaks of the best checkpoints'
    metric (no --best_metric, or the early-stopping metric under another name); else
    None (t2t's known direction, or downwards)."""
    same_metric = bool(config.eval_early_stopping_steps) and (
        canonical_name(config.best_metric) == canonical_name(config.eval_early_stopping_metric))
    if not config.best_metric or same_metric:
        return config.eval_early_stopping_metric_minimize
    return None


def decode_summary_action(task: Task, count: int) -> LoopAction | None:
    """ImageSamples for image targets, DecodeSummaries for others, None for real values."""
    hparams = task.problem_hparams
    if hparams.modality.get("targets") == Modality.REAL:
        return None
    if image_sampling.is_image_target(hparams):
        return ImageSamples(task.problem, task.data_dir, task.eval_split, count)
    return DecodeSummaries(task, count)


def standard_actions(config: TrainerConfig, task: Task, model: Any, hooks: StrategyHooks,
                     output_dir: str) -> list[LoopAction]:
    """The actions `config` turns on, in the order they run."""
    actions: list[LoopAction] = []
    if config.eval_early_stopping_steps:
        actions.append(EarlyStopping(
            output_dir, task.eval_split, config.eval_early_stopping_metric,
            config.eval_early_stopping_steps, config.eval_early_stopping_metric_delta,
            config.eval_early_stopping_metric_minimize))
    if config.keep_best:
        actions.append(KeepBest(
            output_dir, task.eval_split, config.keep_best,
            config.best_metric or config.eval_early_stopping_metric, best_minimize_flag(config),
            "best_metric" if config.best_metric else "eval_early_stopping_metric"))
    if config.layer_summaries:
        actions.append(LayerSummaries(model, hooks.runtime.num_replicas, hooks.runtime.is_chief,
                                      hooks.parameter_server))
    if config.decode_summaries:
        summary = decode_summary_action(task, config.decode_summaries)
        if summary is not None:
            actions.append(summary)
    return actions
