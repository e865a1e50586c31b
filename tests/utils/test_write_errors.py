import errno

from t2t.utils import write_errors


def test_a_full_disk_a_size_limit_and_other_failures():
    full = OSError(errno.ENOSPC, "No space left on device")
    assert write_errors.describe(full)[:2] == ("the disk is full", "Free space on that disk")
    big = OSError(errno.EFBIG, "File too large")
    assert write_errors.describe(big)[0] == "a file grew past the size limit"
    # TensorFlow's errors carry no errno: their text says it.
    why, _, text = write_errors.describe(RuntimeError(
        "{{function_node __wrapped__SaveV2}} /x/ckpt-4_temp/part-0: No space left\n on device"))
    assert why == "the disk is full" and text == "/x/ckpt-4_temp/part-0: No space left on device"
    assert write_errors.is_out_of_space(full) and write_errors.is_out_of_space(big)
    assert not write_errors.is_out_of_space(PermissionError(errno.EACCES, "Permission denied"))
    assert write_errors.describe(OSError(errno.EIO, "I/O error"))[:2] == (
        "the write failed", "Fix the cause")
