"""t2t-import, the command line (its main in the test process, tests/helpers/binaries.py):
what a successful import prints and writes, t2t-decoder using the run right away, and
each refused input: one `error:` line, exit status 1, nothing written."""

import json
import os

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from tests.helpers import hf_fixtures  # noqa: E402
from tests.helpers.binaries import run_binary  # noqa: E402
from tests.pretrained.conftest import copy_checkpoint, make_checkpoint  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny MarianMTModel saved by transformers (English -> German tokenizer trained on
    gettext catalogs)."""
    root = tmp_path_factory.mktemp("t2t_import")
    tokenizer = hf_fixtures.write_marian_tokenizer(str(root / "tokenizer"),
                                                   hf_fixtures.gettext_pairs("de"))
    return make_checkpoint("marian_swish", tokenizer, str(root / "marian"))


@pytest.fixture(scope="module")
def imported(checkpoint, tmp_path_factory):
    """(t2t-import's result, the run folder)."""
    run = str(tmp_path_factory.mktemp("runs") / "run")
    return run_binary("t2t-import", f"--from_dir={checkpoint}", f"--output_dir={run}"), run


def test_a_marian_folder_imports_into_a_run_folder(imported, checkpoint):
    result, run = imported
    assert result.code == 0, result.err[-3000:]
    with open(os.path.join(checkpoint, "vocab.json"), encoding="utf-8") as f:
        ids = len(json.load(f))
    assert f"Imported MarianMTModel from {checkpoint}: " in result.out
    assert f" parameters, {ids} ids; hparams_set transformer_opus_mt with --hparams=" in result.out
    assert (f"Run folder: {run} (problem text2text_pretrained; fine-tune with t2t-datagen "
            f"--problem=P --use_vocab_from={run}") in result.out
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        record = json.load(f)
    assert record["problem"] == "text2text_pretrained" and record["data_dir"] == run
    assert record["imported"]["from"] == checkpoint
    assert record["imported"]["checkpoint"] == "ckpt-0"
    assert {"ckpt-0.index", "vocab.pretrained.json", "hparams.json"} <= set(os.listdir(run))


def test_t2t_decoder_decodes_with_the_run_right_after_the_import(imported, tmp_path):
    result, run = imported
    assert result.code == 0, result.err[-3000:]
    sources = [s for s, _ in hf_fixtures.gettext_pairs("de", hf_fixtures.UNSEEN_CATALOGS, 3)]
    (tmp_path / "en.txt").write_text("".join(s + "\n" for s in sources))
    decoded = run_binary("t2t-decoder", f"--output_dir={run}",
                         "--decode_hparams=beam_size=2,extra_length=5",
                         f"--decode_from_file={tmp_path / 'en.txt'}",
                         f"--decode_to_file={tmp_path / 'de.txt'}")
    assert decoded.code == 0, decoded.err[-3000:]
    assert f"Decoding with transformer from {os.path.join(run, 'ckpt-0')}" in decoded.err
    lines = (tmp_path / "de.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(sources) and any(line.strip() for line in lines)


@pytest.mark.slow  # an export and its parity gate in a fresh process: ~30 s
def test_t2t_exporter_exports_the_run_right_after_the_import(imported):
    """text2text_pretrained has no dev data: the parity gate decodes words of the source
    vocabulary (Text2textPretrained.parity_texts) through the export and t2t's decoder."""
    result, run = imported
    assert result.code == 0, result.err[-3000:]
    exported = run_binary("t2t-exporter", f"--output_dir={run}")
    assert exported.code == 0, exported.err[-3000:]
    assert "Parity check passed on" in exported.out


def _unsupported(checkpoint, folder):
    return copy_checkpoint(checkpoint, folder, config={
        "architectures": ["BartForConditionalGeneration"], "model_type": "bart"})


def _no_config(checkpoint, folder):
    folder = copy_checkpoint(checkpoint, folder)
    os.remove(os.path.join(folder, "config.json"))
    return folder


def _a_file(checkpoint, folder):
    return os.path.join(checkpoint, "config.json")


# name -> (make the --from_dir (None: omit the flag), what the one error line says)
REFUSED = {
    "no_from_dir": (None, "--from_dir required: t2t-import --from_dir=HF_FOLDER "
                          "--output_dir=RUN."),
    "missing_folder": (lambda c, f: f, "missing_folder' is not a folder: give the local "
                                       "folder of a Hugging Face checkpoint"),
    "a_file": (_a_file, "config.json' is not a folder: give the local folder of a Hugging "
                        "Face checkpoint"),
    "no_config_json": (_no_config, "no_config_json' has no config.json (it holds ['"),
    "unsupported_architecture": (_unsupported, "architecture 'BartForConditionalGeneration' "
                                               "is not supported: t2t-import reads ["),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_from_dir_prints_one_error_line_and_writes_nothing(case, checkpoint,
                                                                      tmp_path):
    make, message = REFUSED[case]
    run = tmp_path / "run"
    args = [f"--output_dir={run}"]
    if make is not None:
        args.append(f"--from_dir={make(checkpoint, str(tmp_path / case))}")
    result = run_binary("t2t-import", *args)
    assert result.code == 1, (result.out, result.err[-3000:])
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.err[-3000:]
    assert not result.traceback
    assert not run.exists()


def test_a_missing_output_dir_flag_is_refused(checkpoint):
    result = run_binary("t2t-import", f"--from_dir={checkpoint}")
    assert result.code == 1
    assert result.err.strip() == ("error: --output_dir required: t2t-import "
                                  "--from_dir=HF_FOLDER --output_dir=RUN.")


def test_a_non_empty_output_dir_is_refused_and_left_as_it_was(checkpoint, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    result = run_binary("t2t-import", f"--from_dir={checkpoint}", f"--output_dir={run}")
    assert result.code == 1, result.out
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err[-3000:]
    assert f"--output_dir={str(run)!r} is not empty" in errors[0]
    assert "nothing was written" in errors[0]
    assert os.listdir(run) == ["notes.txt"] and (run / "notes.txt").read_text() == "mine"
