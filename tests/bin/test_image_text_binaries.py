"""Image to text through the binaries: t2t-datagen of the rendered-text corpus,
t2t-trainer (CER at each evaluation), t2t-decoder on a list of image paths (a grayscale
PNG, an RGB JPEG of another size) with CER against references, t2t-exporter (parity gate
on PNG bytes), and a plain TensorFlow script that reads JPEG bytes like the decoder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from t2t import registry
from t2t.problems.image import ocr
from tests.helpers.binaries import run_binary
from tests.helpers.runs import NO_DECODE_SUMMARIES
from tests.helpers.serving import export_and_caption

PROBLEM = "ocr_rendered_text_test"
HPARAMS = ("hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,"
           "image_encoder_channels=8,learning_rate_warmup_steps=10")
LINES = ["Return the number of items", "Close the file"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("ocr_bin")
    data_dir, output_dir = str(root / "data"), str(root / "run")
    trained = run_binary("t2t-trainer", "--generate_data", f"--problem={PROBLEM}",
                         "--model=transformer", "--hparams_set=transformer_image_text_tiny",
                         f"--hparams={HPARAMS}", f"--data_dir={data_dir}",
                         f"--tmp_dir={root / 'tmp'}", f"--output_dir={output_dir}",
                         "--train_steps=4", "--local_eval_frequency=4", "--eval_steps=1",
                         "--eval_decode_examples=4", NO_DECODE_SUMMARIES)
    assert trained.code == 0, trained.err[-3000:]
    font = registry.problem(PROBLEM).fonts("dev")[0]
    # Files a user makes: a grayscale PNG of the problem's size, a larger RGB JPEG.
    Image.fromarray(ocr.render_line(LINES[0], font, 16)[:, :, 0]).save(root / "a.png")
    gray = ocr.render_line(LINES[1], font, 16, paper=240, ink=30)[:, :, 0]
    Image.fromarray(np.stack([gray] * 3, axis=-1)).resize((480, 40)).save(root / "b.jpg")
    (root / "paths.txt").write_text(f"{root / 'a.png'}\n{root / 'b.jpg'}\n")
    (root / "refs.txt").write_text("\n".join(LINES) + "\n")
    return root, data_dir, output_dir


def test_each_evaluation_reports_the_cer_of_greedy_dev_decodes(trained):
    _, _, output_dir = trained
    with open(f"{output_dir}/eval_results.jsonl", encoding="utf-8") as f:
        last = json.loads(f.read().splitlines()[-1])
    assert last["step"] == 4 and {"cer", "accuracy_per_sequence"} <= set(last)


def test_images_decode_from_paths_and_from_jpeg_bytes_in_the_export(trained, tmp_path):
    root, data_dir, output_dir = trained
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                         f"--decode_from_file={root / 'paths.txt'}",
                         f"--decode_reference={root / 'refs.txt'}",
                         f"--decode_to_file={tmp_path / 'out.txt'}", "--decode_hparams=beam_size=1")
    assert decoded.code == 0, decoded.err[-3000:]
    assert "b.jpg is 40x480 pixels: resized to 32x384 (height x width)" in decoded.err
    assert next(line for line in decoded.out.splitlines() if line.startswith("CER|"))
    outputs = (tmp_path / "out.txt").read_text().split("\n")[:2]
    assert export_and_caption(output_dir, data_dir, str(tmp_path / "export"), "beam_size=1",
                              [str(root / "a.png"), str(root / "b.jpg")]) == outputs

