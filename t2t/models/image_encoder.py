"""Image encoders: a uint8-derived image [B, H, W, C] -> a sequence [B, S, hidden] that a
Transformer's encoder (and its decoder's attention) reads, for image -> text problems.

hparams.image_encoder chooses the network (add_image_encoder_hparams in
t2t.hparams.image_text declares the hparams with their defaults):
  "conv"    image_encoder_layers stages of image_encoder_convs 3x3 convolutions with
            batch norm and ReLU, the last of stride 2, channels image_encoder_channels
            doubling per stage (only the first
            image_encoder_width_layers halve the width, -1: all; lines of text keep
            more columns than rows): small, for rendered text and CPU runs;
  "resnet"  the ResNet of t2t.models.resnet (residual blocks image_encoder_resnet_blocks
            per stage, a stride-2 7x7 stem, stride 2 from the second stage): for photos;
  "xception" the Xception of t2t.models.xception at width F = image_encoder_channels:
            its full entry flow (/16), image_encoder_xception_blocks middle-flow blocks
            and its exit flow (/32, 2.5 F channels): 224 px -> 7 x 7 positions.
hparams.image_encoder_flatten turns the feature map [B, h, w, F] into positions:
  "raster"  one position per cell, row by row: S = h * w (photos, captioning);
  "columns" one position per column, the column's cells concatenated: S = w, depth h * F
            (lines of text, read left to right).
A dense layer then projects each position to hidden_size.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t.hparams import views
from t2t.hparams.hparams import HParams
from t2t.layers import common
from t2t.models import resnet, xception

IMAGE_ENCODERS = ("conv", "resnet", "xception")
FLATTEN_ORDERS = ("raster", "columns")


def check_image_encoder_hparams(hp: HParams) -> None:
    """Raises ValueError naming a bad image-encoder hparam and its choices."""
    if "image_encoder" not in hp:
        raise ValueError(
            "image inputs with a Transformer need the image-encoder hparams: use an image-to-"
            "text set (transformer_image_text_tiny, transformer_image_captioning, "
            "transformer_image_captioning_tiny) or add them with "
            "t2t.hparams.image_text.add_image_encoder_hparams(hparams).")
    if hp.image_encoder not in IMAGE_ENCODERS:
        raise ValueError(f"image_encoder={hp.image_encoder!r}: use one of {IMAGE_ENCODERS}.")
    if hp.image_encoder_flatten not in FLATTEN_ORDERS:
        raise ValueError(f"image_encoder_flatten={hp.image_encoder_flatten!r}: use one of "
                         f"{FLATTEN_ORDERS}.")
    if hp.image_encoder == "conv" and min(hp.image_encoder_layers, hp.image_encoder_convs) < 1:
        raise ValueError(f"image_encoder_layers={hp.image_encoder_layers} and "
                         f"image_encoder_convs={hp.image_encoder_convs}: use 1 or more.")
    if hp.image_encoder == "resnet" and (
            len(hp.image_encoder_resnet_blocks) < 1 or min(hp.image_encoder_resnet_blocks) < 1):
        raise ValueError(f"image_encoder_resnet_blocks={hp.image_encoder_resnet_blocks}: use "
                         "one count >= 1 per stage, e.g. [2, 2, 2, 2].")
    if hp.image_encoder_xception_blocks < 0:
        raise ValueError(f"image_encoder_xception_blocks={hp.image_encoder_xception_blocks}: "
                         "use 0 or more.")


class _ConvStage(common.Layer):
    """`convs` 3x3 convolutions, each with batch norm and ReLU; the last has stride 2 (or
    (2, 1): height only): [B, H, W, C] -> [B, H/2, W/2 (or W), F]."""

    def __init__(self, filters: int, hparams: views.InitializerHParams, name: str, halve_width: bool = True,
                 convs: int = 2):
        super().__init__(name=name)
        self.convs = [keras.layers.Conv2D(
            filters, 3, strides=(2, 2 if halve_width else 1) if i == convs - 1 else 1,
            padding="same", use_bias=False, kernel_initializer=common.initializer(hparams),
            name=f"conv2d_{i}") for i in range(convs)]
        self.norms = [common.BatchNormalization(name=f"batch_norm_{i}")
                      for i in range(convs)]

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = tf.nn.relu(norm(conv(x), training=training))
        return x


class ImageEncoder(common.Layer):
    """Image [B, H, W, C] (floats in [0, 1]) -> positions [B, S, hidden_size]."""

    def __init__(self, hparams: views.ImageEncoderHParams, name: str = "image_encoder"):
        super().__init__(name=name)
        check_image_encoder_hparams(hparams)
        self.kind, self.flatten = hparams.image_encoder, hparams.image_encoder_flatten
        if self.kind == "conv":
            channels = hparams.image_encoder_channels
            width_layers = hparams.image_encoder_width_layers
            self.stages = [_ConvStage(channels * 2**i, hparams, f"stage_{i}",
                                      halve_width=width_layers < 0 or i < width_layers,
                                      convs=hparams.image_encoder_convs)
                           for i in range(hparams.image_encoder_layers)]
        elif self.kind == "xception":
            # Xception's layers read their width, kernel and dropout from hparams: give
            # them the encoder's (3x3 kernels as xception_base), not the Transformer's.
            width = hparams.image_encoder_channels
            xhp = hparams.copy().override_from_dict(
                {"hidden_size": width, "kernel_height": 3, "kernel_width": 3})
            self.stem = xception.EntryFlow(xhp, name="xception_entry")
            self.stages = [xception.ResidualBlock(xhp, name=f"layer_{i}")
                           for i in range(hparams.image_encoder_xception_blocks)]
            self.exit_flow = xception.ExitFlow(width, xhp, name="xception_exit")
        else:
            filters = hparams.image_encoder_channels
            self.stem = resnet.FixedPaddingConv2D(filters, 7, 2, hparams, name="initial_conv")
            self.stem_norm = resnet.BatchNormRelu(name="initial_bn")
            self.stages = [
                resnet.BlockLayer("residual", filters=filters * 2**i, blocks=blocks,
                                  strides=1 if i == 0 else 2, bottleneck_ratio=4,
                                  hparams=hparams, name=f"block_layer{i + 1}")
                for i, blocks in enumerate(hparams.image_encoder_resnet_blocks)]
        self.project = keras.layers.Dense(hparams.hidden_size, name="project",
                                          kernel_initializer=common.initializer(hparams))

    def feature_map(self, images: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """[B, H, W, C] -> [B, h, w, F]."""
        x = images
        if self.kind == "conv":
            for stage in self.stages:
                x = stage(x, training=training)
            return x
        if self.kind == "xception":
            x = self.stem(x)
            for block in self.stages:
                x = block(x, training=training)
            return self.exit_flow(x)
        x = self.stem_norm(self.stem(x), training=training)
        for stage in self.stages:
            x = stage(x, training=training)
        return x

    def call(self, images: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        if images.shape.rank != 4:
            raise ValueError(f"image_encoder needs images [B, H, W, C], got shape {images.shape}.")
        x = self.feature_map(images, training=training)
        _, h, w, f = x.shape
        if self.flatten == "columns":  # [B, h, w, F] -> [B, w, h * F]
            x = tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [-1, w, h * f])
        else:
            x = tf.reshape(x, [-1, h * w, f])
        return self.project(x)
