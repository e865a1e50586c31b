"""The t2t-exporter binary's errors, its main run in the test process
(tests/helpers/binaries.py): no TensorFlow start per error.

Exporting from a run directory alone (problem, model, hparams, data and code from its
run.json), the version folder's place and the printed signatures are checked on a real
exporter process in tests/bin/test_run_record.py::test_decoder_and_exporter_need_only_output_dir;
the export itself in tests/serving/."""

import pytest

from tests.helpers.binaries import run_binary

PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from t2t import registry

    path = str(tmp_path_factory.mktemp("exporter_bin") / "data")
    registry.problem(PROBLEM).generate_data(path, path + "/tmp", progress=False)
    return path


def test_clear_errors(data_dir, tmp_path):
    result = run_binary("t2t-exporter", f"--output_dir={tmp_path}", f"--data_dir={data_dir}",
                        f"--problem={PROBLEM}", "--model=transformer",
                        "--hparams_set=transformer_test")
    assert result.code == 1
    assert f"error: no checkpoint in {tmp_path}: train first" in result.err
    assert not result.traceback
    result = run_binary("t2t-exporter", f"--output_dir={tmp_path}",
                        "--decode_hparams=beam_sise=2")
    assert result.code == 1
    assert "--problem, --model, --hparams_set required" in result.err
