"""Progress lines and small helpers for what the trainer shows and records."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from t2t.data.encoders import text_encoder


def decode_ids(encoder: Any, ids: Any) -> str:
    """Text of an id sequence (cut at EOS), or the ids when there is no encoder."""
    ids = np.asarray(ids).reshape(-1).tolist()
    if encoder is None:
        return " ".join(map(str, ids))
    if isinstance(encoder, text_encoder.ClassLabelEncoder):
        return encoder.decode(ids[0])
    return encoder.decode(ids, strip_extraneous=True)


class Progress:
    """One line every `every` steps: step, loss, steps/s, tokens/s and the ETA; `rates()`
    for TensorBoard adds the padding fraction of the window's batches. With gradient
    accumulation (`micro_batches_per_update` > 1) a step is an update: the line shows
    updates/s and micro-batches/s, and `rates()` adds both per-update figures."""

    def __init__(self, start_step: int, target_step: int, every: int,
                 micro_batches_per_update: int = 1):
        self.target, self.every = target_step, max(1, every)
        # Gradient accumulation: a step (an update) reads this many micro-batches.
        self.micro_batches = max(1, micro_batches_per_update)
        self.window_start = time.monotonic()
        self.window_step = start_step
        self.window_tokens = self.window_examples = self.window_positions = 0.0
        self._rates: dict[str, float] = {}

    def update(self, step: int, loss: float, examples: float, tokens: float,
               positions: float = 0.0) -> str | None:
        """Adds one step's counts (token `positions`, padding included, give the padding
        fraction); returns the line to show when one is due."""
        self.window_tokens += tokens
        self.window_examples += examples
        self.window_positions += positions
        if step % self.every and step != self.target:
            return None
        now = time.monotonic()
        elapsed = max(now - self.window_start, 1e-9)
        steps = step - self.window_step
        steps_per_s = steps / elapsed
        self._rates = {
            "steps_per_sec": steps_per_s,
            "examples_per_sec": self.window_examples / elapsed,
            "tokens_per_sec": self.window_tokens / elapsed,
        }
        if self.window_positions:
            self._rates["padding_fraction"] = 1.0 - self.window_tokens / self.window_positions
        steps_shown = f"{steps_per_s:.2f} steps/s"
        if self.micro_batches > 1:
            self._rates["micro_batches_per_update"] = float(self.micro_batches)
            self._rates["micro_batches_per_sec"] = steps_per_s * self.micro_batches
            steps_shown = (f"{steps_per_s:.2f} updates/s "
                           f"({steps_per_s * self.micro_batches:.2f} micro-batches/s)")
        eta = (self.target - step) / steps_per_s if steps_per_s > 0 else float("inf")
        self.window_start, self.window_step = now, step
        self.window_tokens = self.window_examples = self.window_positions = 0.0
        rate = f"{self._rates['examples_per_sec']:,.1f} examples/s"
        if self._rates["tokens_per_sec"]:
            rate = f"{self._rates['tokens_per_sec']:,.0f} tokens/s {rate}"
        return (f"step {step}/{self.target} loss {loss:.4f} {steps_shown} "
                f"{rate} ETA {_duration(eta)}")

    def rates(self) -> dict[str, float]:
        return dict(self._rates)


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
