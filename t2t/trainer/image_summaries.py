"""Images sampled at each evaluation of an image-target model, as TensorBoard images.

One sample per class (the first `count` classes) for class -> image problems, `count`
samples for unconditional ones, a sample per dev input (beside the input, upsampled) for
super-resolution; drawn at temperature 1 with a fixed seed, so successive evaluations
show the same draws of a changing model. The grid is the eval writer's "samples" image.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from t2t.data import problem as problem_lib
from t2t.decoding import image_samples
from t2t.features import Modality


class ImageSampleSummary:
    """Calling it writes the "samples" image to the default summary writer."""

    def __init__(self, model: Any, problem: Any, data_dir: str, split: str, count: int):
        self.model, self.count = model, count
        php = model.problem_hparams
        kind = None if model.hparams.get("unconditional", False) else php.modality.get("inputs")
        self.conditions, self.shown, self.num_samples = None, None, count
        if kind == Modality.CLASS_LABEL:
            self.conditions = np.arange(min(count, php.vocab_size["inputs"]), dtype=np.int32)[:, None]
            self.num_samples = 1
        elif kind == Modality.IMAGE:
            dataset = problem.dataset(problem_lib.EVAL, data_dir, deterministic=True, split=split)
            inputs = [e["inputs"] for e in dataset.take(count).as_numpy_iterator()]
            self.conditions, self.num_samples = np.stack(inputs), 1
            height, width, _ = php.image_shape
            self.shown = image_samples.upsample(self.conditions, height, width)

    def __call__(self) -> None:
        images, _ = image_samples.sample_images(self.model, self.conditions, self.num_samples,
                                                temperature=1.0, seed=0)
        if self.conditions is None:  # one row of samples
            images = images.reshape(1, -1, *images.shape[2:])
        else:  # one column: a sample per condition
            images = images.reshape(-1, 1, *images.shape[2:])
        picture = image_samples.grid(images, self.shown)
        tf.summary.image("samples", picture[None], max_outputs=1)
