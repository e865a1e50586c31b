"""Neural GPU: Tensor2Tensor's `neural_gpu` model (v1.15), the convolutional-GRU network
of Kaiser & Sutskever, "Neural GPUs Learn Algorithms" (arXiv:1511.08228).

Structure, as in Tensor2Tensor's neural_gpu.py and common_layers.conv_gru:

    inputs ids [B, S] -> symbol modality -> state [B, S, H], viewed as [B, S, 1, H]
    for i in 0 .. S-1:                       (a tf.while_loop)
        x = dropout(state)                   (hparams.dropout; training only)
        x = conv_gru(x) num_hidden_layers times
        state = state where input position i is padding, else x   (per example)
    body output = the final state: one output per position -> logits [B, T, V]

    conv_gru(x): kernel kernel_height x kernel_width, hidden_size channels, SAME padding
        r = saturating_sigmoid(conv_r(x))    bias starts at 1
        u = saturating_sigmoid(conv_u(x))    bias starts at 1
        c = tanh(conv_c(r * x))              bias starts at 0
        return u * x + (1 - u) * c
    saturating_sigmoid(z) = clip(1.2 * sigmoid(z) - 0.1, 0, 1)

A padding step (an all-zero input embedding: the symbol modality embeds id 0 to zeros)
leaves the whole state unchanged, so each example gets exactly as many updates as it
has real input tokens, whatever the padding of its batch. Padded positions are still
part of the state: the convolutions compute them (they start at zero) and they feed
back into their neighbours, as in T2T; so an output depends on how much zero state
follows its sequence (two examples padded differently differ slightly), as in T2T.

Differences from Tensor2Tensor:
  - Lengths. The body's state is max(S, T) positions long: the embedded inputs are
    zero-padded to the targets' length T when the targets are longer, and the output is
    cut to the first T positions, so the logits [B, T, V] line up with the targets
    [B, T] and the loss, the eval metrics and the decoder index them directly. T2T's
    state was S long and its loss padded the shorter of logits and labels with zeros
    (`pad_with_zeros`), so a target position past S was scored against zero logits (a
    constant loss of log V); here it gets a real output. The loop runs S steps: steps
    past the inputs would be padding steps, which change nothing.
  - The targets are not embedded (T2T embedded them and did not read them): the body
    needs only their length. The targets' input embedding therefore gets no gradient
    and is made non-trainable (unless it is shared with the softmax).
  - Decoding uses T2TModel's uncached decode_step, which re-runs the model on a targets
    buffer [B, L]; an output reads no targets, so greedy decoding returns the argmax of
    the model's logits for a state max(S, L) long. L (the decode length) is usually
    longer than the training targets, so the state has more trailing zero positions
    than in training; this matters only near the end of the longest inputs of a batch.
  - Packed datasets (inputs_segmentation) are refused: a step updates the whole state.
As in T2T, dropout acts only in training (T2T zeroed the dropout hparams outside it),
and the conv kernels take the hparams initializer (neural_gpu: orthogonal, gain 1; T2T's
variable-scope initializer), each conv its own initializer object.
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

PADDING_THRESHOLD = 1e-5  # T2T: an input embedding whose |.| sums below this is padding


def saturating_sigmoid(x: tf.Tensor) -> tf.Tensor:
    """clip(1.2 * sigmoid(x) - 0.1, 0, 1), elementwise (T2T's saturating_sigmoid)."""
    return tf.clip_by_value(1.2 * tf.sigmoid(x) - 0.1, 0.0, 1.0)


class ConvGRU(keras.layers.Layer):
    """T2T's common_layers.conv_gru: a GRU whose gates are SAME convolutions over the state.

    [B, L, W, C] -> [B, L, W, C] (C == filters). `build` creates all three convolutions,
    so the weights exist before the layer is called inside a loop.
    """

    def __init__(self, filters: int, kernel_size: tuple[int, int], hparams: HParams,
                 name: str | None = None):
        super().__init__(name=name)
        self.filters = filters

        def conv(name: str, bias: float) -> keras.layers.Conv2D:
            return keras.layers.Conv2D(
                filters, kernel_size, padding="same",
                kernel_initializer=common.initializer(hparams),  # a new object per conv
                bias_initializer=keras.initializers.Constant(bias), name=name)

        self.reset_conv = conv("reset", 1.0)
        self.gate_conv = conv("gate", 1.0)
        self.candidate_conv = conv("candidate", 0.0)

    def build(self, input_shape: Any) -> None:
        if input_shape[-1] != self.filters:
            raise ValueError(f"conv_gru needs {self.filters} input channels, got shape {input_shape}.")
        for conv in (self.reset_conv, self.gate_conv, self.candidate_conv):
            conv.build(input_shape)
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """x [B, L, W, C] -> the updated state, same shape."""
        reset = saturating_sigmoid(self.reset_conv(x))
        gate = saturating_sigmoid(self.gate_conv(x))
        candidate = tf.tanh(self.candidate_conv(reset * x))
        return gate * x + (1.0 - gate) * candidate


@registry.register_model
class NeuralGPU(t2t_model.T2TModel):
    """The Neural GPU: a stack of conv-GRUs applied once per input position.

    body: features["inputs"] [B, S, H] (embedded) and the targets' length T ->
    [B, T, H] (or [B, S, H] without targets).
    """

    HPARAMS_VIEW = views.NeuralGPUHParams

    def __init__(
        self,
        hparams: HParams,
        mode: str = t2t_model.TRAIN,
        problem_hparams: ProblemHParams | None = None,
        **kwargs: Any,
    ):
        super().__init__(hparams, mode, problem_hparams, **kwargs)
        hp = self.hparams
        t2t_model.check_modalities("neural_gpu", self.problem_hparams.modality,
                                   inputs=(Modality.SYMBOL,), targets=(Modality.SYMBOL,),
                                   detail=" (one output per position)")
        targets_modality = self.feature_modalities["targets"]
        if not targets_modality.share_softmax:
            # The targets are never embedded: their embedding (kept for checkpoints) takes
            # no gradient, so it is not trained (and the optimizer does not warn about it).
            targets_modality.embedding.trainable = False
        kernel = (hp.kernel_height, hp.kernel_width)
        self.cgru_layers = [
            ConvGRU(hp.hidden_size, kernel, hp, name=f"cgru_{i}") for i in range(hp.num_hidden_layers)
        ]
        for layer in self.cgru_layers:  # weights now, not inside the step loop
            layer.build((None, None, 1, hp.hidden_size))
        self.dropout_rate = float(hp.dropout)

    def bottom(self, features: dict[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        """Embeds the inputs only; the targets ids pass through (the body reads their length)."""
        if "inputs_segmentation" in features:
            raise ValueError("neural_gpu does not support packed datasets (pack_dataset=False).")
        transformed = dict(features)
        transformed["inputs"] = self.feature_modalities["inputs"].bottom(features["inputs"], training=training)
        return transformed

    def body(self, features: dict[str, tf.Tensor], training: bool) -> tf.Tensor:
        """inputs [B, S, H] (+ targets ids [B, T]) -> [B, T, H] ([B, S, H] without targets)."""
        inputs = features["inputs"]
        targets = features.get("targets")
        length = tf.shape(inputs)[1]
        if targets is not None:
            length = tf.maximum(length, tf.shape(targets)[1])
        state = self.neural_gpu_state(inputs, length, training)
        if targets is not None:
            state = state[:, : tf.shape(targets)[1]]
        return state

    def neural_gpu_state(self, inputs: tf.Tensor, length: tf.Tensor | int, training: bool) -> tf.Tensor:
        """The final state [B, L, H] of the loop over inputs [B, S, H], L = max(S, length).

        The state starts as the inputs zero-padded to L positions; step i (of S) updates it
        unless input position i is padding (all-zero embedding) in that example."""
        steps = tf.shape(inputs)[1]
        nonpadding = tf.reduce_sum(tf.abs(tf.cast(inputs, tf.float32)), axis=-1) >= PADDING_THRESHOLD
        pad = tf.maximum(length - steps, 0)
        state = tf.pad(inputs, [[0, 0], [0, pad], [0, 0]])[:, :, None, :]  # [B, L, 1, H]
        rate = self.dropout_rate if training else 0.0

        def step(i: tf.Tensor, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            x = tf.nn.dropout(state, rate) if rate > 0 else state
            for layer in self.cgru_layers:
                x = layer(x)
            update = tf.gather(nonpadding, i, axis=1)[:, None, None, None]  # [B, 1, 1, 1]
            return i + 1, tf.where(update, x, state)

        _, state = tf.while_loop(
            lambda i, _: i < steps, step, (tf.constant(0), state), maximum_iterations=steps
        )
        return state[:, :, 0, :]
