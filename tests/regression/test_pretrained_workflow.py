"""The pretrained-import workflow (regression/pretrained_workflow.py): its pieces in CI
(the export's decode settings, t2t-serve's address line), and the whole workflow with
--quick (slow: ~4 min on 2 cores; seven t2t processes, one of them fine-tuning)."""

import json

import pytest

from regression import pretrained_workflow, workflows


def test_the_workflow_is_registered_with_its_settings():
    assert "pretrained_import" in workflows.WORKFLOWS
    quick, full = workflows.Settings.quick(), workflows.Settings()
    assert quick.pretrained_test_lines < full.pretrained_test_lines
    assert quick.served_lines < full.served_lines


def test_t2t_decoder_gets_the_decode_settings_the_export_recorded():
    record = {"decode_hparams": {"beam_size": 3, "alpha": 0.2, "extra_length": 7,
                                 "max_input_length": 0, "batch_size": 32}}
    assert (pretrained_workflow.export_decode_hparams(record)
            == "beam_size=3,alpha=0.2,extra_length=7,max_input_length=0")


def test_the_serving_address_is_read_from_t2t_serves_line():
    found = pretrained_workflow.SERVING_URL.search(
        "Serving on http://127.0.0.1:40123 (SIGTERM or Ctrl-C stops)")
    assert found and found.group(1) == "http://127.0.0.1:40123"
    assert not pretrained_workflow.SERVING_URL.search("Serving gRPC on 127.0.0.1:40124")


@pytest.mark.slow
def test_the_quick_workflow_imports_fine_tunes_exports_and_serves(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    assert workflows.main(["pretrained_import", "--quick", "--output", str(tmp_path)]) == 0
    report = json.load(open(tmp_path / "pretrained_import" / "report.json"))
    values = {row["measure"]: row for row in report["values"]}
    quick = workflows.Settings.quick()
    loss = values["dev loss"]
    assert loss["fine-tuned"] < loss["imported"] - 1.0, loss
    steps = values["steps (the dev evaluations' steps)"]
    assert (steps["imported"], steps["fine-tuned"]) == (0, quick.steps)
    assert values["export parity gate"]["fine-tuned"].startswith("passed on ")
    served = values["t2t-serve answers == t2t-decoder's"]["fine-tuned"]
    assert served.startswith(f"{quick.served_lines}/{quick.served_lines} "), served
    tools = [command[0].rsplit("/", 1)[-1] for command in report["commands"]]
    for tool in ("t2t-import", "t2t-decoder", "t2t-datagen", "t2t-trainer", "t2t-exporter",
                 "t2t-serve"):
        assert tool in tools, tools
    assert "pretrained_import (" in capsys.readouterr().out
