"""Why a file write failed, in words a user can act on: a full disk or a size limit."""

from __future__ import annotations

import errno
import re

_FULL = (errno.ENOSPC, errno.EDQUOT)


def describe(error: BaseException) -> tuple[str, str, str]:
    """(why, fix, text) for a failed write: why in a few words ("the disk is full"), the
    fix as the start of a sentence, and the error's text on one line without TensorFlow's
    function-node prefixes."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", " ".join(str(error).split()))
    lowered = text.lower()
    code = getattr(error, "errno", None)
    if code in _FULL or "no space" in lowered or "quota" in lowered:
        return "the disk is full", "Free space on that disk", text
    if code == errno.EFBIG or "too large" in lowered:
        return ("a file grew past the size limit", "Raise the file size limit (ulimit -f)",
                text)
    return "the write failed", "Fix the cause", text


def is_out_of_space(error: BaseException) -> bool:
    """Whether `error` says the disk (or a quota, or a file-size limit) ran out."""
    return describe(error)[0] != "the write failed"
