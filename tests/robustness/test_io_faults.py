"""Injected I/O faults: downloads cut or lied about, a disk that fills while t2t-datagen
writes shards, and t2t-decoder SIGKILLed half-way through a long --decode_from_file.

* downloads (a local HTTP server on 127.0.0.1, with and without Range support): the
  connection dropped mid-file, a Content-Length larger or smaller than the body, another
  file than the pinned one, a full disk, t2t-datagen SIGKILLed mid-download. Each completes
  (resumed or retried) or fails naming the URL, the expected and actual size/sha256 and
  the fix; no file is ever kept under its final name unless it verified, and a re-run
  completes.
* disk full (a small tmpfs filled up, or a file size limit where mounting is not
  allowed): a clear error, no partial shard under a final name, the finished shards
  kept; after space is freed a re-run completes with the same examples.
* decoding: SIGKILL half-way (and a torn tail), then the same command again: the output
  equals an uninterrupted decode line for line; a changed input or changed settings
  start over with a note.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from tests.robustness import support
from tests.robustness.support import run_binary

DATA = bytes(range(256)) * 4096  # 1 MiB
OTHER = bytes(reversed(DATA))  # same size, another file
SHARDED, TRAIN_SHARDS, PER_SHARD = "zz_robustness_sharded", 4, 100
TIMEOUT_S = 240


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------- downloads
class _State:
    """What the server serves and how it misbehaves."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.ranges = True  # honour Range requests
        self.cut = 0  # answers still to cut after a third of their body
        self.length_delta = 0  # Content-Length says len(body) + this
        self.throttle = 0.0  # seconds between 64 KiB blocks
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.url = ""


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        st: _State = self.server.state  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        st.requests.append((self.path, rng))
        data = st.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = int(rng.removeprefix("bytes=").split("-")[0]) if rng and st.ranges else 0
        if start >= len(data) > 0 and rng and st.ranges:
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        body = data[start:]
        self.send_header("Content-Length", str(len(body) + st.length_delta))
        self.end_headers()
        if st.cut > 0:
            st.cut -= 1
            body = body[: len(body) // 3]
        try:
            for i in range(0, len(body), 1 << 16):
                self.wfile.write(body[i:i + (1 << 16)])
                self.wfile.flush()
                time.sleep(st.throttle)
        except (BrokenPipeError, ConnectionResetError):  # the client was killed: no
            pass  # traceback on stderr (where a binary run in this process would show it)
        self.close_connection = True  # the client sees the end of what was sent


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.state = state = _State()  # type: ignore[attr-defined]
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    from t2t.data.generation import download

    monkeypatch.setattr(download, "BACKOFF_BASE", 0.0)
    monkeypatch.delenv(download.MIRROR_ENV_VAR, raising=False)


def _fetch(url: str, folder, retries: int = 3, mirror: str | None = None) -> str:
    from t2t.data.generation import download

    resource_ = download.Resource(url, sha256=_sha(DATA), size=len(DATA))
    return download.fetch(resource_, str(folder), mirror, retries=retries, timeout=10.0,
                          progress=False, chunk_size=1 << 16)


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("ranges", [True, False], ids=["range", "no_range"])
def test_download_connection_dropped_mid_file(robustness, server, tmp_path, ranges):
    from t2t.data.generation import download

    server.files["/d/data.bin"], server.ranges, server.cut = DATA, ranges, 2
    url, final = f"{server.url}/d/data.bin", tmp_path / "data.bin"
    partial = tmp_path / "data.bin.partial"
    robustness.fault(f"HTTP connection dropped mid-file, twice ({'with' if ranges else 'no'} "
                     f"Range support)")
    with pytest.raises(download.DownloadError) as error:  # one retry: both attempts cut
        _fetch(url, tmp_path, retries=1)
    message = str(error.value)
    assert url in message and "connection closed after" in message and f"of {len(DATA)}" \
        in message, message
    assert f"kept in {partial}: running again resumes" in message and "--data_mirror" in message
    assert not final.exists()  # never a short file under the final name
    held = _read(partial)
    assert 0 < len(held) < len(DATA) and DATA.startswith(held)
    # The re-run is cut once more, then completes (from where it was, given Range).
    server.cut, server.requests = 1, []
    assert _fetch(url, tmp_path) == str(final)
    assert _read(final) == DATA and not partial.exists()
    assert server.requests[0] == ("/d/data.bin", f"bytes={len(held)}-")
    if ranges:
        first_cut = len(held) + (len(DATA) - len(held)) // 3
        assert server.requests[1] == ("/d/data.bin", f"bytes={first_cut}-"), server.requests
    assert len(server.requests) == 2
    robustness.run_completed(f"download re-run after a dropped connection "
                             f"({'resumed with Range' if ranges else 'restarted'})")


@pytest.mark.parametrize("delta,ranges", [(1000, True), (1000, False), (-1000, True)],
                         ids=["says_more_range", "says_more_no_range", "says_fewer"])
def test_download_wrong_content_length(robustness, server, tmp_path, caplog, delta, ranges):
    from t2t.data.generation import download

    server.files["/data.bin"], server.ranges, server.length_delta = DATA, ranges, delta
    url, final = f"{server.url}/data.bin", tmp_path / "data.bin"
    robustness.fault(f"Content-Length {abs(delta)} bytes {'more' if delta > 0 else 'fewer'} "
                     f"than the body{'' if ranges else ' (no Range support)'}")
    if delta > 0:  # every byte came: the pinned sha256 decides, the file is accepted
        assert _fetch(url, tmp_path) == str(final) and _read(final) == DATA
        assert "the server's Content-Length is wrong; accepted" in caplog.text
        robustness.run_completed("download with a too-large Content-Length")
        return
    with pytest.raises(download.ChecksumError) as error:
        _fetch(url, tmp_path)
    message = str(error.value)
    got = len(DATA) + delta
    assert url in message and f"size: expected {len(DATA)} bytes, got {got} bytes" in message
    assert f"sha256: expected {_sha(DATA)}, got {_sha(DATA[:got])}" in message, message
    assert "--data_mirror" in message and "deleted" in message
    assert os.listdir(tmp_path) == []  # no final file and no partial one
    server.length_delta = 0  # the server is fixed: the re-run completes
    assert _read(_fetch(url, tmp_path)) == DATA
    robustness.run_completed("download re-run after a too-small Content-Length")


def test_download_different_file(robustness, server, tmp_path):
    from t2t.data.generation import download

    server.files["/data.bin"] = OTHER
    url, final = f"{server.url}/data.bin", tmp_path / "out" / "data.bin"
    robustness.fault("HTTP server sends another file (sha256 mismatch)")
    for _ in range(2):  # the same on a re-run: nothing bad is kept
        with pytest.raises(download.ChecksumError) as error:
            _fetch(url, final.parent)
        message = str(error.value)
        assert url in message and f"sha256: expected {_sha(DATA)}, got {_sha(OTHER)}" in message
        assert "--data_mirror" in message and str(final) in message, message
        assert os.listdir(final.parent) == []
    # The fix it names: a mirror holding the right file.
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "data.bin").write_bytes(DATA)
    assert _fetch(url, final.parent, mirror=str(mirror)) == str(final)
    assert _read(final) == DATA and os.listdir(final.parent) == ["data.bin"]
    robustness.run_completed("download through --data_mirror after a sha256 mismatch")


def test_download_disk_full_then_space_freed(robustness, server, small_tmpfs):
    from t2t.data.generation import download

    server.files["/data.bin"] = DATA
    url, folder = f"{server.url}/data.bin", small_tmpfs / "downloads"
    partial = folder / "data.bin.partial"
    ballast = support.fill_disk(small_tmpfs, leave=len(DATA) // 2)
    robustness.fault("disk full during a download (tmpfs)")
    with pytest.raises(download.DownloadError) as error:
        _fetch(url, folder)
    message = str(error.value)
    assert f"could not write {partial} (No space left on device); free space in {folder}" \
        in message and url in message, message
    held = _read(partial)
    assert f"The {len(held)} bytes received are kept in {partial}" in message
    assert 0 < len(held) < len(DATA) and DATA.startswith(held)
    assert len(server.requests) == 1  # a full disk is not retried
    assert os.listdir(folder) == ["data.bin.partial"]
    os.remove(ballast)  # space freed
    server.requests = []
    assert _read(_fetch(url, folder)) == DATA and os.listdir(folder) == ["data.bin"]
    assert server.requests == [("/data.bin", f"bytes={len(held)}-")]
    robustness.run_completed("download re-run after the disk filled (resumed)")


def test_datagen_sigkill_mid_download_then_rerun(robustness, server, usr_dir, tmp_path,
                                                 monkeypatch):
    big = DATA * 3
    server.files["/big.bin"], server.throttle = big, 0.02  # ~1 s for the whole file
    env = {"T2T_ROBUSTNESS_URL": f"{server.url}/big.bin", "T2T_ROBUSTNESS_SHA256": _sha(big),
           "T2T_ROBUSTNESS_SIZE": str(len(big))}
    data, tmp = tmp_path / "data", tmp_path / "data" / "tmp"
    partial = tmp / "big.bin.partial"
    command = [sys.executable, "-m", "t2t.bin.t2t_datagen", f"--t2t_usr_dir={usr_dir}",
               "--problem=zz_robustness_fetched", f"--data_dir={data}", "--progress=false"]
    with open(tmp_path / "killed.log", "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **env))
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline and not (
                partial.exists() and partial.stat().st_size >= len(big) // 4):
            time.sleep(0.01)
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    held = partial.stat().st_size
    robustness.fault(f"SIGKILL t2t-datagen mid-download ({held} of {len(big)} bytes)")
    assert held < len(big) and big.startswith(_read(partial)[:held])
    assert not (tmp / "big.bin").exists()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    server.requests, server.throttle = [], 0.0
    result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}",
                        "--problem=zz_robustness_fetched", f"--data_dir={data}",
                        "--progress=false")
    assert result.code == 0 and not result.traceback, result.err
    assert server.requests == [("/big.bin", f"bytes={held}-")]  # resumed, not restarted
    assert _read(tmp / "big.bin") == big and not partial.exists()
    robustness.run_completed("t2t-datagen re-run after a SIGKILL mid-download (resumed)")


# ------------------------------------------------------------------ disk full
@pytest.fixture(scope="module")
def reference_examples(tmp_path_factory, usr_dir) -> dict[str, list]:
    """The examples of an uninterrupted generation of SHARDED, by shard name."""
    from t2t import registry
    from t2t import usr_dir as usr_dir_lib

    usr_dir_lib.import_usr_dir(usr_dir)
    path = str(tmp_path_factory.mktemp("io_reference"))
    registry.problem(SHARDED).generate_data(path, path + "/tmp", progress=False)
    return _examples(path)


def _examples(data_dir) -> dict[str, list]:
    """{shard name: its examples as (inputs, targets) tuples, in order}."""
    import tensorflow as tf

    return {
        name: [tuple(tuple(tf.train.Example.FromString(r).features.feature[k].int64_list.value)
                     for k in ("inputs", "targets"))
               for r in tf.data.TFRecordDataset(os.path.join(data_dir, name)).as_numpy_iterator()]
        for name in sorted(os.listdir(data_dir)) if name.startswith(SHARDED + "-")
    }


def _lost_examples(got: dict[str, list], expected: dict[str, list]) -> int:
    """Examples of `expected` that `got` is missing or has twice (shard by shard)."""
    lost = 0
    for name, examples in expected.items():
        want, have = Counter(examples), Counter(got.get(name, []))
        lost += sum((want - have).values()) + sum((have - want).values())
    return lost


def _assert_failed_cleanly(data_dir, reference: dict[str, list]) -> None:
    """No partial shard anywhere, and every shard under a final name complete."""
    names = os.listdir(data_dir)
    assert not [n for n in names if n.endswith(".incomplete")], names
    for name, examples in _examples(data_dir).items():
        assert examples == reference[name], name


def _rerun_completes(robustness, data_dir, usr_dir, reference, kept: dict[str, str]) -> None:
    result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}", f"--problem={SHARDED}",
                        f"--data_dir={data_dir}", "--progress=false")
    assert result.code == 0 and not result.traceback, result.err
    support.assert_kept(robustness, str(data_dir), kept)  # finished shards not rewritten
    got = _examples(data_dir)
    lost = _lost_examples(got, reference)
    robustness.data_lost(lost, "examples of t2t-datagen after a full disk")
    assert lost == 0 and got == reference
    assert sum(len(v) for v in got.values()) == TRAIN_SHARDS * PER_SHARD + 40


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs (needs root); the test is skipped where mounting is not allowed."""
    with support.mounted_tmpfs(tmp_path / "disk", "2m", "; test_datagen_file_size_limit "
                               "covers a failed shard write") as disk:
        yield disk


def test_datagen_disk_full_then_space_freed(robustness, small_tmpfs, usr_dir,
                                            reference_examples):
    data = small_tmpfs / "data"
    data.mkdir()
    ballast = support.fill_disk(small_tmpfs, leave=20 * 1024)  # room for two of the four train shards
    robustness.fault("disk full while t2t-datagen writes shards (tmpfs)")
    result = run_binary("t2t-datagen", f"--t2t_usr_dir={usr_dir}", f"--problem={SHARDED}",
                        f"--data_dir={data}", "--progress=false")
    assert result.code == 1 and not result.traceback, result.err
    assert "No space left on device" in result.err and f"Free space in {data}" in result.err
    assert "run t2t-datagen again: it writes only the missing shards" in result.err
    _assert_failed_cleanly(data, reference_examples)
    finished = support.snapshot(str(data))
    assert 1 <= len(finished) < TRAIN_SHARDS, finished  # some shards finished, not all
    os.remove(ballast)  # space freed
    _rerun_completes(robustness, data, usr_dir, reference_examples, finished)
    robustness.run_completed("t2t-datagen re-run after the disk filled and space was freed")


def _limit_file_size() -> None:  # in the child, before exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))


def test_datagen_file_size_limit(robustness, usr_dir, tmp_path, reference_examples):
    data = tmp_path / "data"
    robustness.fault("t2t-datagen's writes fail past 5000 bytes a file (RLIMIT_FSIZE, EFBIG)")
    proc = subprocess.run(
        [sys.executable, "-m", "t2t.bin.t2t_datagen", f"--t2t_usr_dir={usr_dir}",
         f"--problem={SHARDED}", f"--data_dir={data}", "--progress=false"],
        capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=_limit_file_size)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "File too large" in proc.stderr and "its partial file was deleted" in proc.stderr
    _assert_failed_cleanly(data, reference_examples)
    _rerun_completes(robustness, data, usr_dir, reference_examples,
                     support.snapshot(str(data)))
    robustness.run_completed("t2t-datagen re-run after its file size limit was lifted")


# ----------------------------------------------------------------------- decoding
DECODE = "--decode_hparams=beam_size=1,batch_size=32,extra_length=3,write_beam_scores=true"


def _bit_lines(count: int, seed: int) -> str:
    """`count` lines of 1 to 12 random bits: inputs of support.PROBLEM."""
    rng = random.Random(seed)
    return "".join(" ".join(rng.choice("01") for _ in range(rng.randint(1, 12))) + "\n"
                   for _ in range(count))


def _decode(trained_run, data_dir, source, target, *extra: str) -> support.Result:
    return run_binary("t2t-decoder", f"--output_dir={trained_run}", f"--data_dir={data_dir}",
                      DECODE, f"--decode_from_file={source}", f"--decode_to_file={target}",
                      *extra)


def _lines_lost(got: list[str], expected: list[str]) -> int:
    """Output lines missing, duplicated or out of place."""
    return sum(a != b for a, b in zip(got, expected, strict=False)) + abs(len(got) - len(expected))


def test_decoder_sigkill_half_way_then_rerun(robustness, trained_run, data_dir, tmp_path):
    source, out = tmp_path / "source.txt", tmp_path / "out.decodes"
    record = tmp_path / "out.decodes.partial.json"
    total, kill_after = 3000, 1500  # progress is recorded every 1000 lines
    source.write_text(_bit_lines(total, seed=3))
    command = [sys.executable, "-m", "t2t.bin.t2t_decoder", f"--output_dir={trained_run}",
               f"--data_dir={data_dir}", DECODE, f"--decode_from_file={source}",
               f"--decode_to_file={out}"]
    with open(tmp_path / "killed.log", "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline, done = time.monotonic() + TIMEOUT_S, 0
        while proc.poll() is None and time.monotonic() < deadline and done < kill_after:
            time.sleep(0.02)
            try:
                done = json.loads(record.read_text())["lines"]
            except (OSError, ValueError):
                pass
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    assert kill_after <= done < total and not out.exists(), done
    robustness.fault(f"SIGKILL t2t-decoder half-way through --decode_from_file "
                     f"({done} of {total} lines recorded)")
    with open(tmp_path / "out.decodes.partial", "ab") as f:  # a chunk cut mid-write
        f.write(b"0 1 1\t-1.23")
    robustness.fault("t2t-decoder's partial output torn past its last progress record")

    result = _decode(trained_run, data_dir, source, out)
    assert result.code == 0 and not result.traceback, result.err
    assert f"Resuming the unfinished decode in {out}.partial after line {done}" in result.err
    assert sorted(os.listdir(tmp_path)) == ["killed.log", "out.decodes", "source.txt"]
    robustness.run_completed("t2t-decoder re-run after a SIGKILL (resumed)")
    reference = tmp_path / "reference" / "out.decodes"
    reference.parent.mkdir()
    result = _decode(trained_run, data_dir, source, reference)
    assert result.code == 0 and "Resuming" not in result.err, result.err
    robustness.run_completed("t2t-decoder, uninterrupted (reference)")
    expected, got = reference.read_text().splitlines(), out.read_text().splitlines()
    assert len(expected) == total and len(set(expected)) > total // 4  # lines tell apart
    lost = _lines_lost(got, expected)
    robustness.data_lost(lost, "decoded lines after a SIGKILL")
    assert lost == 0 and got == expected


@pytest.mark.slow  # two interrupted decodes and three re-runs (~30 s)
def test_decoder_resume_only_same_input_and_settings(robustness, trained_run, data_dir,
                                                     tmp_path, monkeypatch):
    from t2t.decoding import decoder as decoder_lib

    monkeypatch.setattr(decoder_lib, "RESUME_CHUNK_LINES", 5)
    source, out = tmp_path / "source.txt", tmp_path / "out.decodes"
    source.write_text(_bit_lines(12, seed=5))
    (tmp_path / "ref").mkdir()
    expected = _decode(trained_run, data_dir, source, tmp_path / "ref" / "x")
    assert expected.code == 0, expected.err
    expected_lines = (tmp_path / "ref" / "x").read_text().splitlines()
    original = decoder_lib.Decoder._decode_chunk
    for change in ("input", "settings", None):
        calls = []

        def interrupted(self, lines, first, f, calls=calls):
            calls.append(first)
            if len(calls) == 2:
                raise KeyboardInterrupt  # Ctrl-C in the second chunk
            return original(self, lines, first, f)

        monkeypatch.setattr(decoder_lib.Decoder, "_decode_chunk", interrupted)
        robustness.fault(f"Ctrl-C in t2t-decoder's second chunk, re-run with "
                         f"{'changed ' + change if change else 'the same flags'}")
        assert _decode(trained_run, data_dir, source, out).code == 130
        assert not out.exists()
        assert json.loads((tmp_path / "out.decodes.partial.json").read_text())["lines"] == 5
        monkeypatch.setattr(decoder_lib.Decoder, "_decode_chunk", original)
        extra, want = (), expected_lines
        if change == "input":
            source.write_text(_bit_lines(12, seed=6))
        elif change == "settings":
            extra = ("--decode_hparams=beam_size=1,batch_size=32,extra_length=2,"
                     "write_beam_scores=true",)
        result = _decode(trained_run, data_dir, source, out, *extra)
        assert result.code == 0 and not result.traceback, result.err
        note = {"input": "the input file changed since",
                "settings": "the decode settings changed since"}.get(change)
        if note:
            assert f"Not resuming the earlier, unfinished decode in {out}.partial: {note}" \
                in result.err, result.err
            assert "Decoding from the first line" in result.err
            reference = _decode(trained_run, data_dir, source, tmp_path / "ref" / change, *extra)
            want = (tmp_path / "ref" / change).read_text().splitlines()
            assert reference.code == 0
        else:
            assert "after line 5" in result.err, result.err
        assert out.read_text().splitlines() == want and len(want) == 12
        robustness.run_completed(f"t2t-decoder re-run ({note or 'resumed'})")
        source.write_text(_bit_lines(12, seed=5))
        os.remove(out)
