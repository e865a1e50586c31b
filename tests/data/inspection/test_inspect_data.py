"""Tests of --inspect's report."""

from t2t import registry
from t2t.data.inspection import inspect_data


def test_report_of_algorithmic_data(tmp_path):
    prob = registry.problem("algorithmic_reverse_binary40_test")
    prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), progress=False)
    report = inspect_data.inspect_problem(prob, str(tmp_path), "dev", num_examples=2)
    assert report.examples_read == 100 and not report.truncated
    assert len(report.examples) == 2 and report.examples[0]["inputs"].endswith("ids=" + report.examples[0]["inputs"].split("ids=")[1])
    assert "<EOS>" in report.examples[0]["inputs"]
    stats = report.lengths["targets"]
    assert 2 <= stats.min <= stats.mean <= stats.max <= 11 and stats.count == 100
    text = report.format()
    assert "lengths (tokens, EOS included)" in text and "dev" in text
    truncated = inspect_data.inspect_problem(prob, str(tmp_path), "train", max_records=10,
                                             check_overlap=False)
    assert truncated.truncated and truncated.examples_read == 10 and truncated.overlap is None


def test_report_counts_dev_examples_also_in_train(tmp_path):
    prob = registry.problem("algorithmic_reverse_binary40_test")
    prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), progress=False)
    report = inspect_data.inspect_problem(prob, str(tmp_path), "train", num_examples=0)
    # Lengths 1..10 over 2 symbols: 1,000 train draws hold most short sequences, so 69
    # of the 100 (seeded) dev examples are exact copies of train examples.
    assert (report.overlap.examples, report.overlap.overlapping) == (100, 69)
    # Expected for random short sequences: said with the reason, not as a leak warning.
    assert "--- dev/train overlap: 69 of 100 dev examples (69.0%) also occur in train (exact " \
        "match of the stored features), expected for algorithmic_reverse_binary40_test: " \
        "both splits draw random sequences" in report.format()
    assert "WARNING" not in report.format()


def test_write_text_gives_the_decoder_input_and_reference(tmp_path):
    prob = registry.problem("algorithmic_reverse_binary40_test")
    prob.generate_data(str(tmp_path), str(tmp_path / "tmp"), progress=False)
    paths = inspect_data.write_text(prob, str(tmp_path), "dev", str(tmp_path / "out" / "dev"))
    assert paths == {"inputs": str(tmp_path / "out" / "dev.inputs"),
                     "targets": str(tmp_path / "out" / "dev.targets")}
    inputs = open(paths["inputs"], encoding="utf-8").read().splitlines()
    targets = open(paths["targets"], encoding="utf-8").read().splitlines()
    assert len(inputs) == len(targets) == 100
    for source, target in zip(inputs, targets, strict=True):
        # The text form of the data ("1 0 1"), EOS cut: the problem reverses its input.
        assert set(source.split()) <= {"0", "1"} and target.split() == source.split()[::-1]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".incomplete")]
    assert inspect_data.write_text(prob, str(tmp_path), "dev", str(tmp_path / "two"),
                                   max_records=3) and len(
        open(str(tmp_path / "two.inputs"), encoding="utf-8").read().splitlines()) == 3
