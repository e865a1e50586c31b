"""Distillation: the KL term against its closed form, the mixed loss, refused teachers,
and a student trained for real against a trained teacher (checkpoints: student only)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import RuntimeConfig, TrainerConfig
from t2t.hparams.basic import create_hparams
from t2t.trainer import distillation
from t2t.trainer.trainer import Trainer

PROBLEM = "algorithmic_reverse_binary40_test"


def _softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_kl_equals_its_closed_form():
    # Two classes: teacher logits (2, 0), student (0, 0), temperature 2: p = sigmoid(1),
    # q = 1/2, KL = p ln(2p) + (1 - p) ln(2(1 - p)), times T^2 = 4.
    p = 1 / (1 + math.exp(-1.0))
    closed_form = 4 * (p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p)))
    kl = distillation.kl_to_teacher(tf.constant([[0.0, 0.0]]), tf.constant([[2.0, 0.0]]),
                                    tf.constant([1.0]), temperature=2.0)
    assert float(kl) == pytest.approx(closed_form, rel=1e-6)


def test_kl_sums_weighted_positions_and_is_zero_for_the_same_distribution():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    weights = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # padding excluded
    t = 3.0
    p, q = _softmax(teacher / t), _softmax(student / t)
    expected = t * t * np.sum(weights * np.sum(p * np.log(p / q), axis=-1))
    kl = distillation.kl_to_teacher(tf.constant(student), tf.constant(teacher),
                                    tf.constant(weights), t)
    assert float(kl) == pytest.approx(expected, rel=1e-5)
    same = distillation.kl_to_teacher(tf.constant(teacher), tf.constant(teacher + 7.0),
                                      tf.constant(weights), t)  # softmax ignores a shift
    assert abs(float(same)) < 1e-5


def test_the_gradient_reaches_the_student_only():
    student, teacher = tf.Variable([[0.5, -0.5, 0.0]]), tf.Variable([[1.0, 0.0, -1.0]])
    with tf.GradientTape(persistent=True) as tape:
        kl = distillation.kl_to_teacher(student, teacher, tf.constant([1.0]), 1.0)
    assert tape.gradient(kl, teacher) is None
    # d KL / d student = q - p at T = 1
    expected = _softmax(np.array([[0.5, -0.5, 0.0]])) - _softmax(np.array([[1.0, 0.0, -1.0]]))
    np.testing.assert_allclose(tape.gradient(kl, student).numpy(), expected, atol=1e-6)


def test_the_mix_weights_hard_and_soft_losses():
    hard = (tf.constant(6.0), tf.constant(3.0))
    logits, teacher = tf.constant([[0.0, 0.0]]), tf.constant([[2.0, 0.0]])
    soft = float(distillation.kl_to_teacher(logits, teacher, tf.constant([1.0]), 2.0))
    for weight in (0.0, 0.25, 1.0):
        hparams = create_hparams("transformer_test",
                                 f"distill_weight={weight},distill_temperature=2.0")
        numerator, denominator = distillation.distilled_loss(hard, logits, teacher,
                                                             tf.constant([1.0]), hparams)
        assert float(numerator) == pytest.approx((1 - weight) * 6.0 + weight * soft, rel=1e-6)
        assert float(denominator) == 3.0


@pytest.mark.parametrize("override, named", [("distill_temperature=0.0", "distill_temperature=0.0"),
                                             ("distill_weight=1.5", "distill_weight=1.5")])
def test_bad_distillation_hparams_are_refused(override, named):
    with pytest.raises(distillation.TeacherError, match=named.replace(".", r"\.")):
        distillation.check_hparams(create_hparams("transformer_test", override))


# ----------------------------------------------------------------- a real teacher
HPARAMS = "batch_size=256,learning_rate_warmup_steps=10"


def _trainer(data_dir, output_dir, steps, hparams=HPARAMS, **config):
    return Trainer(registry.problem(PROBLEM), "transformer",
                   create_hparams("transformer_test", hparams), data_dir, str(output_dir),
                   TrainerConfig(train_steps=steps, save_checkpoints_steps=steps,
                                 local_eval_frequency=10**6, log_every_steps=10**6,
                                 decode_summaries=0, layer_summaries=False, **config),
                   RuntimeConfig(random_seed=1), run_info={"hparams_set": "transformer_test"})


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill")
    data_dir = str(root / "data")
    registry.problem(PROBLEM).generate_data(data_dir, data_dir + "/tmp", progress=False)
    trainer = _trainer(data_dir, root / "teacher", 40,
                       hparams=HPARAMS + ",hidden_size=32,filter_size=64")
    trainer.train()
    return data_dir, str(root / "teacher"), trainer.model


# No dropout in the student: its training loss is then a function of its weights alone.
NO_DROPOUT = ",".join(f"{name}=0.0" for name in (
    "dropout", "layer_prepostprocess_dropout", "attention_dropout", "relu_dropout"))


def _one_batch(data_dir):
    example = next(iter(registry.problem(PROBLEM).dataset("eval", data_dir, deterministic=True)))
    return {name: example[name][None] for name in ("inputs", "targets")}


def test_a_student_trains_against_the_teacher_and_saves_only_itself(teacher, tmp_path):
    data_dir, teacher_dir, teacher_model = teacher
    before = [v.numpy().copy() for v in teacher_model.weights]
    student = _trainer(data_dir, tmp_path / "student", 6, hparams=HPARAMS + "," + NO_DROPOUT,
                       teacher_dir=teacher_dir)
    assert student.task.teacher.model_name == "transformer"
    assert not student.task.teacher.model.trainable_variables
    student.train()
    assert student.step == 6 and np.isfinite(student.loss_history[-1][1])
    # The teacher (hidden 32) is frozen: its checkpoint's values are what it still holds.
    loaded = student.task.teacher.model.weights
    assert len(loaded) == len(before)
    for value, original in zip(loaded, before, strict=True):
        np.testing.assert_array_equal(value.numpy(), original)
    # The student's checkpoint holds the student alone: the variables of a plain
    # transformer run (the teacher's own run; its dropout layers add seed states), none
    # of the teacher's shapes.
    student_ckpt = tf.train.list_variables(str(tmp_path / "student" / "ckpt-6"))
    teacher_ckpt = tf.train.list_variables(tf.train.latest_checkpoint(teacher_dir))
    assert {n for n, _ in student_ckpt} == {n for n, _ in teacher_ckpt
                                            if "dropout..seed_generator" not in n}
    assert not any(64 in shape or shape[-1:] == [32] for _, shape in student_ckpt)
    # The loss it minimizes is the mix of its hard loss and the KL to the teacher.
    task, model, features = student.task, student.model, _one_batch(data_dir)
    mixed = task.training_losses(model, features)["training"]
    teacher, task.teacher = task.teacher, None
    logits, hard = model(features, training=True)
    task.teacher = teacher
    weights = model.targets_modality.targets_weights(features["targets"])
    expected = distillation.distilled_loss(hard["training"], logits, teacher.logits(features),
                                           weights, task.hparams)
    np.testing.assert_allclose([float(v) for v in mixed], [float(v) for v in expected], rtol=1e-5)
    assert float(mixed[0]) != pytest.approx(float(hard["training"][0]), rel=1e-3)
    run = json.load(open(tmp_path / "student" / "run.json"))
    assert run["teacher_dir"] == teacher_dir


def test_a_teacher_of_another_problem_is_refused(teacher, tmp_path):
    data_dir, teacher_dir, _ = teacher
    other = tmp_path / "other"
    other.mkdir()
    run = json.load(open(f"{teacher_dir}/run.json"))
    (other / "run.json").write_text(json.dumps({**run, "problem": "algorithmic_identity_binary40"}))
    with pytest.raises(distillation.TeacherError) as e:
        _trainer(data_dir, tmp_path / "student", 2, teacher_dir=str(other))
    message = str(e.value)
    assert "'algorithmic_identity_binary40'" in message and f"'{PROBLEM}'" in message
    assert "--teacher_dir" in message
    assert not (tmp_path / "student" / "run.json").exists()  # nothing written


@pytest.mark.parametrize("damage", ["no_run", "no_checkpoint", "other_vocabulary"])
def test_an_unusable_teacher_dir_is_refused(teacher, tmp_path, damage):
    data_dir, teacher_dir, _ = teacher
    bad = tmp_path / "bad"
    bad.mkdir()
    run = json.load(open(f"{teacher_dir}/run.json"))
    hparams = open(f"{teacher_dir}/hparams.json").read()
    if damage != "no_run":
        if damage == "other_vocabulary":
            run["problem_hparams"]["vocab_size"]["targets"] = 99
        (bad / "run.json").write_text(json.dumps(run))
        (bad / "hparams.json").write_text(hparams)
    expected = {"no_run": "holds no run.json", "no_checkpoint": "no checkpoint in",
                "other_vocabulary": "predicts 99 target symbols"}[damage]
    with pytest.raises(distillation.TeacherError, match=expected):
        _trainer(data_dir, tmp_path / "student", 2, teacher_dir=str(bad))


# slow: a strategy starts its own processes (2 logical CPUs ~60 s; 2 workers through
#   t2t-launch on 127.0.0.1 ~2 min)
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker"])
def test_a_student_trains_against_the_teacher_under_a_strategy(teacher, tmp_path, strategy):
    data_dir, teacher_dir, _ = teacher
    trainer = os.path.join(os.path.dirname(sys.executable), "t2t-trainer")
    command = {"mirrored": [trainer, "--cpu_devices=2"],
               "multi_worker": [sys.executable, "-m", "t2t.bin.t2t_launch", "--num_workers=2",
                                "--", "t2t-trainer"]}[strategy]
    out = tmp_path / "student"
    result = subprocess.run(
        [*command, f"--problem={PROBLEM}", "--model=transformer",
         "--hparams_set=transformer_test", f"--hparams={HPARAMS},distill_weight=0.7",
         f"--teacher_dir={teacher_dir}", f"--data_dir={data_dir}", f"--output_dir={out}",
         "--train_steps=6", "--save_checkpoints_steps=6", "--local_eval_frequency=6",
         "--eval_steps=1"], capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert {"mirrored": "MirroredStrategy, 2 replica(s)",
            "multi_worker": "cluster of 2 worker; this is worker 0 (chief)"}[strategy] in output
    assert "Teacher: transformer from" in output
    # The student's checkpoint holds the student alone, whichever strategy trained it.
    # (the teacher is hidden 32 / filter 64, the student transformer_test's 16 / 8; the
    # target-space embedding is [32, 16] in both)
    shapes = [shape for _, shape in tf.train.list_variables(str(out / "ckpt-6"))]
    assert [16, 8] in shapes
    assert not any(64 in shape or shape[-1:] == [32] for shape in shapes)
    assert np.isfinite(json.loads((out / "eval_results.jsonl").read_text().splitlines()[-1])
                       ["loss"])
