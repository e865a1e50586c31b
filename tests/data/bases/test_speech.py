"""Tests of t2t.data.bases.speech: a user's corpus (a folder of WAV/FLAC files and a
transcript file) as one short subclass; bad files skipped and counted; resampling;
stored PCM16 read back as the audio modality's ids."""

from __future__ import annotations

import io
import os
import shutil
import subprocess

import numpy as np
import pytest
import soundfile

from t2t.data import problem
from t2t.data.bases import speech

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                reason="espeak-ng is not installed (apt-get install espeak-ng)")

SENTENCES = ["return the number of items", "write a file into the archive",
             "set up the environment for one request", "make a fifo called target path"]


def _speak(text: str, path: str, rate: int = 16000, channels: int = 1) -> np.ndarray:
    """Real speech by espeak-ng, written at `rate` Hz with `channels` (WAV or FLAC)."""
    wav = subprocess.run(["espeak-ng", "--stdout", "-v", "en-us", text], capture_output=True,
                         check=True).stdout
    samples, espeak_rate = soundfile.read(io.BytesIO(wav), dtype="int16")
    samples = speech.resample(samples, espeak_rate, rate)
    if channels == 2:
        samples = np.stack([samples, samples], axis=1)
    soundfile.write(path, samples, rate, subtype="PCM_16")
    return samples


class FolderCorpus(speech.SpeechRecognitionProblem):
    """What the README shows: WAV/FLAC files and `transcripts.txt` ("name<TAB>text")."""

    folder = ""
    num_shards = 1

    def generate_samples(self, data_dir, tmp_dir, dataset_split):
        with open(os.path.join(self.folder, "transcripts.txt"), encoding="utf-8") as f:
            for line in f:
                name, text = line.rstrip("\n").split("\t")
                yield {"audio_path": os.path.join(self.folder, name), "transcript": text}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    good = {}
    for i, text in enumerate(SENTENCES):
        name = f"u{i}.flac" if i % 2 else f"u{i}.wav"
        rate = 22050 if i == 3 else 16000  # one file to resample
        good[name] = (_speak(text, str(folder / name), rate), text)
    _speak(SENTENCES[0], str(folder / "stereo.wav"), channels=2)
    (folder / "corrupt.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot audio at all")
    truncated = (folder / "u0.wav").read_bytes()
    (folder / "truncated.wav").write_bytes(truncated[:30])  # cut inside the header
    _speak(SENTENCES[1], str(folder / "silent_text.wav"))
    lines = [f"{name}\t{text}" for name, (_, text) in good.items()] + [
        "stereo.wav\tstereo", "corrupt.wav\tcorrupt", "truncated.wav\ttruncated",
        "silent_text.wav\t   ", "missing.wav\tmissing"]
    (folder / "transcripts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, good


def _problem(folder, **attrs):
    instance = FolderCorpus()
    instance.folder = str(folder)
    for name, value in attrs.items():
        setattr(instance, name, value)
    return instance


def test_good_files_are_stored_bad_ones_skipped_and_counted(corpus, tmp_path, caplog):
    folder, good = corpus
    corpus_problem = _problem(folder)
    data_dir = str(tmp_path / "data")
    with caplog.at_level("WARNING"):
        corpus_problem.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    summary = " ".join(r.getMessage() for r in caplog.records)
    # 4 usable of 9 lines in each split (train and dev read the same transcript file)
    assert "kept 4 utterances, skipped 5" in summary
    for reason in ("channels", "unreadable", "no transcript"):
        assert reason in summary
    assert "stereo.wav: 2 channels" in summary and "corrupt.wav" in summary
    examples = list(corpus_problem.dataset(problem.TRAIN, data_dir, deterministic=True))
    assert len(examples) == 4
    encoder = corpus_problem.feature_encoders(data_dir)["targets"]
    by_text = {encoder.decode([i for i in e["targets"].numpy() if i > 1]): e for e in examples}
    assert set(by_text) == {text for _, text in good.values()}
    for samples, text in good.values():
        ids = by_text[text]["inputs"].numpy()
        if len(samples) == len(ids):  # the files stored at 16 kHz: sample for sample
            np.testing.assert_array_equal(ids, samples.astype(np.int32) + 32769)
    resampled = by_text[SENTENCES[3]]["inputs"].numpy()
    assert abs(len(resampled) - len(good["u3.flac"][0]) * 16000 / 22050) <= 2
    hparams = corpus_problem.hparams(data_dir)
    assert hparams.modality["inputs"] == "audio" and hparams.audio_sample_rate == 16000


def test_a_split_written_out_is_wav_files_listed_beside_their_transcripts(corpus, tmp_path):
    """t2t-datagen --dump_text of a speech split: t2t-decoder's input (WAV paths) and
    reference (transcripts), the WAVs holding the stored samples exactly."""
    from t2t.data.inspection import inspect_data

    folder, good = corpus
    corpus_problem = _problem(folder)
    data_dir = str(tmp_path / "data")
    corpus_problem.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    paths = inspect_data.write_text(corpus_problem, data_dir, "dev", str(tmp_path / "dev"))
    wavs = open(paths["inputs"], encoding="utf-8").read().splitlines()
    texts = open(paths["targets"], encoding="utf-8").read().splitlines()
    assert len(wavs) == len(texts) == 4 and set(texts) == {t for _, t in good.values()}
    stored = list(corpus_problem.dataset(problem.EVAL, data_dir, deterministic=True,
                                         split="dev"))
    for wav, example in zip(wavs, stored, strict=True):
        assert wav.startswith(str(tmp_path / "dev.inputs.audio")) and wav.endswith(".wav")
        samples, rate = soundfile.read(wav, dtype="int16")
        assert rate == 16000
        np.testing.assert_array_equal(samples.astype(np.int32) + 32769, example["inputs"].numpy())


def test_sentencepiece_targets_are_pieces_that_decode_to_the_transcripts(corpus, tmp_path):
    folder, good = corpus
    pieces = _problem(folder, vocab_type="subword", approx_vocab_size=40)
    data_dir = str(tmp_path / "data")
    pieces.generate_data(data_dir, str(tmp_path / "tmp"), progress=False)
    encoder = pieces.feature_encoders(data_dir)["targets"]
    hparams = pieces.hparams(data_dir)
    assert hparams.vocab_size["targets"] == encoder.vocab_size <= 40
    assert hparams.target_space_id == problem.SpaceID.EN_TOK
    decoded = set()
    for example in pieces.dataset(problem.TRAIN, data_dir, deterministic=True):
        ids = [int(i) for i in example["targets"].numpy()]
        assert ids[-1] == 1  # EOS
        text = encoder.decode(ids[:-1])
        assert len(ids) - 1 < len(text)  # pieces, not one id per character
        decoded.add(text)
    assert decoded == {text for _, text in good.values()}


def test_another_rate_is_refused_when_resampling_is_off(corpus):
    folder, _ = corpus
    strict = _problem(folder, resample_audio=False)
    with pytest.raises(speech.AudioError, match="u3.flac: sampled at 22050 Hz, the problem "
                                                  "takes 16000 Hz") as e:
        strict.waveform_of({"audio_path": str(folder / "u3.flac"), "transcript": "x"})
    assert e.value.reason == "sample rate"


def test_length_limits_are_in_seconds(corpus):
    folder, _ = corpus
    short = _problem(folder, max_seconds=0.5)
    with pytest.raises(speech.AudioError, match=r"outside \[0.1, 0.5\] s") as e:
        short.waveform_of({"audio_path": str(folder / "u0.wav"), "transcript": "x"})
    assert e.value.reason == "length"


def test_waveforms_are_checked_like_files():
    corpus_problem = FolderCorpus()
    floats = {"waveform": np.zeros(1600, np.float32), "sample_rate": 16000, "name": "w"}
    with pytest.raises(speech.AudioError, match="w: samples of type float32"):
        corpus_problem.waveform_of(floats)
    with pytest.raises(speech.AudioError, match="no samples"):
        corpus_problem.waveform_of({"waveform": np.zeros(0, np.int16), "name": "w"})


def test_audio_files_lists_wav_and_flac_recursively(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/x.WAV", "b.flac", "c.mp3", "a/d.wav"):
        (tmp_path / name).write_bytes(b"")
    found = [os.path.relpath(p, tmp_path) for p in speech.audio_files(str(tmp_path))]
    assert found == ["a/d.wav", "a/x.WAV", "b.flac"]
