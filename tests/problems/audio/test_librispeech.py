"""Tests of t2t.problems.audio.librispeech: the real pins (TensorFlow Datasets' checksums), and
librispeech_clean_small generated from a local HTTP mirror serving tiny archives in
LibriSpeech's layout, of real speech (espeak-ng) as FLAC files made here."""

from __future__ import annotations

import io
import os
import shutil
import subprocess

import numpy as np
import pytest
import soundfile

from t2t import registry
from t2t.data import problem
from t2t.data.bases import speech
from t2t.data.generation import download
from t2t.problems.audio import librispeech
from tests.helpers.local_http import (
    check_real_pin_rejects,
    serve_folder,
    tar_bytes,
    tfds_root,
    write_pinned,
)

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng is not installed (apt-get install espeak-ng)")

TEXTS = {"train-clean-100": ["RETURN THE NUMBER OF ITEMS", "WRITE A FILE INTO THE ARCHIVE",
                             "THE MODULE'S NAME IS KEPT"],
         "dev-clean": ["CLOSE THE CONNECTION"], "test-clean": ["OPEN THE ARCHIVE AGAIN"]}


def test_the_pins_are_tensorflow_datasets_checksums():
    root = tfds_root()
    if root is None:
        pytest.skip("tensorflow_datasets is not installed")
    with open(os.path.join(root, "datasets", "librispeech", "checksums.tsv")) as f:
        recorded = {line.split("\t")[0]: line.split("\t")[1:3] for line in f if line.strip()}
    assert len(librispeech.RESOURCES) == len(recorded) == 7
    for resource in librispeech.RESOURCES.values():
        size, sha = recorded[resource.url]
        assert (resource.size, resource.sha256) == (int(size), sha)


def test_a_wrong_file_in_a_mirror_fails_the_real_pin(tmp_path):
    check_real_pin_rejects(librispeech.RESOURCES["dev-clean"], tmp_path, b"not librispeech")


def _flac(text: str) -> bytes:
    wav = subprocess.run(["espeak-ng", "--stdout", "-v", "en-us", text.lower()],
                         capture_output=True, check=True).stdout
    samples, rate = soundfile.read(io.BytesIO(wav), dtype="int16")
    buffer = io.BytesIO()
    soundfile.write(buffer, speech.resample(samples, rate, 16000), 16000, format="FLAC")
    return buffer.getvalue()


def _archive(name: str, texts: list[str]) -> bytes:
    """A LibriSpeech-shaped archive: LibriSpeech/<name>/<speaker>/<chapter>/..."""
    folder = f"LibriSpeech/{name}/19/198"
    members = {f"{folder}/19-198-{i:04d}.flac": _flac(t) for i, t in enumerate(texts)}
    members[f"{folder}/19-198.trans.txt"] = "".join(
        f"19-198-{i:04d} {t}\n" for i, t in enumerate(texts)).encode()
    return tar_bytes(members)


@needs_espeak
def test_clean_small_streams_a_mirror_of_its_archives(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    resources = {name: write_pinned(str(mirror), f"{name}.tar.gz", _archive(name, texts),
                                    f"file://{tmp_path}/gone/{name}.tar.gz")
                 for name, texts in TEXTS.items()}
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)
    monkeypatch.setattr(librispeech.LibrispeechCleanSmall, "resources", resources)
    monkeypatch.setattr(librispeech.LibrispeechCleanSmall, "num_shards", 1)
    small = registry.problem("librispeech_clean_small")
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    with serve_folder(str(mirror)) as (url, requested):
        small.generate_data(data_dir, tmp_dir, mirror=url, progress=False)
    assert sorted(requested) == sorted(f"/{name}.tar.gz" for name in TEXTS)
    encoder = small.feature_encoders(data_dir)["targets"]
    for split, mode in (("train-clean-100", problem.TRAIN), ("dev-clean", problem.EVAL)):
        examples = list(small.dataset(mode, data_dir, deterministic=True,
                                      split={"train-clean-100": "train"}.get(split, "dev")))
        texts = sorted(encoder.decode([i for i in e["targets"].numpy() if i > 1])
                       for e in examples)
        assert texts == sorted(t.lower() for t in TEXTS[split])
        assert all(np.asarray(e["inputs"]).min() > 0 for e in examples)  # PCM ids, no padding
    # Extracted under tmp_dir, where a later generation finds it (extract.py's marker).
    assert os.path.isdir(os.path.join(tmp_dir, "librispeech-dev-clean", "LibriSpeech"))


def test_an_archive_without_transcripts_is_named(tmp_path):
    (tmp_path / "LibriSpeech" / "dev-clean").mkdir(parents=True)
    with pytest.raises(problem.DamagedDataError, match="dev-clean.tar.gz does not hold"):
        next(librispeech.utterances(str(tmp_path), "dev-clean"))


def test_tensor2tensors_full_training_problems_pair_960_hours_with_one_test_set():
    clean = registry.problem("librispeech_train_full_test_clean")
    other = registry.problem("librispeech_train_full_test_other")
    full = registry.problem("librispeech")
    assert clean.train_archives == other.train_archives == full.train_archives
    assert (clean.dev_archives, clean.test_archives) == (("dev-clean",), ("test-clean",))
    assert (other.dev_archives, other.test_archives) == (("dev-other",), ("test-other",))
