"""Captioning through the binaries on a tiny MS-COCO in the real layout (solid-colour
photos): t2t-trainer --generate_data of image_ms_coco_tokens32k (its SentencePiece
vocabulary trained on the captions) with the ResNet encoder, t2t-decoder beam search on
JPEG paths of another size, t2t-exporter (parity gate with beam search) and a plain
TensorFlow script that sends JPEG bytes; the Xception encoder on image_ms_coco_characters."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from t2t.data.generation import download
from t2t.problems.image import mscoco
from tests.helpers.binaries import run_binary
from tests.helpers.coco_data import write_tiny_coco
from tests.helpers.runs import NO_DECODE_SUMMARIES
from tests.helpers.serving import export_and_caption

HPARAMS = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=4"


def _train(root, problem: str, hparams: str, steps: int) -> tuple[str, str]:
    data_dir, output_dir = str(root / "data"), str(root / "run")
    trained = run_binary("t2t-trainer", "--generate_data", f"--problem={problem}",
                         "--model=transformer",
                         "--hparams_set=transformer_image_captioning_tiny",
                         f"--hparams={hparams}", f"--data_dir={data_dir}",
                         f"--tmp_dir={root / 'tmp'}", f"--data_mirror={root / 'mirror'}",
                         f"--output_dir={output_dir}", f"--train_steps={steps}",
                         f"--local_eval_frequency={steps}", "--eval_steps=1",
                         NO_DECODE_SUMMARIES)
    assert trained.code == 0, trained.err[-3000:]
    return data_dir, output_dir


@pytest.fixture(scope="module")
def tiny_coco(tmp_path_factory):
    root = tmp_path_factory.mktemp("captioning")
    (root / "mirror").mkdir()
    tiny = write_tiny_coco(str(root / "mirror"))
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(download.MIRROR_ENV_VAR, raising=False)
        patch.setattr(mscoco.ImageMsCocoCharacters, "resources", tiny.resources)
        patch.setattr(mscoco.ImageMsCocoCharacters, "train_shards", 1)
        patch.setattr(mscoco.ImageMsCocoCharacters, "dev_shards", 1)
        # Small photos keep the test fast: 64 px stored, 48 px crops (COCO: 256, 224).
        patch.setattr(mscoco.ImageMsCocoCharacters, "image_size", 64)
        patch.setattr(mscoco.ImageMsCocoCharacters, "crop_size", 48)
        yield root


@pytest.mark.slow  # ~40 s; CI keeps the other captioning runs
def test_tokens32k_captioner_decodes_with_beams_and_exports_for_jpeg_bytes(tiny_coco):
    root = tiny_coco / "tokens"
    root.mkdir()
    (root / "mirror").symlink_to(tiny_coco / "mirror")
    data_dir, output_dir = _train(root, "image_ms_coco_tokens32k", HPARAMS, 4)
    Image.new("RGB", (320, 240), (200, 30, 30)).save(root / "red.jpg", quality=90)
    Image.new("L", (48, 48), 90).save(root / "gray.jpg", quality=90)
    (root / "paths.txt").write_text(f"{root / 'red.jpg'}\n{root / 'gray.jpg'}\n")
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                         f"--decode_from_file={root / 'paths.txt'}",
                         f"--decode_to_file={root / 'out.txt'}",
                         "--decode_hparams=beam_size=2,alpha=0.6,extra_length=8")
    assert decoded.code == 0, decoded.err[-3000:]
    assert "red.jpg is 240x320 pixels: resized to 48x48 (height x width)" in decoded.err
    outputs = (root / "out.txt").read_text().split("\n")[:2]
    assert export_and_caption(output_dir, data_dir, str(root / "export"),
                              "beam_size=2,alpha=0.6,extra_length=8",
                              [str(root / "red.jpg"), str(root / "gray.jpg")]) == outputs


@pytest.mark.slow
def test_the_xception_encoder_trains_a_characters_captioner(tiny_coco):
    root = tiny_coco / "characters"
    root.mkdir()
    (root / "mirror").symlink_to(tiny_coco / "mirror")
    data_dir, output_dir = _train(
        root, "image_ms_coco_characters",
        HPARAMS + ",image_encoder=xception,image_encoder_channels=16,"
                  "image_encoder_xception_blocks=1", 2)
    with open(f"{output_dir}/eval_results.jsonl", encoding="utf-8") as f:
        last = json.loads(f.read().splitlines()[-1])
    assert last["step"] == 2 and "accuracy_per_sequence" in last
