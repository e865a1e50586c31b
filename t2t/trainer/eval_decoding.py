"""Decoded metrics at each evaluation: BLEU/chrF, ROUGE-1/2/L, WER/CER, and with hparams
eval_run_autoregressive the accuracy of greedy decodes.

Teacher-forced accuracy and loss come from the evaluation batches; BLEU, ROUGE or a word
error rate needs the model's own outputs. Both ways below decode greedily with the code
t2t-decoder runs (t2t.decoding.infer) and score with t2t.decoding.decode_scores:

- `EvalDecoder`: the first `examples` examples of the eval split (the decoder's
  `decode_dev_set`). A problem whose eval_metrics name bleu, rouge_1/2/l, wer or cer
  gets it by default (AUTO: `AUTO_EXAMPLES`); --eval_decode_examples=N sets the count,
  0 turns it off.
- `AutoregressiveEval` (Tensor2Tensor's hparams eval_run_autoregressive): every example
  the evaluation reads (eval_steps batches per local replica, or the whole split) is
  decoded and scored, and compared with its targets position by position:
  "decoded/accuracy" (target tokens, EOS included, equal to the output's token at that
  position) and "decoded/accuracy_per_sequence" (outputs equal to their targets), T2T's
  accuracy and accuracy_per_sequence of its autoregressive evaluation.

`plan_decoded_eval` decides which runs, and checks what it needs (the count, the
scorers' packages, a problem that can be decoded) when the loop is built, before the
first step; its `announcement` is the line the trainer prints once at the start. The
figures join the evaluation's results: eval_results.jsonl, TensorBoard, the log line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

AUTO = -1  # TrainerConfig.eval_decode_examples: decode where the problem needs it
# Examples decoded at each evaluation by default, by the metric asking (the largest of
# the problem's applies). A speech WER curve takes 200 utterances; BLEU and ROUGE take
# 100 sentences, so that a translation or summarization evaluation stays cheap: greedy
# decoding runs one step per output token, teacher forcing one per batch.
AUTO_EXAMPLES = {"wer": 200, "cer": 200, "bleu": 100, "rouge_1": 100, "rouge_2": 100,
                 "rouge_l": 100}
_DECODE_BATCH = 16
ROUGE_KEYS = ("rouge_1", "rouge_2", "rouge_l")  # F-measures, 0-100
# The problem's eval metric -> the scores of decode_scores.score_decodes it reports.
_REPORTED: dict[str, tuple[str, ...]] = {"wer": ("wer",), "cer": ("cer",),
                                         "bleu": ("bleu", "chrf"),
                                         **{name: ROUGE_KEYS for name in ROUGE_KEYS}}
DECODED_ACCURACY = "decoded/accuracy"
DECODED_ACCURACY_PER_SEQUENCE = "decoded/accuracy_per_sequence"


def decode_metric_names(metric_names: Iterable[str]) -> list[str]:
    """The names among `metric_names` (a problem's eval_metrics) scored on decodes."""
    return [name for name in metric_names if name in _REPORTED]


def metrics_label(metric_names: Iterable[str]) -> str:
    """What the decode metrics among `metric_names` report, e.g. "BLEU/chrF, ROUGE-1/2/L"."""
    names = set(metric_names)
    parts = ["BLEU/chrF"] if "bleu" in names else []
    if names & set(ROUGE_KEYS):
        parts.append("ROUGE-1/2/L")
    rates = [name.upper() for name in ("wer", "cer") if name in names]
    if rates:
        parts.append("/".join(rates))
    return ", ".join(parts)


def examples_to_decode(requested: int, metric_names: Iterable[str]) -> int:
    """How many eval examples to decode: `requested` (0: none), or with AUTO the default
    of the problem's decode metrics (`AUTO_EXAMPLES`); 0 when it names none."""
    if requested < AUTO:
        raise ValueError(f"eval_decode_examples={requested}: use a count >= 0, or -1 for "
                         f"the default (200 for WER/CER, 100 for BLEU and ROUGE); 0 turns "
                         f"decoded evaluation off.")
    named = decode_metric_names(metric_names)
    if not named:
        return 0
    if requested == AUTO:
        return max(AUTO_EXAMPLES[name] for name in named)
    return requested


def require_scorers(metric_names: Iterable[str]) -> None:
    """Imports what scoring `metric_names`' decodes needs: sacrebleu (every decode is
    scored with BLEU and chrF), rouge-score for ROUGE, jiwer for WER/CER.

    Raises:
      MissingDependencyError: one of them is not installed; the message is one line
        with the pip command.
    """
    from t2t.decoding import decode_scores, speech_metrics, text_metrics
    from t2t.utils import optional_deps

    names = decode_metric_names(metric_names)
    if not names:
        return
    decode_scores.require_sacrebleu()
    if text_metrics.wants_rouge(names):
        text_metrics.require_rouge()
    if speech_metrics.wants_error_rates(names):
        optional_deps.require("jiwer", "speech", "WER/CER")


def reported_keys(metric_names: Iterable[str]) -> list[str]:
    """The result keys the decode metrics among `metric_names` report, in order:
    bleu -> bleu, chrf; any ROUGE name -> rouge_1, rouge_2, rouge_l; wer; cer."""
    keys: list[str] = []
    for name in metric_names:
        keys += [key for key in _REPORTED.get(name, ()) if key not in keys]
    return keys


def reported_scores(scores: Mapping[str, Any], metric_names: Iterable[str]) -> dict[str, float]:
    """The figures of `decode_scores.score_decodes`' `scores` that `metric_names` (the
    problem's eval_metrics) report: bleu and chrf, rouge_1/2/l (F), wer, cer."""
    reported = {}
    for name in metric_names:
        for key in _REPORTED.get(name, ()):
            reported[key] = float(scores["rouge"][key] if key in ROUGE_KEYS else scores[key])
    return reported


@dataclasses.dataclass(frozen=True)
class DecodedEvalPlan:
    """What each evaluation decodes: the first `examples` examples of the eval split, or
    with `autoregressive` every example it reads; `metric_names` are the decode metrics
    scored; `announcement` is the line said at the start ("": nothing to say)."""

    metric_names: tuple[str, ...]
    examples: int
    autoregressive: bool
    announcement: str

    @property
    def enabled(self) -> bool:
        """Whether an evaluation decodes anything."""
        return self.autoregressive or self.examples > 0

    @property
    def reported_keys(self) -> list[str]:
        """The keys an evaluation adds to its results ([] when it decodes nothing)."""
        if not self.enabled:
            return []
        accuracy = [DECODED_ACCURACY, DECODED_ACCURACY_PER_SEQUENCE] if self.autoregressive else []
        return [*reported_keys(self.metric_names), *accuracy]


def _check_autoregressive(problem_name: str, modality: Mapping[str, str], parts: int,
                          packed: bool) -> None:
    """ValueError where eval_run_autoregressive cannot apply: it decodes symbol targets
    (text) from inputs, one problem at a time, one example per row."""
    from t2t.features import Modality

    if packed:
        raise ValueError(
            "hparams eval_run_autoregressive=True and pack_dataset=True: packed evaluation "
            "rows hold several examples, which are not decoded apart. Set one of them False.")
    targets = modality.get("targets")
    why = ""
    if parts > 1:
        why = "is a multi-problem (its tasks are evaluated apart)"
    elif "inputs" not in modality:
        why = "has no inputs"
    elif targets != Modality.SYMBOL:
        why = f"has {targets} targets"
    if why:
        raise ValueError(
            f"hparams eval_run_autoregressive=True: {problem_name} {why}; an autoregressive "
            f"evaluation decodes the text targets of a problem with inputs. Set "
            f"eval_run_autoregressive=False (t2t-decoder decodes the others).")


def plan_decoded_eval(task: Any, eval_decode_examples: int, eval_steps: int) -> DecodedEvalPlan:
    """The decoded evaluation of `task` (a t2t.trainer.task.Task: its problem's
    eval_metrics, hparams eval_run_autoregressive, eval split) with TrainerConfig's
    `eval_decode_examples` (AUTO, a count, 0: off) and `eval_steps` (<= 0: all).

    Raises:
      ValueError: a bad count, or eval_run_autoregressive for a problem it cannot decode.
      MissingDependencyError: a scorer's package is not installed.
    """
    names = decode_metric_names(task.problem.eval_metrics())
    examples = examples_to_decode(eval_decode_examples, names)
    hparams = task.hparams
    autoregressive = bool(hparams.get("eval_run_autoregressive"))
    parts = len(task.eval_parts())
    label, split = metrics_label(names), task.eval_split
    if autoregressive:
        _check_autoregressive(task.problem.name, task.problem_hparams.modality, parts,
                              bool(hparams.get("pack_dataset")))
        what = ", ".join(filter(None, [label, f"{DECODED_ACCURACY}, "
                                              f"{DECODED_ACCURACY_PER_SEQUENCE}"]))
        reads = f"{eval_steps} batches" if eval_steps > 0 else "the whole split"
        line = (f"Decoded evaluation: {what} of greedy decodes of every {split} example "
                f"each evaluation reads ({reads}; hparams eval_run_autoregressive=False "
                f"turns it off)")
        examples = 0  # the examples read include the first ones: decoded once
    elif not names:
        line = ""
    elif parts > 1:
        line = (f"Decoded evaluation: off for a multi-problem (its tasks are evaluated "
                f"apart): {label} not computed during training; t2t-decoder "
                f"--decode_reference scores decodes")
        examples = 0
    elif examples:
        line = (f"Decoded evaluation: {label} on the first {examples} {split} examples each "
                f"evaluation (--eval_decode_examples=0 turns it off)")
    else:
        line = (f"Decoded evaluation: off (--eval_decode_examples=0): {label} not computed "
                f"during training; t2t-decoder --decode_reference scores decodes")
    plan = DecodedEvalPlan(tuple(names), examples, autoregressive, line)
    if plan.enabled:
        require_scorers(names)
    return plan


def eval_batches(eval_steps: int, hooks: Any) -> int:
    """Batches of the eval input (`Task.input_fn`'s, per replica) that an evaluation of
    `eval_steps` steps reads in this process under `hooks` (t2t.trainer.hooks): one per
    local replica a step (one with parameter servers or a mesh, whose evaluation reads
    the input undistributed); 0 (all) when eval_steps <= 0."""
    if eval_steps <= 0:
        return 0
    if (hooks.parameter_server or hooks.runtime.mesh is not None
            or hooks.runtime.num_replicas == 1):  # (the default strategy has no devices)
        return eval_steps
    return eval_steps * len(hooks.strategy.extended.worker_devices)


def decoded_accuracy_sums(outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[correct tokens, target tokens, correct sequences, sequences] of greedy `outputs`
    int [B, L] (0 after EOS) against `targets` int [B, T] (0: padding), compared position
    by position over the targets' tokens (EOS included); a sequence is correct when all
    its tokens are (a longer output misses the target's EOS); rows without a token are
    not counted."""
    outputs, targets = np.asarray(outputs), np.asarray(targets)
    if outputs.ndim != 2 or targets.ndim != 2 or len(outputs) != len(targets):
        raise ValueError(f"outputs {outputs.shape} and targets {targets.shape} must be "
                         f"[batch, length] of the same batch.")
    length = max(outputs.shape[1], targets.shape[1])
    outputs = np.pad(outputs, [(0, 0), (0, length - outputs.shape[1])])
    targets = np.pad(targets, [(0, 0), (0, length - targets.shape[1])])
    weights = targets != 0
    correct = (outputs == targets) & weights
    tokens, right = weights.sum(axis=1), correct.sum(axis=1)
    present = tokens > 0
    return np.array([right.sum(), tokens.sum(), ((right == tokens) & present).sum(),
                     present.sum()], np.float64)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


class EvalDecoder:
    """Greedy decodes of the first `examples` examples of `split`, scored: calling it
    gives the `metric_names`' figures (`reported_scores`), percentages. The decoder (and
    its traced decode) is kept from one evaluation to the next."""

    def __init__(self, model: Any, problem: Any, data_dir: str, split: str, examples: int,
                 metric_names: Sequence[str]):
        from t2t.config import DecodeHParams
        from t2t.decoding import decoder

        self.split, self.examples, self.metric_names = split, examples, list(metric_names)
        self.decoder = decoder.Decoder(problem, model, data_dir,
                                       DecodeHParams(beam_size=1, batch_size=_DECODE_BATCH))

    def __call__(self) -> dict[str, float]:
        from t2t.decoding import decode_scores

        batches = -(-self.examples // _DECODE_BATCH)
        triples = self.decoder.decode_dev_set(batches, self.split)[: self.examples]
        scores = decode_scores.score_decodes([t[2] for t in triples], [t[1] for t in triples],
                                             self.metric_names)
        return reported_scores(scores, self.metric_names)


class AutoregressiveEval:
    """Greedy decodes of every example of the first `max_batches` batches (0: all) of
    `eval_input(None)` (a `Task.input_fn` of the eval split), scored against their
    targets: `DECODED_ACCURACY`, `DECODED_ACCURACY_PER_SEQUENCE` and the `metric_names`'
    figures. Each batch decodes longest input + extra_length tokens (t2t-decoder's
    default budget: the same outputs). The traced decode is kept between evaluations."""

    def __init__(self, model: Any, problem: Any, data_dir: str,
                 eval_input: Callable[[Any], Any], max_batches: int,
                 metric_names: Sequence[str]):
        import tensorflow as tf

        from t2t.config import DecodeHParams
        from t2t.decoding import infer
        from t2t.decoding import settings as settings_lib
        from t2t.features import Modality

        self.eval_input, self.max_batches = eval_input, max_batches
        self.metric_names = list(metric_names)
        self.settings = settings_lib.resolve(DecodeHParams(beam_size=1), model)
        self.encoder = problem.feature_encoders(data_dir).get("targets")
        self.inputs_modality = model.problem_hparams.modality.get("inputs")
        self.ids_in = self.inputs_modality in (Modality.SYMBOL, Modality.AUDIO)  # 0 pads
        self.sample_rate = model.problem_hparams.audio_sample_rate
        signature = None
        if self.ids_in:  # traced once for any batch and length, as the decoder's
            signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)]
        self._decode = tf.function(
            lambda inputs, length: infer.infer(model, {"inputs": inputs}, length)["outputs"],
            input_signature=signature, reduce_retracing=True)

    def _decode_length(self, inputs: np.ndarray, targets: np.ndarray) -> int:
        """t2t-decoder's budget: the longest input's tokens + extra_length (audio: its
        samples' budget, t2t.decoding.audio_inputs; images: the longest target's)."""
        from t2t.decoding import audio_inputs
        from t2t.features import Modality

        if not self.ids_in:
            return self.settings.new_tokens(targets.shape[1])
        longest = int(np.count_nonzero(inputs, axis=1).max())
        if self.inputs_modality == Modality.AUDIO:
            longest = audio_inputs.decode_budget(longest, self.sample_rate)
        return self.settings.new_tokens(longest)

    def _text(self, ids: np.ndarray) -> str:
        from t2t.decoding import settings as settings_lib

        return settings_lib.target_text(ids, self.encoder, False)

    def __call__(self) -> dict[str, float]:
        from t2t.decoding import decode_scores

        dataset = self.eval_input(None)
        if self.max_batches > 0:
            dataset = dataset.take(self.max_batches)
        sums = np.zeros(4)
        hypotheses: list[str] = []
        references: list[str] = []
        for features in dataset:
            inputs = features["inputs"].numpy()
            targets = features["targets"].numpy().reshape(len(inputs), -1)
            if self.ids_in:
                inputs = inputs.reshape(len(inputs), -1).astype(np.int32)
            outputs = self._decode(inputs, np.int32(self._decode_length(inputs, targets)))
            outputs = outputs.numpy()
            sums += decoded_accuracy_sums(outputs, targets)
            hypotheses += [self._text(row) for row in outputs]
            references += [self._text(row) for row in targets]
        results = {DECODED_ACCURACY: _ratio(sums[0], sums[1]),
                   DECODED_ACCURACY_PER_SEQUENCE: _ratio(sums[2], sums[3])}
        if self.metric_names and hypotheses:
            scores = decode_scores.score_decodes(hypotheses, references, self.metric_names)
            results.update(reported_scores(scores, self.metric_names))
        return results


def make_eval_decoder(plan: DecodedEvalPlan, model: Any, task: Any,
                      eval_input: Callable[[Any], Any], max_batches: int
                      ) -> Callable[[], dict[str, float]]:
    """What `plan` decodes at each evaluation, with `model` (the model or its one-device
    twin) on `task`'s eval split: an AutoregressiveEval over `max_batches` batches of
    `eval_input` (`eval_batches`), else an EvalDecoder of the first examples."""
    if plan.autoregressive:
        return AutoregressiveEval(model, task.problem, task.data_dir, eval_input, max_batches,
                                  plan.metric_names)
    return EvalDecoder(model, task.problem, task.data_dir, task.eval_split, plan.examples,
                       plan.metric_names)
