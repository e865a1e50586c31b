"""End-to-end tests of the t2t-decoder and t2t-bleu binaries (each run as a process)."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.runs import untrained_run

PROBLEM = "algorithmic_reverse_binary40_test"
DECODER = [sys.executable, "-m", "t2t.bin.t2t_decoder"]
BLEU = [sys.executable, "-m", "t2t.bin.t2t_bleu"]
FAST = "--decode_hparams=beam_size=1,batch_size=4,extra_length=3"


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A training run's directory as t2t-trainer leaves it (run.json, hparams.json, a
    checkpoint of model, optimizer and input position), untrained, and its data."""
    return untrained_run(PROBLEM, tmp_path_factory.mktemp("decoder_bin"))


def test_decode_from_file_with_reference(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    source = tmp_path / "source.txt"
    source.write_bytes(b"1 0 1\n\n0 \xff 1\n" + b"1 0 " * 3000 + b"\n0 1 1 0\n")
    reference = tmp_path / "reference.txt"
    reference.write_text("1 0 1\n\n1 0\n0 1\n0 1 1 0\n")
    result = _run([*DECODER, f"--problem={PROBLEM}", "--model=transformer",
                   "--hparams_set=transformer_test", "--hparams=batch_size=256,max_length=12",
                   f"--data_dir={data_dir}", f"--output_dir={output_dir}",
                   FAST + ",write_beam_scores=True", f"--decode_from_file={source}",
                   f"--decode_reference={reference}"])
    assert result.returncode == 0, result.stderr[-3000:]
    decodes = f"{source}.transformer.transformer_test.{PROBLEM}.beam1.alpha0.6.decodes"
    assert f"Decoded 5 lines of {source}" in result.stdout and decodes in result.stdout
    lines = open(decodes, encoding="utf-8").read().split("\n")
    assert len(lines) == 6 and lines[-1] == ""
    for line in lines[:-1]:
        text, score = line.split("\t")
        assert set(text.split()) <= {"0", "1"} and float(score) <= 0
    assert "line 2 is empty" in result.stderr and "not valid UTF-8" in result.stderr
    # max_input_length defaults to hparams.max_length (a decode-time override here).
    assert "line 4 has 6000 tokens: cut to the first 12 (max_input_length)" in result.stderr
    assert "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in result.stdout
    assert "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" in result.stdout
    assert "Traceback" not in result.stderr
    # The scores, for scripts (the regression runner reads them).
    scores = json.loads(open(decodes + ".scores.json", encoding="utf-8").read())
    assert scores["lines"] == 5 and scores["reference"] == str(reference)
    assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
    assert scores["bleu_signature"].startswith("BLEU|nrefs:1")
    assert f"Scores written to {decodes}.scores.json" in result.stdout


def test_interactive_answers_two_lines_in_one_process(run_dir):
    data_dir, output_dir = run_dir
    # The problem, model and hparams come from the run's run.json / hparams.json.
    result = _run([*DECODER, f"--output_dir={output_dir}", f"--data_dir={data_dir}", FAST,
                   "--decode_interactive"], input="1 0 1\n0 0 1\n")
    assert result.returncode == 0, result.stderr[-3000:]
    answers = result.stdout.split("\n")
    assert len(answers) == 3 and answers[2] == "", result.stdout
    assert all(set(a.split()) <= {"0", "1"} for a in answers)
    assert "'q' or EOF quits" in result.stderr


def test_dev_set_decoding_and_errors(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    result = _run([*DECODER, f"--output_dir={output_dir}", f"--data_dir={data_dir}", FAST,
                   "--eval_steps=2"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[7] inputs:" in result.stdout and "[8] inputs:" not in result.stdout
    assert "Decoded 8 dev examples: exact match" in result.stdout
    assert "BLEU|nrefs:1|" in result.stdout
    texts = {}
    for name in ("inputs", "targets", "outputs"):
        with open(os.path.join(output_dir, f"decode_dev.{name}.txt"), encoding="utf-8") as f:
            texts[name] = f.read().splitlines()
        assert len(texts[name]) == 8
    assert [t.split() for t in texts["targets"]] == [i.split()[::-1] for i in texts["inputs"]]

    empty = tmp_path / "empty_run"
    empty.mkdir()
    missing = _run([*DECODER, f"--problem={PROBLEM}", "--model=transformer",
                    "--hparams_set=transformer_test", f"--output_dir={empty}", FAST])
    assert missing.returncode == 1
    assert f"error: no checkpoint in {empty}: train first with t2t-trainer" in missing.stderr
    assert "or pass --checkpoint_path" in missing.stderr
    bad = _run([*DECODER, f"--output_dir={output_dir}", "--decode_hparams=beam_sise=2"])
    assert bad.returncode == 1 and "Did you mean: beam_size" in bad.stderr
    no_run = _run([*DECODER, "--model=transformer"])
    assert no_run.returncode == 1 and "--problem, --hparams_set required" in no_run.stderr
    assert "Traceback" not in missing.stderr + bad.stderr + no_run.stderr


def test_t2t_bleu(tmp_path):
    (tmp_path / "hyp.txt").write_text("the cat sat on the mat\nhello world\n")
    (tmp_path / "ref.txt").write_text("the cat sat on the mat\nhello world\n")
    (tmp_path / "short.txt").write_text("the cat\n")
    result = _run([*BLEU, f"--translation={tmp_path / 'hyp.txt'}",
                   f"--reference={tmp_path / 'ref.txt'}"])
    assert result.returncode == 0, result.stderr
    bleu, chrf = result.stdout.splitlines()
    assert bleu.startswith("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert " = 100.00 " in bleu and chrf.startswith("chrF2|nrefs:1|") and chrf.endswith("= 100.00")
    mismatch = _run([*BLEU, f"--translation={tmp_path / 'short.txt'}",
                     f"--reference={tmp_path / 'ref.txt'}"])
    assert mismatch.returncode == 1 and "1 translations but 2 references" in mismatch.stderr
    missing = _run([*BLEU, f"--translation={tmp_path / 'nope.txt'}", "--reference=x"])
    assert missing.returncode == 1 and "no such file" in missing.stderr
    assert "Traceback" not in mismatch.stderr + missing.stderr
