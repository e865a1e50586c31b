"""Reading Hugging Face checkpoint folders (t2t.pretrained.checkpoint_files) and what
t2t-import refuses (import_run.import_checkpoint): each case's values or its message,
and for a refusal that nothing was written."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from t2t.pretrained import checkpoint_files, import_run
from t2t.pretrained.checkpoint_files import CheckpointFolderError
from t2t.pretrained.weight_mapping import UnsupportedCheckpointError
from tests.pretrained.conftest import copy_checkpoint

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def write_config(folder, config=None) -> str:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config or {"architectures": ["MarianMTModel"]}, f)
    return str(folder)


# ------------------------------------------------------------------ weight files
def test_bfloat16_safetensors_read_as_float32(tmp_path):
    """A bf16 tensor (numpy has no bfloat16) comes back as the float32 of the same value,
    beside a float32 tensor of the same file."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    torch.manual_seed(0)
    tensors = {"model.shared.weight": torch.randn(5, 4).to(torch.bfloat16),
               "final_logits_bias": torch.randn(1, 5)}
    save_file(tensors, str(write_config(tmp_path) + "/model.safetensors"))
    weights = checkpoint_files.read_weights(str(tmp_path))
    assert sorted(weights) == sorted(tensors)
    for name, value in tensors.items():
        assert weights[name].dtype == np.float32 and weights[name].shape == tuple(value.shape)
        np.testing.assert_array_equal(weights[name], value.float().numpy())


def test_sharded_index_reads_every_shard(tmp_path):
    """model.safetensors.index.json: the tensors of all shards it names, by name."""
    pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    shards = {"model-00001-of-00002.safetensors": {"a.weight": rng.normal(size=(3, 2))},
              "model-00002-of-00002.safetensors": {"b.weight": rng.normal(size=(4,)),
                                                    "c.bias": rng.normal(size=(2, 2))}}
    folder = write_config(tmp_path)
    weight_map = {}
    for shard, tensors in shards.items():
        save_file({k: v.astype(np.float32) for k, v in tensors.items()}, f"{folder}/{shard}")
        weight_map.update({name: shard for name in tensors})
    with open(f"{folder}/model.safetensors.index.json", "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    weights = checkpoint_files.read_weights(folder)
    assert sorted(weights) == ["a.weight", "b.weight", "c.bias"]
    for tensors in shards.values():
        for name, value in tensors.items():
            np.testing.assert_array_equal(weights[name], value.astype(np.float32))


def test_pytorch_bin_state_dict(tmp_path):
    """pytorch_model.bin (torch.save of a state dict), float16 included, as float32."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    state = {"shared.weight": torch.randn(6, 3), "lm_head.weight": torch.randn(6, 3).half()}
    torch.save(state, write_config(tmp_path) + "/pytorch_model.bin")
    weights = checkpoint_files.read_weights(str(tmp_path))
    assert sorted(weights) == sorted(state)
    for name, value in state.items():
        assert weights[name].dtype == np.float32
        np.testing.assert_array_equal(weights[name], value.float().numpy())


def test_safetensors_preferred_over_pytorch_bin(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file

    folder = write_config(tmp_path)
    save_file({"x": np.ones(2, np.float32)}, f"{folder}/model.safetensors")
    torch.save({"x": torch.zeros(2)}, f"{folder}/pytorch_model.bin")
    np.testing.assert_array_equal(checkpoint_files.read_weights(folder)["x"], [1.0, 1.0])


# ------------------------------------------------------------- missing or bad files
def test_missing_weights_names_the_expected_files(tmp_path):
    folder = write_config(tmp_path)
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(CheckpointFolderError) as e:
        checkpoint_files.read_weights(folder)
    message = str(e.value)
    assert "holds no weights" in message
    for name in checkpoint_files.WEIGHT_FILES:
        assert name in message
    assert "vocab.json" in message  # what the folder does hold


def test_missing_config_names_the_folder_and_how_to_get_one(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointFolderError) as e:
        checkpoint_files.read_config(str(tmp_path))
    message = str(e.value)
    assert "has no config.json" in message and "model.safetensors" in message
    assert "huggingface-cli download" in message


def test_not_a_folder_and_bad_json(tmp_path):
    with pytest.raises(CheckpointFolderError, match="is not a folder"):
        checkpoint_files.read_config(str(tmp_path / "opus-mt-en-de"))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointFolderError, match="config.json is not valid JSON"):
        checkpoint_files.read_config(str(tmp_path))


# ------------------------------------------------------------------------ refusals
def assert_refused(folder: str, output_dir: str, error: type, *fragments: str) -> None:
    """import_checkpoint raises `error` whose message holds every fragment, and
    writes nothing (output_dir is not created)."""
    with pytest.raises(error) as e:
        import_run.import_checkpoint(folder, output_dir)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)
    assert not os.path.exists(output_dir)


def test_refuses_an_unsupported_architecture(hf_checkpoint, tmp_path):
    folder = copy_checkpoint(hf_checkpoint("marian_swish"), str(tmp_path / "bart"),
                             config={"architectures": ["BartForConditionalGeneration"],
                                     "model_type": "bart"})
    assert_refused(folder, str(tmp_path / "run"), UnsupportedCheckpointError,
                   "'BartForConditionalGeneration' is not supported",
                   "MarianMTModel", "T5ForConditionalGeneration")


def test_refuses_marian_with_differing_ffn_dims(hf_checkpoint, tmp_path):
    folder = copy_checkpoint(hf_checkpoint("marian_swish"), str(tmp_path / "m"),
                             config={"decoder_ffn_dim": 128})
    assert_refused(folder, str(tmp_path / "run"), UnsupportedCheckpointError,
                   "encoder_ffn_dim=64 differs from decoder_ffn_dim=128")


def test_refuses_t5_with_an_unknown_feed_forward(hf_checkpoint, tmp_path):
    folder = copy_checkpoint(hf_checkpoint("t5_v1_1"), str(tmp_path / "t5"),
                             config={"feed_forward_proj": "gated-foo"})
    assert_refused(folder, str(tmp_path / "run"), UnsupportedCheckpointError,
                   "feed_forward_proj='gated-foo' is not supported", "gated-gelu")


def test_refuses_a_tensor_of_the_wrong_shape(hf_checkpoint, tmp_path):
    name = "model.encoder.layers.0.fc1.weight"  # [64, 32]

    def narrower(tensors):
        return {**tensors, name: tensors[name][:48]}

    folder = copy_checkpoint(hf_checkpoint("marian_swish"), str(tmp_path / "m"),
                             tensors=narrower)
    assert_refused(folder, str(tmp_path / "run"), UnsupportedCheckpointError,
                   f"{name} (stored (48, 32), transposed) has shape (32, 48)", "ffn",
                   "has (32, 64)",
                   "config.json does not describe these weights")


def test_refuses_an_unexpected_tensor(hf_checkpoint, tmp_path):
    extra = "model.encoder.layers.0.adapter.weight"
    folder = copy_checkpoint(hf_checkpoint("marian_swish"), str(tmp_path / "m"),
                             tensors=lambda t: {**t, extra: np.zeros((4, 32), np.float32)})
    assert_refused(folder, str(tmp_path / "run"), UnsupportedCheckpointError,
                   "holds 1 tensor(s) this architecture does not use", extra,
                   "nothing was imported")


def test_refuses_a_non_empty_output_dir(hf_checkpoint, tmp_path):
    output_dir = tmp_path / "run"
    output_dir.mkdir()
    (output_dir / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError) as e:
        import_run.import_checkpoint(hf_checkpoint("marian_swish"), str(output_dir))
    assert "is not empty" in str(e.value) and "notes.txt" in str(e.value)
    assert "nothing was written" in str(e.value)
    assert sorted(os.listdir(output_dir)) == ["notes.txt"]
    assert (output_dir / "notes.txt").read_text() == "mine"
