"""The hparams sets of resnet, shake_shake and basic_fc_relu carry Tensor2Tensor's values."""

from __future__ import annotations

import pytest

from t2t import registry
from t2t.hparams import basic, basic_models, resnet, shake_shake
from t2t.hparams.hparams import HParams

OPTIMIZERS = {"adam", "momentum", "sgd", "adafactor"}

RESNET_BASE = {
    "layer_sizes": [3, 4, 6, 3],
    "bottleneck_ratios": [4, 4, 4, 4],
    "filter_sizes": [64, 64, 128, 256, 512],
    "block_fn": "bottleneck",
    "is_cifar": False,
    "initializer": "normal_unit_scaling",
    "initializer_gain": 2.0,
    "optimizer": "momentum",
    "optimizer_momentum_momentum": 0.9,
    "optimizer_momentum_nesterov": True,
    "weight_decay": 1e-4,
    "clip_grad_norm": 0.0,
    "learning_rate": 0.4,
    "learning_rate_decay_scheme": "cosine",
    "learning_rate_cosine_cycle_steps": 120000,
    "batch_size": 128,
}

SHAKESHAKE_SMALL = {
    "batch_size": 128,
    "hidden_size": 32,
    "layer_prepostprocess_dropout": 0.0,
    "dropout": 0.0,
    "label_smoothing": 0.0,
    "clip_grad_norm": 0.0,
    "num_hidden_layers": 26,
    "learning_rate_decay_scheme": "cosine",
    "learning_rate_cosine_cycle_steps": 700000,
    "learning_rate": 0.2,
    "learning_rate_warmup_steps": 100,
    "initializer": "uniform_unit_scaling",
    "initializer_gain": 1.0,
    "weight_decay": 1e-4,
    "optimizer": "momentum",
    "optimizer_momentum_momentum": 0.9,
    "shake_shake_num_branches": 2,
    "shake_shake_concat": 0,
}


def values(hp: HParams, expected: dict) -> dict:
    return {name: hp.get(name, "MISSING") for name in expected}


def changes(hp: HParams) -> dict:
    """What a set changes or adds relative to basic_params1."""
    base = basic.basic_params1()
    return {k: hp.get(k) for k in hp if k not in base or hp.get(k) != base.get(k)}


def assert_set(hp: HParams, expected: dict) -> None:
    """hp has the `expected` values and differs from basic_params1 nowhere else."""
    assert values(hp, expected) == expected
    unexpected = {k: v for k, v in changes(hp).items() if k not in expected}
    assert unexpected == {}


def test_resnet_base_has_tensor2tensors_values():
    hp = resnet.resnet_base()
    assert_set(hp, RESNET_BASE)
    assert type(hp.learning_rate) is float and type(hp.batch_size) is int


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("resnet_50", {}),
        ("resnet_18", {"block_fn": "residual", "layer_sizes": [2, 2, 2, 2]}),
        ("resnet_34", {"block_fn": "residual"}),
        ("resnet_imagenet_34", {"block_fn": "residual", "layer_sizes": [2, 4, 8, 2]}),
        ("resnet_imagenet_102", {"block_fn": "residual", "layer_sizes": [3, 8, 36, 3]}),
        ("resnet_101", {"layer_sizes": [3, 4, 23, 3]}),
        ("resnet_152", {"layer_sizes": [3, 8, 36, 3]}),
        ("resnet_200", {"layer_sizes": [3, 24, 36, 3]}),
        (
            "resnet_cifar_15",
            {
                "block_fn": "residual",
                "is_cifar": True,
                "layer_sizes": [2, 2, 2],
                "filter_sizes": [16, 32, 64, 128],
            },
        ),
        (
            "resnet_cifar_32",
            {
                "block_fn": "residual",
                "is_cifar": True,
                "layer_sizes": [5, 5, 5],
                "filter_sizes": [16, 32, 64, 128],
            },
        ),
    ],
)
def test_resnet_sets(name, expected):
    hp = registry.hparams(name)()
    assert_set(hp, {**RESNET_BASE, **expected})


def test_resnet_base_is_not_registered():
    assert "resnet_base" not in registry.list_hparams()


def test_resnet_tiny_cpu_is_small_and_uses_adam():
    hp = registry.hparams("resnet_tiny_cpu")()
    assert hp.is_cifar is True and hp.block_fn == "residual"
    assert hp.layer_sizes == [1, 1, 1] and hp.filter_sizes == [8, 8, 16, 32]
    assert hp.optimizer == "adam" and hp.learning_rate_schedule == "constant*linear_warmup"
    assert hp.learning_rate_constant == 0.01 and hp.batch_size == 64


def test_shakeshake_sets():
    assert_set(shake_shake.shakeshake_small(), SHAKESHAKE_SMALL)
    quick = registry.hparams("shake_shake_quick")()
    assert_set(
        quick,
        {
            **SHAKESHAKE_SMALL,
            "optimizer": "adam",
            "learning_rate_cosine_cycle_steps": 1000,
            "learning_rate": 0.5,
            "batch_size": 100,
        },
    )
    assert_set(registry.hparams("shakeshake_big")(), {**SHAKESHAKE_SMALL, "hidden_size": 96})
    assert_set(
        registry.hparams("shakeshake_tpu")(),
        {
            **SHAKESHAKE_SMALL,
            "hidden_size": 96,
            "learning_rate_cosine_cycle_steps": 180000,
            "learning_rate": 0.6,
        },
    )


def test_basic_fc_small():
    assert_set(
        basic_models.basic_fc_small(),
        {
            "learning_rate": 0.1,
            "batch_size": 128,
            "hidden_size": 256,
            "num_hidden_layers": 2,
            "initializer": "uniform_unit_scaling",
            "initializer_gain": 1.0,
            "weight_decay": 0.0,
            "dropout": 0.0,
        },
    )
    assert "basic_fc_relu" not in registry.list_hparams()  # T2T has no set by that name


@pytest.mark.parametrize(
    "name",
    [
        "resnet_18",
        "resnet_34",
        "resnet_50",
        "resnet_101",
        "resnet_152",
        "resnet_200",
        "resnet_imagenet_34",
        "resnet_imagenet_102",
        "resnet_cifar_15",
        "resnet_cifar_32",
        "resnet_tiny_cpu",
        "shakeshake_small",
        "shake_shake_quick",
        "shakeshake_big",
        "shakeshake_tpu",
        "basic_fc_small",
    ],
)
def test_sets_use_lower_case_optimizer_names_and_round_trip(name):
    hp = registry.hparams(name)()
    assert hp.optimizer in OPTIMIZERS
    assert HParams.from_json(hp.to_json()) == hp
