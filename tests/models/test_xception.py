"""Tests of t2t.models.xception (the `xception` model) on fake image problems."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.hparams import xception as xception_hparams
from t2t.hparams.hparams import HParams
from t2t.models import xception
from tests.helpers.image_models import (
    NUM_CLASSES,
    image_problem,
    random_batch,
    stripes,
    with_overrides,
)
from tests.helpers.model_checks import (
    assert_xla_forward_matches_eager,
    mirrored_step_result,
    mirrored_step_script,
    mixed_bfloat16,  # noqa: F401
)


def tiny_hparams(**overrides) -> HParams:
    return with_overrides(xception_hparams.xception_tiny_cpu(), **overrides)


def param_count(model) -> int:
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights)


def test_xception_and_its_hparams_sets_are_registered():
    assert registry.model("xception") is xception.Xception
    for name in ("xception_base", "xception_tiny", "xception_tiny_tpu", "xception_tiny_cpu"):
        assert isinstance(registry.hparams(name)(), HParams)
    base, tiny = xception_hparams.xception_base(), xception_hparams.xception_tiny()
    assert (base.hidden_size, base.num_hidden_layers, base.batch_size) == (768, 8, 128)
    assert (tiny.hidden_size, tiny.num_hidden_layers, tiny.batch_size) == (64, 2, 2)
    assert xception_hparams.xception_tiny_tpu().hidden_size == 128


@pytest.mark.parametrize(
    ("shape", "entry_flow", "body_hw"),
    [
        # T2T's choice for images up to 200 pixels high: a 3x3 conv keeps H x W through
        # the middle flow; the exit flow halves it.
        ([28, 28, 1], "auto", 14),
        ([32, 32, 3], "auto", 16),
        # xception_tiny_cpu's full entry flow: /16 (rounded up), then the exit flow: /2.
        ([28, 28, 1], "xception", 1),
        ([32, 32, 3], "xception", 1),
    ],
)
def test_logits_losses_and_body_shapes(shape, entry_flow, body_hw):
    model = xception.Xception(
        tiny_hparams(xception_entry_flow=entry_flow), "train", image_problem(shape)
    )
    assert model.entry_flow == ("small_image" if entry_flow == "auto" else entry_flow)
    features = random_batch(3, shape)
    logits, losses = model(features, training=True)
    assert logits.shape == (3, 1, NUM_CLASSES) and logits.dtype == tf.float32
    numerator, denominator = losses["training"]
    assert float(denominator) == 3.0 and np.isfinite(float(numerator))
    body = model.body(model.bottom(features, False), False)
    assert body.shape == (3, body_hw, body_hw, 160)  # 2.5 * hidden_size 64
    assert float(tf.reduce_min(body)) >= 0.0  # ends with a ReLU


def test_full_entry_flow_downsamples_by_16_then_the_exit_by_2():
    hp = tiny_hparams(xception_entry_flow="xception", hidden_size=32, num_hidden_layers=1)
    model = xception.Xception(hp, "eval", image_problem([40, 24, 3]))
    features = random_batch(2, [40, 24, 3])
    body = model.body(model.bottom(features, False), False)
    # 40 -> 20 (conv0) -> 10 -> 5 -> 3 (entry blocks) -> 2 (exit); 24 -> 12, 6, 3, 2, 1.
    assert body.shape == (2, 2, 1, 80)
    assert model(features)[0].shape == (2, 1, NUM_CLASSES)


def test_entry_flow_follows_the_image_height_as_in_t2t():
    hp = xception_hparams.xception_tiny()
    assert hp.xception_entry_flow == "auto"
    assert xception.Xception(hp, "train", image_problem([299, 299, 3])).entry_flow == "xception"
    assert xception.Xception(hp, "train", image_problem([200, 200, 3])).entry_flow == "small_image"
    with pytest.raises(ValueError, match="xception_entry_flow"):
        xception.Xception(tiny_hparams(xception_entry_flow="big"), "train", image_problem([8, 8, 1]))


def test_xception_tiny_parameter_count_matches_the_layer_sizes():
    channels, classes, f = 3, 7, 64  # xception_tiny: hidden_size 64, 2 middle blocks
    model = xception.Xception(
        xception_hparams.xception_tiny(), "eval", image_problem([16, 16, channels], classes)
    )
    model(random_batch(1, [16, 16, channels]))

    def norm(c):  # layer norm: scale and bias
        return 2 * c

    def sepconv(c_in, c_out):  # 3x3 depthwise + 1x1 pointwise, no bias, then layer norm
        return 9 * c_in + c_in * c_out + norm(c_out)

    entry = 9 * channels * f + norm(f)  # small_image_conv: 3x3 conv, no bias
    middle = 2 * (3 * sepconv(f, f) + norm(f))
    c1, c2, c3 = int(1.25 * f), 2 * f, int(2.5 * f)  # 80, 128, 160
    exit_flow = (9 * f * c1 + norm(c1)) + sepconv(f, f) + sepconv(f, c1) + sepconv(c1, c2)
    exit_flow += sepconv(c2, c3)
    logits = c3 * classes + classes
    assert (entry, middle, exit_flow, logits) == (1856, 29056, 90064, 1127)
    assert param_count(model) == entry + middle + exit_flow + logits == 122_103


def test_same_shaped_kernels_start_different():
    hp = tiny_hparams(xception_entry_flow="small_image")
    model = xception.Xception(hp, "train", image_problem([8, 8, 1]))
    model(random_batch(1, [8, 8, 1]), training=False)
    kernels = [v.numpy() for v in model.trainable_weights if v.shape == (1, 1, 64, 64)]
    depthwise = [v.numpy() for v in model.trainable_weights if v.shape == (3, 3, 64, 1)]
    assert len(kernels) == 7 and len(depthwise) == 8
    for group in (kernels, depthwise):
        for i in range(len(group)):
            for j in range(i):
                assert not np.array_equal(group[i], group[j])


def test_dropout_only_in_training():
    model = xception.Xception(tiny_hparams(dropout=0.5), "train", image_problem([8, 8, 1]))
    features = random_batch(2, [8, 8, 1])
    a, b = model(features, training=False)[0], model(features, training=False)[0]
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c, d = model(features, training=True)[0], model(features, training=True)[0]
    assert not np.allclose(c.numpy(), d.numpy())


def test_loss_falls_on_a_tiny_fixed_batch():
    tf.random.set_seed(3)
    hp = tiny_hparams(dropout=0.0, xception_entry_flow="auto")
    model = xception.Xception(hp, "train", image_problem([12, 12, 1]))
    features = stripes(32, 12)  # a learnable task: stripes whose orientation is the class
    model(features, training=False)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            numerator, denominator = model(features, training=True)[1]["training"]
            loss = numerator / denominator
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    losses = [float(step()) for _ in range(30)]
    assert losses[-1] < 0.1 * losses[0], losses


def test_xla_forward_matches_eager():
    model = xception.Xception(tiny_hparams(), "eval", image_problem([12, 12, 1]))
    assert_xla_forward_matches_eager(model, random_batch(2, [12, 12, 1]))


def test_infer_returns_a_class():
    model = xception.Xception(tiny_hparams(), "infer", image_problem([16, 16, 1]))
    out = infer_lib.infer(model, {"inputs": random_batch(3, [16, 16, 1])["inputs"]})
    assert out["outputs"].shape == (3, 1)
    assert out["scores"].shape == (3,)


@pytest.mark.usefixtures("mixed_bfloat16")
def test_mixed_bfloat16_forward_gives_float32_logits():
    model = xception.Xception(tiny_hparams(), "train", image_problem([28, 28, 1]))
    features = random_batch(2, [28, 28, 1])
    logits, losses = model(features, training=True)
    assert logits.shape == (2, 1, NUM_CLASSES) and logits.dtype == tf.float32
    body = model.body(model.bottom(features, False), False)
    assert body.dtype == tf.bfloat16 and body.shape == (2, 1, 1, 160)  # full entry flow
    assert all(v.dtype == "float32" for v in model.trainable_weights)
    assert np.isfinite(float(losses["training"][0]))


_MIRRORED_STEP = mirrored_step_script(
    """
    from t2t.hparams import xception as xh
    from t2t.models import xception
    from tests.helpers.image_models import image_problem, random_batch
    features = random_batch(4, [12, 12, 1])
    """,
    {"xception": 'xception.Xception(xh.xception_tiny_cpu(), "train", image_problem([12, 12, 1]))'},
    loss='losses["training"][0] / 4.0',  # the global batch
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_mirrored_strategy_on_two_cpus():
    result = mirrored_step_result(_MIRRORED_STEP)["xception"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    # Every weight moved (the label embedding is never built).
    assert result["changed"] == result["total"] == 88
