"""Tests of the installed t2t-datagen binary, run as a subprocess (its flag errors: its
main in the test's process).

Runs that generate or inspect data import TensorFlow (seconds each), so they are few
and each checks several things.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.helpers.binaries import run_binary

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
    # --inspect and --dump_text: main in this process, no TensorFlow start each.
    data_dir, _ = generated
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
                        "--inspect", "--inspect_examples=3")
    assert result.code == 0, result.err[-3000:]
    out = result.out
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
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
                        "--inspect_split=dev", f"--dump_text={prefix}")
    assert result.code == 0, result.err[-3000:]
    assert f"{PROBLEM} [dev]: wrote 100 examples to {prefix}.inputs, {prefix}.targets" \
        in result.out
    inputs = (tmp_path / "dev.inputs").read_text().splitlines()
    targets = (tmp_path / "dev.targets").read_text().splitlines()
    assert len(inputs) == len(targets) == 100
    assert all(t.split() == i.split()[::-1] for i, t in zip(inputs, targets, strict=True))
    both = run_binary("t2t-datagen", f"--problem={PROBLEM},{PROBLEM}",
                      f"--data_dir={data_dir}", f"--dump_text={prefix}")
    assert both.code != 0 and "run once per problem" in both.err


# Flag errors: main in this process (tests/helpers/binaries.py), no TensorFlow start each.
def test_unknown_problem_fails_with_suggestions(tmp_path):
    result = run_binary("t2t-datagen", "--problem=algorithmic_reverse_binary4",
                        f"--data_dir={tmp_path}")
    assert result.code == 1
    assert "error: Unknown problem 'algorithmic_reverse_binary4'." in result.err
    assert "Did you mean: algorithmic_reverse_binary40" in result.err
    assert not result.traceback
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
    result = run_binary("t2t-datagen", *problem, *flags, f"--data_dir={tmp_path}")
    assert result.code == 1
    assert message in result.err
    assert not result.traceback
    assert not os.listdir(tmp_path)  # failed before writing anything


# Tensor2Tensor's documented example problem (docs/new_problem.md, PoetryLines), as a
# user porting it writes it: only the imports name t2t, and `load_etext` stands in for
# the Gutenberg download (no network in tests).
POETRY_LINES = '''
import re

from t2t import registry
from t2t.problems import problem
from t2t.problems import text_problems

WORDS = "sea sky grey morning came over hills gold wind rain river stone light dark song".split()


def load_etext(book_id):
  """A book: a Gutenberg-like header, then stanzas under upper-case titles."""
  lines = ["*** START OF THIS PROJECT GUTENBERG EBOOK ***"] * 600
  for stanza in range(50):
    lines += ["", "CANTO %d" % stanza, ""]
    for verse in range(4):
      n = stanza * 4 + verse
      words = [WORDS[n % 15], WORDS[(n // 15) % 15], WORDS[book_id % 15]]
      lines.append("The %s and the %s, %s!" % tuple(words))
  return "\\n".join(lines)


@registry.register_problem
class PoetryLines(text_problems.Text2TextProblem):
  """Predict next line of poetry from the last line. From Gutenberg texts."""

  @property
  def approx_vocab_size(self):
    return 2**13  # ~8k

  @property
  def is_generate_per_split(self):
    # generate_data will shard the data into TRAIN and EVAL for us.
    return False

  @property
  def dataset_splits(self):
    """Splits of data to produce and number of output shards for each."""
    # 10% evaluation data
    return [{
        "split": problem.DatasetSplit.TRAIN,
        "shards": 9,
    }, {
        "split": problem.DatasetSplit.EVAL,
        "shards": 1,
    }]

  def generate_samples(self, data_dir, tmp_dir, dataset_split):
    del data_dir
    del tmp_dir
    del dataset_split

    books = [
        # bookid, skip N lines
        (19221, 223),
        (15553, 522),
    ]

    for (book_id, toskip) in books:
      text = load_etext(book_id).strip()
      lines = text.split("\\n")[toskip:]
      prev_line = None
      ex_count = 0
      for line in lines:
        # Any line that is all upper case is a title or author name
        if not line or line.upper() == line:
          prev_line = None
          continue

        line = re.sub("[^a-z]+", " ", line.strip().lower())
        if prev_line and line:
          yield {
              "inputs": prev_line,
              "targets": line,
          }
          ex_count += 1
        prev_line = line


@registry.register_problem
class PoetryLinesPerSplit(PoetryLines):
  """The same corpus generated per split: what t2t wrote before it dealt the splits."""

  @property
  def is_generate_per_split(self):
    return True
'''


def _poetry_pairs() -> list[tuple[str, str]]:
    """The pairs PoetryLines generates, from its own code (not registered here)."""
    namespace = {}
    exec(POETRY_LINES.replace("@registry.register_problem\n", ""), namespace)  # noqa: S102
    samples = namespace["PoetryLines"]().generate_samples(None, None, "train")
    return [(" ".join(s["inputs"].split()), " ".join(s["targets"].split())) for s in samples]


def _read_pairs(data_dir, name: str, split: str) -> list[tuple[str, str]]:
    import glob

    import tensorflow as tf

    from t2t.data.encoders import text_encoder

    encoder = text_encoder.SentencePieceEncoder.load(
        os.path.join(data_dir, f"vocab.{name}.8192.model"))
    pairs = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{name}-{split}-*"))):
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            texts = [encoder.decode(list(feature[k].int64_list.value), strip_extraneous=True)
                     for k in ("inputs", "targets")]
            pairs.append(tuple(" ".join(t.split()) for t in texts))
    return pairs


@pytest.fixture(scope="module")
def poetry(tmp_path_factory):
    root = tmp_path_factory.mktemp("poetry")
    usr_dir = root / "poetry_usr"
    usr_dir.mkdir()
    (usr_dir / "poetry_lines.py").write_text(POETRY_LINES)
    (usr_dir / "__init__.py").write_text("from . import poetry_lines\n")
    data_dir = root / "data"
    result = datagen(f"--t2t_usr_dir={usr_dir}", "--problem=poetry_lines,poetry_lines_per_split",
                     f"--data_dir={data_dir}", "--progress=false")
    return usr_dir, data_dir, result


def test_t2t_documented_problem_deals_one_corpus_to_train_and_dev(poetry):
    _, data_dir, result = poetry
    assert result.returncode == 0, result.stderr[-3000:]
    assert "unexpected keyword argument" not in result.stderr
    corpus = _poetry_pairs()
    assert len(corpus) == 300 and len(set(corpus)) == 300
    first, second = _tables(result.stdout)
    assert first == {"train": ["270", "9", "0"], "dev": ["30", "1", "0"]}
    assert "dev/train overlap: 0 of 30 dev examples (0.0%) also occur in train" in result.stdout
    dev = _read_pairs(data_dir, "poetry_lines", "dev")
    train = _read_pairs(data_dir, "poetry_lines", "train")
    assert dev == corpus[9::10]  # every 10th pair, in order, as T2T dealt them
    assert sorted(train) == sorted(p for i, p in enumerate(corpus) if i % 10 != 9)
    # Generated per split, the same corpus goes to both splits: the report says so loudly.
    assert second == {"train": ["300", "9", "0"], "dev": ["300", "1", "0"]}
    assert ("WARNING: 300 of 300 dev examples (100.0%) also occur in train, above the 1% "
            "threshold") in result.stdout
    assert "dev figures (loss, accuracy, BLEU) would be measured on training data" \
        in result.stdout


def test_inspect_reports_the_overlap(poetry):
    usr_dir, data_dir, _ = poetry
    result = datagen(f"--t2t_usr_dir={usr_dir}", "--problem=poetry_lines_per_split",
                     f"--data_dir={data_dir}", "--inspect", "--inspect_examples=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "poetry_lines_per_split [train]: 300 examples" in result.stdout
    assert "--- WARNING: 300 of 300 dev examples (100.0%) also occur in train" in result.stdout
