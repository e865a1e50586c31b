"""t2t.decoding.decode_progress: where a re-run of an interrupted decode continues.
(The whole resume, with kills, is in tests/robustness/test_io_faults.py.)"""

import hashlib
import json
import logging

from t2t.decoding import decode_progress


def _record(settings="s1", sha="abc"):
    return {"input_sha256": sha, "settings": settings, "lines": 0, "bytes": 0}


def test_a_matching_record_resumes_and_a_stale_one_starts_over(tmp_path, caplog):
    partial, record_path = str(tmp_path / "out.partial"), str(tmp_path / "out.partial.json")
    assert decode_progress.resume_point(partial, record_path, _record()) == 0  # nothing yet
    (tmp_path / "out.partial").write_text("a\nb\nc\n")
    decode_progress.write_record(record_path, {**_record(), "lines": 2, "bytes": 4})
    record = _record()
    assert decode_progress.resume_point(partial, record_path, record) == 2
    assert (record["lines"], record["bytes"]) == (2, 4)
    with caplog.at_level(logging.WARNING):
        assert decode_progress.resume_point(partial, record_path, _record(settings="s2")) == 0
    assert "the decode settings changed since (were: s1; now: s2)" in caplog.text
    assert not (tmp_path / "out.partial").exists() and not (tmp_path / "out.partial.json").exists()
    (tmp_path / "out.partial").write_text("a\n")
    (tmp_path / "out.partial.json").write_text(json.dumps({**_record(), "lines": 5, "bytes": 40}))
    with caplog.at_level(logging.WARNING):
        assert decode_progress.resume_point(partial, record_path, _record()) == 0
    assert "is missing or shorter than its record says" in caplog.text


def test_file_sha256_and_remove_if_exists(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3_000_000)  # several read blocks
    assert decode_progress.file_sha256(str(path)) == hashlib.sha256(b"x" * 3_000_000).hexdigest()
    decode_progress.remove_if_exists(str(path))
    decode_progress.remove_if_exists(str(path))  # gone already: no error
    assert not path.exists()
