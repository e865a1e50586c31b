"""Per-layer summaries of a real two-layer model: norms, gradient norms, update ratios."""

import glob
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t.trainer.actions.layer_summaries import LayerSummaries


class _TwoLayers(keras.Model):
    def __init__(self):
        super().__init__()
        self.encoder = keras.layers.Dense(3, kernel_initializer="ones")
        self.decoder = keras.layers.Dense(2, kernel_initializer="ones")

    def call(self, x):
        return self.decoder(self.encoder(x))


def _scalars(events_dir):
    """{tag: {step: value}} of the scalar summaries in a TensorBoard directory."""
    found = {}
    for path in glob.glob(os.path.join(events_dir, "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
    return found


def _model():
    model = _TwoLayers()
    model(tf.ones([1, 4]))
    return model


def test_norms_and_the_measured_update_of_a_logged_step(tmp_path):
    model = _model()
    action = LayerSummaries(model, num_replicas=2, is_chief=True, parameter_server=False)
    assert action.gradient_groups == (["encoder", "decoder"], [0, 0, 1, 1])
    writer = tf.summary.create_file_writer(str(tmp_path))
    action.before_step(4, logged=False)
    assert action.snapshot is None  # a step that is not logged is not measured
    action.before_step(4, logged=True)
    model.encoder.kernel.assign_add(tf.fill([4, 3], 0.5))  # the step's update: encoder only
    with writer.as_default(step=5):
        action.after_log(5, [8.0, 2.0])  # squared gradient norms, summed over 2 replicas
    writer.flush()
    scalars = {tag: values[5] for tag, values in _scalars(str(tmp_path)).items()}
    encoder = math.sqrt(12 * 1.5 ** 2)  # kernel 4x3 of 1.5, bias 0
    decoder = math.sqrt(6)
    assert scalars["layers/parameter_norm/encoder"] == pytest.approx(encoder)
    assert scalars["layers/parameter_norm/decoder"] == pytest.approx(decoder)
    assert scalars["parameter_global_norm"] == pytest.approx(math.hypot(encoder, decoder))
    assert scalars["layers/gradient_norm/encoder"] == pytest.approx(2.0)  # sqrt(8 / 2)
    assert scalars["layers/gradient_norm/decoder"] == pytest.approx(1.0)
    assert scalars["layers/update_ratio/encoder"] == pytest.approx(math.sqrt(12 * 0.25) / encoder)
    assert scalars["layers/update_ratio/decoder"] == 0.0
    assert scalars["update_ratio"] == pytest.approx(
        math.sqrt(12 * 0.25) / math.hypot(encoder, decoder))
    assert action.snapshot is None  # used once


def test_only_the_chief_writes_and_parameter_servers_measure_no_update(tmp_path):
    model = _model()
    worker = LayerSummaries(model, num_replicas=1, is_chief=False, parameter_server=False)
    worker.before_step(0, logged=True)
    ps_chief = LayerSummaries(model, num_replicas=1, is_chief=True, parameter_server=True)
    ps_chief.before_step(0, logged=True)
    assert worker.snapshot is None and ps_chief.snapshot is None
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=1):
        worker.after_log(1, [1.0, 1.0])
    writer.flush()
    assert _scalars(str(tmp_path)) == {}
    with writer.as_default(step=1):
        ps_chief.after_log(1, [1.0, 1.0])
    writer.flush()
    tags = set(_scalars(str(tmp_path)))
    assert "layers/gradient_norm/decoder" in tags and not any("update_ratio" in t for t in tags)
    assert np.isfinite(_scalars(str(tmp_path))["parameter_global_norm"][1])
