"""Learning-rate schedules: Tensor2Tensor's factor products, step by step.

`hparams.learning_rate_schedule` is a product of factor names, e.g. transformer_base's
`"constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size"`:

    lr(step) = 2.0 * min(1, step / 8000) * rsqrt(max(step, 8000)) * 512 ** -0.5

Each factor follows Tensor2Tensor v1.15 (`tensor2tensor/utils/learning_rate.py`) formula
for formula. `step` is the optimizer step (Keras `optimizer.iterations`, counted from 0):
the number of updates. With `optimizer_multistep_accumulate_steps` N, T2T counted
micro-batches and divided the step by N here; t2t's steps already count updates (one
step draws N micro-batches, t2t.trainer.accumulation), so the schedule reads them as
they are, as T2T's effectively did.

Deviations from T2T, all deliberate:
- "legacy" applies the 0.002 Adam correction when "adam" occurs in `hparams.optimizer`
  in any case. T2T v1.15 tests the lowercase substring, older versions tested "Adam";
  t2t accepts both spellings, so both get the correction.
- The legacy decay scheme "piecewise" is not supported (it needs hparams t2t lacks).
- `learning_rate_minimum` is ignored, as in T2T v1.15 (only older T2TModel.optimize
  applied `lr = max(lr, learning_rate_minimum)`).
- The legacy warmup is T2T's "exp" warmup; an optional hparam
  `learning_rate_warmup_schedule="linear"` selects T2T's linear one (start 0.35).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from t2t.hparams.hparams import HParams

Factor = Callable[[tf.Tensor, HParams, Any], Any]  # (step, hparams, train_steps) -> factor

# Hparams the schedules read (kept in LearningRateSchedule.get_config).
_READ_HPARAMS = (
    "learning_rate_schedule",
    "learning_rate_constant",
    "learning_rate_warmup_steps",
    "learning_rate_decay_steps",
    "learning_rate_decay_staircase",
    "learning_rate_decay_rate",
    "learning_rate_decay_scheme",
    "learning_rate_cosine_cycle_steps",
    "learning_rate_warmup_schedule",
    "learning_rate",
    "hidden_size",
    "optimizer",
    "train_steps",
)


def _need_train_steps(name: str, train_steps: float | None) -> float:
    if train_steps is None:
        raise ValueError(
            f"Learning-rate factor {name!r} needs train_steps: pass train_steps= or set "
            "hparams.train_steps."
        )
    return float(train_steps)


def _linear_decay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    total = _need_train_steps("linear_decay", train_steps)
    ret = (total - step) / hp.learning_rate_decay_steps
    return tf.minimum(1.0, tf.maximum(0.0, ret))


def _cosdecay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    in_warmup = tf.cast(step <= hp.learning_rate_warmup_steps, tf.float32)
    ret = 0.5 * (1.0 + tf.cos(math.pi * step / hp.learning_rate_decay_steps))
    return in_warmup * 1.0 + (1.0 - in_warmup) * ret


def _single_cycle_cos_decay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    total = _need_train_steps("single_cycle_cos_decay", train_steps)
    warmup = float(hp.learning_rate_warmup_steps)
    if total <= warmup:
        raise ValueError(
            "single_cycle_cos_decay cannot be used unless train_steps > "
            f"learning_rate_warmup_steps (got {total:g} <= {warmup:g})."
        )
    after = tf.maximum(step, warmup) - warmup
    return tf.cos(after * math.pi / (total - warmup)) / 2.0 + 0.5


def _multi_cycle_cos_decay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    warmup = float(hp.learning_rate_warmup_steps)
    after = tf.maximum(step, warmup) - warmup
    return tf.cos(after * math.pi / hp.learning_rate_decay_steps) / 2.0 + 0.5


def _rsqrt_decay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    return tf.math.rsqrt(tf.maximum(step, float(hp.learning_rate_warmup_steps)))


def _rsqrt_normalized_decay(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    warmup = float(hp.learning_rate_warmup_steps)
    return math.sqrt(warmup) * tf.math.rsqrt(tf.maximum(step, warmup))


def _exp_decay_factor(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    p = (step - float(hp.learning_rate_warmup_steps)) / hp.learning_rate_decay_steps
    p = tf.maximum(p, 0.0)
    if hp.learning_rate_decay_staircase:
        p = tf.floor(p)
    return tf.pow(float(hp.learning_rate_decay_rate), p)


def _legacy_warmup(step: tf.Tensor, warmup_steps: float, schedule: str) -> tf.Tensor:
    """T2T's `_learning_rate_warmup`: 1 when warmup_steps is 0."""
    if not warmup_steps:
        return tf.constant(1.0)
    if schedule == "exp":
        return tf.exp(math.log(0.01) / warmup_steps) ** (warmup_steps - step)
    if schedule == "linear":
        start = 0.35
        return ((1.0 - start) / warmup_steps) * step + start
    raise ValueError(f"Unknown learning_rate_warmup_schedule {schedule!r}: use 'exp' or 'linear'.")


_LEGACY_DECAY_SCHEMES = ("none", "exp", "cosine", "cyclelinear10x", "sqrt")


def _legacy_decay(step: tf.Tensor, hp: HParams, warmup_steps: float) -> tf.Tensor:
    """T2T's `_learning_rate_decay` multiplier for `learning_rate_decay_scheme`."""
    scheme = hp.learning_rate_decay_scheme
    if not scheme or scheme == "none":
        return tf.constant(1.0)
    if scheme == "exp":
        p = (step - warmup_steps) / hp.learning_rate_decay_steps
        if hp.learning_rate_decay_staircase:
            p = tf.floor(p)
        return tf.pow(float(hp.learning_rate_decay_rate), p)
    if scheme == "cosine":
        cycle = float(hp.learning_rate_cosine_cycle_steps)
        position = tf.math.floormod(step, 2.0 * cycle)
        position = cycle - tf.abs(cycle - position)
        return 0.5 * (1.0 + tf.cos(math.pi * position / cycle))
    if scheme == "cyclelinear10x":
        cycle = warmup_steps  # 10x up and down every warmup_steps
        position = (tf.math.floormod(step, 2.0 * cycle) - cycle) / cycle
        position = 1.0 - tf.abs(position)
        return (position + 0.1) * 3.0
    if scheme == "sqrt":
        return 500.0 / tf.sqrt(tf.maximum(step - warmup_steps, 1.0))
    raise ValueError(
        f"Unknown learning_rate_decay_scheme {scheme!r}: use one of "
        f"{', '.join(_LEGACY_DECAY_SCHEMES)} ('piecewise' is not supported)."
    )


def _legacy(step: tf.Tensor, hp: HParams, train_steps: float | None) -> tf.Tensor:
    """T2T's `legacy_learning_rate_schedule`, including * hparams.learning_rate."""
    warmup_steps = float(hp.learning_rate_warmup_steps)
    if hp.learning_rate_decay_scheme == "noam":
        w = tf.constant(warmup_steps)
        ret = (
            5000.0
            * float(hp.hidden_size) ** -0.5
            * tf.minimum((step + 1.0) * w**-1.5, (step + 1.0) ** -0.5)
        )
    else:
        schedule = hp.learning_rate_warmup_schedule or "exp"
        warmup = _legacy_warmup(step, warmup_steps, schedule)
        decay = _legacy_decay(step, hp, warmup_steps)
        ret = tf.where(step < warmup_steps, warmup, decay)
    correction = 0.002 if "adam" in str(hp.optimizer).lower() else 1.0
    return ret * correction * float(hp.learning_rate)


FACTORS: dict[str, Factor] = {
    "constant": lambda step, hp, ts: float(hp.learning_rate_constant),
    "linear_warmup": lambda step, hp, ts: tf.minimum(1.0, step / hp.learning_rate_warmup_steps),
    "linear_decay": _linear_decay,
    "cosdecay": _cosdecay,
    "single_cycle_cos_decay": _single_cycle_cos_decay,
    "multi_cycle_cos_decay": _multi_cycle_cos_decay,
    "rsqrt_decay": _rsqrt_decay,
    "rsqrt_normalized_decay": _rsqrt_normalized_decay,
    "exp_decay": _exp_decay_factor,
    "rsqrt_hidden_size": lambda step, hp, ts: float(hp.hidden_size) ** -0.5,
    "legacy": _legacy,
}


def factor_names(schedule: str) -> list[str]:
    """The factor names of a schedule string, checked: "a * b" -> ["a", "b"]."""
    names = [name.strip() for name in schedule.split("*") if name.strip()]
    for name in names:
        if name not in FACTORS:
            raise ValueError(
                f"Unknown learning rate factor {name!r} in learning_rate_schedule "
                f"{schedule!r}. Valid factors: {', '.join(FACTORS)}."
            )
    return names


def _float_step(step: Any) -> tf.Tensor:
    if isinstance(step, keras.Variable):
        step = step.value
    return tf.cast(step, tf.float32)


def learning_rate_schedule(
    hparams: HParams, step: Any, train_steps: int | None = None
) -> tf.Tensor:
    """The learning rate at `step`: a float32 scalar tensor.

    Args:
      hparams: reads learning_rate_schedule and the hparams its factors need.
      step: optimizer step (int or float, Python, tensor or variable), from 0.
      train_steps: total training steps, for linear_decay and single_cycle_cos_decay;
        defaults to `hparams.train_steps` when that exists.
    """
    names = factor_names(hparams.learning_rate_schedule)
    if train_steps is None and "train_steps" in hparams:  # a set may carry its own
        train_steps = hparams.train_steps
    step_f = _float_step(step)
    ret = tf.constant(1.0, tf.float32)
    for name in names:
        factor = FACTORS[name](step_f, hparams, train_steps)
        ret = ret * tf.cast(factor, tf.float32)
    return ret


@keras.saving.register_keras_serializable(package="t2t")
class LearningRateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Keras schedule for `learning_rate_schedule(hparams, optimizer.iterations)`.

    Pass it as an optimizer's `learning_rate`; the optimizer calls it with its
    `iterations` (int64 scalar, possibly a mirrored variable) on every step.
    """

    def __init__(self, hparams: HParams | dict[str, Any], train_steps: int | None = None):
        if isinstance(hparams, dict):
            hparams = HParams(**hparams)
        factor_names(hparams.learning_rate_schedule)  # fail early on unknown factors
        values = hparams.values()
        self.hparams = HParams(**{k: values[k] for k in _READ_HPARAMS if k in values})
        self.train_steps = train_steps

    def __call__(self, step: Any) -> tf.Tensor:
        return learning_rate_schedule(self.hparams, step, self.train_steps)

    def get_config(self) -> dict[str, Any]:
        return {"hparams": self.hparams.values(), "train_steps": self.train_steps}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateSchedule:
        return cls(HParams(**config["hparams"]), config.get("train_steps"))
