"""Tests of the installed t2t-datagen binary, run as a subprocess.

Runs that generate or inspect data import TensorFlow (seconds each), so they are few
and each checks several things; runs that fail before any TensorFlow is needed are cheap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

PROBLEM = "algorithmic_reverse_binary40_test"
SHARDS = [f"{PROBLEM}-dev-00000-of-00001", f"{PROBLEM}-train-00000-of-00001"]

pytestmark = pytest.mark.skipif(shutil.which("t2t-datagen") is None,
                                reason="t2t-datagen is not installed")


def datagen(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["t2t-datagen", *flags], capture_output=True, text=True, timeout=180)


def _tables(stdout: str) -> list[dict[str, list[str]]]:
    """The summary tables printed by generation: [{split: [examples, written, skipped]}]."""
    tables = []
    for line in stdout.splitlines():
        fields = line.split()
        if fields[:2] == ["split", "examples"]:
            tables.append({})
        elif tables and fields and fields[0] in ("train", "dev", "test"):
            tables[-1][fields[0]] = fields[1:4]
    return tables


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Generates PROBLEM twice in one run (`--problem=P,P`): the second pass must skip."""
    data_dir = tmp_path_factory.mktemp("datagen")
    result = datagen(f"--problem={PROBLEM},{PROBLEM}", f"--data_dir={data_dir}",
                     "--progress=false")
    return data_dir, result


def test_generate_prints_a_summary_and_writes_shards(generated):
    data_dir, result = generated
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Generating {PROBLEM} into {data_dir}" in result.stdout
    assert re.search(rf"^{PROBLEM}: done in \d+\.\ds$", result.stdout, re.M)
    assert re.search(r"^\s+split\s+examples\s+shards written\s+skipped\s+size$",
                     result.stdout, re.M)
    first = _tables(result.stdout)[0]
    assert first == {"train": ["1,000", "1", "0"], "dev": ["100", "1", "0"]}
    names = sorted(os.listdir(data_dir))
    assert [n for n in names if n.startswith(PROBLEM)] == SHARDS
    assert all(os.path.getsize(data_dir / n) > 1000 for n in SHARDS)
    assert not [n for n in names if "tmp" in n and n != "tmp"]  # no temporary shard left
    assert (data_dir / "tmp").is_dir()  # default --tmp_dir is DATA_DIR/tmp


def test_rerun_skips_finished_shards(generated):
    data_dir, result = generated
    assert result.returncode == 0, result.stderr[-3000:]
    tables = _tables(result.stdout)
    assert len(tables) == 2
    # The second pass finds both shards complete: it writes none and skips one per split.
    assert tables[1]["train"][1:] == ["0", "1"]
    assert tables[1]["dev"][1:] == ["0", "1"]


def test_inspect_shows_decoded_examples_and_lengths(generated):
    data_dir, _ = generated
    result = datagen(f"--problem={PROBLEM}", f"--data_dir={data_dir}", "--inspect",
                     "--inspect_examples=3")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert f"{PROBLEM} [train]: 1,000 examples" in out
    assert "Generating" not in out  # --inspect does not generate
    inputs = re.findall(r"^\s+inputs: '((?:[01] )+<EOS>)'", out, re.M)
    targets = re.findall(r"^\s+targets: '((?:[01] )+<EOS>)'", out, re.M)
    assert len(inputs) == len(targets) == 3, out
    for source, target in zip(inputs, targets, strict=True):
        # The problem reverses its input; EOS stays last.
        assert target.split()[:-1] == source.split()[:-1][::-1]
    assert "--- lengths (tokens, EOS included)" in out
    for feature in ("inputs", "targets"):
        row = re.search(rf"^\s+{feature}\s+(\d+)\s+[\d.]+(?:\s+\d+){{3}}\s+(\d+)\s+([\d,]+)$",
                        out, re.M)
        assert row, out
        low, high = int(row.group(1)), int(row.group(2))
        assert 2 <= low <= high <= 11  # 1..10 symbols plus EOS


def test_dump_text_writes_a_split_as_lines(generated, tmp_path):
    data_dir, _ = generated
    prefix = tmp_path / "dev"
    result = datagen(f"--problem={PROBLEM}", f"--data_dir={data_dir}", "--inspect_split=dev",
                     f"--dump_text={prefix}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{PROBLEM} [dev]: wrote 100 examples to {prefix}.inputs, {prefix}.targets" \
        in result.stdout
    inputs = (tmp_path / "dev.inputs").read_text().splitlines()
    targets = (tmp_path / "dev.targets").read_text().splitlines()
    assert len(inputs) == len(targets) == 100
    assert all(t.split() == i.split()[::-1] for i, t in zip(inputs, targets, strict=True))
    both = datagen(f"--problem={PROBLEM},{PROBLEM}", f"--data_dir={data_dir}",
                   f"--dump_text={prefix}")
    assert both.returncode != 0 and "run once per problem" in both.stderr


def test_unknown_problem_fails_with_suggestions(tmp_path):
    result = datagen("--problem=algorithmic_reverse_binary4", f"--data_dir={tmp_path}")
    assert result.returncode == 1
    assert "error: Unknown problem 'algorithmic_reverse_binary4'." in result.stderr
    assert "Did you mean: algorithmic_reverse_binary40" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("flags, message", [
    (["--gin_param=ZzNoSuchConfigurable.x=1"],
     "error: Bad gin configuration (No configurable matching 'ZzNoSuchConfigurable'"),
    (["--gin_file=/nonexistent/zz.gin"], "error: --gin_file='/nonexistent/zz.gin' does not exist"),
    (["--t2t_usr_dir=/nonexistent/zz_usr"], "error: --t2t_usr_dir='/nonexistent/zz_usr': no such"),
    ([], "error: --problem is required"),
])
def test_bad_flags_fail_clearly(tmp_path, flags, message):
    problem = [] if not flags else [f"--problem={PROBLEM}"]
    result = datagen(*problem, *flags, f"--data_dir={tmp_path}")
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.listdir(tmp_path)  # failed before writing anything
