"""Sampling images from an image-target model (imagetransformer), as PNG files.

What a sample is conditioned on follows the problem's inputs:
  class label (`image_*_rev`)  one row per class (or per class named in a file), N samples;
  none (`image_*_gen`)         one row of N samples;
  an image (`img2img_*`)       one row per given low-resolution image (dev examples, or
                               image files), its first column the input upsampled, then
                               N samples.
`sample_images` draws them (cached sampling over sub-pixels, t2t.decoding.infer);
`write_samples` writes one PNG per sample and a grid of all of them (rows as above).
"""

from __future__ import annotations

import dataclasses
import os
import re
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from t2t.data.bases.image_problems import encode_png
from t2t.decoding import infer as infer_lib
from t2t.features import Modality
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")


@dataclasses.dataclass
class Samples:
    """images uint8 [R, N, H, W, C]; row_names [R]; scores float32 [R, N] (log-prob,
    nats); shown uint8 [R, H, W, C] or None: each row's conditioning image, upsampled."""

    images: np.ndarray
    row_names: list[str]
    scores: np.ndarray
    shown: np.ndarray | None = None


def conditions_kind(problem_hparams: Any) -> str | None:
    """What samples are conditioned on: Modality.CLASS_LABEL, Modality.IMAGE or None."""
    return problem_hparams.modality.get("inputs")


# model -> {settings: traced draw}: a trainer samples at every evaluation with the same
# settings, and a new tf.function per call would retrace the whole sampling loop.
_DRAWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _draw_function(model: Any, num_samples: int, temperature: float, top_k: int, top_p: float,
                   seed: int | None) -> Any:
    """features -> infer's outputs for whole images, traced once per model and settings."""
    key = (num_samples, float(temperature), int(top_k), float(top_p), seed)
    draws = _DRAWS.setdefault(model, {})
    if key not in draws:
        height, width, channels = model.problem_hparams.image_shape

        @tf.function(reduce_retracing=True)
        def draw(features):
            return infer_lib.infer(model, features, height * width * channels,
                                   temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                   num_samples=num_samples)

        draws[key] = draw
    return draws[key]


def sample_images(model: Any, conditions: np.ndarray | None, num_samples: int,
                  temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                  seed: int | None = None, batch_size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 [R, N, H, W, C], log-probabilities [R, N]) of `num_samples` images per
    condition row (class ids int32 [R, 1], or images uint8 [R, h, w, C]; None: one
    unconditional row), about `batch_size` images per call of the model."""
    height, width, channels = model.problem_hparams.image_shape
    draw = _draw_function(model, num_samples, temperature, top_k, top_p, seed)
    chunks = [None] if conditions is None else [
        conditions[i:i + max(1, batch_size // num_samples)]
        for i in range(0, len(conditions), max(1, batch_size // num_samples))]
    images, scores = [], []
    for chunk in chunks:
        out = draw({} if chunk is None else {"inputs": tf.constant(chunk)})
        ids, chunk_scores = out["outputs"].numpy(), out["scores"].numpy()
        ids = ids.reshape(-1, num_samples, height, width, channels)
        images.append(ids)
        scores.append(chunk_scores.reshape(-1, num_samples))
    return (np.clip(np.concatenate(images), 0, 255).astype(np.uint8),
            np.concatenate(scores).astype(np.float32))


def grid(images: np.ndarray, shown: np.ndarray | None = None, pad: int = 2,
         pad_value: int = 128) -> np.ndarray:
    """uint8 [R, N, H, W, C] (and a first column `shown` [R, H, W, C]) -> one uint8 image
    of R rows and N (+1) columns with `pad` pixels between them."""
    if shown is not None:
        images = np.concatenate([shown[:, None], images], axis=1)
    rows, cols, height, width, channels = images.shape
    out = np.full([rows * (height + pad) + pad, cols * (width + pad) + pad, channels],
                  pad_value, np.uint8)
    for r in range(rows):
        for c in range(cols):
            top, left = pad + r * (height + pad), pad + c * (width + pad)
            out[top:top + height, left:left + width] = images[r, c]
    return out


def upsample(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 [R, h, w, C] -> [R, height, width, C] by repeating pixels (nearest)."""
    return tf.image.resize(images, [height, width], method="nearest").numpy().astype(np.uint8)


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "row"


def write_samples(samples: Samples, grid_path: str) -> list[str]:
    """Writes the grid at `grid_path`, each sample as GRID_STEM/RRR_ROWNAME_K.png and
    their paths, one per line, in GRID_STEM/paths.txt (e.g. for a classifier's
    t2t-decoder --decode_from_file); returns the paths of the samples."""
    folder = os.path.splitext(grid_path)[0]
    os.makedirs(folder, exist_ok=True)
    with open(grid_path, "wb") as f:
        f.write(encode_png(grid(samples.images, samples.shown)))
    paths = []
    for r, name in enumerate(samples.row_names):
        for k in range(samples.images.shape[1]):
            path = os.path.join(folder, f"{r:03d}_{_file_part(name)}_{k}.png")
            with open(path, "wb") as f:
                f.write(encode_png(samples.images[r, k]))
            paths.append(path)
    with open(os.path.join(folder, "paths.txt"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in paths))
    return paths


def class_rows(class_names: Sequence[str], wanted: Sequence[str] | None = None
               ) -> tuple[np.ndarray, list[str]]:
    """(class ids int32 [R, 1], names): every class, or those `wanted` (names or ids)."""
    if wanted is None:
        return np.arange(len(class_names), dtype=np.int32)[:, None], list(class_names)
    ids = []
    for item in wanted:
        item = item.strip()
        if item in class_names:
            ids.append(list(class_names).index(item))
        elif item.isdigit() and int(item) < len(class_names):
            ids.append(int(item))
        else:
            raise ValueError(f"{item!r} is not a class: use one of {list(class_names)} or an "
                             f"id in [0, {len(class_names)}).")
    return np.asarray(ids, np.int32)[:, None], [class_names[i] for i in ids]


def is_image_target(problem_hparams: Any) -> bool:
    """Whether the problem's targets are images (the model samples pictures)."""
    return problem_hparams.modality.get("targets") == Modality.IMAGE
