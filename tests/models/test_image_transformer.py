"""Tests of t2t.models.image_transformer: cached sampling equals the teacher-forced model
for every attention type and conditioning, a tiny class -> image model learns its images,
unconditional sampling, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer
from t2t.features import Modality, ProblemHParams
from t2t.models import t2t_model
from tests.helpers.model_checks import losses_on_a_fixed_batch

SHAPE = [6, 4, 3]


def _hparams(**overrides):
    hp = registry.hparams("imagetransformer_tiny_cpu")()
    hp.hidden_size, hp.filter_size, hp.num_heads, hp.num_hidden_layers = 32, 32, 2, 2
    hp.block_length, hp.query_shape, hp.memory_flange = 10, [2, 6], [2, 3]
    for name, value in overrides.items():
        setattr(hp, name, value)
    return hp


def _problem(inputs: str | None, shape=SHAPE, classes: int = 3) -> ProblemHParams:
    modality, vocab = {"targets": Modality.IMAGE}, {"targets": 256}
    if inputs is not None:
        modality["inputs"] = inputs
        vocab["inputs"] = classes if inputs == Modality.CLASS_LABEL else 256
    return ProblemHParams(modality=modality, vocab_size=vocab, image_shape=shape,
                          batch_size_means_tokens=False)


@pytest.mark.parametrize("attention, inputs", [
    ("local_1d", Modality.CLASS_LABEL), ("local_2d", None), ("local_2d", Modality.IMAGE)])
def test_cached_sampling_steps_equal_the_teacher_forced_model(attention, inputs):
    model = registry.model("imagetransformer")(_hparams(dec_attention_type=attention),
                                               t2t_model.PREDICT, _problem(inputs))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, [2, *SHAPE]).astype(np.uint8)
    features = {}
    if inputs == Modality.CLASS_LABEL:
        features["inputs"] = np.array([[0], [2]], np.int32)
    elif inputs == Modality.IMAGE:
        features["inputs"] = rng.integers(0, 256, [2, 3, 2, 3]).astype(np.uint8)
    logits, _ = model({**features, "targets": images}, training=False)
    state = model.decode_init_cached(features or {"targets": tf.zeros([2, 0], tf.int32)}, 72)
    flat, steps = images.reshape(2, -1).astype(np.int32), []
    for i in range(72):
        step_logits, state = model.decode_step_cached(
            tf.constant(flat[:, i - 1] if i else [0, 0]), tf.constant(i), state)
        steps.append(step_logits.numpy())
    np.testing.assert_allclose(np.stack(steps, 1), logits.numpy(), atol=1e-4)


def test_a_class_to_image_model_learns_each_class_image():
    shape = [4, 4, 1]
    targets = np.stack([np.full(shape, 40 * c + 3, np.uint8) for c in range(3)])
    targets[:, 1, ::2] = 200  # some structure inside each image
    hp = _hparams(block_length=8, learning_rate_warmup_steps=1)
    model = registry.model("imagetransformer")(hp, t2t_model.TRAIN, _problem(Modality.CLASS_LABEL, shape))
    features = {"inputs": np.arange(3, dtype=np.int32)[:, None], "targets": targets}
    loss = losses_on_a_fixed_batch(model, features, 80, learning_rate=0.01)[-1]
    assert float(loss) < 0.05  # nats per sub-pixel
    greedy = infer.infer(model, {"inputs": features["inputs"]}, 16)["outputs"].numpy()
    np.testing.assert_array_equal(greedy.reshape(targets.shape), targets)


def test_unconditional_sampling_draws_num_samples_full_images():
    model = registry.model("imagetransformer")(_hparams(), t2t_model.PREDICT, _problem(None))
    sample = tf.function(lambda: infer.infer(model, {}, 72, temperature=1.0, num_samples=3,
                                             seed=5))
    out = sample()
    assert out["outputs"].shape == (1, 3, 72) and out["scores"].shape == (1, 3)
    again = sample()
    np.testing.assert_array_equal(out["outputs"].numpy(), again["outputs"].numpy())
    assert len({tuple(row) for row in out["outputs"].numpy()[0]}) == 3  # distinct samples


def test_sample_images_traces_once_per_model_and_settings():
    from t2t.decoding import image_samples

    model = registry.model("imagetransformer")(
        _hparams(), t2t_model.PREDICT, _problem(Modality.CLASS_LABEL))
    classes = np.array([[0], [2]], np.int32)
    images, scores = image_samples.sample_images(model, classes, 2, seed=3)
    assert images.shape == (2, 2, *SHAPE) and images.dtype == np.uint8 and scores.shape == (2, 2)
    draw = image_samples._draw_function(model, 2, 1.0, 0, 1.0, 3)
    traces = draw.experimental_get_tracing_count()  # 2: the first call built the weights
    again, _ = image_samples.sample_images(model, classes, 2, seed=3)
    np.testing.assert_array_equal(images, again)  # same seed, same draws
    assert draw.experimental_get_tracing_count() == traces
    assert image_samples._draw_function(model, 2, 0.5, 0, 1.0, 3) is not draw


def test_text_targets_and_unknown_attention_are_refused():
    text = ProblemHParams(modality={"targets": Modality.SYMBOL}, vocab_size={"targets": 10})
    with pytest.raises(ValueError, match="use an image-target problem"):
        registry.model("imagetransformer")(_hparams(), t2t_model.TRAIN, text)
    with pytest.raises(ValueError, match="dec_attention_type='global'"):
        registry.model("imagetransformer")(_hparams(dec_attention_type="global"),
                                           t2t_model.TRAIN, _problem(None))
