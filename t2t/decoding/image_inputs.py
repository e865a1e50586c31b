"""Image inputs of t2t-decoder: one image path per input line (PNG, JPEG, GIF, BMP, WebP).

A line names a file (absolute, or relative to the working directory). It is decoded
with the ops the exported SavedModel uses (t2t.serving.serving_module), so t2t-decoder
and the export see the same pixels:
  channels  converted to the problem's: a grayscale file given to an RGB model is
            repeated over 3 channels, an RGB file given to a grayscale model becomes its
            luminance (ITU-R 601), an alpha channel is dropped;
  size      resized (bilinear, aspect ratio not kept) to the problem's height and width
            when it differs, with a warning naming both sizes.
A file that cannot be used (missing, not an image, a folder) is named in a warning and
decoded as a white image, so one bad line does not stop a long file of paths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from absl import logging

from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


class ImageInputError(ValueError):
    """An input line does not name a usable image."""


def decode_image(data: bytes, image_shape: Sequence[int]) -> tuple[np.ndarray, tuple[int, int]]:
    """(uint8 [H, W, C], the file's own (height, width)) of encoded image bytes, converted
    to `image_shape`'s channels and resized to its height and width (see the module doc).
    ImageInputError if `data` is not an image TensorFlow decodes."""
    height, width, channels = (int(d) for d in image_shape)
    try:
        image = tf.io.decode_image(data, channels=channels if channels in (1, 3, 4) else 0,
                                   dtype=tf.uint8, expand_animations=False)
    except (tf.errors.InvalidArgumentError, ValueError):
        raise ImageInputError("not a PNG, JPEG, GIF, BMP or WebP image") from None
    size = (int(image.shape[0]), int(image.shape[1]))
    if size != (height, width):
        image = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, [height, width])),
                                         0, 255), tf.uint8)
    return image.numpy(), size


def read_input(line: str, image_shape: Sequence[int], where: str) -> np.ndarray:
    """uint8 [H, W, C] of the image file named by `line` (white, warned, if unusable)."""
    path = line.strip()
    try:
        if not path:
            raise ImageInputError("an empty line names no image file")
        if not os.path.isfile(path):
            raise ImageInputError(f"{path!r} is not a file")
        with open(path, "rb") as f:
            data = f.read()
        try:
            image, size = decode_image(data, image_shape)
        except ImageInputError as e:
            raise ImageInputError(f"{path!r}: {e}") from None
    except ImageInputError as e:
        logging.warning("%s: %s: decoded as a white image.", where, e)
        return np.full([int(d) for d in image_shape], 255, np.uint8)
    if size != tuple(int(d) for d in image_shape[:2]):
        logging.warning("%s: %s is %dx%d pixels: resized to %dx%d (height x width).",
                        where, path, *size, *image_shape[:2])
    return image
