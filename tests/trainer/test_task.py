"""Task: model, optimizer, inputs, losses and the per-replica steps, without a loop."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.config import InputConfig
from t2t.data import problem as problem_lib
from t2t.hparams.basic import create_hparams
from t2t.models import t2t_model
from t2t.trainer import task as task_lib

PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = registry.problem(PROBLEM)
    problem.generate_data(data_dir, data_dir + "/tmp", progress=False)
    hparams = create_hparams("transformer_test", "batch_size=128,learning_rate_warmup_steps=10")
    return task_lib.Task(problem, "transformer", hparams, data_dir)


def test_count_tokens_counts_examples_and_non_padding_tokens():
    features = {"inputs": tf.constant([[3, 4, 1, 0], [3, 1, 0, 0]]),
                "targets": tf.constant([[4, 1], [1, 0]])}
    np.testing.assert_array_equal(task_lib.count_tokens(features).numpy(), [2.0, 8.0, 12.0])


def test_count_tokens_counts_every_sub_pixel_of_image_targets():
    features = {"inputs": tf.constant([[3], [5]]),  # class labels
                "targets": tf.zeros([2, 4, 4, 3], tf.uint8)}  # black: 0 is a colour
    np.testing.assert_array_equal(task_lib.count_tokens(features).numpy(), [2.0, 98.0, 98.0])


def test_a_train_step_lowers_the_loss_of_a_batch(task):
    keras.utils.set_random_seed(4)
    model = task.build_model()
    assert model.trainable_variables  # weights exist before the first step
    optimizer, learning_rate = task.build_optimizer(model, train_steps=100)
    assert float(learning_rate(0)) >= 0
    batch = next(iter(task.input_fn(problem_lib.TRAIN, InputConfig(seed=1), task.batching())(None)))
    step = tf.function(lambda features: tf.distribute.get_strategy().run(
        task.train_step_fn(model, optimizer), args=(features,)))
    losses = [float(step(batch)[0]) for _ in range(20)]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    loss, grad_norm, counts = step(batch)
    assert float(grad_norm) > 0 and float(counts[0]) == batch["targets"].shape[0]


def test_validation_step_sums_the_problem_metrics(task):
    model = task.build_model()
    names = task.eval_metric_names()
    assert "accuracy_per_sequence" in names
    batch = next(iter(task.input_fn(problem_lib.EVAL, InputConfig(), task.batching())(None)))
    results = task.validation_step(batch, model, names)
    assert set(names) | {"loss"} <= set(results)
    numerator, denominator = (float(v) for v in results["loss"])
    assert denominator > 0 and numerator > 0


@pytest.mark.parametrize("model, shape, expected", [
    ("resnet", [28, 28, 1], "(28x28 px): the sets made for 28-32 px images train stably on "
                            "them: --hparams_set=resnet_cifar_15 or --hparams_set=resnet_cifar_32."),
    ("shake_shake", [32, 32, 3], "--hparams_set=shakeshake_small or --hparams_set=shake_shake_quick."),
    ("xception", [32, 32, 3], "train stably on them: --hparams_set=xception_tiny_cpu."),
    ("basic_fc_relu", [32, 32, 3], ": --model=resnet --hparams_set=resnet_cifar_15 or "),
    ("resnet", [224, 224, 3], None),  # ImageNet-sized: the generic advice only
    ("resnet", None, None),  # not an image problem
])
def test_a_divergence_on_small_images_names_the_sets_made_for_them(model, shape, expected):
    task = task_lib.Task.__new__(task_lib.Task)
    task.model_name, task.hparams_set = model, "resnet_18"
    task.problem_hparams = type("ProblemHParams", (), {"image_shape": shape})()
    hint = task.divergence_hint()
    if expected is None:
        assert hint == ""
    else:
        assert expected in hint and hint.startswith(" Its images are small")


def test_no_small_image_hint_when_such_a_set_diverged():
    task = task_lib.Task.__new__(task_lib.Task)
    task.model_name, task.hparams_set = "resnet", "resnet_cifar_15"
    task.problem_hparams = type("ProblemHParams", (), {"image_shape": [32, 32, 3]})()
    assert task.divergence_hint() == ""


def test_every_declared_small_image_set_is_registered():
    """The sets a model declares (T2TModel.SMALL_IMAGE_HPARAMS_SETS) are registered: the
    hint never names a set a user cannot train with."""
    declared = {name: registry.model(name).SMALL_IMAGE_HPARAMS_SETS for name in registry.list_models()}
    declared = {name: sets for name, sets in declared.items() if sets}
    assert {"resnet", "shake_shake", "xception"} <= set(declared)
    assert declared[t2t_model.SMALL_IMAGE_MODEL]  # the fallback names sets of its own
    registered = set(registry.list_hparams())
    assert {(model, name) for model, sets in declared.items() for name in sets
            if name not in registered} == set()
