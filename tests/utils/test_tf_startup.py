"""Tests of t2t.utils.tf_startup: TensorFlow's start-up chatter is filtered, real errors
are not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from t2t.utils import tf_startup

# Lines TensorFlow 2.21 prints at start-up on a machine without a GPU (copied from one).
CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795679532.896568   10364 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results.",
    "I0000 00:00:1795679532.897006   10364 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795679937.084422   12268 cpu_feature_guard.cc:227] This TensorFlow binary "
    "is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795679626.586431   10518 cuda_dnn.cc:8310] Unable to register cuDNN factory: "
    "Attempting to register factory for plugin cuDNN when one has already been registered",
    # TensorFlow 2.19 prints them in its own format (seen in the version matrix).
    "2026-11-26 15:09:31.550849: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:467] "
    "Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when "
    "one has already been registered",
    "2026-11-26 15:09:31.560012: I tensorflow/core/platform/cpu_feature_guard.cc:210] This "
    "TensorFlow binary is optimized to use available CPU instructions.",
]
CUINIT = ("E0000 00:00:1795679535.092949   10364 cuda_platform.cc:52] failed call to cuInit: "
          "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)")
REAL = [
    "E0000 00:00:1795679535.092949   10364 op_kernel.cc:1830] OP_REQUIRES failed: bad input",
    "F0000 00:00:1795679535.092949   10364 some_file.cc:12] Check failed: x == y",
    "Traceback (most recent call last):",
    "ImportError: libcudart.so.12: cannot open shared object file",
    "2026-11-26 15:09:42.191370: F tensorflow/core/some_file.cc:12] Check failed: x == y",
]


@pytest.mark.parametrize("line", CHATTER)
def test_start_up_chatter_is_recognised(line):
    assert tf_startup.is_chatter(line + "\n", nvidia_present=False)
    assert tf_startup.is_chatter(line, nvidia_present=True)


@pytest.mark.parametrize("line", REAL)
def test_real_errors_are_kept(line):
    assert not tf_startup.is_chatter(line, nvidia_present=False)


CUINIT_2_19 = ("2026-11-26 15:09:42.191370: E external/local_xla/xla/stream_executor/cuda/"
               "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call "
               "to cuInit: UNKNOWN ERROR (303)")


@pytest.mark.parametrize("line", [CUINIT, CUINIT_2_19])
def test_a_failed_cuinit_is_an_error_only_where_a_driver_exists(line):
    assert tf_startup.is_chatter(line, nvidia_present=False)
    assert not tf_startup.is_chatter(line, nvidia_present=True)


def test_filtered_stderr_writes_back_what_is_not_chatter(capfd):
    with tf_startup.filtered_stderr():
        os.write(2, ("\n".join(CHATTER + [REAL[0], "plain text from a library"]) + "\n").encode())
    err = capfd.readouterr().err
    assert err == REAL[0] + "\nplain text from a library\n"


def test_filtered_stderr_writes_back_when_the_block_fails(capfd):
    with pytest.raises(RuntimeError), tf_startup.filtered_stderr():
        os.write(2, f"{CHATTER[1]}\nthe reason it failed\n".encode())
        raise RuntimeError("import failed")
    assert capfd.readouterr().err == "the reason it failed\n"


def test_a_crash_inside_the_block_still_shows_its_last_lines():
    """The filter is another process: an abort (as in a failing TensorFlow import) does
    not take the lines written before it down with it."""
    code = ("import os\nfrom t2t.utils import tf_startup\n"
            "with tf_startup.filtered_stderr():\n"
            f"    os.write(2, {(CHATTER[1] + chr(10) + REAL[1] + chr(10)).encode()!r})\n"
            "    os.abort()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert result.stderr == REAL[1] + "\n"


def test_without_a_stderr_the_block_runs_unfiltered():
    code = ("import sys\nfrom t2t.utils import tf_startup\nsys.stderr = None\n"
            "with tf_startup.filtered_stderr():\n    print('ran')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and result.stdout == "ran\n", result.stderr


def test_importing_tensorflow_quietly_prints_nothing_and_keeps_logical_devices_open():
    """In a fresh process: no start-up lines, and the CPU can still be split afterwards
    (MirroredStrategy on logical CPUs needs that)."""
    code = ("from t2t.utils import tf_startup; tf_startup.import_tensorflow(quiet=True)\n"
            "import tensorflow as tf\n"
            "cpu = tf.config.list_physical_devices('CPU')[0]\n"
            "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
            "print(len(tf.config.list_logical_devices('CPU')))\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2\n"
    assert result.stderr == ""
