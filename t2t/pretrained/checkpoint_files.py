"""Reading a local Hugging Face checkpoint folder: config.json and the weights.

Weights: model.safetensors, or model.safetensors.index.json and its shards (read with
the `safetensors` package alone), else pytorch_model.bin (needs torch). Every tensor
comes back as a float32 numpy array by its Hugging Face name. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from t2t.utils import optional_deps

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX, PYTORCH_FILE)
HOW_TO_GET = ("get one on a machine with internet, e.g. `huggingface-cli download "
              "Helsinki-NLP/opus-mt-en-de --local-dir opus-mt-en-de`, and copy the folder here")


class CheckpointFolderError(ValueError):
    """A folder that is not a readable Hugging Face checkpoint."""


def read_config(folder: str) -> dict[str, Any]:
    """config.json of `folder` as a dict; CheckpointFolderError naming what is missing."""
    if not os.path.isdir(folder):
        raise CheckpointFolderError(f"{folder!r} is not a folder: give the local folder of a "
                                    f"Hugging Face checkpoint ({HOW_TO_GET}).")
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.isfile(path):
        found = sorted(os.listdir(folder))[:12]
        raise CheckpointFolderError(
            f"{folder!r} has no {CONFIG_FILE} (it holds {found}): give the folder of a "
            f"Hugging Face checkpoint ({HOW_TO_GET}).")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise CheckpointFolderError(f"{path} is not valid JSON ({e}).") from e


def _bfloat16_tensors(path: str) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file holding bfloat16 (which numpy lacks), read
    from the format itself: an 8-byte header length, a JSON header, raw little-endian
    data. bfloat16 is the top half of a float32."""
    kinds = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
             "I32": np.int32, "BF16": np.uint16}
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in kinds:
            raise CheckpointFolderError(f"{path}: tensor {name!r} has dtype {entry['dtype']}, "
                                        f"which t2t-import does not read ({sorted(kinds)}).")
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=kinds[entry["dtype"]])
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.reshape(entry["shape"])
    return tensors


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
    safetensors_numpy = optional_deps.require("safetensors.numpy", "import", "t2t-import")
    try:
        return dict(safetensors_numpy.load_file(path))
    except (TypeError, ValueError) as e:  # bfloat16: no numpy dtype
        if "bf16" not in str(e).lower() and "bfloat16" not in str(e).lower():
            raise CheckpointFolderError(f"{path} is not a readable safetensors file ({e}).") from e
        return _bfloat16_tensors(path)


def _read_pytorch(path: str) -> dict[str, np.ndarray]:
    torch = optional_deps.require("torch", "import",
                                   f"t2t-import of {PYTORCH_FILE}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: value.float().numpy() for name, value in state.items()}


def read_weights(folder: str) -> dict[str, np.ndarray]:
    """{Hugging Face name: float32 array} of every tensor of the checkpoint in `folder`."""
    if os.path.isfile(os.path.join(folder, SAFETENSORS_FILE)):
        tensors = _read_safetensors(os.path.join(folder, SAFETENSORS_FILE))
    elif os.path.isfile(os.path.join(folder, SAFETENSORS_INDEX)):
        with open(os.path.join(folder, SAFETENSORS_INDEX), encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        tensors = {}
        for shard in shards:
            tensors.update(_read_safetensors(os.path.join(folder, shard)))
    elif os.path.isfile(os.path.join(folder, PYTORCH_FILE)):
        tensors = _read_pytorch(os.path.join(folder, PYTORCH_FILE))
    else:
        raise CheckpointFolderError(
            f"{folder!r} holds no weights: expected one of {list(WEIGHT_FILES)} "
            f"(it holds {sorted(os.listdir(folder))[:12]}).")
    return {name: np.asarray(value, np.float32) for name, value in tensors.items()}
