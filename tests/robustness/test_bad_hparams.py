"""Malformed --hparams, --decode_hparams and --gin_param: unknown keys, wrong types, bad
syntax. Each fails with one clear line that names the key or the text and what is
expected, before anything is written: the run, the data and earlier decodes are kept."""

from __future__ import annotations

import shutil

import pytest

from tests.robustness import support
from tests.robustness.support import FAST_DECODE, HPARAMS, HPARAMS_SET, MODEL, PROBLEM, run_binary


@pytest.fixture
def run_copy(trained_run, tmp_path):
    path = str(tmp_path / "run")
    shutil.copytree(trained_run, path)
    return path


def _assert_clear(result, fragments):
    assert result.code == 1, (result.out, result.err)
    assert not result.traceback, result.err
    assert result.err.startswith("error: "), result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


@pytest.mark.parametrize("overrides, fragments", [
    # An unknown key: the close match, and where keys are listed / added.
    ("hiden_size=32", ["Unknown hparam 'hiden_size'.", "Did you mean: hidden_size",
                       "t2t-trainer --dry_run", "add_hparam"]),
    ("batch_size=256,num_head=4", ["Unknown hparam 'num_head'.", "Did you mean: num_heads"]),
    # A value of the wrong type: the key, its type and current value, the bad text.
    ("num_heads=two", ["hparam 'num_heads' is an int (current value 2)",
                       "cannot set it to 'two'"]),
    ("hidden_size=16.5", ["hparam 'hidden_size' is an int", "cannot set it to '16.5'"]),
    ("learning_rate=fast", ["hparam 'learning_rate' is a float", "cannot set it to 'fast'"]),
    ("shared_embedding_and_softmax_weights=maybe",
     ["hparam 'shared_embedding_and_softmax_weights' is a bool", "cannot set it to 'maybe'"]),
    ("num_heads=[2,4]", ["hparam 'num_heads' is an int, not a list; got '[2,4]'"]),
    # Bad syntax: the offending part and the expected form.
    ("hidden_size", ["Malformed hparams override 'hidden_size'",
                     "expected name=value pairs separated by commas"]),
    ("hidden_size=16,=3", ["Malformed hparams override '=3'", "e.g. 'learning_rate=0.1,"]),
    ("hidden_size=16;num_heads=2", ["hparam 'hidden_size' is an int",
                                    "cannot set it to '16;num_heads=2'"]),
    ("hidden_size=[16", ["Unbalanced '[' in hparams string 'hidden_size=[16'"]),
    ("hidden_size=16]", ["Unbalanced ']' in hparams string 'hidden_size=16]'"]),
])
def test_trainer_bad_hparams(robustness, data_dir, run_copy, overrides, fragments):
    """The run being resumed (a copy of a trained run) and the data are untouched."""
    robustness.bad_input(f"t2t-trainer --hparams={overrides!r}")
    run_before, data_before = support.snapshot(run_copy), support.snapshot(data_dir)
    result = run_binary("t2t-trainer", f"--problem={PROBLEM}", f"--model={MODEL}",
                        f"--hparams_set={HPARAMS_SET}", f"--hparams={overrides}",
                        f"--data_dir={data_dir}", f"--output_dir={run_copy}", "--train_steps=1")
    support.assert_kept(robustness, run_copy, run_before)
    support.assert_kept(robustness, data_dir, data_before)
    assert support.snapshot(run_copy) == run_before  # nothing new either
    _assert_clear(result, fragments)


@pytest.mark.parametrize("binary", ["t2t-decoder", "t2t-exporter"])
@pytest.mark.parametrize("decode_hparams, fragments", [
    ("beam_sise=2", ["Unknown decode hparam 'beam_sise'.", "Did you mean: beam_size",
                     "Known: beam_size, alpha,"]),
    ("beam_size=two", ["--decode_hparams='beam_size=two'", "hparam 'beam_size' is an int",
                       "cannot set it to 'two'"]),
    ("beam_size=0,top_p=1.5", ["Bad decode hparams: beam_size=0 (need >= 1)",
                               "top_p=1.5 (need 0 < top_p <= 1)"]),
    ("temperature=0.7,beam_size=4", ["temperature > 0 samples, which needs beam_size=1"]),
    ("alpha", ["Malformed hparams override 'alpha'", "expected name=value pairs"]),
])
def test_bad_decode_hparams(robustness, trained_run, data_dir, tmp_path, binary,
                            decode_hparams, fragments):
    """An earlier decodes file (or export directory) is kept as it was."""
    robustness.bad_input(f"{binary} --decode_hparams={decode_hparams!r}")
    source = tmp_path / "source.txt"
    source.write_text("1 0 1\n")
    decodes = tmp_path / "earlier.decodes"
    decodes.write_text("0 1 1 0\n")
    export_dir = tmp_path / "export"
    (export_dir / "1700000000").mkdir(parents=True)
    (export_dir / "1700000000" / "saved_model.pb").write_bytes(b"an earlier export")
    before, run_before = support.snapshot(str(tmp_path)), support.snapshot(trained_run)
    extra = ([f"--decode_from_file={source}", f"--decode_to_file={decodes}"]
             if binary == "t2t-decoder" else [f"--export_dir={export_dir}"])
    result = run_binary(binary, f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        f"--decode_hparams={decode_hparams}", *extra)
    support.assert_kept(robustness, str(tmp_path), before)
    support.assert_kept(robustness, trained_run, run_before)
    assert support.snapshot(str(tmp_path)) == before
    _assert_clear(result, fragments)


def test_decoder_bad_hparams_for_the_run(robustness, trained_run, data_dir):
    """--hparams on top of the run's recorded hparams.json are checked the same way."""
    robustness.bad_input("t2t-decoder --hparams=max_lenght=12")
    before = support.snapshot(trained_run)
    result = run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                        "--hparams=max_lenght=12", f"--decode_hparams={FAST_DECODE}")
    support.assert_kept(robustness, trained_run, before)
    assert support.snapshot(trained_run) == before  # no decode_dev.*.txt
    _assert_clear(result, ["Unknown hparam 'max_lenght'.", "Did you mean: max_length"])


@pytest.mark.parametrize("binding, fragments", [
    ("InputConfig.shuffle_bufer_size=16", ["Bad gin configuration",
                                           "shuffle_bufer_size",
                                           "--gin_param='InputConfig.shuffle_buffer_size=2048'"]),
    ("InputConfig.shuffle_buffer_size=", ["Bad gin configuration", "Bindings look like"]),
    ("NoSuchConfig.x=1", ["Bad gin configuration", "NoSuchConfig"]),
])
def test_trainer_bad_gin_param(robustness, data_dir, run_copy, binding, fragments):
    robustness.bad_input(f"t2t-trainer --gin_param={binding!r}")
    before = support.snapshot(run_copy)
    result = run_binary("t2t-trainer", f"--problem={PROBLEM}", f"--model={MODEL}",
                        f"--hparams_set={HPARAMS_SET}", f"--hparams={HPARAMS}",
                        f"--data_dir={data_dir}", f"--output_dir={run_copy}",
                        f"--gin_param={binding}")
    support.assert_kept(robustness, run_copy, before)
    _assert_clear(result, fragments)
