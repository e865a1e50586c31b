"""Shared helpers of the image-model tests (basic, resnet, shake_shake): fake image
problems, batches, a learnable striped-image task and a plain training loop."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from t2t.data.problem import ProblemHParams
from t2t.hparams.hparams import HParams

NUM_CLASSES = 10


def image_problem(shape: list[int], num_classes: int = NUM_CLASSES) -> ProblemHParams:
    return ProblemHParams(
        modality={"inputs": "image", "targets": "class_label"},
        vocab_size={"inputs": 256, "targets": num_classes},
        batch_size_means_tokens=False,
        image_shape=shape,
    )


def random_batch(batch: int, shape: list[int], seed: int = 0) -> dict[str, tf.Tensor]:
    rng = np.random.default_rng(seed)
    return {
        "inputs": tf.constant(rng.integers(0, 256, [batch, *shape], dtype=np.uint8)),
        "targets": tf.constant(rng.integers(0, NUM_CLASSES, [batch, 1], dtype=np.int32)),
    }


def stripes(n: int, size: int, classes: int = 4, seed: int = 0) -> dict[str, tf.Tensor]:
    """n uint8 images [size, size, 1]: stripes whose orientation is the class, noisy."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:size, 0:size]
    directions = [rows, cols, rows + cols, rows - cols][:classes]
    labels = np.arange(n) % classes
    images = np.empty([n, size, size, 1], np.float32)
    for i, label in enumerate(labels):
        phase = rng.integers(0, 4)
        images[i, :, :, 0] = ((directions[label] + phase) % 4 < 2).astype(np.float32)
    images = 0.75 * images + 0.25 * rng.random(images.shape)
    return {
        "inputs": tf.constant((images * 255).astype(np.uint8)),
        "targets": tf.constant(labels[:, None].astype(np.int32)),
    }


def train(model, features: dict[str, tf.Tensor], steps: int, learning_rate: float) -> float:
    """Plain GradientTape + Adam on one fixed batch; returns eval-mode train accuracy."""
    model(features, training=False)
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            _, losses = model(features, training=True)
            numerator, denominator = losses["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        # The targets' class-label embedding gets no gradient (the body ignores targets).
        optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, model.trainable_variables, strict=True) if g is not None]
        )
        return loss

    for _ in range(steps):
        step(features)
    logits, _ = model(features, training=False)
    predictions = np.argmax(logits[:, 0, :].numpy(), axis=-1)
    return float(np.mean(predictions == features["targets"].numpy()[:, 0]))


def with_overrides(hp: HParams, **overrides) -> HParams:
    """`hp` with each keyword set through `set_hparam`."""
    for key, value in overrides.items():
        hp.set_hparam(key, value)
    return hp


def tiny_image_classifier_run(tmp_path) -> tuple:
    """An 8x8 RGB three-class problem (4 random images per split, generated into
    tmp_path/data) and an untrained basic_fc_relu saved as checkpoint 1 in tmp_path/run.
    Returns (problem, data_dir, run_dir, hparams, model)."""
    from t2t.data import problem as problem_lib
    from t2t.data.bases import image_problems
    from t2t.hparams.basic import create_hparams
    from t2t.models import checkpoints, t2t_model
    from t2t.models.t2t_model import example_features

    class TinyImages(image_problems.Image2ClassProblem):
        image_size, num_channels, train_shards, dev_shards = 8, 3, 1, 1
        class_labels = ["red", "green", "blue"]

        def generate_images(self, data_dir, tmp_dir, split, *, mirror=None):
            rng = np.random.default_rng(0 if split == "train" else 1)
            for i in range(4):
                yield rng.integers(0, 255, [8, 8, 3], dtype=np.uint8), i % 3

    problem = TinyImages()
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    keras.utils.set_random_seed(0)
    php = problem.hparams(data_dir)
    hparams = create_hparams("basic_fc_small")
    model = t2t_model.create_model("basic_fc_relu", hparams, problem_lib.TRAIN, php)
    model.build_for(example_features(php))
    run = str(tmp_path / "run")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=checkpoints.model_trackable(model)),
                               run, 1).save(1)
    return problem, data_dir, run, hparams, model
