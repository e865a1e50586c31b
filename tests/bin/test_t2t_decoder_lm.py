"""t2t-decoder on a language model (as a process, and its main in the test process):
prompts, seeded sampling, scoring, another split, and the messages for bad requests."""

import json
import subprocess
import sys

import pytest

from tests.helpers.binaries import run_binary
from tests.helpers.runs import untrained_run

PROBLEM = "algorithmic_lm_reverse_binary10"
DECODER = [sys.executable, "-m", "t2t.bin.t2t_decoder"]
SAMPLE = "--decode_hparams=temperature=1.0,num_samples=2,max_new_tokens=6,seed=5,batch_size=2"


def _run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """An untrained decoder-only run (checkpoint at step 0) and its data."""
    return untrained_run(PROBLEM, tmp_path_factory.mktemp("decoder_lm_bin"))


def test_prompts_sample_the_same_text_twice_and_scores_give_bits_per_byte(lm_run, tmp_path):
    data_dir, output_dir = lm_run
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1 0 1 |\n\n0 0\n")
    outputs = []
    # Once as a process and once in this one (tests/helpers/binaries.py): the seed gives
    # the same samples in both.
    for i in range(2):
        out = tmp_path / f"out{i}.txt"
        args = [f"--output_dir={output_dir}", f"--data_dir={data_dir}", SAMPLE,
                f"--decode_from_file={prompts}", f"--decode_to_file={out}"]
        if i == 0:
            result = _run([*DECODER, *args])
            assert result.returncode == 0, result.stderr[-3000:]
        else:
            result = run_binary("t2t-decoder", *args)
            assert result.code == 0, result.err[-3000:]
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    lines = outputs[0].splitlines()
    assert len(lines) == 3 and all(line.count("\t") == 1 for line in lines)

    heldout = tmp_path / "heldout.txt"
    heldout.write_text("1 0 | 0 1\n1 1 1 | 1 1 1\n")
    result = run_binary("t2t-decoder", f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                        f"--score_file={heldout}")
    assert result.code == 0, result.err[-3000:]
    assert "bits_per_byte" in result.out and "perplexity" in result.out
    scores = (tmp_path / "heldout.txt.scores").read_text().splitlines()
    assert len(scores) == 2 and all(float(s) < 0 for s in scores)
    corpus = json.loads((tmp_path / "heldout.txt.scores.json").read_text())
    assert corpus["lines"] == 2 and corpus["bits_per_byte"] > 0


def test_bad_requests_get_one_clear_line(lm_run, tmp_path):
    data_dir, output_dir = lm_run
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    flags = [f"--output_dir={output_dir}", f"--data_dir={data_dir}"]
    # In this process (no TensorFlow start each).
    refused = run_binary("t2t-decoder", *flags, f"--decode_from_file={empty}")
    assert refused.code == 1 and "is empty: nothing to decode" in refused.err
    both = run_binary("t2t-decoder", *flags, f"--score_file={empty}", "--decode_interactive")
    assert both.code == 1 and "choose one" in both.err
    split = run_binary("t2t-decoder", *flags, "--decode_split=test")
    assert split.code == 1 and "has no split 'test': its splits are train, dev" in split.err
    empty_score = run_binary("t2t-decoder", *flags, f"--score_file={empty}")
    assert empty_score.code == 1 and "has no lines to score" in empty_score.err
    assert not any(r.traceback for r in (refused, both, split, empty_score))
    dev = run_binary("t2t-decoder", *flags, "--decode_split=dev", "--eval_steps=1",
                     "--decode_hparams=beam_size=1,batch_size=2,max_new_tokens=4")
    assert dev.code == 0 and "Decoded 2 dev examples" in dev.out
