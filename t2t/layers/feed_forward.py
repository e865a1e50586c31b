"""Position-wise feed-forward layers."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from t2t.layers import common

# hparams.ffn_activation -> the function (Hugging Face's names in comments).
ACTIVATIONS = {
    "relu": tf.nn.relu,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),  # "gelu" (erf)
    "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),  # "gelu_new" (T5 v1.1)
    "swish": tf.nn.silu,  # "swish" / "silu" (Marian, OPUS-MT)
}
FFN_LAYERS = ("dense_relu_dense", "dense_gated_dense")  # hparams.ffn_layer


def activation(name: str):
    """The activation hparams.ffn_activation names; ValueError listing them otherwise."""
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown ffn_activation {name!r}: use one of {sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]


def _dense(units: int, use_bias: bool, initializer: Any, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(units, use_bias=use_bias,
                              kernel_initializer=common.clone_initializer(initializer), name=name)


class DenseReluDense(common.Layer):
    """Tensor2Tensor's dense_relu_dense: [B, T, H] -> act(x W1 + b1) (dropout) W2 + b2 ->
    [B, T, H]; `activation` relu by default (ACTIVATIONS), biases unless `use_bias` is
    False (T5)."""

    def __init__(self, filter_size: int, hidden_size: int, dropout: float = 0.0,
                 kernel_initializer: Any = "glorot_uniform", name: str | None = None,
                 activation_name: str = "relu", use_bias: bool = True):
        super().__init__(name=name)
        self.activation = activation(activation_name)
        self.inner = _dense(filter_size, use_bias, kernel_initializer, "conv1")
        self.outer = _dense(hidden_size, use_bias, kernel_initializer, "conv2")
        self.dropout = common.Dropout(dropout)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        return self.outer(self.dropout(self.activation(self.inner(x)), training=training))


class DenseGatedDense(DenseReluDense):
    """A gated feed-forward layer (Shazeer, 2020; T5 v1.1's "gated-gelu"): [B, T, H] ->
    (act(x W1) * x W1') (dropout) W2 -> [B, T, H]; W1' is "conv1_linear"."""

    def __init__(self, filter_size: int, hidden_size: int, dropout: float = 0.0,
                 kernel_initializer: Any = "glorot_uniform", name: str | None = None,
                 activation_name: str = "gelu_tanh", use_bias: bool = False):
        super().__init__(filter_size, hidden_size, dropout, kernel_initializer, name,
                         activation_name, use_bias)
        self.linear = _dense(filter_size, use_bias, kernel_initializer, "conv1_linear")

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        hidden = self.activation(self.inner(x)) * self.linear(x)
        return self.outer(self.dropout(hidden, training=training))
