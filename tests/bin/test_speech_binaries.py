"""Speech through the binaries: t2t-datagen of the espeak-ng corpus, t2t-trainer, t2t-decoder
on a list of WAV/FLAC paths with WER/CER against references, t2t-exporter (parity gate on
WAV bytes), and a plain TensorFlow script that transcribes WAV bytes like the decoder."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import pytest
import soundfile

from t2t.data.bases import speech
from tests.helpers.binaries import run_binary
from tests.helpers.runs import NO_DECODE_SUMMARIES

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                reason="espeak-ng is not installed (apt-get install espeak-ng)")

PROBLEM = "speech_synthetic_espeak_test"
HPARAMS = ("hidden_size=32,filter_size=64,num_heads=2,num_encoder_layers=1,"
           "num_decoder_layers=1,audio_num_mel_bins=20,audio_frontend_channels=8,"
           "batch_size=160000,learning_rate_warmup_steps=10")
SPOKEN = ["return the number of items", "close the file"]


def _speak(text: str, path, rate: int, fmt: str) -> None:
    wav = subprocess.run(["espeak-ng", "--stdout", "-v", "en-029+f5", text],
                         capture_output=True, check=True).stdout
    samples, espeak_rate = soundfile.read(io.BytesIO(wav), dtype="int16")
    soundfile.write(str(path), speech.resample(samples, espeak_rate, rate), rate,
                    format=fmt, subtype="PCM_16")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech_bin")
    data_dir, output_dir = str(root / "data"), str(root / "run")
    generated = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
                           f"--tmp_dir={root / 'tmp'}", "--progress=false")
    assert generated.code == 0, generated.err[-3000:]
    trained = run_binary("t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
                         "--hparams_set=transformer_speech_tiny", f"--hparams={HPARAMS}",
                         f"--data_dir={data_dir}", f"--output_dir={output_dir}",
                         "--train_steps=4", "--local_eval_frequency=4", "--eval_steps=1",
                         "--save_checkpoints_steps=4", NO_DECODE_SUMMARIES)
    assert trained.code == 0, trained.err[-3000:]
    # Files a user speaks: a 16 kHz WAV and a 22,050 Hz FLAC (resampled on reading).
    _speak(SPOKEN[0], root / "a.wav", 16000, "WAV")
    _speak(SPOKEN[1], root / "b.flac", 22050, "FLAC")
    (root / "paths.txt").write_text(f"{root / 'a.wav'}\n{root / 'b.flac'}\n")
    (root / "refs.txt").write_text("\n".join(SPOKEN) + "\n")
    return root, data_dir, output_dir


def test_checkpoints_hold_the_model_not_the_shuffled_audio(trained):
    """Speech problems do not save the input position: their shuffle buffers of
    waveforms made gigabyte checkpoints."""
    import tensorflow as tf

    _, _, output_dir = trained
    names = [name for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(output_dir))]
    assert any(name.startswith("model/") for name in names)
    assert not any("train_iterator" in name for name in names)


def test_each_evaluation_reports_the_wer_of_greedy_dev_decodes(trained):
    """The trainer's WER/CER (eval_results.jsonl) are t2t-decoder's on the same dev
    utterances with the same greedy decoding."""
    root, data_dir, output_dir = trained
    with open(f"{output_dir}/eval_results.jsonl", encoding="utf-8") as f:
        last = json.loads(f.read().splitlines()[-1])
    assert last["step"] == 4 and {"wer", "cer"} <= set(last)
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                         "--decode_hparams=beam_size=1,batch_size=16", "--eval_steps=0")
    assert decoded.code == 0, decoded.err[-3000:]
    lines = decoded.out.splitlines()
    wer = next(line for line in lines if line.startswith("WER|"))
    cer = next(line for line in lines if line.startswith("CER|"))
    assert f"= {last['wer']:.2f} (" in wer and "in 8 utterances" in wer
    assert f"= {last['cer']:.2f} (" in cer


def test_the_decoder_transcribes_audio_paths_and_scores_wer(trained):
    root, data_dir, output_dir = trained
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                         f"--decode_from_file={root / 'paths.txt'}",
                         f"--decode_reference={root / 'refs.txt'}",
                         f"--decode_to_file={root / 'out.txt'}", "--decode_hparams=beam_size=2")
    assert decoded.code == 0, decoded.err[-3000:]
    assert len((root / "out.txt").read_text().splitlines()) == 2
    wer_line = next(line for line in decoded.out.splitlines() if line.startswith("WER|"))
    assert "norm:lowercase" in wer_line and "of 8 words in 2 utterances" in wer_line
    scores = json.loads((root / "out.txt.scores.json").read_text())
    assert 0.0 <= scores["wer"] and scores["error_rates"]["words"] == 8


@pytest.mark.slow  # ~41 s; CI serves a WAV file to a speech export in tests/serving/test_page.py
def test_the_export_transcribes_wav_bytes_like_the_decoder(trained, tmp_path):
    root, data_dir, output_dir = trained
    exported = run_binary("t2t-exporter", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                          f"--export_dir={tmp_path / 'export'}", "--decode_hparams=beam_size=1")
    assert exported.code == 0, exported.err[-3000:]
    assert "Parity check passed on " in exported.out
    assert "serving_default: (inputs: string[None]) -> (outputs: string[None]" in exported.out
    path = next(line.removeprefix("Exported: ") for line in exported.out.splitlines()
                if line.startswith("Exported: "))
    _speak(SPOKEN[1], tmp_path / "b16.wav", 16000, "WAV")  # the export takes 16 kHz WAV
    wavs = [str(root / "a.wav"), str(tmp_path / "b16.wav")]
    (tmp_path / "paths.txt").write_text("\n".join(wavs) + "\n")
    decoded = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                         f"--decode_from_file={tmp_path / 'paths.txt'}",
                         f"--decode_to_file={tmp_path / 'out.txt'}", "--decode_hparams=beam_size=1")
    assert decoded.code == 0, decoded.err[-3000:]
    script = tmp_path / "client.py"
    script.write_text(
        "import sys, json, tensorflow as tf\n"
        "model = tf.saved_model.load(sys.argv[1])\n"
        "wavs = [open(p, 'rb').read() for p in sys.argv[2:]]\n"
        "out = model.signatures['serving_default'](inputs=tf.constant(wavs))\n"
        "print(json.dumps([t.decode() for t in out['outputs'].numpy()]))\n")
    client = subprocess.run([sys.executable, str(script), path, *wavs], capture_output=True,
                            text=True, timeout=300)
    assert client.returncode == 0, client.stderr[-3000:]
    served = json.loads(client.stdout.splitlines()[-1])
    assert served == (tmp_path / "out.txt").read_text().split("\n")[:2]
