"""The progress record of a resumable decode (t2t.decoding.decoder.Decoder.decode_file).

OUTPUT.partial holds the decoded lines so far, OUTPUT.partial.json their count and
bytes, the input's sha256 and the decode settings. `resume_point` says where a re-run
continues, or discards a partial that no longer matches (with a warning saying why).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from absl import logging

PARTIAL_SUFFIX, RECORD_SUFFIX = ".partial", ".partial.json"


def remove_if_exists(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_record(path: str, record: dict[str, Any]) -> None:
    """Replaces the progress record atomically (a kill leaves the old or the new one)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def resume_point(partial: str, record_path: str, record: dict[str, Any]) -> int:
    """Lines already decoded by an interrupted run of the same decode (0: none), with
    `record`'s "lines" and "bytes" set to them; a stale partial is discarded with a
    warning saying why."""
    if not os.path.exists(partial) and not os.path.exists(record_path):
        return 0
    why = ""
    try:
        with open(record_path, encoding="utf-8") as f:
            old = json.load(f)
        lines, size = int(old["lines"]), int(old["bytes"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"its progress record {record_path} is missing or unreadable ({e})"
    else:
        if old.get("input_sha256") != record["input_sha256"]:
            why = "the input file changed since"
        elif old.get("settings") != record["settings"]:
            why = (f"the decode settings changed since (were: {old.get('settings')}; now: "
                   f"{record['settings']})")
        elif not os.path.exists(partial) or os.path.getsize(partial) < size:
            why = f"{partial} is missing or shorter than its record says"
    if why:
        logging.warning("Not resuming the earlier, unfinished decode in %s: %s. Decoding "
                        "from the first line.", partial, why)
        remove_if_exists(partial)
        remove_if_exists(record_path)
        return 0
    logging.warning("Resuming the unfinished decode in %s after line %d.", partial, lines)
    record.update(lines=lines, bytes=size)
    return lines
