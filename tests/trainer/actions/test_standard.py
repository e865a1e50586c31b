"""Which actions a TrainerConfig turns on, in which order, and the best checkpoints'
direction when only the early-stopping flags say it."""

import dataclasses

import keras
import tensorflow as tf

from t2t.config import RuntimeConfig, TrainerConfig
from t2t.features import Modality, ProblemHParams
from t2t.trainer import hooks as hooks_lib
from t2t.trainer.actions import standard
from t2t.trainer.actions.decode_summaries import DecodeSummaries
from t2t.trainer.actions.early_stopping import EarlyStopping
from t2t.trainer.actions.image_samples import ImageSamples
from t2t.trainer.actions.keep_best import KeepBest
from t2t.trainer.actions.layer_summaries import LayerSummaries
from t2t.trainer.runtime import Runtime


@dataclasses.dataclass
class _Task:
    """What standard_actions reads of a t2t.trainer.task.Task."""

    problem_hparams: ProblemHParams
    problem: object = None
    data_dir: str = "/data"
    eval_split: str = "dev"


def _task(targets):
    return _Task(ProblemHParams(modality={"inputs": Modality.SYMBOL, "targets": targets},
                                vocab_size={"inputs": 4, "targets": 4}))


def _actions(task, **config):
    # Explicit values: a gin binding left by another test in the process changes defaults.
    config = {"keep_best": 1, "layer_summaries": True, "decode_summaries": 3,
              "eval_early_stopping_steps": 0, "best_metric": "", **config}
    model = keras.Sequential([keras.Input([2]), keras.layers.Dense(1)])
    hooks = hooks_lib.hooks_for(Runtime(RuntimeConfig(), tf.distribute.get_strategy(), seed=None))
    return standard.standard_actions(TrainerConfig(**config), task, model, hooks, "/out")


def test_the_config_turns_actions_on_in_their_order():
    usual = _actions(_task(Modality.SYMBOL))  # keep_best=1, layer and decode summaries
    assert [type(a) for a in usual] == [KeepBest, LayerSummaries, DecodeSummaries]
    every = _actions(_task(Modality.SYMBOL), eval_early_stopping_steps=100)
    assert [type(a) for a in every] == [EarlyStopping, KeepBest, LayerSummaries, DecodeSummaries]
    assert every[0].output_dir == "/out" and every[0].steps == 100
    none = _actions(_task(Modality.SYMBOL), keep_best=0, layer_summaries=False,
                    decode_summaries=0)
    assert none == []
    assert [type(a) for a in _actions(_task(Modality.IMAGE), keep_best=0,
                                      layer_summaries=False)] == [ImageSamples]
    assert _actions(_task(Modality.REAL), keep_best=0, layer_summaries=False) == []
    named = _actions(_task(Modality.SYMBOL), best_metric="accuracy")[0]
    assert (named.metric, named.flag) == ("accuracy", "best_metric")
    assert _actions(_task(Modality.SYMBOL))[0].flag == "eval_early_stopping_metric"


def test_the_early_stopping_direction_applies_to_its_own_metric_only():
    flag = TrainerConfig(eval_early_stopping_metric_minimize=False,
                         eval_early_stopping_metric="my_score", best_metric="",
                         eval_early_stopping_steps=0)
    assert standard.best_minimize_flag(flag) is False  # no --best_metric: the same metric
    other = dataclasses.replace(flag, best_metric="other_score")
    assert standard.best_minimize_flag(other) is None
    # The early-stopping metric under T2T's name: the same metric, when early stopping is on.
    t2t_name = dataclasses.replace(flag, eval_early_stopping_metric="approx_bleu_score",
                                   best_metric="bleu")
    assert standard.best_minimize_flag(t2t_name) is None
    on = dataclasses.replace(t2t_name, eval_early_stopping_steps=10)
    assert standard.best_minimize_flag(on) is False
