"""Bad data: a missing or empty data_dir, mixed, truncated or corrupted TFRecord shards,
a download whose checksum is wrong, an archive with a path-traversal entry.

Each fails with a clear message naming the bad path (or file, or entry) and what to do,
and keeps what was there: the run directory, the other shards, files in the download
and extraction folders."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import zipfile

import pytest

from tests.helpers.local_http import serve_folder, tar_bytes
from tests.robustness import support
from tests.robustness.support import HPARAMS, HPARAMS_SET, MODEL, PROBLEM, run_binary

TRAIN_SHARD = f"{PROBLEM}-train-00000-of-00001"
DEV_SHARD = f"{PROBLEM}-dev-00000-of-00001"



def _assert_clear(result, *fragments):
    assert result.code == 1, (result.out, result.err)
    assert not result.traceback, result.err
    assert "error: " in result.err, result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def _trainer(data_dir, output_dir, *extra):
    return run_binary("t2t-trainer", f"--problem={PROBLEM}", f"--model={MODEL}",
                      f"--hparams_set={HPARAMS_SET}", f"--hparams={HPARAMS}",
                      f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--train_steps=2",
                      "--schedule=train", *extra)


@pytest.fixture
def run_copy(trained_run, tmp_path):
    path = str(tmp_path / "run")
    shutil.copytree(trained_run, path)
    return path


@pytest.fixture
def data_copy(data_dir, tmp_path):
    path = str(tmp_path / "data")
    shutil.copytree(data_dir, path)
    return path


# ----------------------------------------------------------- missing / empty data_dir
@pytest.mark.parametrize("state", ["missing", "empty"])
def test_trainer_without_data(robustness, run_copy, tmp_path, state):
    """The run being resumed is kept (flags.txt aside: see test_bad_checkpoints)."""
    data = tmp_path / "no_data"
    if state == "empty":
        data.mkdir()
    robustness.bad_input(f"t2t-trainer --data_dir=<{state}>")
    before = support.snapshot(run_copy)
    result = _trainer(data, run_copy)
    support.assert_kept(robustness, run_copy, before)
    assert support.checkpoint_steps(run_copy) == [0]
    assert (os.listdir(data) == []) if state == "empty" else not data.exists()
    _assert_clear(result, f"No train data for problem {PROBLEM!r} in '{data}'",
                  f"Run: t2t-datagen --problem={PROBLEM} --data_dir={data}")


def test_datagen_inspect_and_decoder_without_data(robustness, data_dir, trained_run, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    robustness.bad_input("t2t-datagen --inspect --data_dir=<empty>")
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={empty}",
                        "--inspect")
    _assert_clear(result, f"No train data for problem {PROBLEM!r} in '{empty}'",
                  f"Run: t2t-datagen --problem={PROBLEM} --data_dir={empty}")
    assert os.listdir(empty) == []

    # Another problem's data: the message says what the folder holds.
    other = "algorithmic_identity_binary40_test"
    robustness.bad_input(f"t2t-datagen --inspect --problem={other} (data of {PROBLEM})")
    before = support.snapshot(data_dir)
    result = run_binary("t2t-datagen", f"--problem={other}", f"--data_dir={data_dir}",
                        "--inspect_split=dev", "--inspect")
    _assert_clear(result, f"No dev data for problem {other!r}", f"It holds data of: {PROBLEM}.",
                  f"Run: t2t-datagen --problem={other}")
    support.assert_kept(robustness, data_dir, before)

    # The decoder's dev-set decoding needs the data too; the run is left as it was.
    missing = tmp_path / "missing"
    robustness.bad_input("t2t-decoder (dev set) --data_dir=<missing>")
    before = support.snapshot(trained_run)
    result = run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={missing}",
                        f"--decode_hparams={support.FAST_DECODE}", "--eval_steps=1")
    _assert_clear(result, f"No dev data for problem {PROBLEM!r} in '{missing}'",
                  f"Run: t2t-datagen --problem={PROBLEM} --data_dir={missing}")
    assert support.snapshot(trained_run) == before  # no decode_dev.*.txt either
    assert not missing.exists()


def test_datagen_data_dir_is_a_file(robustness, tmp_path):
    target = tmp_path / "data_dir_file"
    target.write_text("not a folder\n")
    robustness.bad_input("t2t-datagen --data_dir=<a regular file>")
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={target}",
                        "--progress=false")
    _assert_clear(result, "is a file, not a folder", str(target))
    assert target.read_text() == "not a folder\n"
    robustness.data_lost([] if target.read_text() == "not a folder\n" else [str(target)])


# ------------------------------------------------------------------ damaged shards
def test_mixed_shard_counts_inspect(robustness, data_copy):
    stale = os.path.join(data_copy, f"{PROBLEM}-train-00000-of-00002")
    shutil.copy(os.path.join(data_copy, TRAIN_SHARD), stale)
    robustness.bad_input("t2t-datagen --inspect: shards -of-00001 and -of-00002 mixed")
    before = support.snapshot(data_copy)
    result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_copy}",
                        "--inspect")
    support.assert_kept(robustness, data_copy, before)
    _assert_clear(result, "Shards of different counts [1, 2] are mixed in", data_copy,
                  "delete the stale ones and re-run t2t-datagen")


def test_mixed_shard_counts_trainer(robustness, data_copy, run_copy):
    shutil.copy(os.path.join(data_copy, TRAIN_SHARD),
                os.path.join(data_copy, f"{PROBLEM}-train-00000-of-00002"))
    robustness.bad_input("t2t-trainer: shards -of-00001 and -of-00002 mixed")
    data_before = support.snapshot(data_copy)
    run_before = support.snapshot(run_copy)
    result = _trainer(data_copy, run_copy)
    support.assert_kept(robustness, data_copy, data_before)
    support.assert_kept(robustness, run_copy, run_before)
    _assert_clear(result, "Shards of different counts [1, 2] are mixed in",
                  "delete the stale ones and re-run t2t-datagen")


def _damage(path: str, how: str) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if how == "truncated":
        data = data[: len(data) // 2]  # cut inside a record
    else:
        data[len(data) // 2] ^= 0xFF  # one flipped byte: a record's CRC no longer matches
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("binary, how", [("t2t-trainer", "corrupted"),
                                         ("t2t-datagen", "truncated")])
def test_damaged_shard(robustness, data_copy, run_copy, binary, how):
    shard = os.path.join(data_copy, TRAIN_SHARD)
    _damage(shard, how)
    robustness.bad_input(f"{binary}: a {how} TFRecord shard")
    data_before = support.snapshot(data_copy)
    # flags.txt records the latest command the trainer accepted (this one: its data
    # fails only once training reads it); everything else must stay as it was.
    run_before = support.snapshot(run_copy, exclude=("flags.txt",))
    if binary == "t2t-trainer":
        result = _trainer(data_copy, run_copy)
    else:
        result = run_binary("t2t-datagen", f"--problem={PROBLEM}", f"--data_dir={data_copy}",
                            "--inspect")
    support.assert_kept(robustness, data_copy, data_before)  # the dev shard included
    support.assert_kept(robustness, run_copy, run_before, exclude=("flags.txt",))
    assert support.checkpoint_steps(run_copy) == [0]  # no checkpoint of damaged data
    _assert_clear(result, TRAIN_SHARD, "t2t-datagen")


# ------------------------------------------------------------------ downloads
_PUBLISHED = b"the published file\n" * 64
_TAMPERED = _PUBLISHED[:-2] + b"!\n"  # same size: only the sha256 can tell


def _resource(url: str):
    from t2t.data.generation.download import Resource

    return Resource(url, sha256=hashlib.sha256(_PUBLISHED).hexdigest(), size=len(_PUBLISHED))


def test_wrong_checksum_is_refused_and_the_bad_copy_deleted(robustness, tmp_path):
    from t2t.data.generation import download

    served, downloads = tmp_path / "server", tmp_path / "downloads"
    served.mkdir()
    downloads.mkdir()
    (served / "corpus.txt").write_bytes(_TAMPERED)
    (downloads / "other.txt").write_text("fetched earlier\n")
    before = support.snapshot(str(downloads))
    robustness.bad_input("download: served bytes with the wrong sha256")
    with serve_folder(str(served)) as (url, requested):
        resource = _resource(url + "corpus.txt")
        with pytest.raises(download.ChecksumError) as error:
            download.fetch(resource, str(downloads), mirror="", progress=False)
    message = str(error.value)
    assert requested == ["/corpus.txt"]
    assert f"Checksum mismatch for corpus.txt fetched from canonical {url}corpus.txt" in message
    assert (f"sha256: expected {resource.sha256}, got "
            f"{hashlib.sha256(_TAMPERED).hexdigest()}") in message
    assert "The bad copy was deleted" in message
    assert f"place it at {downloads / 'corpus.txt'}, or set --data_mirror" in message
    assert sorted(os.listdir(downloads)) == ["other.txt"]  # no bad copy, no .partial
    support.assert_kept(robustness, str(downloads), before)

    # The fix the message gives: a mirror folder holding the right file.
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "corpus.txt").write_bytes(_PUBLISHED)
    path = download.fetch(resource, str(downloads), mirror=str(mirror), progress=False)
    assert open(path, "rb").read() == _PUBLISHED
    support.assert_kept(robustness, str(downloads), before)
    robustness.run_completed("download from the mirror the error suggested")


def test_a_stale_mirror_falls_back_to_the_canonical_url(robustness, tmp_path):
    from t2t.data.generation import download

    stale, canonical, downloads = tmp_path / "stale", tmp_path / "canonical", tmp_path / "dl"
    stale.mkdir()
    canonical.mkdir()
    (stale / "corpus.txt").write_bytes(_TAMPERED)
    (canonical / "corpus.txt").write_bytes(_PUBLISHED)
    robustness.bad_input("download: a mirror serving the wrong bytes")
    with serve_folder(str(stale)) as (mirror_url, _), \
            serve_folder(str(canonical)) as (url, requested):
        path = download.fetch(_resource(url + "corpus.txt"), str(downloads), mirror=mirror_url,
                              progress=False)
    assert requested == ["/corpus.txt"]
    assert open(path, "rb").read() == _PUBLISHED
    assert os.listdir(downloads) == ["corpus.txt"]
    robustness.run_completed("download past a stale mirror")


def _serve_env(monkeypatch, url: str, data: bytes) -> None:
    monkeypatch.setenv("T2T_ROBUSTNESS_URL", url)
    monkeypatch.setenv("T2T_ROBUSTNESS_SHA256", hashlib.sha256(data).hexdigest())
    monkeypatch.setenv("T2T_ROBUSTNESS_SIZE", str(len(data)))


def test_datagen_wrong_checksum(robustness, usr_dir, tmp_path, monkeypatch):
    served, data, tmp = tmp_path / "server", tmp_path / "data", tmp_path / "tmp"
    served.mkdir()
    data.mkdir()
    tmp.mkdir()
    (served / "corpus.txt").write_bytes(_TAMPERED)
    (data / "earlier-train-00000-of-00001").write_bytes(b"another problem's shard")
    (tmp / "earlier.tar.gz").write_bytes(b"an earlier download")
    before = support.snapshot(str(tmp_path))
    robustness.bad_input("t2t-datagen: a download with the wrong sha256")
    with serve_folder(str(served)) as (url, _):
        _serve_env(monkeypatch, url + "corpus.txt", _PUBLISHED)
        result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}",
                            "--problem=zz_robustness_fetched", f"--data_dir={data}",
                            f"--tmp_dir={tmp}", "--progress=false")
    support.assert_kept(robustness, str(tmp_path), before)
    assert support.snapshot(str(tmp_path)) == before  # no shard, no bad copy
    _assert_clear(result, "Checksum mismatch for corpus.txt", "sha256: expected",
                  f"place it at {tmp / 'corpus.txt'}, or set --data_mirror")


# ------------------------------------------------------------------ unsafe archives
def _tar_with(entry: str, tmp_path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        def add(name, data=b"", **attrs):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in attrs.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data))

        add("corpus/good.txt", b"fine\n")
        if entry == "dotdot":
            add("../evil.txt", b"escaped\n")
        elif entry == "nested_dotdot":
            add("corpus/../../evil.txt", b"escaped\n")
        elif entry == "absolute":
            add(str(tmp_path / "evil.txt"), b"escaped\n")
        elif entry == "symlink_out":
            add("corpus/link", type=tarfile.SYMTYPE, linkname="../../")
            add("corpus/link/evil.txt", b"escaped\n")
        elif entry == "hardlink_out":
            add("corpus/passwd", type=tarfile.LNKTYPE, linkname="/etc/passwd")
    return buffer.getvalue()


_EXPECTED_ENTRY = {
    "dotdot": ("'../evil.txt'", "contains a '..' component"),
    "nested_dotdot": ("'corpus/../../evil.txt'", "contains a '..' component"),
    "absolute": ("evil.txt'", "has an absolute path"),
    "symlink_out": ("'corpus/link'", "outside the target folder"),
    "hardlink_out": ("'corpus/passwd'", "is a link to the absolute path '/etc/passwd'"),
}


@pytest.mark.parametrize("entry", sorted(_EXPECTED_ENTRY) + ["zip_dotdot"])
def test_path_traversal_archive_extracts_nothing(robustness, tmp_path, entry):
    from t2t.data.generation import extract

    downloads = tmp_path / "downloads"
    target = downloads / "extracted"
    target.mkdir(parents=True)
    (target / "kept.txt").write_text("extracted earlier\n")
    if entry == "zip_dotdot":
        archive = downloads / "corpus.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("corpus/good.txt", "fine\n")
            zf.writestr("../evil.txt", "escaped\n")
        bad, why = "'../evil.txt'", "contains a '..' component"
    else:
        archive = downloads / "corpus.tar.gz"
        archive.write_bytes(_tar_with(entry, tmp_path))
        bad, why = _EXPECTED_ENTRY[entry]
    robustness.bad_input(f"archive entry: {entry}")
    before = support.snapshot(str(tmp_path))
    with pytest.raises(extract.UnsafeArchiveError) as error:
        extract.extract(str(archive), str(target))
    message = str(error.value)
    assert f"Refusing to extract {archive}: entry " in message and bad in message, message
    assert why in message and "Nothing was extracted from it." in message, message
    support.assert_kept(robustness, str(tmp_path), before)
    assert support.snapshot(str(tmp_path)) == before  # nothing inside, outside, or a marker
    assert not os.path.exists(tmp_path / "evil.txt")


def test_datagen_refuses_a_path_traversal_archive(robustness, usr_dir, tmp_path, monkeypatch):
    served, data, tmp = tmp_path / "server", tmp_path / "data", tmp_path / "tmp"
    for folder in (served, data, tmp / "extracted"):
        folder.mkdir(parents=True)
    archive = tar_bytes({"corpus/good.txt": b"fine\n", "../../evil.txt": b"escaped\n"})
    (served / "corpus.tar.gz").write_bytes(archive)
    (tmp / "extracted" / "kept.txt").write_text("extracted earlier\n")
    robustness.bad_input("t2t-datagen: a downloaded archive with a '../../' entry")
    before = support.snapshot(str(tmp_path))
    with serve_folder(str(served)) as (url, _):
        _serve_env(monkeypatch, url + "corpus.tar.gz", archive)
        result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}",
                            "--problem=zz_robustness_fetched", f"--data_dir={data}",
                            f"--tmp_dir={tmp}", "--progress=false")
    support.assert_kept(robustness, str(tmp_path), before)
    _assert_clear(result, f"Refusing to extract {tmp / 'corpus.tar.gz'}: entry '../../evil.txt'"
                  " contains a '..' component. Nothing was extracted from it.")
    after = support.snapshot(str(tmp_path))
    # Only the verified download was added: no member, no shard, nothing outside.
    assert sorted(set(after) - set(before)) == ["tmp/corpus.tar.gz"]
    assert not os.path.exists(tmp_path.parent / "evil.txt")


def test_unsafe_archive_error_says_what_to_do(robustness, tmp_path):
    from t2t.data.generation import extract

    archive = tmp_path / "corpus.tar.gz"
    archive.write_bytes(tar_bytes({"../evil.txt": b"escaped\n"}))
    robustness.bad_input("archive entry: ../evil.txt (is a fix suggested?)")
    with pytest.raises(extract.UnsafeArchiveError) as error:
        extract.extract(str(archive), str(tmp_path / "out"))
    message = str(error.value).lower()
    assert any(hint in message for hint in ("delete", "re-download", "--data_mirror",
                                            "official", "trusted")), message


def test_resource_with_a_path_in_its_file_name(robustness):
    """A Resource whose file name would leave the download folder is refused up front."""
    from t2t.data.generation.download import Resource

    for url, filename in [("http://127.0.0.1/a/..", None), ("http://x/f", "../evil.txt")]:
        robustness.bad_input(f"download file name from {url!r}, filename={filename!r}")
        with pytest.raises(ValueError, match="Cannot derive a plain file name") as error:
            _ = Resource(url, filename=filename).local_name
        assert "pass Resource(filename=...)" in str(error.value)
