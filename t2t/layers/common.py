"""Small building blocks: initializers, normalization, residual pre/post-processing."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


class Layer(keras.layers.Layer):
    """A Keras layer whose sub-layers build themselves on the first call.

    Keras 3 tries to trace `call` to build a layer that has no `build` of its own and
    warns when it cannot (keyword-only call arguments); the sub-layers here need no help.
    """

    def build(self, *args: Any, **kwargs: Any) -> None:
        self.built = True


def initializer(hparams: Any) -> keras.initializers.Initializer:
    """The weight initializer named by hparams.initializer, scaled by initializer_gain.

    "uniform_unit_scaling" is Tensor2Tensor's default for most models: variance scaling
    with fan-in and a uniform distribution (as tf.uniform_unit_scaling_initializer).
    """
    name, gain = hparams.initializer, hparams.initializer_gain
    if name == "uniform_unit_scaling":
        return keras.initializers.VarianceScaling(gain, mode="fan_avg", distribution="uniform")
    if name == "normal_unit_scaling":
        return keras.initializers.VarianceScaling(gain, mode="fan_avg", distribution="truncated_normal")
    if name == "orthogonal":
        return keras.initializers.Orthogonal(gain)
    if name == "uniform":
        return keras.initializers.RandomUniform(-gain * 0.1, gain * 0.1)
    if name == "xavier":
        return keras.initializers.GlorotUniform()
    raise ValueError(
        f"Unknown initializer {name!r}: use uniform_unit_scaling, normal_unit_scaling, "
        f"orthogonal, uniform or xavier."
    )


def clone_initializer(init: Any) -> Any:
    """A fresh copy of a Keras initializer (or its name).

    An unseeded Keras 3 initializer object returns the same values on every call, so
    one object shared by several same-shaped layers would start them identical.
    """
    if isinstance(init, keras.initializers.Initializer):
        return init.__class__.from_config(init.get_config())
    return init


def make_norm(hparams: Any, name: str) -> keras.layers.Layer:
    """The normalization layer hparams.norm_type names ("layer", "batch", "none")."""
    norm_type = hparams.norm_type
    if norm_type == "layer":
        return keras.layers.LayerNormalization(epsilon=hparams.norm_epsilon, name=name)
    if norm_type == "batch":
        return keras.layers.BatchNormalization(epsilon=hparams.norm_epsilon, name=name)
    if norm_type == "none":
        return keras.layers.Identity(name=name)
    raise ValueError(f"Unknown norm_type {norm_type!r}: use layer, batch or none.")


class PrePostProcess(Layer):
    """Tensor2Tensor's layer_preprocess / layer_postprocess around a sublayer.

    A sequence string applies, in order: "n" normalize, "d" dropout, "a" add the
    residual. Pre-norm Transformers use preprocess "n" and postprocess "da".
    """

    def __init__(self, sequence: str, hparams: Any, dropout: float, name: str | None = None):
        super().__init__(name=name)
        if sequence == "none":  # Tensor2Tensor's spelling of "do nothing" (basic_params1)
            sequence = ""
        for char in sequence:
            if char not in "nda":
                raise ValueError(f"Bad pre/post-process sequence {sequence!r}: use letters n, d, a.")
        self.sequence = sequence
        self.norm = make_norm(hparams, "norm") if "n" in sequence else None
        self.dropout = keras.layers.Dropout(dropout) if "d" in sequence else None

    def call(self, x: tf.Tensor, residual: tf.Tensor | None = None, training: bool | None = None) -> tf.Tensor:
        for char in self.sequence:
            if char == "n":
                x = self.norm(x)
            elif char == "d":
                x = self.dropout(x, training=training)
            elif char == "a":
                x = x + residual if residual is not None else x
        return x

