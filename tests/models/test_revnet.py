"""Tests of t2t.models.revnet (the `revnet` model) on fake image problems."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t import registry
from t2t.decoding import infer as infer_lib
from t2t.hparams import revnet as revnet_hparams
from t2t.hparams.hparams import HParams
from t2t.models import revnet
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
    return with_overrides(revnet_hparams.revnet_tiny_cpu(), **overrides)


def param_count(model) -> int:
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights)


# T2T's revnet.py (v1.15) values, set by set.
T2T_SETS = {
    "revnet_104": dict(
        num_channels=[64, 128, 256, 416], num_layers_per_block=[1, 1, 10, 1], bottleneck=True,
        first_batch_norm=[False, True, True, True], init_stride=2, init_kernel_size=7,
        init_maxpool=True, strides=[1, 2, 2, 2], num_channels_init_block=64, dim="2d",
        initializer="normal_unit_scaling", initializer_gain=2.0, optimizer="momentum",
        optimizer_momentum_momentum=0.9, optimizer_momentum_nesterov=True, weight_decay=1e-4,
        clip_grad_norm=0.0, learning_rate=0.4, learning_rate_decay_scheme="cosine",
        learning_rate_cosine_cycle_steps=120000, batch_size=128,
    ),
    "revnet_38_cifar": dict(
        num_channels=[16, 32, 56], num_layers_per_block=[2, 2, 2], bottleneck=False,
        first_batch_norm=[False, True, True], init_stride=1, init_kernel_size=3,
        init_maxpool=False, strides=[1, 2, 2], num_channels_init_block=32,
        initializer="normal_unit_scaling", initializer_gain=1.5, learning_rate=0.1,
        learning_rate_cosine_cycle_steps=5000, batch_size=128, weight_decay=1e-4,
    ),
    "revnet_110_cifar": dict(
        num_channels=[16, 32, 64], num_layers_per_block=[8, 8, 8], bottleneck=False,
        num_channels_init_block=32, initializer_gain=2.0, learning_rate=0.1, init_stride=1,
    ),
    "revnet_164_cifar": dict(
        num_channels=[16, 32, 64], num_layers_per_block=[8, 8, 8], bottleneck=True,
        num_channels_init_block=32, init_maxpool=False, learning_rate=0.1,
    ),
}


def test_revnet_and_its_hparams_sets_are_registered_with_t2t_values():
    assert registry.model("revnet") is revnet.RevNet
    assert revnet.RevNet.registered_name == "revnet"
    for name, expected in T2T_SETS.items():
        hp = registry.hparams(name)()
        assert {key: hp.get(key) for key in expected} == expected, name
    assert isinstance(registry.hparams("revnet_tiny_cpu")(), HParams)
    assert registry.ranged_hparams("revnet_range") is revnet_hparams.revnet_range


@pytest.mark.parametrize("bottleneck", [False, True])
def test_logits_losses_and_body_shapes(bottleneck):
    model = revnet.RevNet(tiny_hparams(bottleneck=bottleneck), "train", image_problem([16, 16, 1]))
    features = random_batch(3, [16, 16, 1])
    logits, losses = model(features, training=True)
    assert logits.shape == (3, 1, NUM_CLASSES) and logits.dtype == tf.float32
    numerator, denominator = losses["training"]
    assert float(denominator) == 3.0 and np.isfinite(float(numerator))
    body = model.body(model.bottom(features, False), False)
    # CIFAR layout: strides 1, 2, 2 -> 16 / 4; channels 2 halves of the last depth2.
    assert body.shape == (3, 4, 4, 2 * 32 * (4 if bottleneck else 1))
    assert float(tf.reduce_min(body)) >= 0.0  # ends with BN-ReLU


def test_imagenet_layout_matches_t2t_shapes():
    # T2T's revnet_test: 299x299 -> init 74x74 -> units 74, 37, 19, 10 (SAME strides),
    # [1, 1, 1, 3328] for revnet_base (2 * 4 * 416). Narrow here, same spatial sizes.
    hp = with_overrides(
        revnet_hparams.revnet_base(), num_channels=[2, 2, 2, 4], num_layers_per_block=[0, 1, 0, 0],
        num_channels_init_block=4,
    )
    model = revnet.RevNet(hp, "eval", image_problem([299, 299, 3]))
    features = random_batch(1, [299, 299, 3])
    body = model.body(model.bottom(features, False), False)
    assert body.shape == (1, 10, 10, 2 * 4 * 4)
    assert model(features)[0].shape == (1, 1, NUM_CLASSES)


def one_unit_hparams(**overrides) -> HParams:
    """revnet_tiny_cpu cut to one unit (2 reversible layers, stride 2): quick to trace."""
    defaults = dict(num_layers_per_block=[2], num_channels=[4], strides=[2],
                    first_batch_norm=[True], num_channels_init_block=4)
    return tiny_hparams(**{**defaults, **overrides})


def _loss_and_grads(model, features, recompute: bool, graph: bool):
    """Training-mode loss and its gradients w.r.t. the float image and every weight."""
    model.recompute = recompute

    def run(images):
        with tf.GradientTape() as tape:
            tape.watch(images)
            body = model.body({"inputs": images}, True)
            loss = model.loss(model.top(body, features), features, True)
            loss = loss[0] / loss[1]
        return loss, tape.gradient(loss, [images, *model.trainable_variables])

    images = model.bottom(features, False)["inputs"]
    return (tf.function(run) if graph else run)(images)


@pytest.mark.parametrize(
    ("bottleneck", "graph"),
    # The custom gradient has a graph (tf.function) and an eager implementation in TF.
    [(False, True), (True, False)],
)
def test_reversible_gradients_equal_ordinary_backprop(bottleneck, graph, monkeypatch):
    model = revnet.RevNet(one_unit_hparams(bottleneck=bottleneck), "train", image_problem([8, 8, 1]))
    features = random_batch(4, [8, 8, 1])
    model(features, training=False)
    moving = [v for v in model.non_trainable_weights if "moving" in v.path]
    start = [v.numpy() for v in moving]
    backward_calls = []
    backward = revnet.RevBlock._backward

    def spy(self, *args):
        backward_calls.append(self.name)
        return backward(self, *args)

    monkeypatch.setattr(revnet.RevBlock, "_backward", spy)

    loss, grads = _loss_and_grads(model, features, recompute=True, graph=graph)
    assert backward_calls == ["rev_block"]  # the reversible backward pass ran
    after_reversible = [v.numpy() for v in moving]
    for v, value in zip(moving, start, strict=True):
        v.assign(value)
    ordinary_loss, ordinary = _loss_and_grads(model, features, recompute=False, graph=graph)
    assert backward_calls == ["rev_block"]  # ordinary backprop: not again

    np.testing.assert_allclose(float(loss), float(ordinary_loss), rtol=1e-6)
    assert all(g is not None for g in [*grads, *ordinary])  # every weight and the image
    names = ["image", *(v.path for v in model.trainable_variables)]
    for name, a, b in zip(names, grads, ordinary, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    # The moving averages moved once, in the forward pass: as in ordinary training.
    for v, once, value in zip(moving, after_reversible, start, strict=True):
        np.testing.assert_allclose(once, v.numpy(), rtol=1e-6, atol=1e-7, err_msg=v.path)
        assert not np.allclose(once, value)


def test_reconstructed_inputs_equal_the_inputs():
    block = revnet.RevBlock(3, 4, 4, bottleneck=False, name="rev_block")
    rng = np.random.default_rng(0)
    x1, x2 = (tf.constant(rng.normal(size=[2, 5, 5, 4]), tf.float32) for _ in range(2))
    for training in (True, False):
        y1, y2 = block(x1, x2, training=training)
        assert not np.allclose(y1.numpy(), x1.numpy())
        r1, r2 = block.reconstruct(y1, y2, training=training)
        np.testing.assert_allclose(r1.numpy(), x1.numpy(), atol=1e-5)
        np.testing.assert_allclose(r2.numpy(), x2.numpy(), atol=1e-5)


def test_loss_falls_on_a_tiny_fixed_batch():
    tf.random.set_seed(3)
    model = revnet.RevNet(one_unit_hparams(num_channels=[8]), "train", image_problem([12, 12, 1]))
    features = stripes(32, 12)  # stripes whose orientation is the class
    model(features, training=False)
    optimizer = keras.optimizers.Adam(1e-2)
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


def test_infer_returns_a_class():
    model = revnet.RevNet(tiny_hparams(), "infer", image_problem([8, 8, 1]))
    out = infer_lib.infer(model, {"inputs": random_batch(3, [8, 8, 1])["inputs"]})
    assert out["outputs"].shape == (3, 1)
    assert out["scores"].shape == (3,)


def test_xla_forward_matches_eager():
    model = revnet.RevNet(one_unit_hparams(), "eval", image_problem([8, 8, 1]))
    assert_xla_forward_matches_eager(model, random_batch(2, [8, 8, 1]))


@pytest.mark.usefixtures("mixed_bfloat16")
def test_mixed_bfloat16_gives_float32_logits_and_finite_gradients():
    model = revnet.RevNet(tiny_hparams(), "train", image_problem([8, 8, 1]))
    features = random_batch(2, [8, 8, 1])
    model(features, training=False)
    with tf.GradientTape() as tape:
        logits, losses = model(features, training=True)
        loss = losses["training"][0] / losses["training"][1]
    grads = tape.gradient(loss, model.trainable_variables)
    assert logits.dtype == tf.float32 and np.isfinite(float(loss))
    assert all(v.dtype == "float32" for v in model.trainable_weights)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)
    assert all(np.all(np.isfinite(g.numpy())) for g in grads)
    # The coupling stays float32 while the layers compute in bfloat16.
    x = model.bottom(features, False)["inputs"]
    x1, x2 = tf.split(tf.cast(model.init_conv(x), tf.float32), 2, axis=-1)
    y1, _ = model.units[0](x1, x2, training=False)
    assert y1.dtype == tf.float32 and model.units[0].f.compute_dtype == "bfloat16"


def test_parameter_count_by_hand():
    hp = revnet_hparams.revnet_tiny_cpu()
    model = revnet.RevNet(hp, "eval", image_problem([8, 8, 1]))
    model.build_weights()

    def conv3(c_in, c_out):  # 3x3 kernel and bias
        return 9 * c_in * c_out + c_out

    def bn(c):  # gamma and beta (the moving statistics are not trainable)
        return 2 * c

    def fn(c_in, c_out, first_bn=True):  # [BN-ReLU] conv3 -> BN-ReLU conv3
        return (bn(c_in) if first_bn else 0) + conv3(c_in, c_out) + bn(c_out) + conv3(c_out, c_out)

    init = conv3(1, 16) + bn(16)
    # Unit i: f and g of the downsampling layer, then f and g of its one reversible layer.
    units = [
        fn(8, 8, first_bn=False) + fn(8, 8) + 2 * fn(8, 8),
        fn(8, 16) + fn(16, 16) + 2 * fn(16, 16),
        fn(16, 32) + fn(32, 32) + 2 * fn(32, 32),
    ]
    final = bn(64) + 64 * NUM_CLASSES + NUM_CLASSES
    assert (init, units, final) == (192, [4784, 17648, 69856], 778)
    assert param_count(model) == init + sum(units) + final == 93_258


@pytest.mark.parametrize(
    ("name", "paper_millions"),
    # The RevNet paper's Table 1 (CIFAR-10). t2t's convolutions carry biases (as T2T's).
    # (revnet_110_cifar: 1,733,258 here, the paper 1.73M; left out to keep this file quick.)
    [("revnet_38_cifar", 0.46), ("revnet_164_cifar", 1.75)],
)
def test_cifar_sets_have_the_papers_parameter_counts(name, paper_millions):
    model = revnet.RevNet(registry.hparams(name)(), "eval", image_problem([4, 4, 3]))
    model.build_weights()
    assert param_count(model) / 1e6 == pytest.approx(paper_millions, rel=0.03)


def test_bad_hparams_raise_clear_errors():
    problem = image_problem([8, 8, 1])
    with pytest.raises(ValueError, match="dim"):
        revnet.RevNet(tiny_hparams(dim="3d"), "train", problem)
    with pytest.raises(ValueError, match="strides"):
        revnet.RevNet(tiny_hparams(strides=[1, 2]), "train", problem)
    with pytest.raises(ValueError, match="even"):
        revnet.RevNet(tiny_hparams(num_channels_init_block=15), "train", problem)
    with pytest.raises(ValueError, match="cannot shrink"):
        revnet.RevNet(tiny_hparams(num_channels=[8, 4, 8]), "train", problem)


_MIRRORED_STEP = mirrored_step_script(
    """
    from t2t.hparams import revnet as rh
    from t2t.models import revnet
    from tests.helpers.image_models import image_problem, random_batch
    features = random_batch(4, [8, 8, 1])
    hp = rh.revnet_tiny_cpu()
    hp.num_layers_per_block, hp.num_channels, hp.strides = [2], [4], [2]
    hp.first_batch_norm, hp.num_channels_init_block = [True], 4
    """,
    {"revnet": 'revnet.RevNet(hp, "train", image_problem([8, 8, 1]))'},
    loss='losses["training"][0] / 4.0',  # the global batch; every gradient must exist
)


# slow: a MirroredStrategy start on 2 logical CPUs; CI trains mirrored in test_t2t_trainer.py
@pytest.mark.slow
def test_one_training_step_under_mirrored_strategy_on_two_cpus():
    result = mirrored_step_result(_MIRRORED_STEP)["revnet"]
    assert (result["replicas"], result["finite"], result["same"]) == (2, True, True)
    assert result["changed"] == result["total"]  # every weight moved: the reversible layers' too
