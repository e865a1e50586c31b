"""Smoke test of benchmarks/resnet.py: the FLOP count, the three paths (a few steps)."""

import os
import sys

import pytest

try:
    from benchmarks import resnet, training
except ImportError:  # pytest run from elsewhere than the repository root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks import resnet, training

SIZE, BATCH = 16, 4


def test_flops_match_the_published_resnet50_count():
    # ResNet-50 at 224x224: 4.09 G multiply-adds forward (He et al. report "3.8 x 10^9
    # FLOPs" counting the convolutions' multiply-adds of the pre-projection variant;
    # the commonly measured figure with projections and the top is 4.09-4.11 G).
    hp = resnet.model_hparams("resnet_50", 1)
    assert resnet.model_flops_per_image(hp, 224) / 6 == pytest.approx(4.09e9, rel=0.01)
    # resnet_tiny_cpu on 16x16x3, by hand: stem 16*16*49*3*8; layer 1 (8->8, 16x16):
    # 2 convs 3x3 + projection 1x1; layer 2 (8->16, 8x8); layer 3 (16->32, 4x4); dense.
    tiny = resnet.model_hparams("resnet_tiny_cpu", 1)
    macs = (256 * 49 * 3 * 8 + 256 * (9 * 8 * 8 * 2 + 8 * 8) + 64 * (9 * (8 * 16 + 16 * 16)
            + 8 * 16) + 16 * (9 * (16 * 32 + 32 * 32) + 16 * 32) + 32 * 10)
    assert resnet.model_flops_per_image(tiny, SIZE) == 6 * macs


@pytest.fixture(scope="module")
def problem_and_data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    return resnet.make_problem(SIZE, data_dir, train_size=16), data_dir


def test_trainer_and_bare_paths(problem_and_data, tmp_path):
    problem, data_dir = problem_and_data
    paths = {
        resnet.TRAINER: resnet.trainer_step(problem, data_dir, str(tmp_path / "out"),
                                            "resnet_tiny_cpu", BATCH),
        resnet.BARE: resnet.bare_step(problem.problem_hparams(data_dir), "resnet_tiny_cpu",
                                      BATCH, SIZE),
    }
    for result in training.time_interleaved(paths, steps=2, warmup=1, rounds=2).values():
        assert result["steps"] == 2 and result["examples_per_s"] > 0
        assert result["tokens_per_step"] == BATCH  # images a step, from the Trainer's counts


def test_torch_resnet_has_the_t2t_models_parameters(problem_and_data):
    pytest.importorskip("torch")
    from t2t.models import t2t_model
    from t2t.models.t2t_model import example_features

    problem, data_dir = problem_and_data
    for name in ("resnet_tiny_cpu", "resnet_50"):
        hp = resnet.model_hparams(name, BATCH)
        problem_hparams = problem.problem_hparams(data_dir)
        model = t2t_model.create_model("resnet", hp, t2t_model.TRAIN, problem_hparams)
        model.build_for(example_features(problem_hparams))
        shapes = sorted(tuple(v.shape) for v in model.trainable_variables)
        step = resnet.torch_step(hp, BATCH, SIZE, threads=1)
        # Same tensors up to layout: conv kernels HWIO vs OIHW, dense [in, out] vs [out, in].
        torch_shapes = sorted(
            (*p.shape[2:], p.shape[1], p.shape[0]) if p.dim() == 4 else
            (p.shape[1], p.shape[0]) if p.dim() == 2 else tuple(p.shape)
            for p in step.model.parameters())
        assert torch_shapes == shapes, name
    assert step()[0] == BATCH


@pytest.mark.parametrize("argv, message", [
    (["--models", "resnet_51"], "unknown --models resnet_51: use some of resnet_cifar_15"),
    (["--batch", "0"], "--batch=0: give 1 or more"),
    (["--steps", "-1"], "--steps=-1: give 1 or more"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        resnet.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
