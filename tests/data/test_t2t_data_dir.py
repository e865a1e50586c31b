"""A data dir laid out as Tensor2Tensor writes it trains, decodes and exports in t2t.

The fixture is what T2T's `t2t-datagen --problem=translate_envi_iwslt32k` leaves: shards
`PROBLEM-{train,dev}-NNNNN-of-MMMMM` of tf.train.Examples with int64 `inputs` and
`targets` (subword ids ending in EOS=1), and the vocabulary `vocab.PROBLEM.32768.subwords`
(one quoted subtoken per line, reserved tokens first). The vocabulary is built here by
t2t's SubwordTextEncoder from real sentences; its encoding is checked against T2T's
documented rules first (escaping, `_` word ends, unknown characters), so the files are
T2T's format and not merely t2t's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from t2t import registry
from t2t.data.encoders import text_encoder
from t2t.data.encoders.subword_encoder import SubwordTextEncoder
from t2t.data.generation.generator_utils import to_example
from t2t.problems.text import sentences

BIN = os.path.dirname(sys.executable)
PROBLEM = "translate_envi_iwslt32k"


def _pairs(held_out: bool, count: int) -> list[tuple[str, str]]:
    """(sentence, its words reversed): real English on both sides."""
    text = [s for s in sentences.docstring_sentences() if sentences.held_out(s) == held_out]
    return [(s, " ".join(reversed(s.split()))) for s in text[:count]]


def _write_t2t_data_dir(data_dir: Path) -> SubwordTextEncoder:
    import tensorflow as tf

    problem = registry.problem(PROBLEM)
    train, dev = _pairs(False, 600), _pairs(True, 40)
    encoder = SubwordTextEncoder.build_from_generator(
        (side for pair in train for side in pair), 300)
    data_dir.mkdir(parents=True)
    encoder.store_to_file(str(data_dir / f"vocab.{PROBLEM}.{problem.approx_vocab_size}.subwords"))
    for split, pairs, shards in (("train", train, 2), ("dev", dev, 1)):
        writers = [tf.io.TFRecordWriter(str(data_dir / f"{PROBLEM}-{split}-{i:05d}-of-{shards:05d}"))
                   for i in range(shards)]
        for index, (source, target) in enumerate(pairs):
            example = to_example({"inputs": encoder.encode(source) + [text_encoder.EOS_ID],
                                  "targets": encoder.encode(target) + [text_encoder.EOS_ID]})
            writers[index % shards].write(example.SerializeToString())
        for writer in writers:
            writer.close()
    return encoder


def test_the_vocabulary_follows_t2ts_rules(tmp_path):
    encoder = _write_t2t_data_dir(tmp_path / "data")
    lines = (tmp_path / "data" / f"vocab.{PROBLEM}.32768.subwords").read_text().splitlines()
    # Reserved tokens first, escaped like every subtoken (T2T 1.15's files: '<pad>_').
    assert lines[:2] == ["'<pad>_'", "'<EOS>_'"] and all(
        line.startswith("'") and line.endswith("'") for line in lines)
    # T2T's tokens are runs of letters/digits and runs of the rest (a lone space between
    # two words dropped); each ends in "_", "_" and "\" are escaped, and a character
    # outside the alphabet (the space before the snowman here, and the snowman) becomes
    # \NNN; (its code point), spelled with subtokens of the alphabet.
    pieces = encoder.decode_list(encoder.encode("return a_b\\c ☃"))
    joined = "".join(pieces)
    assert joined == "return_a_\\u_b_\\\\_c_\\32;\\9731;_"
    assert encoder.decode(encoder.encode("return a_b\\c ☃")) == "return a_b\\c ☃"
    # A reloaded file gives the same ids (what T2T's data was written with).
    reloaded = SubwordTextEncoder(str(tmp_path / "data" / f"vocab.{PROBLEM}.32768.subwords"))
    text = "Return the number of items in the queue."
    assert reloaded.encode(text) == encoder.encode(text)


def _run(*args: str) -> str:
    result = subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stderr[-4000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("t2t_data_dir")
    encoder = _write_t2t_data_dir(root / "data")
    common = [f"--problem={PROBLEM}", f"--data_dir={root / 'data'}", "--model=transformer",
              "--hparams_set=transformer_tiny", "--hparams=batch_size=1024"]
    out = _run("t2t-trainer", *common, "--train_steps=6", "--local_eval_frequency=6",
               "--eval_steps=1", f"--output_dir={root / 'run'}")
    return root, common, encoder, out


def test_trains_on_t2t_files(trained):
    root, _, _, out = trained
    assert "eval step 6:" in out
    # Nothing was regenerated: no SentencePiece model appeared beside T2T's vocabulary.
    assert not list((root / "data").glob("*.model"))


@pytest.mark.slow  # ~24 s; CI trains on the same T2T files (test_trains_on_t2t_files)
def test_decodes_with_the_t2t_vocabulary(trained):
    root, common, encoder, _ = trained
    source = root / "source.txt"
    source.write_text("Return the number of items.\nCreate a new list.\n")
    _run("t2t-decoder", *common, f"--output_dir={root / 'run'}",
         f"--decode_from_file={source}", f"--decode_to_file={root / 'decoded.txt'}",
         "--decode_hparams=extra_length=5")
    decoded = (root / "decoded.txt").read_text().splitlines()
    assert len(decoded) == 2
    for line in decoded:  # text the T2T vocabulary spells (round trip through its ids)
        assert encoder.decode(encoder.encode(line)) == line


@pytest.mark.slow  # ~50 s; CI checks the in-graph subword tokenizer's SavedModel round
# trip and its equality with the Python encoder in tests/serving/test_tokenizers.py.
def test_exports_with_the_subword_tokenizer_in_graph(trained):
    root, common, _, _ = trained
    out = _run("t2t-exporter", *common, f"--output_dir={root / 'run'}",
               "--decode_hparams=beam_size=1,extra_length=5")
    assert "Parity check passed on " in out, out[-3000:]
    export = [line.removeprefix("Exported: ") for line in out.splitlines()
              if line.startswith("Exported: ")][0]
    code = ("import tensorflow_text, tensorflow as tf, sys\n"
            "m = tf.saved_model.load(sys.argv[1])\n"
            "out = m.signatures['serving_default'](inputs=tf.constant(['Create a new list.']))\n"
            "print(repr(out['outputs'].numpy()[0].decode()))\n")
    result = subprocess.run([sys.executable, "-c", code, export], capture_output=True,
                            text=True, timeout=300, check=True)
    assert result.stdout.strip().startswith("'")
    assert Path(export, "assets").is_dir() and list(Path(export, "assets").glob("*.subwords"))
