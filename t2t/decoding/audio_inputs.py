"""Audio inputs of t2t-decoder: one WAV/FLAC path per input line.

A line names a file (absolute, or relative to the working directory); it is read,
checked and resampled as speech problems store audio (t2t.data.bases.speech), and becomes
int32 PCM ids [N] for the audio modality. A file that cannot be used (missing, not
audio, several channels, another rate with resampling off) is named in a warning and
decoded as 0.1 s of silence, so one bad line does not stop a long file of paths.
The decode length of a batch is `CHARS_PER_SECOND` per second of its longest input
(speech rarely passes 20 characters a second) plus extra_length.
"""

from __future__ import annotations

import numpy as np
from absl import logging

from t2t.data.bases import speech

CHARS_PER_SECOND = 25


def read_input(line: str, sample_rate: int, where: str) -> np.ndarray:
    """int32 PCM ids [N] of the audio file named by `line` (silence, warned, if unusable)."""
    path = line.strip()
    try:
        if not path:
            raise speech.AudioError("an empty line names no audio file", "empty")
        return speech.read_waveform_ids(path, sample_rate)
    except speech.AudioError as e:
        logging.warning("%s: %s: decoded as 0.1 s of silence.", where, e)
        return speech.waveform_ids(np.zeros(sample_rate // 10, np.int16))


def decode_budget(longest_samples: int, sample_rate: int) -> int:
    """The `longest_input` (in target symbols) a batch's decode length is computed from:
    ceil(seconds * CHARS_PER_SECOND), in integers (the export computes the same)."""
    return (longest_samples * CHARS_PER_SECOND + sample_rate - 1) // sample_rate
