"""Position-wise feed-forward layers."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t.layers import common


class DenseReluDense(common.Layer):
    """Tensor2Tensor's dense_relu_dense: [B, T, H] -> relu(x W1) (dropout) W2 -> [B, T, H]."""

    def __init__(self, filter_size: int, hidden_size: int, dropout: float = 0.0,
                 kernel_initializer: Any = "glorot_uniform", name: str | None = None):
        super().__init__(name=name)
        self.inner = keras.layers.Dense(filter_size, activation="relu",
                                        kernel_initializer=common.clone_initializer(kernel_initializer),
                                        name="conv1")
        self.outer = keras.layers.Dense(hidden_size,
                                        kernel_initializer=common.clone_initializer(kernel_initializer),
                                        name="conv2")
        self.dropout = common.Dropout(dropout)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        return self.outer(self.dropout(self.inner(x), training=training))
