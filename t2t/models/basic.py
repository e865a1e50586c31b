"""Basic models for testing simple tasks (Tensor2Tensor's models/basic.py).

`basic_fc_relu` (class BasicFcRelu): flatten the inputs, then num_hidden_layers x
(Dense(hidden_size) -> dropout(hparams.dropout) -> ReLU). Train it with the
`basic_fc_small` hparams set (t2t.hparams.basic_models). Each dense layer gets its own
initializer object (a Keras 3 initializer reused across layers repeats its values).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t import registry
from t2t.features import Modality, ProblemHParams
from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import common
from t2t.models import t2t_model


def flatten_inputs(x: tf.Tensor) -> tf.Tensor:
    """The per-example vector BasicFcRelu's dense layers read: [B, D].

    images  [B, H, W, C] -> [B, H * W * C] (H, W, C must be known statically);
    symbols [B, T, E]    -> [B, E]: the mean over the non-padding positions. T varies
        between batches, so flattening T * E (as T2T did for its fixed-size 4-D inputs)
        would give the dense layers no fixed input size; the symbol modality embeds
        padding (id 0) to an all-zero vector, which is how padding is recognised here;
    vectors [B, D]       -> unchanged.
    """
    rank = len(x.shape)
    if rank == 2:
        return x
    if rank == 3:
        nonpadding = tf.cast(tf.reduce_any(tf.not_equal(x, 0), axis=-1), x.dtype)[..., None]
        count = tf.maximum(tf.reduce_sum(nonpadding, axis=1), tf.cast(1.0, x.dtype))
        return tf.reduce_sum(x * nonpadding, axis=1) / count
    if rank == 4:
        height, width, channels = x.shape[1:]
        if None in (height, width, channels):
            raise ValueError(
                f"basic_fc_relu flattens images and needs their size known, got shape {x.shape}."
            )
        return tf.reshape(x, [-1, height * width * channels])
    raise ValueError(f"basic_fc_relu takes inputs of rank 2, 3 or 4, got shape {x.shape}.")


@registry.register_model
class BasicFcRelu(t2t_model.T2TModel):
    """Basic fully-connected + ReLU model.

    body: features["inputs"] (see `flatten_inputs`) -> [B, 1, 1, hidden_size].
    """

    HPARAMS_VIEW = views.BasicFcReluHParams

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        if "inputs" not in self.problem_hparams.modality:
            raise ValueError("basic_fc_relu needs a problem with inputs.")
        targets = self.problem_hparams.modality.get("targets")
        if targets not in (Modality.CLASS_LABEL, Modality.REAL):
            raise ValueError(
                f"basic_fc_relu predicts one label (or vector) per example, but the problem's "
                f"targets are {targets!r} sequences: use transformer or lstm_seq2seq."
            )
        self.dense_layers = [
            keras.layers.Dense(
                hp.hidden_size, kernel_initializer=common.initializer(hp), name=f"layer_{i}"
            )
            for i in range(hp.num_hidden_layers)
        ]
        self.dropout = common.Dropout(hp.dropout)

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """features["inputs"] [B, H, W, C], [B, T, E] or [B, D] -> [B, 1, 1, hidden_size]."""
        x = flatten_inputs(features["inputs"])
        for dense in self.dense_layers:
            x = tf.nn.relu(self.dropout(dense(x), training=training))
        return x[:, None, None, :]  # 4-D, as T2T's body returned
