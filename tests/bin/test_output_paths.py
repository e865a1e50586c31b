"""t2t.bin.output_paths, and every binary that writes refusing an output path it cannot
write: one line on stderr (`error: --FLAG=PATH: ...`), exit status 1, nothing written.

"No permission" is made real, not mocked: /sys takes no new files even from root
(EACCES), /proc none either (ENOENT); a folder's modes stop a user who is not root (this
process when it is not root, else `nobody` through setpriv); a read-only tmpfs in a user
and mount namespace (unshare) gives EROFS. The binaries' mains run in this process
(tests/helpers/binaries.py) and fail before any training or TensorFlow start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from absl import flags

from t2t.bin import output_paths
from tests.helpers.binaries import run_binary

PROBLEM = "algorithmic_reverse_binary40_test"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_NEW_FILES = "/sys"  # sysfs: creating a file fails for everyone, root included


def _tree(root) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None: a folder): what a run wrote."""
    tree = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            tree[os.path.join(folder, name)] = None
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                tree[os.path.join(folder, name)] = f.read()
    return tree


@pytest.fixture
def places(tmp_path):
    """tmp_path holding a folder `folder` and a file `a_file`."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "a_file").write_text("keep me\n")
    return tmp_path


def _needs_sys() -> None:
    if not os.path.isdir(NO_NEW_FILES):
        pytest.skip(f"no {NO_NEW_FILES} on this system")


# ------------------------------------------------------------------------ files
def test_a_writable_file_path_passes_and_leaves_nothing(places):
    before = _tree(places)
    assert output_paths.file_problem("out", str(places / "new.txt")) is None
    assert output_paths.file_problem("out", str(places / "a_file")) is None  # overwritten
    assert output_paths.file_problem("out", "gs://bucket/out.txt") is None  # its filesystem's
    assert output_paths.file_problem("out", "") is None  # not given
    assert _tree(places) == before  # the probe file is gone


def test_a_folder_where_a_file_is_wanted(places):
    folder = places / "folder"
    assert output_paths.file_problem("decode_to_file", str(folder)) == (
        f"--decode_to_file={folder} is a folder, not a file: give a file name (e.g. "
        f"{folder}/out.txt) or remove the folder.")
    new = f"{places}/new/"
    assert output_paths.file_problem("decode_to_file", new) == (
        f"--decode_to_file={new} ends with '/', so it names a folder: give a file name "
        f"(e.g. {new}out.txt).")
    # A prefix flag: the file written is PREFIX + suffix.
    (places / "dev.inputs").mkdir()
    assert output_paths.file_problem("dump_text", str(places / "dev"), ".inputs") == (
        f"--dump_text={places}/dev: {places}/dev.inputs is a folder, not a file: give a "
        f"file name (e.g. {places}/dev.inputs/out.txt) or remove the folder.")
    assert output_paths.file_problem("dump_text", str(places / "dev"), ".targets") is None


def test_a_missing_parent_folder(places):
    path = places / "missing" / "deeper" / "out.txt"
    assert output_paths.file_problem("score_file", str(path)) == (
        f"--score_file={path}: its folder {path.parent} does not exist: create it "
        f"(mkdir -p {path.parent}) or give a path in an existing folder.")
    # A binary that makes the folder itself: fine, and still nothing is made here.
    assert output_paths.file_problem("score_file", str(path), make_parents=True) is None
    assert not (places / "missing").exists()


def test_a_parent_that_is_a_file(places):
    a_file = places / "a_file"
    for path in (a_file / "out.txt", a_file / "sub" / "out.txt"):
        assert output_paths.file_problem("x", str(path)) == (
            f"--x={path}: {a_file} is a file, not a folder: give another path or move the "
            f"file."), path
    assert output_paths.file_problem("x", str(a_file / "sub" / "out"), make_parents=True) == (
        f"--x={a_file}/sub/out: {a_file} is a file, not a folder: give another path or "
        f"move the file.")
    assert a_file.read_text() == "keep me\n"


def test_a_folder_that_takes_no_files_even_for_root():
    _needs_sys()
    assert output_paths.file_problem("out", "/sys/out.txt") == (
        "--out=/sys/out.txt: cannot write in the folder /sys: Permission denied: give a "
        "path in a folder you can write.")
    assert output_paths.file_problem("out", "/sys/a/b/out", make_parents=True) == (
        "--out=/sys/a/b/out: cannot write in the folder /sys (where /sys/a/b would be "
        "made): Permission denied: give a path in a folder you can write.")
    assert output_paths.file_problem("out", "/proc/out.txt") == (
        "--out=/proc/out.txt: cannot write in the folder /proc: it takes no new files: give "
        "a path in a folder you can write.")


# ---------------------------------------------------------------------- folders
def test_folders(places):
    before = _tree(places)
    assert output_paths.dir_problem("output_dir", str(places / "folder")) is None
    assert output_paths.dir_problem("output_dir", str(places / "new" / "run")) is None
    a_file = places / "a_file"
    assert output_paths.dir_problem("output_dir", str(a_file)) == (
        f"--output_dir={a_file} is a file, not a folder: give a folder's path or move the "
        f"file.")
    assert output_paths.dir_problem("output_dir", str(a_file / "run" / "x")) == (
        f"--output_dir={a_file}/run/x: {a_file} is a file, not a folder: give another path "
        f"or move the file.")
    assert output_paths.dir_problem("output_dir", "~") is None  # expanded
    assert _tree(places) == before
    _needs_sys()
    assert output_paths.dir_problem("data_dir", "/sys") == (
        "--data_dir=/sys: cannot write in the folder /sys: Permission denied: give a path "
        "in a folder you can write.")
    assert output_paths.dir_problem("data_dir", "/sys/t2t/data") == (
        "--data_dir=/sys/t2t/data: cannot write in the folder /sys (where /sys/t2t/data "
        "would be made): Permission denied: give a path in a folder you can write.")


def test_check_functions_exit_with_one_line(places, capsys):
    output_paths.check_dir("output_dir", str(places / "folder"))
    output_paths.check_file("decode_to_file", None)
    assert capsys.readouterr().err == ""
    for check, flag, path in ((output_paths.check_file, "decode_to_file", places / "folder"),
                              (output_paths.check_dir, "output_dir", places / "a_file")):
        with pytest.raises(SystemExit) as exit_:
            check(flag, str(path))
        assert exit_.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: --{flag}={path}") and err.count("\n") == 1, err


def test_check_given_checks_only_flags_on_the_command_line(places, capsys):
    values = flags.FlagValues()
    flags.DEFINE_string("out_dir", str(places / "a_file"), "", flag_values=values)
    flags.DEFINE_string("out_file", None, "", flag_values=values)
    values(["prog"])  # the default, a file, is not checked: it may be resolved later
    output_paths.check_given(dirs=("out_dir",), files=("out_file",), flag_values=values)
    values.unparse_flags()
    values(["prog", f"--out_file={places / 'folder'}"])
    with pytest.raises(SystemExit):
        output_paths.check_given(dirs=("out_dir",), files=("out_file",), flag_values=values)
    assert capsys.readouterr().err.startswith(f"error: --out_file={places / 'folder'} is a folder")


# ------------------------------------------------ permissions that stop a real user
_PROBE = ("import json, sys\nfrom t2t.bin import output_paths as o\n"
          "print(json.dumps([o.file_problem('out', sys.argv[1] + '/out.txt'), "
          "o.dir_problem('out', sys.argv[1] + '/run'), "
          "o.file_problem('out', sys.argv[2])]))")


def _problems_as_user(locked: str, read_only_file: str) -> list:
    """file_problem/dir_problem in `locked` and for `read_only_file`, as a user whom
    file modes stop: this process when not root, else `nobody` through setpriv."""
    if os.geteuid() != 0:
        return [output_paths.file_problem("out", locked + "/out.txt"),
                output_paths.dir_problem("out", locked + "/run"),
                output_paths.file_problem("out", read_only_file)]
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no user whom file modes stop")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    env = {**os.environ, "HOME": "/"}
    probe = subprocess.run([*as_nobody, "-c", "import t2t.bin.output_paths"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:  # e.g. the TF-version matrix's copy of t2t under /root
        pytest.skip(f"user nobody cannot import t2t from {REPO}: "
                    f"{probe.stderr.strip().splitlines()[-1:]}")
    result = subprocess.run([*as_nobody, "-c", _PROBE, locked, read_only_file],
                            capture_output=True, text=True, cwd=REPO, timeout=60, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_no_permission_for_a_user_who_is_not_root():
    with tempfile.TemporaryDirectory() as top:  # under /tmp: `nobody` may enter it
        os.chmod(top, 0o755)
        locked, open_ = os.path.join(top, "locked"), os.path.join(top, "open")
        os.mkdir(locked, 0o555)
        os.mkdir(open_)
        os.chmod(open_, 0o777)
        read_only_file = os.path.join(open_, "old.txt")
        with open(read_only_file, "w") as f:
            f.write("old\n")
        os.chmod(read_only_file, 0o444)
        try:
            problems = _problems_as_user(locked, read_only_file)
        finally:
            os.chmod(locked, 0o755)
        assert problems == [
            f"--out={locked}/out.txt: cannot write in the folder {locked}: Permission "
            f"denied: give a path in a folder you can write.",
            f"--out={locked}/run: cannot write in the folder {locked} (where {locked}/run "
            f"would be made): Permission denied: give a path in a folder you can write.",
            f"--out={read_only_file}: {read_only_file} exists and is not writable: make it "
            f"writable or give another path."]
        assert os.listdir(locked) == [] and os.listdir(open_) == ["old.txt"]


def test_a_read_only_disk(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare: cannot mount a read-only tmpfs")
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = 'mount -t tmpfs -o ro tmpfs "$1" || exit 97; exec "$2" -c "$3" "$1" "$1/old"'
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(mount),
                             sys.executable, _PROBE], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    if result.returncode != 0 and ("unshare" in result.stderr or result.returncode == 97):
        pytest.skip(f"no user/mount namespace here: {result.stderr.strip()[:200]}")
    assert result.returncode == 0, result.stderr[-2000:]
    on_file, on_dir, _ = json.loads(result.stdout)
    assert on_file == (f"--out={mount}/out.txt: cannot write in the folder {mount}: "
                       f"Read-only file system: give a path in a folder you can write.")
    assert on_dir == (f"--out={mount}/run: cannot write in the folder {mount} (where "
                      f"{mount}/run would be made): Read-only file system: give a path in "
                      f"a folder you can write.")


# ------------------------------------------------------------------ the binaries
def _assert_refused(result, flag: str, path) -> None:
    """Exit status 1 and one line on stderr naming the flag and the path; no traceback."""
    assert result.code == 1, result.out[-2000:] + result.err[-2000:]
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --{flag}={path}"), result.err


def test_trainer_refuses_before_anything(places):
    before = _tree(places)
    task = (f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_tiny")
    bad_tmp = places / "a_file" / "tmp"
    result = run_binary("t2t-trainer", *task, "--generate_data", f"--tmp_dir={bad_tmp}",
                        f"--output_dir={places / 'run'}", f"--data_dir={places / 'data'}")
    _assert_refused(result, "tmp_dir", bad_tmp)
    result = run_binary("t2t-trainer", *task, f"--output_dir={places / 'a_file'}")
    _assert_refused(result, "output_dir", places / "a_file")
    assert _tree(places) == before  # no run, no data folder


def test_trainer_refuses_before_tensorflow_starts(places):
    # A real process: a bad output path costs no TensorFlow start (~5 s).
    code = ("import sys\nfrom t2t.bin import t2t_trainer\n"
            "sys.argv = ['t2t-trainer', '--output_dir=' + sys.argv[1]]\n"
            "try:\n    t2t_trainer.run()\nfinally:\n"
            "    print('tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code, str(places / "a_file")],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 1 and result.stdout == "False\n", result.stderr
    assert result.stderr.startswith(f"error: --output_dir={places / 'a_file'} is a file")


def test_trainer_refuses_a_default_output_dir(places, monkeypatch):
    # No --output_dir: ~/t2t_train/PROBLEM/MODEL-HPARAMS_SET, with HOME a file.
    monkeypatch.setenv("HOME", str(places / "a_file"))
    monkeypatch.setenv("T2T_DATA_DIR", str(places / "data"))
    before = _tree(places)
    result = run_binary("t2t-trainer", f"--problem={PROBLEM}", "--model=transformer",
                        "--hparams_set=transformer_tiny", "--generate_data")
    default = places / "a_file" / "t2t_train" / PROBLEM / "transformer-transformer_tiny"
    _assert_refused(result, "output_dir", default)
    assert f"{places / 'a_file'} is a file, not a folder" in result.err
    assert _tree(places) == before


def test_datagen_refuses_before_anything(places):
    before = _tree(places)
    bad_tmp = places / "a_file" / "tmp"
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={places / 'data'}",
                        f"--tmp_dir={bad_tmp}")
    _assert_refused(result, "tmp_dir", bad_tmp)
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={places / 'a_file'}")
    _assert_refused(result, "data_dir", places / "a_file")
    (places / "dev.targets").mkdir()
    before = _tree(places)
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={places / 'data'}",
                        f"--dump_text={places / 'dev'}")
    _assert_refused(result, "dump_text", places / "dev")
    assert f"{places / 'dev.targets'} is a folder, not a file" in result.err
    assert _tree(places) == before  # not even dev.inputs


def test_exporter_refuses_before_anything(places):
    before = _tree(places)
    bad = places / "a_file" / "export"
    result = run_binary("t2t-exporter", f"--output_dir={places / 'run'}", f"--export_dir={bad}",
                        f"--problem={PROBLEM}", "--model=transformer",
                        "--hparams_set=transformer_tiny")
    _assert_refused(result, "export_dir", bad)
    assert _tree(places) == before


def test_avg_all_refuses_before_anything(places):
    before = _tree(places)
    result = run_binary("t2t-avg-all", f"--model_dir={places / 'run'}",
                        f"--output_dir={places / 'a_file'}")
    _assert_refused(result, "output_dir", places / "a_file")
    _needs_sys()
    result = run_binary("t2t-avg-all", "--model_dir=/sys/run")  # default: MODEL_DIR/avg
    _assert_refused(result, "output_dir", "/sys/run/avg")
    assert _tree(places) == before


def test_tuner_refuses_before_anything(places):
    before = _tree(places)
    study = (f"--problem={PROBLEM}", "--model=transformer", "--hparams_set=transformer_tiny",
             "--hparams_range=transformer_tiny_range", "--objective=accuracy")
    result = run_binary("t2t-tuner", *study, f"--output_dir={places / 'a_file' / 'study'}")
    _assert_refused(result, "output_dir", places / "a_file" / "study")
    bad_db = places / "a_file" / "study.db"
    result = run_binary("t2t-tuner", *study, f"--output_dir={places / 'study'}",
                        f"--storage=sqlite:///{bad_db}")
    _assert_refused(result, "storage", bad_db)
    result = run_binary("t2t-tuner", *study, f"--output_dir={places / 'study'}",
                        "--generate_data", f"--data_dir={places / 'a_file'}")
    _assert_refused(result, "data_dir", places / "a_file")
    assert _tree(places) == before


def test_launch_refuses_before_starting_tasks(places):
    before = _tree(places)
    marker = places / "task_ran"
    bad = places / "a_file" / "logs"
    result = subprocess.run(
        [sys.executable, "-m", "t2t.bin.t2t_launch", f"--log_dir={bad}", "--num_workers=2",
         "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"error: --log_dir={bad}: {places / 'a_file'} is a file, not a folder: give another "
        f"path or move the file."]
    assert result.stdout == "" and _tree(places) == before  # no task started
