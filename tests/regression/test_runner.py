"""Tests of the regression suite's case table and runner, with a fake trainer (no
training: each test takes milliseconds)."""

import json
import math
import os
import sys

import pytest

from regression import case_run, runner, selection, session, tools, verdict
from regression import report as report_lib
from regression.case_spec import CPU_2CORE, FASHION_MNIST_MIRROR, Case
from regression.cases import CASES, by_name, validate
from regression.report import FAIL, PASS, SKIP, CaseResult
from regression.selection import Registered

REGISTERED = Registered(
    problems=frozenset({"algorithmic_reverse_binary40_test", "algorithmic_addition_binary40_test",
                        "image_fashion_mnist", "translate_ende_wmt32k"}),
    models=frozenset({"transformer", "resnet", "shake_shake"}),
    hparams_sets=frozenset({"transformer_tiny", "transformer_base", "transformer_big",
                            "resnet_tiny_cpu", "shake_shake_quick", "shakeshake_big"}),
)


def _case(name="good", problem="algorithmic_reverse_binary40_test", metric="accuracy",
          band=(0.5, 1.0), **kwargs):
    fields = dict(model="transformer", hparams_set="transformer_tiny", train_steps=100,
                  trainer_flags={"local_eval_frequency": 50, "eval_steps": 0})
    fields.update(kwargs)
    return Case(name=name, problem=problem, metric=metric, band=band, **fields)


# ---------------------------------------------------------------------- the case table
def test_case_table_is_sane():
    assert validate(CASES) == []
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert [c for c in CASES if c.quick], "the quick subset is empty"
    for case in CASES:
        low, high = case.band
        assert low <= high and not math.isnan(low) and not math.isnan(high), case.name
        assert case.expected_minutes > 0 and case.measured_on, case.name
    table = by_name()
    assert table["transformer_tiny_reverse"].metric == "accuracy_per_sequence"
    assert table["transformer_tiny_reverse"].band == (0.90, 1.0)
    assert table["transformer_tiny_reverse_quick"].quick
    assert table["resnet_fashion_mnist"].data_mirror == FASHION_MNIST_MIRROR
    assert table["transformer_big_ende"].hardware != CPU_2CORE
    assert table["shake_shake_cifar10"].problem == "image_cifar10"


def test_validate_reports_bad_tables():
    errors = validate([
        _case("a", band=(0.9, 0.1)), _case("a"), _case("b", strategy="warp_drive"),
        _case("c", band=(0.5, 1.5)), _case("d", band=(0.0, 1.0)),
        _case("e", decode_hparams="beam_size=4", also={"bleu": (0.0, 100.0)}),
    ])
    text = "\n".join(errors)
    assert "duplicate case name 'a'" in text
    assert "band low 0.9 > high 0.1" in text
    assert "unknown strategy 'warp_drive'" in text
    assert "c: an accuracy band must lie within [0, 1]" in text
    assert "d: the accuracy band [0.0, 1.0] is the metric's whole range" in text
    assert "e: the bleu band [0.0, 100.0] is the metric's whole range, so it can never fail" in text
    assert "quick subset would be empty" in text


def test_the_readme_quick_start_is_the_measured_reverse_case():
    """The quick start's t2t-trainer flags are transformer_tiny_reverse's, so the README
    promises what the regression suite measures."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        line = next(line for line in f if "t2t-trainer --generate_data" in line)
    flags = line.split("t2t-trainer", 1)[1].split()
    flags = [f for f in flags if f != "--generate_data"
             and not f.startswith(("--output_dir=", "--data_dir="))]
    assert sorted(flags) == sorted(by_name()["transformer_tiny_reverse"].trainer_args())


def test_trainer_and_datagen_args():
    table = by_name()
    args = table["transformer_tiny_reverse"].trainer_args()
    assert args[:5] == ["--problem=algorithmic_reverse_binary40_test", "--model=transformer",
                        "--hparams_set=transformer_tiny",
                        "--hparams=learning_rate_warmup_steps=400", "--train_steps=4000"]
    assert "--local_eval_frequency=500" in args and "--eval_steps=0" in args
    assert "--cpu_devices=2" in table["transformer_tiny_reverse_mirrored"].trainer_args()
    assert "--train_steps=2000" in table["transformer_tiny_reverse_mirrored"].trainer_args()
    assert "--worker_gpu=8" in table["transformer_big_ende"].trainer_args()
    assert not any(a.startswith("--hparams=") for a in table["resnet_fashion_mnist"].trainer_args())
    assert table["resnet_fashion_mnist"].datagen_args() == [
        "--problem=image_fashion_mnist", f"--data_mirror={FASHION_MNIST_MIRROR}"]

    datagen, trainer = case_run.case_commands(table["transformer_tiny_reverse"], "/out",
                                            ["--random_seed=3"])
    assert datagen[0].endswith("t2t-datagen") or datagen[-1] == "t2t.bin.t2t_datagen" or \
        "t2t_datagen" in " ".join(datagen)
    assert "--data_dir=/out/data" in datagen and "--progress=false" in datagen
    assert trainer[-3:] == ["--data_dir=/out/data", "--output_dir=/out/transformer_tiny_reverse",
                            "--random_seed=3"]


# ------------------------------------------------------------------- skips and bands
def test_skip_reasons(tmp_path):
    hardware = {CPU_2CORE}
    assert selection.skip_reasons(_case(), hardware, REGISTERED) == []

    reasons = selection.skip_reasons(by_name()["shake_shake_cifar10"], hardware, REGISTERED)
    assert any("needs 1xGPU" in r for r in reasons)
    assert "problem 'image_cifar10' not registered" in reasons
    # Available hardware, still unregistered: skipped for that reason alone.
    assert selection.skip_reasons(by_name()["shake_shake_cifar10"], {"1xGPU"}, REGISTERED) == [
        "problem 'image_cifar10' not registered"]

    assert selection.skip_reasons(_case(model="nope", hparams_set="nada"), hardware, REGISTERED) == [
        "model 'nope' not registered", "hparams set 'nada' not registered"]
    assert selection.skip_reasons(_case(problem="algorithmic_reverse_binary40_test_rev"),
                               hardware, REGISTERED) == []
    assert selection.skip_reasons(_case(strategy="multi_worker_2"), hardware, REGISTERED) == []
    assert selection.skip_reasons(_case(strategy="nope"), hardware, REGISTERED) == [
        "unknown strategy 'nope'"]

    missing = _case(data_mirror=str(tmp_path / "absent"))
    [reason] = selection.skip_reasons(missing, hardware, REGISTERED)
    assert reason == f"data mirror {tmp_path / 'absent'} missing"
    assert selection.skip_reasons(_case(data_mirror=str(tmp_path)), hardware, REGISTERED) == []
    assert selection.skip_reasons(_case(data_mirror="https://mirror.example/x/"), hardware,
                               REGISTERED) == []
    fashion = by_name()["resnet_fashion_mnist"]
    [reason] = selection.skip_reasons(fashion, hardware, REGISTERED, mirror_exists=lambda p: False)
    assert "apt-get install dataset-fashion-mnist" in reason


def test_parse_hardware(monkeypatch):
    monkeypatch.delenv(selection.HARDWARE_ENV, raising=False)
    assert selection.parse_hardware(None) == {CPU_2CORE}
    assert selection.parse_hardware("cpu-2core, 8xV100,") == {CPU_2CORE, "8xV100"}
    monkeypatch.setenv(selection.HARDWARE_ENV, "1xGPU")
    assert selection.parse_hardware(None) == {"1xGPU"}


def test_in_band():
    assert verdict.in_band(0.9, (0.9, 1.0)) and verdict.in_band(1.0, (0.9, 1.0))
    assert not verdict.in_band(0.8999, (0.9, 1.0))
    assert not verdict.in_band(None, (0.9, 1.0))
    assert not verdict.in_band(float("nan"), (0.0, 1.0))


def _judged(evals, returncode=0, **case_kwargs):
    result = CaseResult.for_case(_case(**case_kwargs))
    verdict.judge(result, evals, returncode)
    return result


def test_judge_uses_the_final_evaluation():
    evals = [{"step": 50, "accuracy": 0.95, "loss": 1.0}, {"step": 100, "accuracy": 0.7}]
    result = _judged(evals)
    assert (result.status, result.value, result.final_step) == (PASS, 0.7, 100)
    assert result.curve == [(50, 0.95), (100, 0.7)]

    low = _judged(evals, band=(0.8, 1.0))
    assert low.status == FAIL and low.reason == "accuracy 0.7000 outside [0.80, 1.00]"
    assert _judged(evals, returncode=1).reason == "t2t-trainer exited with status 1"
    assert _judged([]).reason == "no evaluation in eval_results.jsonl"
    missing = _judged(evals, metric="bleu", band=(27.5, 29.5))
    assert missing.status == FAIL
    assert missing.reason == "metric 'bleu' not in the final evaluation (it has: accuracy)"
    short = _judged(evals[:1])
    assert short.status == FAIL and "final evaluation at step 50" in short.reason
    assert _judged([{"step": 100, "accuracy": float("nan")}]).status == FAIL


def test_a_recorded_figure_narrows_the_band_and_says_why():
    """The learning guard: a deterministic case's recorded value +- tolerance; #47's
    0.9508 -> 0.8182 fails it although the band [0.80, 1.00] holds."""
    recorded = {"accuracy": (0.9508, 0.05)}
    assert _case(band=(0.8, 1.0), recorded=recorded).bands() == {"accuracy": (0.9008, 1.0)}
    assert _case(band=(0.8, 0.92), recorded=recorded).bands() == {"accuracy": (0.9008, 0.92)}
    worse = _judged([{"step": 100, "accuracy": 0.8182}], band=(0.8, 1.0), recorded=recorded)
    assert worse.status == FAIL
    assert worse.reason.startswith(
        "accuracy 0.8182 outside [0.9008, 1.00] (recorded 0.9508 +- 0.05")
    assert "update the record" in worse.reason
    assert "[0.9008, 1.00]" in report_lib.results_table([worse])  # the band that was applied
    assert _judged([{"step": 100, "accuracy": 0.93}], band=(0.8, 1.0),
                   recorded=recorded).status == PASS
    assert validate([_case(recorded=recorded, quick=True)]) == [
        "good: a recorded accuracy needs a deterministic run (trainer_flags "
        "deterministic=True and a random_seed)"]
    deterministic = {"deterministic": True, "random_seed": 1}
    assert validate([_case(recorded={"loss": (1.0, 0.1)}, trainer_flags=deterministic,
                           quick=True)]) == [
        "good: recorded loss (1.0, 0.1) needs a tolerance > 0 on a metric the case checks"]
    quick = by_name()["transformer_tiny_reverse_quick"]
    assert quick.recorded and quick.trainer_flags["deterministic"] is True
    low, _ = quick.bands()[quick.metric]
    assert 0.8182 < low < 0.8927 < quick.recorded[quick.metric][0]  # #47's note: the figures


def test_read_eval_results_ignores_a_torn_line(tmp_path):
    (tmp_path / "eval_results.jsonl").write_text('{"step": 1, "accuracy": 0.5}\n{"step": 2, "acc')
    assert verdict.read_eval_results(str(tmp_path)) == [{"step": 1, "accuracy": 0.5}]
    assert verdict.read_eval_results(str(tmp_path / "none")) == []


# ---------------------------------------------------------------------------- list
def test_list_output(capsys, monkeypatch):
    monkeypatch.delenv(selection.HARDWARE_ENV, raising=False)
    assert runner.main(["list"], registered=REGISTERED) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line and line[0].isalpha()}
    for case in CASES:
        assert case.name in lines, case.name
    assert lines["transformer_tiny_reverse"].rstrip().endswith("yes")
    assert "transformer_tiny_reverse_quick *" in out and "quick" in out
    assert "no: needs 8xV100" in lines["transformer_big_ende"]
    assert "problem 'image_cifar10' not registered" in lines["shake_shake_cifar10"]
    assert "[0.90, 1.00]" in lines["transformer_tiny_reverse"]
    assert "accuracy_per_sequence" in lines["transformer_tiny_reverse"]
    header = out.splitlines()[0].split()
    assert header[:4] == ["case", "problem", "model/hparams_set", "steps"]

    runner.main(["list", "--hardware=cpu-2core,8xV100"], registered=REGISTERED)
    out = capsys.readouterr().out
    assert "needs 8xV100" not in out and "needs 1xGPU" in out


# ------------------------------------------------------------------- run (faked)
class FakeTrainer:
    """Stands in for the subprocesses: writes eval_results.jsonl with `values`."""

    def __init__(self, values, returncode=0, decode_scores=None, export_returncode=0):
        self.values = values  # case name -> [(step, {metric: value})]
        self.returncode = returncode
        self.decode_scores = decode_scores or {}  # case name -> {"bleu": .., "chrf": ..}
        self.export_returncode = export_returncode
        self.commands = []

    def __call__(self, command, log, prefix):
        self.commands.append(command)
        print(f"{prefix}fake {os.path.basename(command[0])}")
        log.write("fake output\n")
        flags = dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)
        joined = " ".join(command)
        if "t2t_trainer" in joined or command[0].endswith("t2t-trainer"):
            output_dir = flags["output_dir"]
            name = os.path.basename(output_dir)
            split = flags.get("eval_split", "dev")
            results = "eval_results.jsonl" if split == "dev" else f"eval_results_{split}.jsonl"
            if split != "dev":
                name = f"{name}@{split}"
            with open(os.path.join(output_dir, results), "a") as f:
                for step, metrics in self.values.get(name, []):
                    f.write(json.dumps({"step": step, **metrics}) + "\n")
            return self.returncode
        if "t2t_decoder" in joined or command[0].endswith("t2t-decoder"):
            name = os.path.basename(flags["output_dir"])
            split = os.path.basename(flags["decode_from_file"]).split(".")[0]
            with open(flags["decode_to_file"] + ".scores.json", "w") as f:
                json.dump(self.decode_scores.get(f"{name}@{split}", self.decode_scores[name]), f)
        if "t2t_exporter" in joined or command[0].endswith("t2t-exporter"):
            return self.export_returncode
        return 0


def _fake_cases(tmp_path):
    return [
        _case("good", quick=True),
        _case("good_same_problem", quick=True),
        _case("low", problem="algorithmic_addition_binary40_test"),
        _case("unregistered", problem="image_cifar10"),
        _case("no_mirror", data_mirror=str(tmp_path / "missing")),
        _case("gpu_only", hardware="1xGPU"),
    ]


def _values():
    curve = [(50, {"accuracy": 0.4}), (100, {"accuracy": 0.9})]
    return {"good": curve, "good_same_problem": curve,
            "low": [(50, {"accuracy": 0.1}), (100, {"accuracy": 0.2})]}


def test_run_full_with_fake_trainer(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(session, "plots_available", lambda: False)
    fake = FakeTrainer(_values())
    output = tmp_path / "out"
    status = runner.main(["run", "--full", "--output", str(output), "--hardware=cpu-2core"],
                         cases=_fake_cases(tmp_path), registered=REGISTERED, execute=fake)
    out = capsys.readouterr().out
    assert status == 1  # "low" failed
    assert "matplotlib is not installed: plots are skipped" in out
    assert "[good] fake t2t-datagen" in out or "[good] fake " in out

    # Datagen once per problem (good and good_same_problem share it), then trainers.
    datagens = [c for c in fake.commands if "t2t_datagen" in " ".join(c) or
                c[0].endswith("t2t-datagen")]
    assert len(datagens) == 2 and len(fake.commands) == 5

    report = json.loads((output / "report.json").read_text())
    results = {c["name"]: c for c in report["cases"]}
    assert [c["name"] for c in report["cases"]] == [c.name for c in _fake_cases(tmp_path)]
    assert results["good"]["status"] == PASS and results["good"]["value"] == 0.9
    assert results["good"]["curve"] == [[50, 0.4], [100, 0.9]]
    assert results["good"]["log"] == os.path.join("good", "log.txt")
    assert (output / "good" / "log.txt").read_text().count("fake output") == 2
    assert results["low"]["status"] == FAIL and results["low"]["value"] == 0.2
    assert results["unregistered"]["status"] == SKIP
    assert results["unregistered"]["reason"] == "problem 'image_cifar10' not registered"
    assert results["no_mirror"]["status"] == SKIP and "missing" in results["no_mirror"]["reason"]
    assert results["gpu_only"]["status"] == SKIP and "needs 1xGPU" in results["gpu_only"]["reason"]
    assert not (output / "unregistered").exists()
    machine = report["machine"]
    assert machine["cores"] == os.cpu_count() and machine["cpu"] and machine["date"]
    assert "tensorflow" in machine and report["selection"] == "full" and report["finished"]

    # The final table: one row per case, then the reasons.
    table = out[out.index("case   "):]
    assert "good               accuracy  0.9000  [0.50, 1.00]  PASS" in table
    assert "low: FAIL - accuracy 0.2000 outside [0.50, 1.00]" in table
    assert "unregistered: SKIP - problem 'image_cifar10' not registered" in table


def test_run_quick_passes_and_starts_over(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(session, "plots_available", lambda: True)
    plotted = []

    def fake_plot(result, path):
        plotted.append(result.name)
        open(path, "wb").close()
        return path

    monkeypatch.setattr(session, "plot_curve", fake_plot)
    output = tmp_path / "out"
    args = ["run", "--output", str(output)]
    fake = FakeTrainer(_values())
    assert runner.main(args, cases=_fake_cases(tmp_path), registered=REGISTERED,
                       execute=fake) == 0
    report = json.loads((output / "report.json").read_text())
    assert [c["name"] for c in report["cases"]] == ["good", "good_same_problem"]
    assert report["cases"][0]["plot"] == os.path.join("good", "accuracy.png")
    assert plotted == ["good", "good_same_problem"]
    # A second run starts each case afresh (eval_results.jsonl is not appended to)...
    assert runner.main(args, cases=_fake_cases(tmp_path), registered=REGISTERED,
                       execute=fake) == 0
    lines = (output / "good" / "eval_results.jsonl").read_text().splitlines()
    assert len(lines) == 2
    # ... unless --resume: then the finished cases of the report are kept, not run again.
    capsys.readouterr()
    before = len(fake.commands)
    assert runner.main(args + ["--resume"], cases=_fake_cases(tmp_path), registered=REGISTERED,
                       execute=fake) == 0
    assert len(fake.commands) == before
    assert len((output / "good" / "eval_results.jsonl").read_text().splitlines()) == 2
    assert "[good] kept from the run of " in capsys.readouterr().out
    kept = json.loads((output / "report.json").read_text())["cases"]
    assert [(c["name"], c["status"], c["value"]) for c in kept] == [
        ("good", PASS, 0.9), ("good_same_problem", PASS, 0.9)]


def _is_trainer(command):
    return command[0].endswith("t2t-trainer") or "t2t_trainer" in " ".join(command)


def _trained(fake):
    """The cases `fake` trained, in order (the basename of each --output_dir)."""
    return [os.path.basename(dict(a[2:].split("=", 1) for a in c if "=" in a)["output_dir"])
            for c in fake.commands if _is_trainer(c)]


class InterruptingTrainer(FakeTrainer):
    """A FakeTrainer whose trainer run number `at` (from 1) is stopped by Ctrl-C."""

    def __init__(self, values, at):
        super().__init__(values)
        self.at, self.trainer_runs = at, 0

    def __call__(self, command, log, prefix):
        if _is_trainer(command):
            self.trainer_runs += 1
            if self.trainer_runs == self.at:
                # What the interrupted trainer left: a checkpoint's worth of files.
                flags = dict(a[2:].split("=", 1) for a in command if "=" in a)
                open(os.path.join(flags["output_dir"], "ckpt-1.index"), "w").close()
                raise KeyboardInterrupt
        return super().__call__(command, log, prefix)


def test_resume_keeps_finished_cases_and_continues_the_interrupted_one(tmp_path, capsys):
    cases = [_case("first"), _case("second"), _case("third")]
    curve = [(50, {"accuracy": 0.4}), (100, {"accuracy": 0.9})]
    values = {"first": curve, "second": curve, "third": curve}
    output = tmp_path / "out"
    args = ["run", "--full", "--output", str(output), "--hardware=cpu-2core"]

    stopped = InterruptingTrainer(values, at=2)
    assert runner.main(args, cases=cases, registered=REGISTERED, execute=stopped) == 130
    data = json.loads((output / "report.json").read_text())
    assert data["interrupted"] and [(c["name"], c["status"], c["reason"])
                                      for c in data["cases"]] == [
        ("first", PASS, ""), ("second", FAIL, "interrupted")]
    first = data["cases"][0]
    assert first["commit"] == data["machine"]["t2t_commit"] and first["date"]
    data["cases"][1]["minutes"] = 7.5  # as if it had trained for 7.5 minutes
    (output / "report.json").write_text(json.dumps(data))
    capsys.readouterr()

    resumed = FakeTrainer(values)
    assert runner.main(args + ["--resume"], cases=cases, registered=REGISTERED,
                       execute=resumed) == 0
    out = capsys.readouterr().out
    assert "[first] kept from the run of " in out and "PASS accuracy 0.9000" in out
    assert _trained(resumed) == ["second", "third"]  # "first" is not trained again
    data = json.loads((output / "report.json").read_text())
    results = {c["name"]: c for c in data["cases"]}
    assert [c["name"] for c in data["cases"]] == ["first", "second", "third"]
    assert all(c["status"] == PASS for c in data["cases"])
    # The interrupted case continued from its folder and counts the earlier 7.5 minutes.
    assert results["second"]["continued"] and results["second"]["earlier_minutes"] == 7.5
    assert results["second"]["minutes"] >= 7.5
    assert not results["third"]["continued"] and results["third"]["earlier_minutes"] == 0.0
    assert results["first"] == first  # kept as it was, with its own commit and date
    rows = report_lib.markdown_table(data).splitlines()
    assert [r for r in rows if r.startswith("| second |")][0].count("(resumed)") == 1
    assert "(resumed)" not in [r for r in rows if r.startswith("| third |")][0]


def test_resume_runs_a_case_again_when_its_commands_or_bands_changed(tmp_path, capsys):
    curve = [(50, {"accuracy": 0.4}), (100, {"accuracy": 0.9})]
    output = tmp_path / "out"
    args = ["run", "--full", "--output", str(output), "--hardware=cpu-2core"]
    assert runner.main(args, cases=[_case("a"), _case("b"), _case("c")], registered=REGISTERED,
                       execute=FakeTrainer({"a": curve, "b": curve, "c": curve})) == 0
    changed = [_case("a"), _case("b", hparams="dropout=0.0"), _case("c", band=(0.95, 1.0))]
    again = FakeTrainer({"a": curve, "b": curve, "c": curve})
    assert runner.main(args + ["--resume"], cases=changed, registered=REGISTERED,
                       execute=again) == 1  # c's new band fails the 0.9 it measured
    assert _trained(again) == ["b", "c"]
    # A report written before results carried their own commit: the machine's is used.
    data = json.loads((output / "report.json").read_text())
    for case in data["cases"]:
        case.pop("commit"), case.pop("date")
    data["machine"]["t2t_commit"] = "abc1234"
    (output / "report.json").write_text(json.dumps(data))
    capsys.readouterr()
    once_more = FakeTrainer({})
    assert runner.main(args + ["--resume"], cases=changed, registered=REGISTERED,
                       execute=once_more) == 1
    assert _trained(once_more) == []
    assert "(t2t abc1234)" in capsys.readouterr().out


def test_resume_refuses_a_report_it_cannot_read(tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()
    (output / "report.json").write_text('{"cases": [{"name": "a"}]}')
    status = runner.main(["run", "--full", "--output", str(output), "--resume"],
                         cases=[_case("a")], registered=REGISTERED, execute=FakeTrainer({}))
    assert status == 2
    err = capsys.readouterr().err
    assert f"cannot read the earlier report {output / 'report.json'}" in err
    assert "move it away to start over" in err
    assert (output / "report.json").read_text() == '{"cases": [{"name": "a"}]}'


def test_run_trainer_failure_and_case_selection(tmp_path, capsys):
    output = tmp_path / "out"
    fake = FakeTrainer(_values(), returncode=1)
    status = runner.main(["run", "--case", "good", "--output", str(output)],
                         cases=_fake_cases(tmp_path), registered=REGISTERED, execute=fake)
    assert status == 1
    [result] = json.loads((output / "report.json").read_text())["cases"]
    assert result["status"] == FAIL and result["reason"] == "t2t-trainer exited with status 1"

    status = runner.main(["run", "--case", "godo", "--output", str(output)],
                         cases=_fake_cases(tmp_path), registered=REGISTERED, execute=fake)
    err = capsys.readouterr().err
    assert status == 2 and "unknown case godo (did you mean good" in err


def test_run_refuses_a_foreign_case_dir(tmp_path, capsys):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "precious.txt").write_text("mine")
    status = runner.main(["run", "--case", "good", "--output", str(tmp_path)],
                         cases=_fake_cases(tmp_path), registered=REGISTERED,
                         execute=FakeTrainer(_values()))
    assert status == 2 and "was not written by the regression runner" in capsys.readouterr().err
    assert (tmp_path / "good" / "precious.txt").exists()


def test_dry_run_writes_nothing(tmp_path, capsys):
    output = tmp_path / "out"
    status = runner.main(["run", "--full", "--dry-run", "--output", str(output)],
                         cases=_fake_cases(tmp_path), registered=REGISTERED,
                         execute=FakeTrainer({}))
    out = capsys.readouterr().out
    assert status == 0 and not output.exists()
    assert "[good] would run" in out and f"--output_dir={output / 'good'}" in out
    assert "[unregistered] SKIP: problem 'image_cifar10' not registered" in out


def test_stream_command_prefixes_and_logs(tmp_path, capsys):
    log_path = tmp_path / "log.txt"
    with open(log_path, "w") as log:
        status = tools.stream_command(
            [sys.executable, "-c", "import sys; print('one'); print('two', file=sys.stderr); "
                                   "sys.exit(3)"], log, "[x] ")
    out = capsys.readouterr().out
    assert status == 3
    assert "[x] one\n" in out and "[x] two\n" in out and out.startswith("[x] $ ")
    assert log_path.read_text().splitlines()[1:] == ["one", "two"]


# ------------------------------------------------------------------ report / README
def _report(tmp_path):
    fake = FakeTrainer(_values())
    runner.main(["run", "--full", "--output", str(tmp_path / "out")],
                cases=_fake_cases(tmp_path), registered=REGISTERED, execute=fake)
    return str(tmp_path / "out" / "report.json")


def test_markdown_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(session, "plots_available", lambda: False)
    report_path = _report(tmp_path)
    capsys.readouterr()
    assert runner.main(["readme", "--report", report_path]) == 0
    table = capsys.readouterr().out
    assert table.startswith("Run ") and "TensorFlow" in table
    assert "| case | problem | model / hparams_set | steps | metric | value | band |" in table
    assert ("| good | algorithmic_reverse_binary40_test | transformer / transformer_tiny | 100 "
            "| accuracy | 0.9000 | [0.50, 1.00] | PASS |") in table
    assert "| SKIP: problem 'image_cifar10' not registered | - |" in table


def test_readme_block_replacement(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(session, "plots_available", lambda: False)
    report_path = _report(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nBefore.\n\n{report_lib.BEGIN_MARKER}\nold table\n"
                      f"{report_lib.END_MARKER}\n\nAfter.\n")
    capsys.readouterr()
    assert runner.main(["readme", "--report", report_path, "--write", str(readme)]) == 0
    assert "Updated the results block" in capsys.readouterr().out
    text = readme.read_text()
    assert "old table" not in text and "| good |" in text
    assert text.startswith("# Title\n\nBefore.\n\n" + report_lib.BEGIN_MARKER + "\nRun ")
    assert text.endswith(report_lib.END_MARKER + "\n\nAfter.\n")
    # Idempotent.
    runner.main(["readme", "--report", report_path, "--write", str(readme)])
    assert readme.read_text() == text

    bare = tmp_path / "BARE.md"
    bare.write_text("# No markers\n")
    assert runner.main(["readme", "--report", report_path, "--write", str(bare)]) == 2
    err = capsys.readouterr().err
    assert "has no results block" in err and report_lib.BEGIN_MARKER in err
    assert bare.read_text() == "# No markers\n"

    assert runner.main(["readme", "--report", str(tmp_path / "nope.json")]) == 2
    assert "no report at" in capsys.readouterr().err




def test_empty_block_and_the_projects_readme(tmp_path):
    empty = f"# R\n\n{report_lib.BEGIN_MARKER}\n{report_lib.END_MARKER}\n\n## Next\n"
    assert report_lib.replace_block(empty, "| a |\n") == (
        f"# R\n\n{report_lib.BEGIN_MARKER}\n| a |\n{report_lib.END_MARKER}\n\n## Next\n")
    # The docs' results page keeps exactly one results block for `readme --write PAGE`.
    root = os.path.dirname(os.path.dirname(os.path.abspath(runner.__file__)))
    with open(os.path.join(root, "docs", "results", "regression.md"), encoding="utf-8") as f:
        text = f.read()
    assert "| a |" in report_lib.replace_block(text, "| a |")


@pytest.mark.slow
def test_load_registered_reads_t2t_registry():
    registered = selection.load_registered()
    assert "transformer" in registered.models
    assert registered.has_problem("algorithmic_reverse_binary40_test")
    assert "transformer_tiny" in registered.hparams_sets


def test_a_multi_worker_case_trains_through_t2t_launch(tmp_path):
    case = _case(strategy="multi_worker_2")
    _, trainer = case_run.case_commands(case, str(tmp_path))
    separator = trainer.index("--")
    assert any("t2t-launch" in part or "t2t_launch" in part for part in trainer[:separator])
    assert "--num_workers=2" in trainer[:separator]
    assert any("t2t-trainer" in part or "t2t_trainer" in part for part in trainer[separator + 1:])




def test_a_folder_of_reports_makes_one_table_with_each_runs_date(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(session, "plots_available", lambda: False)
    report = json.loads(open(_report(tmp_path)).read())
    for case in report["cases"]:  # as reports written before cases carried their own
        del case["commit"], case["date"]
    results = tmp_path / "results"
    results.mkdir()
    older = {**report, "machine": {**report["machine"], "date": "2026-11-20T01:00:00",
                                   "t2t_commit": "old1234", "note": "rebuilt from a table"}}
    newer = {**report, "machine": {**report["machine"], "date": "2026-11-25T01:00:00",
                                   "t2t_commit": "new5678"},
             "cases": [c for c in report["cases"] if c["name"] == "good"]}
    # File names sort the other way round: the runs' dates decide which wins.
    (results / "a-newer.json").write_text(json.dumps(newer))
    (results / "b-older.json").write_text(json.dumps(older))
    capsys.readouterr()
    assert runner.main(["readme", "--report", str(results)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("2 runs from 2026-11-20 to 2026-11-25 on ")
    good = [line for line in table.splitlines() if line.startswith("| good |")]
    assert len(good) == 1 and good[0].endswith("| 2026-11-25 | new5678 |")
    assert any(line.startswith("| low |") and line.endswith("| 2026-11-20 | old1234 |")
               for line in table.splitlines())
    assert table.split("\n\nCases that need GPUs")[0].rstrip().endswith(
        "Note on the run of 2026-11-20: rebuilt from a table")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.main(["readme", "--report", str(empty)]) == 2
    assert "no *.json report in the folder" in capsys.readouterr().err


def test_decoding_and_export_after_training(tmp_path, capsys):
    """A case with decode_hparams and export: after training, the dev text is written,
    decoded against its targets, exported with the parity gate; their metrics join the
    final evaluation's and every band is checked."""
    bands = {"bleu": (90.0, 100.0), "export_parity": (1.0, 1.0)}
    cases = [_case("beam", decode_hparams="beam_size=4,alpha=0.6", export=True, also=bands)]
    assert validate(cases + [_case("q", quick=True)]) == []
    values = {"beam": [(100, {"accuracy": 0.99})]}
    output = tmp_path / "out"
    fake = FakeTrainer(values, decode_scores={"beam": {"bleu": 97.5, "chrf": 98.0}})
    args = ["run", "--case", "beam", "--output", str(output)]
    assert runner.main(args, cases=cases, registered=REGISTERED, execute=fake) == 0
    tools = [os.path.basename(c[0]) if c[0] != sys.executable else c[2] for c in fake.commands]
    assert [t.replace("t2t.bin.t2t_", "t2t-") for t in tools] == [
        "t2t-datagen", "t2t-trainer", "t2t-datagen", "t2t-decoder", "t2t-exporter"]
    dump, decode, export = fake.commands[2:]
    case_dir = str(output / "beam")
    assert f"--dump_text={case_dir}/dev" in dump and "--inspect_split=dev" in dump
    assert f"--decode_from_file={case_dir}/dev.inputs" in decode
    assert f"--decode_reference={case_dir}/dev.targets" in decode
    assert "--decode_hparams=beam_size=4,alpha=0.6" in decode
    assert f"--export_dir={case_dir}/export" in export
    report = json.loads((output / "report.json").read_text())
    case = report["cases"][0]
    assert case["values"] == {"accuracy": 0.99, "bleu": 97.5, "export_parity": 1.0}
    assert case["status"] == PASS

    low = FakeTrainer(values, decode_scores={"beam": {"bleu": 60.0, "chrf": 70.0}})
    assert runner.main(args, cases=cases, registered=REGISTERED, execute=low) == 1
    case = json.loads((output / "report.json").read_text())["cases"][0]
    assert case["reason"] == "bleu 60.0000 outside [90.00, 100.00]"

    broken = FakeTrainer(values, decode_scores={"beam": {"bleu": 97.5}}, export_returncode=1)
    assert runner.main(args, cases=cases, registered=REGISTERED, execute=broken) == 1
    case = json.loads((output / "report.json").read_text())["cases"][0]
    assert "t2t-exporter exited with status 1" in case["reason"]
    assert case["values"]["export_parity"] == 0.0
    capsys.readouterr()


def test_speech_cases_decode_dev_and_test_and_check_wer_on_each(tmp_path, capsys):
    """also_decode_splits: each split is written out and decoded like the dev split;
    its scores are named SPLIT_<metric> (test_wer beside wer) and checked."""
    case = _case("asr", decode_hparams="beam_size=1", also_decode_splits=("test",),
                 metric="wer", band=(0.0, 0.3), also={"test_wer": (0.0, 0.2)})
    assert validate([case, _case("q", quick=True)]) == []
    values = {"asr": [(100, {"accuracy": 0.9})]}
    output = tmp_path / "out"
    fake = FakeTrainer(values, decode_scores={"asr": {"wer": 0.25, "cer": 0.1, "bleu": None},
                                              "asr@test": {"wer": 0.15, "cer": 0.05}})
    args = ["run", "--case", "asr", "--output", str(output)]
    assert runner.main(args, cases=[case], registered=REGISTERED, execute=fake) == 0
    case_dir = str(output / "asr")
    dump_test, decode_test = fake.commands[4:6]
    assert "--inspect_split=test" in dump_test and f"--dump_text={case_dir}/test" in dump_test
    assert f"--decode_to_file={case_dir}/decodes.test.txt" in decode_test
    result = json.loads((output / "report.json").read_text())["cases"][0]
    assert result["values"] == {"wer": 0.25, "test_wer": 0.15}
    assert result["status"] == PASS

    unseen = FakeTrainer(values, decode_scores={"asr": {"wer": 0.25},
                                                "asr@test": {"wer": 0.45}})
    assert runner.main(args, cases=[case], registered=REGISTERED, execute=unseen) == 1
    result = json.loads((output / "report.json").read_text())["cases"][0]
    assert result["reason"] == "test_wer 0.4500 outside [0.00, 0.20]"
    capsys.readouterr()


def test_post_training_metrics_need_their_step():
    assert validate([_case("q", quick=True, metric="test_wer", band=(0.0, 0.5),
                           decode_hparams="beam_size=1")]) == [
        "q: metric 'test_wer' needs decode_hparams and 'test' in also_decode_splits"]
    assert validate([_case("q", quick=True, metric="bleu", band=(1.0, 2.0))]) == [
        "q: metric 'bleu' needs decode_hparams"]
    assert validate([_case("q", quick=True, also={"export_parity": (1.0, 1.0)})]) == [
        "q: metric 'export_parity' needs export=True"]


def test_a_split_evaluated_after_training_against_a_baseline(tmp_path, capsys, monkeypatch):
    """eval_split_after: `t2t-trainer --schedule=evaluate --eval_split=test` after training,
    its metrics named test_*; below_baseline: the main band's high end becomes the
    baseline computed on the case's data, reported beside it."""
    from regression import baselines

    case = _case("lm", metric="test_bits_per_byte", band=(1.0, 3.0), eval_split_after="test",
                 below_baseline="xz_bits_per_byte")
    assert validate([case, _case("q", quick=True)]) == []
    assert case.curve_metric == "bits_per_byte"
    monkeypatch.setitem(baselines.BASELINES, "xz_bits_per_byte", lambda c, out: 2.5)
    values = {"lm": [(50, {"bits_per_byte": 3.0}), (100, {"bits_per_byte": 2.4})],
              "lm@test": [(100, {"bits_per_byte": 2.45, "accuracy": 0.5})]}
    output = tmp_path / "out"
    fake = FakeTrainer(values)
    args = ["run", "--case", "lm", "--output", str(output)]
    assert runner.main(args, cases=[case], registered=REGISTERED, execute=fake) == 0
    evaluate = fake.commands[-1]
    assert "--schedule=evaluate" in evaluate and "--eval_split=test" in evaluate
    result = json.loads((output / "report.json").read_text())["cases"][0]
    assert result["values"] == {"test_bits_per_byte": 2.45, "xz_bits_per_byte": 2.5}
    assert result["bands"]["test_bits_per_byte"] == [1.0, 2.5]
    assert result["curve"] == [[50, 3.0], [100, 2.4]] and result["status"] == PASS
    monkeypatch.setitem(baselines.BASELINES, "xz_bits_per_byte", lambda c, out: 2.4)
    assert runner.main(args, cases=[case], registered=REGISTERED, execute=FakeTrainer(values)) == 1
    result = json.loads((output / "report.json").read_text())["cases"][0]
    assert result["reason"] == "test_bits_per_byte 2.4500 outside [1.00, 2.40]"

    def no_xz(case, output_dir):
        raise FileNotFoundError("xz is not on PATH")

    monkeypatch.setitem(baselines.BASELINES, "xz_bits_per_byte", no_xz)
    assert runner.main(args, cases=[case], registered=REGISTERED, execute=FakeTrainer(values)) == 1
    result = json.loads((output / "report.json").read_text())["cases"][0]
    assert result["reason"] == ("baseline xz_bits_per_byte failed: FileNotFoundError: xz is "
                                "not on PATH")
    assert validate([_case("bad", metric="test_accuracy", band=(0.1, 0.9),
                           below_baseline="zip"), _case("q", quick=True)]) == [
        "bad: metric 'test_accuracy' needs eval_split_after='test'",
        "bad: unknown baseline 'zip' (known: xz_bits_per_byte)"]
    capsys.readouterr()


def test_the_results_block_lists_every_gpu_gated_case_with_band_source_and_skip():
    from regression.runner import gated_cases_table

    table = gated_cases_table(CASES)
    gated = [case for case in CASES if case.hardware != "cpu-2core"]
    assert len(gated) >= 5
    for case in gated:
        row = next(line for line in table.splitlines() if line.startswith(f"| {case.name} |"))
        assert f"[{case.band[0]:.2f}, {case.band[1]:.2f}]" in row
        assert row.endswith(f"| SKIP: needs {case.hardware} |")
    assert gated_cases_table([c for c in CASES if c.hardware == "cpu-2core"]) == ""
