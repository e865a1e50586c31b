"""Distillation: a student trained against a frozen teacher's output distribution.

    teacher = load_teacher("runs/teacher", problem, data_dir)     # in the strategy scope
    task = Task(problem, "transformer", student_hparams, data_dir, teacher=teacher)

The student's training loss becomes

    (1 - w) * hard-label loss + w * T^2 * KL(softmax(teacher / T) || softmax(student / T))

per target position (padding excluded), with T = hparams.distill_temperature and
w = hparams.distill_weight (Hinton et al., 2015; the T^2 keeps the soft term's gradient
scale independent of T). Tensor2Tensor's `task_balance` is 1 - w. The teacher runs its
forward pass in the same step in evaluation mode (no dropout); its variables are not
trainable and are not part of the run's checkpoints, which hold the student only.
The teacher must have been trained on the same problem (same name and target
vocabulary); its model and hparams may differ.
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.data import problem as problem_lib
from t2t.hparams.hparams import HParams
from t2t.trainer import run_dir


class TeacherError(ValueError):
    """A --teacher_dir that cannot teach this run (the message says why and what to do)."""


def kl_to_teacher(student_logits: tf.Tensor, teacher_logits: tf.Tensor, weights: tf.Tensor,
                  temperature: float) -> tf.Tensor:
    """sum over positions of weights * T^2 * KL(softmax(teacher/T) || softmax(student/T)).

    logits: float [..., V] (same shape); weights: float [...] (0 at padding). Returns a
    float32 scalar, in nats."""
    t = float(temperature)
    teacher = tf.stop_gradient(tf.cast(teacher_logits, tf.float32)) / t
    student = tf.cast(student_logits, tf.float32) / t
    teacher_log_p = tf.nn.log_softmax(teacher, axis=-1)
    student_log_q = tf.nn.log_softmax(student, axis=-1)
    kl = tf.reduce_sum(tf.exp(teacher_log_p) * (teacher_log_p - student_log_q), axis=-1)
    return t * t * tf.reduce_sum(kl * tf.cast(weights, tf.float32))


def distilled_loss(hard: tuple[tf.Tensor, tf.Tensor], student_logits: tf.Tensor,
                   teacher_logits: tf.Tensor, targets_weights: tf.Tensor,
                   hparams: HParams) -> tuple[tf.Tensor, tf.Tensor]:
    """(numerator, denominator) of the mixed loss, on the hard loss's denominator:
    (1 - w) * hard numerator + w * kl_to_teacher(...)."""
    weight = float(hparams.distill_weight)
    numerator, denominator = hard
    soft = kl_to_teacher(student_logits, teacher_logits, targets_weights,
                         hparams.distill_temperature)
    return (1.0 - weight) * numerator + weight * soft, denominator


def check_hparams(hparams: HParams) -> None:
    """TeacherError for distillation hparams that cannot work."""
    if not float(hparams.distill_temperature) > 0:
        raise TeacherError(f"distill_temperature={hparams.distill_temperature}: give a "
                           f"temperature > 0 (1.0 is the plain distribution; 2-5 is usual).")
    if not 0.0 <= float(hparams.distill_weight) <= 1.0:
        raise TeacherError(f"distill_weight={hparams.distill_weight}: give a weight in "
                           f"[0, 1] (0: hard labels only; 1: the teacher only).")


def _read_record(teacher_dir: str, name: str) -> dict[str, Any]:
    path = os.path.join(teacher_dir, name)
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise TeacherError(f"--teacher_dir={teacher_dir} holds no {name}: give the output "
                           f"directory of a t2t-trainer run (the teacher).") from None
    except (OSError, ValueError) as e:
        raise TeacherError(f"{path} cannot be read ({e}): give the output directory of a "
                           f"t2t-trainer run (the teacher).") from None
    if not isinstance(value, dict):
        raise TeacherError(f"{path} is not a t2t run record (a JSON object expected).")
    return value


class Teacher:
    """A trained model, frozen, loaded from its run directory."""

    def __init__(self, model: Any, model_name: str, checkpoint: str):
        self.model, self.model_name, self.checkpoint = model, model_name, checkpoint

    def logits(self, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """The teacher's logits [B, T, 1, 1, V] (or its modality's) in evaluation mode."""
        logits, _ = self.model(features, training=False)
        return tf.stop_gradient(logits)


def load_teacher(teacher_dir: str, problem: problem_lib.Problem, data_dir: str) -> Teacher:
    """The teacher of `teacher_dir` (its run.json, hparams.json and latest checkpoint),
    built for `problem` and frozen. Call inside the strategy's scope. TeacherError when
    the run is not a run, was trained on another problem or target vocabulary, or has
    no checkpoint that fits."""
    from t2t.models import checkpoints, t2t_model

    teacher_dir = os.path.expanduser(teacher_dir)
    run = _read_record(teacher_dir, run_dir.RUN_FILE)
    recorded_problem = run.get("problem")
    if recorded_problem != problem.name:
        raise TeacherError(
            f"The teacher in {teacher_dir} was trained on problem {recorded_problem!r}, this "
            f"run trains {problem.name!r}: a teacher must have the student's problem (its "
            f"model and hparams may differ). Give the --teacher_dir of a {problem.name} run.")
    problem_hparams = problem.hparams(data_dir)
    recorded_vocab = (run.get("problem_hparams") or {}).get("vocab_size", {}).get("targets")
    vocab = problem_hparams.vocab_size.get("targets")
    if recorded_vocab is not None and vocab is not None and recorded_vocab != vocab:
        raise TeacherError(
            f"The teacher in {teacher_dir} predicts {recorded_vocab} target symbols, this "
            f"run's data ({data_dir}) has {vocab}: the vocabularies differ. Give the "
            f"--data_dir the teacher was trained on ({run.get('data_dir')}).")
    hparams = HParams(**_read_record(teacher_dir, run_dir.HPARAMS_FILE))
    model_name = run.get("model")
    try:
        path = checkpoints.resolve_checkpoint(teacher_dir)
    except checkpoints.NoCheckpointError as e:
        raise TeacherError(f"--teacher_dir: {e}") from None
    model = t2t_model.create_model(model_name, hparams, problem_lib.EVAL, problem_hparams)
    model.build_weights()
    try:
        checkpoints.restore(path, model)
    except checkpoints.CheckpointError as e:
        raise TeacherError(f"The teacher's checkpoint {path} does not load into its model "
                           f"{model_name!r} ({str(e)[:300]}).") from e
    model.trainable = False
    logging.info("Teacher: %s from %s (frozen).", model_name, path)
    return Teacher(model, model_name, path)
