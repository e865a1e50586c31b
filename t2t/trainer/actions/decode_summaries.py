"""A few dev examples decoded greedily at each evaluation, as TensorBoard text.

    action = DecodeSummaries(task, count=3)   # TrainerConfig.decode_summaries

The first `count` examples of the task's eval split are decoded in one padded batch by
greedy decoding (t2t.decoding.infer, traced once: eager decoding costs seconds) and
written as the evaluation writer's "decoded_examples" text: "inputs: ... targets: ...
outputs: ..." per example. Problems without "inputs" and "targets" write nothing. A
failure is logged, never raised: a summary must not stop training.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.data import problem as problem_lib
from t2t.decoding import infer
from t2t.features import Modality
from t2t.trainer import summaries
from t2t.trainer.actions.base import EvalOutcome, LoopAction


class DecodeSummaries(LoopAction):
    """Writes "decoded_examples" after each evaluation (chief)."""

    decodes = True

    def __init__(self, task: Any, count: int):
        if count < 1:
            raise ValueError(f"decode_summaries={count}: give the number of examples to "
                             f"decode (>= 1), or leave the action out for none.")
        self.task, self.count = task, count
        self._decoder: Callable | None = None  # traced with the first inference model

    def summary_batch(self) -> dict[str, tf.Tensor] | None:
        """{"inputs", "targets"} of the first `count` eval examples, padded; None when
        the problem has no such features."""
        if "targets" not in self.task.problem_hparams.modality:
            return None
        dataset = self.task.problem.dataset(problem_lib.EVAL, self.task.data_dir,
                                            deterministic=True, split=self.task.eval_split)
        if "inputs" not in dataset.element_spec:
            return None
        examples = dataset.take(self.count).map(lambda e: {"inputs": e["inputs"],
                                                           "targets": e["targets"]})
        return next(iter(examples.padded_batch(self.count)), None)

    def after_eval(self, outcome: EvalOutcome) -> None:
        try:
            self._write(outcome.inference_model)
        except Exception as e:  # a summary must never stop training
            logging.warning("Could not decode examples for TensorBoard: %s", e)

    def _write(self, model: Any) -> None:
        batch = self.summary_batch()
        if batch is None:
            return
        if self._decoder is None:
            self._decoder = tf.function(
                lambda inputs, length: infer.infer(
                    model, {"inputs": inputs}, decode_length=length)["outputs"],
                reduce_retracing=True)
        length = tf.constant(int(tf.shape(batch["targets"])[1]) + 10, tf.int32)
        outputs = self._decoder(batch["inputs"], length).numpy()
        encoders = self.task.problem.feature_encoders(self.task.data_dir)
        image_inputs = self.task.problem_hparams.modality.get("inputs") == Modality.IMAGE

        def decode(key, ids):  # images as their shape (an image encoder writes files)
            if key == "inputs" and image_inputs:
                return f"<image {'x'.join(str(d) for d in ids.shape)}>"
            return summaries.decode_ids(encoders.get(key), ids)

        lines = [
            f"inputs: {decode('inputs', inputs)}  \n"
            f"targets: {decode('targets', targets)}  \n"
            f"outputs: {decode('targets', output)}"
            for inputs, targets, output in zip(
                batch["inputs"].numpy(), batch["targets"].numpy(), outputs, strict=True)
        ]
        tf.summary.text("decoded_examples", "\n\n".join(lines))
