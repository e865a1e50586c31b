"""The image-sample action with a real (tiny, untrained) class -> image model."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.models import t2t_model
from t2t.trainer.actions.base import EvalOutcome
from t2t.trainer.actions.image_samples import ImageSamples

SHAPE = [2, 3, 1]


def _class_to_image_model():
    hp = registry.hparams("imagetransformer_tiny_cpu")()
    hp.hidden_size, hp.filter_size, hp.num_heads, hp.num_hidden_layers = 8, 8, 2, 1
    hp.block_length, hp.query_shape, hp.memory_flange = 6, [2, 6], [2, 3]
    problem = ProblemHParams(modality={"inputs": Modality.CLASS_LABEL, "targets": Modality.IMAGE},
                             vocab_size={"inputs": 3, "targets": 256}, image_shape=SHAPE,
                             batch_size_means_tokens=False)
    return registry.model("imagetransformer")(hp, t2t_model.PREDICT, problem)


def _images(events_dir):
    """{tag: (height, width) of the last image} written under `events_dir`."""
    found = {}
    for path in tf.io.gfile.glob(f"{events_dir}/events.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                encoded = tf.make_ndarray(value.tensor)[2]  # [width, height, png]
                found[value.tag] = tuple(tf.io.decode_png(encoded).shape[:2])
    return found


@pytest.mark.slow  # ~4 CPU-s of sampling; through t2t-trainer: test_image_generation_binaries
def test_writes_one_sample_per_class_as_a_grid(tmp_path):
    model = _class_to_image_model()
    action = ImageSamples(problem=None, data_dir=str(tmp_path), split="dev", count=2)
    assert action.decodes
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=10):
        action.after_eval(EvalOutcome(10, {"bits_per_dim": 8.0}, None, model))
    writer.flush()
    # 2 classes in rows, 1 sample each; 2 pixels between and around the 2x3 images.
    assert _images(str(tmp_path)) == {"samples": (2 * (2 + 2) + 2, 3 + 2 + 2)}
    np.testing.assert_array_equal(action.summary.conditions, [[0], [1]])


def test_a_failure_is_logged_not_raised(tmp_path, caplog):
    action = ImageSamples(problem=None, data_dir=str(tmp_path), split="dev", count=2)
    with caplog.at_level(logging.WARNING):
        action.after_eval(EvalOutcome(10, {}, None, inference_model=None))
    assert "Could not decode examples for TensorBoard" in caplog.text
