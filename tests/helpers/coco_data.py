"""A tiny MS-COCO 2014 in the real layout (three zips, captions JSON), for tests: one
solid-colour JPEG per image, so that a caption is learnable from its image's colour."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile

from PIL import Image

from t2t.data.generation import download
from t2t.problems.image import mscoco
from tests.helpers.local_http import write_pinned

TRAIN = {  # image id -> (file name, size (w, h), colour, captions)
    1: ("COCO_train2014_000000000001.jpg", (80, 60), (200, 30, 30), ["A red square.", "Red!"]),
    7: ("COCO_train2014_000000000007.jpg", (40, 90), (30, 200, 30), ["A café sign ."]),
    9: ("COCO_train2014_000000000009.jpg", (64, 64), (30, 30, 200), []),  # no caption
}
VAL = {
    42: ("COCO_val2014_000000000042.jpg", (70, 50), (220, 220, 40), ["Yellow.", "So yellow", "x"]),
}
NUM_TRAIN, NUM_DEV = 3, 3


def _jpeg(size: tuple[int, int], colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="JPEG", quality=95)
    return out.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2014, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _captions(images: dict) -> bytes:
    annotations = []
    for image_id, (_, _, _, captions) in images.items():
        for caption in captions:
            annotations.append({"image_id": image_id, "id": 1000 + len(annotations), "caption": caption})
    annotations.reverse()  # not grouped or ordered by image, as in the real files
    return json.dumps(
        {
            "info": {"year": 2014},
            "images": [
                {"id": i, "file_name": f, "width": s[0], "height": s[1]}
                for i, (f, s, _, _) in images.items()
            ],
            "licenses": [],
            "annotations": annotations,
        }
    ).encode()


@dataclasses.dataclass
class Tiny:
    folder: str
    resources: dict[str, download.Resource]


def write_tiny_coco(folder: str) -> Tiny:
    """Writes the three zips into `folder`; resources pinned to them (URLs unreachable)."""
    files = {
        mscoco.TRAIN_IMAGES: _zip({f"train2014/{f}": _jpeg(s, c) for f, s, c, _ in TRAIN.values()}),
        mscoco.VAL_IMAGES: _zip({f"val2014/{f}": _jpeg(s, c) for f, s, c, _ in VAL.values()}),
        mscoco.ANNOTATIONS: _zip(
            {
                "annotations/captions_train2014.json": _captions(TRAIN),
                "annotations/captions_val2014.json": _captions(VAL),
                "annotations/instances_val2014.json": b"{}",
            }
        ),
    }
    resources = {}
    for name, data in files.items():
        resources[name] = write_pinned(folder, name, data, "file:///nonexistent/" + name)
    return Tiny(folder, resources)
