"""End-to-end tests of the t2t-decoder and t2t-bleu binaries: their mains in the test
process (tests/helpers/binaries.py: no TensorFlow start each), and a real process where
only one shows the behaviour (stdin of the interactive mode, a shadowed package)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from t2t import registry, usr_dir
from t2t.decoding import text_metrics
from tests.helpers.binaries import run_binary
from tests.helpers.runs import untrained_run

PROBLEM = "algorithmic_reverse_binary40_test"
DECODER = [sys.executable, "-m", "t2t.bin.t2t_decoder"]
FAST = "--decode_hparams=beam_size=1,batch_size=4,extra_length=3"


# A tiny word-level summarization problem whose metrics, like summarize_cnn_dailymail32k's,
# include ROUGE.
SUMMARY_PROBLEM = "tiny_summarize_rouge_test"
SUMMARY_MODULE = textwrap.dedent('''
    from t2t import registry
    from t2t.problems import problem, text_problems

    WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "to", "red", "house"]
    PAIRS = {
        "train": [("the cat sat on the red mat", "cat sat on mat"),
                  ("the dog ran to the red house", "dog ran to house")] * 4,
        "dev": [("the red cat ran to the dog", "cat ran to dog"),
                ("the dog sat on the cat", "dog sat on cat")],
    }


    @registry.register_problem("PROBLEM_NAME")
    class TinySummarize(text_problems.Text2TextProblem):
        vocab_type = text_problems.VOCAB_TOKEN
        splits = (problem.SplitSpec("train", 1), problem.SplitSpec("dev", 1))

        def vocab_tokens(self):
            return WORDS

        def generate_samples(self, data_dir, tmp_dir, split):
            for article, summary in PAIRS[split]:
                yield {"inputs": article, "targets": summary}

        def eval_metrics(self):
            return [*super().eval_metrics(), "rouge_2", "rouge_l"]
''').replace("PROBLEM_NAME", SUMMARY_PROBLEM)
ROUGE_LINE = re.compile(r"^(ROUGE-[12L])\|(\S+) = (\d+\.\d\d) F \(P (\d+\.\d\d), R (\d+\.\d\d)\)$")


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def _decode(*args: str):
    """t2t-decoder's main in this process (no TensorFlow start): code, out, err."""
    return run_binary("t2t-decoder", *args)


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
    result = _decode(f"--problem={PROBLEM}", "--model=transformer",
                 "--hparams_set=transformer_test", "--hparams=batch_size=256,max_length=12",
                 f"--data_dir={data_dir}", f"--output_dir={output_dir}",
                 FAST + ",write_beam_scores=True", f"--decode_from_file={source}",
                 f"--decode_reference={reference}")
    assert result.code == 0, result.err[-3000:]
    decodes = f"{source}.transformer.transformer_test.{PROBLEM}.beam1.alpha0.6.decodes"
    assert f"Decoded 5 lines of {source}" in result.out and decodes in result.out
    lines = open(decodes, encoding="utf-8").read().split("\n")
    assert len(lines) == 6 and lines[-1] == ""
    for line in lines[:-1]:
        text, score = line.split("\t")
        assert set(text.split()) <= {"0", "1"} and float(score) <= 0
    assert "line 2 is empty" in result.err and "not valid UTF-8" in result.err
    # max_input_length defaults to hparams.max_length (a decode-time override here).
    assert "line 4 has 6000 tokens: cut to the first 12 (max_input_length)" in result.err
    assert "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in result.out
    assert "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" in result.out
    assert "Traceback" not in result.err
    # The scores, for scripts (the regression runner reads them).
    scores = json.loads(open(decodes + ".scores.json", encoding="utf-8").read())
    assert scores["lines"] == 5 and scores["reference"] == str(reference)
    assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
    assert scores["bleu_signature"].startswith("BLEU|nrefs:1")
    assert f"Scores written to {decodes}.scores.json" in result.out
    # No ROUGE where the problem does not ask for it: the output is BLEU's and chrF's only.
    assert "ROUGE" not in result.out + result.err
    assert set(scores) == {"bleu", "chrf", "lines", "bleu_signature", "chrf_signature",
                           "reference"}


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
    result = _decode(f"--output_dir={output_dir}", f"--data_dir={data_dir}", FAST,
                 "--eval_steps=2")
    assert result.code == 0, result.err[-3000:]
    assert "[7] inputs:" in result.out and "[8] inputs:" not in result.out
    assert "Decoded 8 dev examples: exact match" in result.out
    assert "BLEU|nrefs:1|" in result.out
    texts = {}
    for name in ("inputs", "targets", "outputs"):
        with open(os.path.join(output_dir, f"decode_dev.{name}.txt"), encoding="utf-8") as f:
            texts[name] = f.read().splitlines()
        assert len(texts[name]) == 8
    assert [t.split() for t in texts["targets"]] == [i.split()[::-1] for i in texts["inputs"]]

    empty = tmp_path / "empty_run"
    empty.mkdir()
    # The refusals in this process: no TensorFlow start each.
    missing = run_binary("t2t-decoder", f"--problem={PROBLEM}", "--model=transformer",
                         "--hparams_set=transformer_test", f"--output_dir={empty}", FAST)
    assert missing.code == 1
    assert f"error: no checkpoint in {empty}: train first with t2t-trainer" in missing.err
    assert "or pass --checkpoint_path" in missing.err
    bad = run_binary("t2t-decoder", f"--output_dir={output_dir}", "--decode_hparams=beam_sise=2")
    assert bad.code == 1 and "Did you mean: beam_size" in bad.err
    no_run = run_binary("t2t-decoder", "--model=transformer")
    assert no_run.code == 1 and "--problem, --hparams_set required" in no_run.err
    assert not (missing.traceback or bad.traceback or no_run.traceback)


# slow: three decoder starts; the maps themselves are checked in
#   tests/decoding/test_attention_maps.py
@pytest.mark.slow
def test_write_attention_heat_maps(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    source = tmp_path / "source.txt"
    source.write_text("1 0 1\n0 0\n")
    decodes = tmp_path / "out.decodes"
    result = _run([*DECODER, f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                   FAST + ",write_attention=true,write_beam_scores=true",
                   f"--decode_from_file={source}", f"--decode_to_file={decodes}"])
    assert result.returncode == 0, result.stderr[-3000:]
    page_path = f"{decodes}.attention.html"
    assert f"Attention heat maps of 2 outputs written to {page_path}" in result.stdout
    page = open(page_path, encoding="utf-8").read()
    data = json.loads(page.split('<script type="application/json" id="data">')[1]
                      .split("</script>")[0])
    assert [e["source"] for e in data["examples"]] == [["1", "0", "1", "<EOS>"],
                                                       ["0", "0", "<EOS>"]]
    outputs = [line.split("\t")[0].split() for line in open(decodes, encoding="utf-8")]
    assert [e["target"] for e in data["examples"]] == [[*o, "<EOS>"] for o in outputs]
    assert (data["layers"], data["heads"]) == (2, 2)  # transformer_test
    first = np.asarray(data["examples"][0]["weights"])
    assert first.shape == (2, 2, len(outputs[0]) + 1, 4)
    np.testing.assert_allclose(first.sum(-1), 1.0, atol=1e-3)
    # The dev set's decodes: OUTPUT_DIR/decode_dev.attention.html.
    dev = _run([*DECODER, f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                FAST + ",write_attention=true", "--eval_steps=1"])
    assert dev.returncode == 0, dev.stderr[-3000:]
    dev_page = os.path.join(output_dir, "decode_dev.attention.html")
    assert f"Attention heat maps of 4 outputs written to {dev_page}" in dev.stdout
    # What it cannot honour is refused before decoding, naming the reason.
    refused = _run([*DECODER, f"--output_dir={output_dir}", f"--data_dir={data_dir}",
                    FAST + ",write_attention=true", "--decode_interactive"], input="1 0\n")
    assert refused.returncode == 1
    assert "not with --score_file or --decode_interactive" in refused.stderr
    assert "Traceback" not in result.stderr + dev.stderr + refused.stderr


def test_t2t_bleu(tmp_path):
    (tmp_path / "hyp.txt").write_text("the cat sat on the mat\nhello world\n")
    (tmp_path / "ref.txt").write_text("the cat sat on the mat\nhello world\n")
    (tmp_path / "short.txt").write_text("the cat\n")
    # t2t-bleu's main in this process (tests/helpers/binaries.py).
    result = run_binary("t2t-bleu", f"--translation={tmp_path / 'hyp.txt'}",
                        f"--reference={tmp_path / 'ref.txt'}")
    assert result.code == 0, result.err
    bleu, chrf = result.out.splitlines()
    assert bleu.startswith("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert " = 100.00 " in bleu and chrf.startswith("chrF2|nrefs:1|") and chrf.endswith("= 100.00")
    # Its errors.
    mismatch = run_binary("t2t-bleu", f"--translation={tmp_path / 'short.txt'}",
                          f"--reference={tmp_path / 'ref.txt'}")
    assert mismatch.code == 1 and "1 translations but 2 references" in mismatch.err
    missing = run_binary("t2t-bleu", f"--translation={tmp_path / 'nope.txt'}", "--reference=x")
    assert missing.code == 1 and "no such file" in missing.err
    assert not mismatch.traceback and not missing.traceback


# ------------------------------------------------------------------ ROUGE
@pytest.fixture(scope="module")
def summary_run(tmp_path_factory):
    """(usr module path, data_dir, output_dir) of an untrained run of SUMMARY_PROBLEM."""
    root = tmp_path_factory.mktemp("decoder_rouge")
    path = root / "tiny_summarize.py"
    path.write_text(SUMMARY_MODULE)
    module = usr_dir.import_usr_dir(str(path))
    try:
        yield (str(path), *untrained_run(SUMMARY_PROBLEM, root))
    finally:
        registry.REGISTRIES["problem"].unregister(SUMMARY_PROBLEM)
        sys.modules.pop(module.__name__, None)


def _summary_args(summary_run):
    usr_file, data_dir, output_dir = summary_run
    return [f"--t2t_usr_dir={usr_file}", f"--output_dir={output_dir}",
            f"--data_dir={data_dir}", FAST]


def _printed_rouge(stdout):
    """{"ROUGE-1": (F, P, R), ...} as printed, and the set of the lines' signatures."""
    matches = [ROUGE_LINE.match(line) for line in stdout.splitlines() if "ROUGE" in line]
    assert len(matches) == 3 and all(matches), stdout
    return {m[1]: (m[3], m[4], m[5]) for m in matches}, {m[2] for m in matches}


def _expected_rouge(hypotheses, references):
    """rouge_scores of the same lines, and what the decoder must print (2 decimals)."""
    scores = text_metrics.rouge_scores(hypotheses, references)
    return scores, {label: tuple(f"{scores[name + part]:.2f}" for part in ("", "_p", "_r"))
                    for name, label in text_metrics.ROUGE_LABELS.items()}


def test_rouge_of_a_summarization_problem(summary_run, tmp_path):
    pytest.importorskip("rouge_score")
    source = tmp_path / "articles.txt"
    source.write_text("the cat sat on the red mat\nthe dog ran to the house\nthe red cat\n")
    reference = tmp_path / "summaries.txt"
    # Every word of the vocabulary in each reference: a non-empty decode overlaps it.
    reference.write_text("cat sat on mat the dog ran to red house\n" * 3)
    decodes = tmp_path / "summaries.decodes"
    result = _decode(*_summary_args(summary_run), f"--decode_from_file={source}",
                 f"--decode_to_file={decodes}", f"--decode_reference={reference}")
    assert result.code == 0, result.err[-3000:]
    print(result.out)  # the figures, for the README (pytest -s)
    assert "BLEU|nrefs:1|" in result.out and "chrF2|nrefs:1|" in result.out
    hypotheses = decodes.read_text(encoding="utf-8").splitlines()
    scores, expected = _expected_rouge(hypotheses, reference.read_text().splitlines())
    printed, signatures = _printed_rouge(result.out)
    assert printed == expected
    assert signatures == {text_metrics.rouge_signature()}
    assert signatures.pop().startswith("nrefs:1|tok:default|stem:porter|agg:mean|version:")
    if any(h.split() for h in hypotheses):
        assert float(printed["ROUGE-1"][1]) > 0  # precision: each word is in its reference
    record = json.loads((tmp_path / "summaries.decodes.scores.json").read_text())
    for name in text_metrics.ROUGE_LABELS:
        for part in ("", "_p", "_r"):
            assert record[name + part] == pytest.approx(scores[name + part], abs=1e-9)
    assert record["rouge_signature"] == text_metrics.rouge_signature() and record["lines"] == 3

    # The dev set: ROUGE of the outputs written against the targets written.
    dev = _decode(*_summary_args(summary_run), "--eval_steps=1")
    assert dev.code == 0, dev.err[-3000:]
    outputs, targets = (
        open(os.path.join(summary_run[2], f"decode_dev.{name}.txt"), encoding="utf-8")
        .read().splitlines() for name in ("outputs", "targets"))
    assert targets == ["cat ran to dog", "dog sat on cat"]
    assert _printed_rouge(dev.out)[0] == _expected_rouge(outputs, targets)[1]
    assert "Traceback" not in result.err + dev.err


# slow: two decoder starts for the missing-package message
@pytest.mark.slow
def test_rouge_without_rouge_score_installed(summary_run, tmp_path):
    shadow = tmp_path / "shadow"  # `import rouge_score` fails there as if not installed
    shadow.mkdir()
    (shadow / "rouge_score.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'rouge_score'\", name='rouge_score')\n")
    path = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    (tmp_path / "in.txt").write_text("the cat\n")
    decodes = tmp_path / "out.decodes"
    failed = _run([*DECODER, *_summary_args(summary_run), f"--decode_from_file={tmp_path / 'in.txt'}",
                   f"--decode_to_file={decodes}", f"--decode_reference={tmp_path / 'in.txt'}"],
                  env=env)
    message = "ROUGE needs rouge_score, which is not installed: pip install 't2t[summarization]'"
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == f"error: {message}", failed.stderr[-3000:]
    assert not decodes.exists()  # refused before decoding
    # Dev decodes are still written and scored with BLEU; ROUGE is skipped with a note.
    dev = _run([*DECODER, *_summary_args(summary_run), "--eval_steps=1"], env=env)
    assert dev.returncode == 0, dev.stderr[-3000:]
    assert "BLEU|nrefs:1|" in dev.stdout and "ROUGE-" not in dev.stdout
    assert f"note: ROUGE skipped: {message}" in dev.stderr
    assert "Traceback" not in failed.stderr + dev.stderr


# ------------------------------------------ output paths, shards, T2T's decode hparams
def test_output_paths_are_checked_before_the_model_loads(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    (tmp_path / "in.txt").write_text("1 0\n")
    (tmp_path / "a_folder").mkdir()
    text = (f"--output_dir={output_dir}", f"--data_dir={data_dir}", FAST,
            f"--decode_from_file={tmp_path / 'in.txt'}")
    folder = _decode(*text, f"--decode_to_file={tmp_path / 'a_folder'}")
    assert folder.code == 1
    assert f"error: --decode_to_file={tmp_path / 'a_folder'} is a folder, not a file" in folder.err
    no_parent = _decode(*text, f"--decode_to_file={tmp_path / 'no' / 'out.txt'}")
    assert no_parent.code == 1
    assert f"its folder {tmp_path / 'no'} does not exist: create it" in no_parent.err
    # Image generation: DECODE_TO_FILE is the grid's PNG, its samples go in NAME/. The
    # run's checkpoint is not an imagetransformer's: loading it would fail differently.
    image_run = tmp_path / "image_run"
    tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(image_run / "ckpt"))
    image = ("--problem=image_fashion_mnist_rev", "--model=imagetransformer",
             "--hparams_set=imagetransformer_tiny_cpu", f"--output_dir={image_run}",
             f"--data_dir={tmp_path}")
    no_png = _decode(*image, f"--decode_to_file={tmp_path / 'samples'}")
    assert no_png.code == 1 and (f"give the grid's PNG file (e.g. --decode_to_file="
                                 f"{tmp_path / 'samples'}.png)") in no_png.err
    assert not (tmp_path / "samples").exists()  # was: a folder made, then IsADirectoryError
    (tmp_path / "grid.png").mkdir()
    png_folder = _decode(*image, f"--decode_to_file={tmp_path / 'grid.png'}")
    assert png_folder.code == 1 and "grid.png is a folder, not a file" in png_folder.err
    (tmp_path / "taken").write_text("")
    taken = _decode(*image, f"--decode_to_file={tmp_path / 'taken.png'}")
    assert taken.code == 1 and f"{tmp_path / 'taken'}, where the samples go, is a file" in taken.err
    results = (folder, no_parent, no_png, png_folder, taken)
    assert not any(r.traceback or "does not match model" in r.err for r in results)


def test_shards_delimiter_and_num_decodes(run_dir, tmp_path):
    data_dir, output_dir = run_dir
    lines = ["1 0 1", "0", "1 1 0 0", "0 1", "1"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "in.txt001").write_text("0 0 1\n1 1\n")  # T2T's split file of shard 1
    files = (f"--output_dir={output_dir}", f"--data_dir={data_dir}",
             f"--decode_from_file={tmp_path / 'in.txt'}", f"--decode_to_file={tmp_path / 'out'}")
    split = _decode(*files, FAST + ",shards=2,shard_id=1")
    assert split.code == 0, split.err[-3000:]
    assert f"Decoded 2 lines of {tmp_path / 'in.txt001'} in" in split.out
    assert len((tmp_path / "out001").read_text().splitlines()) == 2
    part = _decode(*files, FAST + ",shards=3,shard_id=0")  # no in.txt000: part 0 of in.txt
    assert part.code == 0, part.err[-3000:]
    assert f"Decoded 2 lines of {tmp_path / 'in.txt'} (part 0 of 0..2) in" in part.out
    assert len((tmp_path / "out000").read_text().splitlines()) == 2
    bad = _decode(*files, FAST + ",shards=2,shard_id=2")
    assert bad.code == 1 and "shard_id=2 (need 0 <= shard_id < shards=2" in bad.err
    scored = _decode(*files, FAST + ",shards=2", f"--decode_reference={tmp_path / 'in.txt'}")
    assert scored.code == 1 and "concatenate the shards' decodes in order" in scored.err
    # Records between ';', two passes, scored against the ;-separated references.
    (tmp_path / "in.txt").write_text(";".join(lines))
    (tmp_path / "ref.txt").write_text(";\n".join(lines) + ";\n")
    passes = _decode(*files, FAST + ",delimiter=;,num_decodes=2",
                     f"--decode_reference={tmp_path / 'ref.txt'}")
    assert passes.code == 0, passes.err[-3000:]
    outputs = (tmp_path / "out").read_text().splitlines()
    assert len(outputs) == 10 and outputs[:5] == outputs[5:]  # greedy: the passes agree
    assert json.loads((tmp_path / "out.scores.json").read_text())["lines"] == 10
    # The dev set: shard 1 of 2 (examples 1, 3, 5, 7) into decode_dev001.*.txt.
    dev = _decode(f"--output_dir={output_dir}", f"--data_dir={data_dir}", "--eval_steps=1",
                  FAST + ",shards=2,shard_id=1")
    assert dev.code == 0, dev.err[-3000:]
    inputs, targets = (open(os.path.join(output_dir, f"decode_dev001.{name}.txt"),
                            encoding="utf-8").read().splitlines() for name in ("inputs", "targets"))
    assert len(inputs) == 4 and [t.split() for t in targets] == [i.split()[::-1] for i in inputs]
    assert "Decoded 4 dev examples" in dev.out  # (which ones: tests/decoding/test_decode_options)
    assert not any(r.traceback for r in (split, part, bad, scored, passes, dev))
