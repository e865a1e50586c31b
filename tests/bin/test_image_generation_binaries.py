"""Image generation through the binaries: t2t-trainer of imagetransformer on the class ->
image `_rev` of (tiny) Fashion-MNIST reports bits/dim and writes sampled images to
TensorBoard; t2t-decoder samples a PNG grid (rows: the classes asked for) and one PNG per
sample."""

from __future__ import annotations

import glob
import json

import numpy as np
import pytest
from PIL import Image

from tests.helpers.binaries import run_binary
from tests.helpers.image_data import tiny_fashion_mnist  # noqa: F401 (a fixture)

HPARAMS = ("hidden_size=16,filter_size=16,num_heads=2,num_hidden_layers=1,batch_size=4,"
           "learning_rate_warmup_steps=2")


@pytest.fixture(scope="module")
def data_dir(tiny_fashion_mnist):  # noqa: F811
    return tiny_fashion_mnist


def _train(problem: str, data_dir: str, tmp_path, decode_summaries: int) -> str:
    """The run directory of 2 steps of imagetransformer on `problem`, evaluated once."""
    run = str(tmp_path / "run")
    trained = run_binary("t2t-trainer", f"--problem={problem}", "--model=imagetransformer",
                         "--hparams_set=imagetransformer_tiny_cpu", f"--hparams={HPARAMS}",
                         f"--data_dir={data_dir}", f"--output_dir={run}", "--train_steps=2",
                         "--local_eval_frequency=2", "--eval_steps=1",
                         f"--gin_param=TrainerConfig.decode_summaries={decode_summaries}")
    assert trained.code == 0, trained.err[-3000:]
    return run


def test_train_then_sample_a_png_grid(data_dir, tmp_path):
    path, _ = data_dir
    run = _train("image_fashion_mnist_rev", path, tmp_path, decode_summaries=2)
    with open(f"{run}/eval_results.jsonl", encoding="utf-8") as f:
        last = json.loads(f.read().splitlines()[-1])
    assert 6.0 < last["bits_per_dim"] < 9.0  # about 8 bits (256 values) before training
    events = glob.glob(f"{run}/eval/events.out.tfevents.*")
    from tensorboard.backend.event_processing import event_accumulator

    tags = event_accumulator.EventAccumulator(events[0]).Reload().Tags()
    assert "samples" in tags["tensors"] or "samples" in tags["images"]
    (tmp_path / "classes.txt").write_text("Trouser\n9\n")
    sampled = run_binary("t2t-decoder", f"--output_dir={run}", f"--data_dir={path}",
                         f"--decode_from_file={tmp_path / 'classes.txt'}",
                         "--decode_hparams=num_samples=3,temperature=1.0,seed=1",
                         f"--decode_to_file={tmp_path / 'grid.png'}")
    assert sampled.code == 0, sampled.err[-3000:]
    assert "Sampled 2 x 3 images of 28x28x1" in sampled.out and "bits/dim" in sampled.out
    grid = np.asarray(Image.open(tmp_path / "grid.png"))
    assert grid.shape == (2 * 30 + 2, 3 * 30 + 2)  # 2 rows, 3 columns, 2 px between
    singles = sorted(p.name for p in (tmp_path / "grid").iterdir() if p.suffix == ".png")
    assert len((tmp_path / "grid" / "paths.txt").read_text().splitlines()) == 6
    assert singles == [f"{r:03d}_{name}_{k}.png" for r, name in ((0, "Trouser"), (1, "Ankle_boot"))
                       for k in range(3)]
    bad = run_binary("t2t-decoder", f"--output_dir={run}", f"--data_dir={path}",
                     "--decode_interactive")
    assert bad.code != 0 and "generates images" in bad.err
    export = run_binary("t2t-exporter", f"--output_dir={run}", f"--data_dir={path}",
                        f"--export_dir={tmp_path / 'export'}")
    assert export.code != 0 and "sample them with t2t-decoder" in export.err


def test_super_resolution_trains_and_refines_a_users_small_image(data_dir, tmp_path):
    path, _ = data_dir
    run = _train("img2img_fashion_mnist", path, tmp_path, decode_summaries=0)
    small = np.zeros([7, 7], np.uint8)
    small[2:5, 2:5] = 255  # a white square
    Image.fromarray(small).save(tmp_path / "small.png")
    Image.fromarray(np.stack([small] * 3, -1)).resize((14, 14)).save(tmp_path / "rgb.png")
    (tmp_path / "inputs.txt").write_text(f"{tmp_path / 'small.png'}\n{tmp_path / 'rgb.png'}\n")
    sampled = run_binary("t2t-decoder", f"--output_dir={run}", f"--data_dir={path}",
                         f"--decode_from_file={tmp_path / 'inputs.txt'}",
                         "--decode_hparams=num_samples=2,temperature=1.0,seed=1",
                         f"--decode_to_file={tmp_path / 'grid.png'}")
    assert sampled.code == 0, sampled.err[-3000:]
    assert "rgb.png is 14x14 pixels: resized to 7x7" in sampled.err
    grid = np.asarray(Image.open(tmp_path / "grid.png"))
    assert grid.shape == (2 * 30 + 2, 3 * 30 + 2)  # per row: the input upsampled, 2 samples
    shown = grid[2:30, 2:30]  # the first row's input, upsampled 4x (nearest)
    np.testing.assert_array_equal(shown, np.kron(small, np.ones([4, 4], np.uint8)))
