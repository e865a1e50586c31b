"""Debugging aids of the trainer: `--overfit_batches` and `--check_numerics` reports.

- Overfitting a few batches is the first check when a model does not learn: a model
  and loss that work drive the training loss on N fixed batches near zero.
- With numerics checking on (RuntimeConfig.check_numerics), the first op that produces
  a NaN or Inf raises an InvalidArgumentError whose text names the op, its graph node
  (the name scopes of the layers it ran in) and where the user's code created it;
  `numerics_error` turns that into one clear message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

# "Near zero": the training loss of the last steps below this (nats per token). The
# t2t losses subtract label smoothing's constant entropy, so a perfect fit scores 0.
OVERFIT_NEAR_ZERO = 0.1
_NUMERICS_MARK = "Detected Infinity or NaN"


def overfit_dataset_fn(dataset_fn: Callable[[Any], Any], batches: int) -> Callable[[Any], Any]:
    """`dataset_fn` cut to its first `batches` batches, cached and repeated forever (the
    same batches, in the same order, every pass)."""
    if batches < 1:
        raise ValueError(f"overfit_batches={batches}: give the number of batches to "
                         f"overfit (>= 1), or 0 to train normally.")

    def overfit(input_context: Any) -> Any:
        return dataset_fn(input_context).take(batches).cache().repeat()

    return overfit


def overfit_report(losses: Sequence[tuple[int, float]], batches: int,
                   hparams: Any = None) -> tuple[bool, str]:
    """(whether the loss went near zero, a one-paragraph verdict) from the run's
    (step, training loss) history; the mean of the last tenth of the steps is compared
    with OVERFIT_NEAR_ZERO."""
    if not losses:
        return False, f"Overfit check ({batches} batches): no step ran."
    first_step, first = losses[0]
    tail = [loss for _, loss in losses[-max(1, len(losses) // 10):]]
    last = sum(tail) / len(tail)
    step = losses[-1][0]
    ok = last <= OVERFIT_NEAR_ZERO
    head = (f"Overfit check ({batches} batches repeated): training loss {first:.4f} at step "
            f"{first_step} -> {last:.4f} at step {step} (mean of the last {len(tail)} "
            f"steps; {last / first:.1%} of the first) ")
    if ok:
        return True, head + (f"- near zero (<= {OVERFIT_NEAR_ZERO}): the model and loss can "
                             f"fit these batches.")
    advice = ["train longer (--train_steps)", "raise the learning rate"]
    dropouts = [name for name in ("dropout", "layer_prepostprocess_dropout", "attention_dropout",
                                  "relu_dropout") if hparams is not None and name in hparams
                and hparams.get(name)]
    if dropouts:
        advice.insert(0, "turn dropout off (--hparams=" +
                      ",".join(f"{name}=0" for name in dropouts) + ")")
    return False, head + (f"- NOT near zero (> {OVERFIT_NEAR_ZERO}): "
                          f"{'; '.join(advice)}; if it still stays up, suspect the model, the "
                          f"loss or the data (t2t-datagen --inspect).")


def is_numerics_error(error: BaseException) -> bool:
    """Whether `error` is numerics checking's report of a NaN/Inf."""
    return isinstance(error, tf.errors.InvalidArgumentError) and _NUMERICS_MARK in str(error)


def _user_frame(text: str) -> str | None:
    """The last frame of the op's creation stack that is not TensorFlow's or Keras'."""
    frames = re.findall(r"\+ (\S+) \(L(\d+)\) (\S+)", text)
    for path, line, function in reversed(frames):
        # Library paths (often shortened to ".../src/layers/...") are skipped.
        if not re.search(r"(tensorflow|keras|site-packages|dist-packages)/|/src/|/python/",
                         path):
            return f"{path} line {line} ({function})"
    return None


def describe_numerics_error(error: BaseException) -> tuple[str, str | None, str | None]:
    """(op type, its graph node's name scope (the layers it ran in), the user code that
    created it) from numerics checking's error text."""
    text = str(error)
    op = re.search(r'graph op "([^"]+)"', text) or re.search(r'eagerly-executing op "([^"]+)"',
                                                            text)
    node = re.search(r"\{\{node ([^}]+?)/CheckNumerics\w*\}\}", text)
    scope = None
    if node:
        parts = node.group(1).split("/")
        scope = "/".join(parts[:-1]) or None  # the node's name without the op's own
    return (op.group(1) if op else "?"), scope, _user_frame(text)


def numerics_message(error: BaseException, step: int, last_checkpoint: str | None) -> str:
    """The message of a run stopped by numerics checking at `step`."""
    op, scope, frame = describe_numerics_error(error)
    where = f" in layer scope '{scope}'" if scope else ""
    created = f", created at {frame}" if frame else ""
    kind = "NaN" if "NaN values" in str(error) else "Inf or NaN"
    return (f"check_numerics: the first {kind} appeared in the output of op '{op}'{where}"
            f"{created}, during step {step + 1}. Nothing was saved from that step; the last "
            f"good checkpoint ({last_checkpoint or 'none yet'}) is kept. Try a lower learning "
            f"rate, gradient clipping (clip_grad_norm) or float32, or fix that layer.")
