"""Decoding with a trained model: text in, text out, batched, in the input's order.

    model = load_model(problem, "transformer", hparams, data_dir, output_dir)
    decoder = Decoder(problem, model, data_dir, DecodeHParams.parse("beam_size=4,alpha=0.6"))
    results = decoder.decode_texts(["1 0 1", "0 0 1 1"])   # [DecodeResult, ...]
    decoder.decode_file("input.txt", "input.txt.decodes")
    score_bleu([r.text for r in results], references)     # sacrebleu BLEU and chrF
    score_decodes(texts, references, problem.eval_metrics())  # and ROUGE if it asks

The model and the encoders are loaded once. Inputs are encoded (+EOS), sorted by
length (longest first) and decoded `batch_size` at a time by one traced `infer.infer`
(decode length = longest input of the batch + `extra_length`); results come back in
the original order. Empty lines decode as an empty input, lines longer than
`max_input_length` tokens are cut, bytes that are not UTF-8 are replaced: each with a
warning naming the line, and never a crash.

Language models (problems without inputs): each line is a prompt (an empty line: no
prompt), encoded without EOS; the output is its continuation of `max_new_tokens` (else
`extra_length`) tokens, or prompt + continuation with `return_prompt`. A prompt longer
than `max_input_length` tokens keeps its last ones (with a warning). With
`num_samples` > 1 each line gets that many samples, tab-separated.

Tensor2Tensor's decode hparams: `partial_targets` (seq2seq lines 'INPUT<TAB>TARGET
PREFIX', the prefix forced), `delimiter` and `shards`/`shard_id` (which records of a
file: t2t.decoding.input_records), `num_decodes` (passes, each with its own sample
numbers), `force_decode_length` (no EOS before the decode length).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

import numpy as np
from absl import logging

from t2t.config import DecodeHParams, DecodeHParamsError  # noqa: F401  (re-exported)
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.decoding import (
    audio_inputs,
    image_inputs,
    input_records,
    interactive,
    output_file,
    unreadable_text,
)
from t2t.decoding import settings as settings_lib
from t2t.decoding.decode_result import DecodeResult, format_result, one_line  # noqa: F401
from t2t.decoding.decode_scores import DecodeError, score_bleu, score_decodes  # noqa: F401
from t2t.decoding.input_records import (  # noqa: F401  (re-exported)
    FILE_CHUNK_LINES,
    iter_line_chunks,
    iter_text_lines,
    read_text_lines,
)
from t2t.decoding.output_file import write_lines  # noqa: F401  (re-exported)
from t2t.decoding.settings import DEFAULT_MAX_INPUT_LENGTH  # noqa: F401  (re-exported)
from t2t.features import EOS_ID, PAD_ID
from t2t.hparams.hparams import HParams

# Lines decode_file decodes (sorted by length) and records before the next: a killed
# decode resumes after the last recorded chunk.
RESUME_CHUNK_LINES = 1_000


# ---------------------------------------------------------------- the model
def resolve_checkpoint(checkpoint_path: str) -> str:
    """A checkpoint prefix from a prefix or a directory (its latest checkpoint);
    DecodeError when there is none."""
    from t2t.models import checkpoints

    try:
        return checkpoints.resolve_checkpoint(checkpoint_path)
    except checkpoints.NoCheckpointError as e:
        raise DecodeError(str(e)) from None


def load_model(
    problem: problem_lib.Problem,
    model_name: str,
    hparams: HParams,
    data_dir: str | None,
    checkpoint_path: str,
) -> Any:
    """The model built in PREDICT mode with its weights from `checkpoint_path`.

    `checkpoint_path` is a checkpoint prefix (DIR/ckpt-1000) or a run directory (its
    latest checkpoint), written by any t2t version. DecodeError when there is no
    checkpoint or it does not fit the model (other hparams than at training).
    """
    from t2t.models import checkpoints, t2t_model

    path = resolve_checkpoint(checkpoint_path)
    problem_hparams = problem.hparams(data_dir)
    model = t2t_model.create_model(model_name, hparams, problem_lib.PREDICT, problem_hparams)
    model.build_weights()
    try:  # the optimizer (and input position) in the checkpoint are not needed here
        checkpoints.restore(path, model)
    except checkpoints.DamagedCheckpointError as e:
        raise DecodeError(str(e)) from e
    except checkpoints.CheckpointError as e:
        raise DecodeError(
            f"The checkpoint {path} does not match model {model_name!r} with these hparams "
            f"(use the --hparams_set/--hparams it was trained with): {str(e)[:300]}"
        ) from e
    logging.info("Loaded %s from %s.", model_name, path)
    model.checkpoint_path = path
    return model


# The old name of output_file.atomic_writer (t2t.decoding.scoring imports it).


# ------------------------------------------------------------------ decoding
class Decoder:
    """A loaded model and the problem's encoders, decoding batches of inputs."""

    def __init__(
        self,
        problem: problem_lib.Problem,
        model: Any,
        data_dir: str | None,
        decode_hparams: DecodeHParams | None = None,
        *,
        infer_fn: Callable[..., dict[str, Any]] | None = None,
    ):
        """`infer_fn(model, features, decode_length, **settings.infer_args())` decodes a
        batch; default `t2t.decoding.infer.infer` (a stand-in can replace it in tests)."""
        self.problem, self.model, self.data_dir = problem, model, data_dir
        self.infer_fn = infer_fn
        self.decode_hparams = dhp = decode_hparams or DecodeHParams()
        dhp.validate()
        self.problem_hparams = model.problem_hparams
        modality = self.problem_hparams.modality
        self.is_language_model = self.problem_hparams.is_language_model
        if "inputs" not in modality and not self.is_language_model:
            raise DecodeError(f"{problem.name} has no inputs and {modality.get('targets')} "
                              f"targets: t2t-decoder decodes inputs, or continues prompts of "
                              f"a language model (symbol targets).")
        # A language model's "inputs" are prompts: target tokens.
        self.inputs_modality = modality["targets" if self.is_language_model else "inputs"]
        self.is_class_label = self.problem_hparams.is_classifier
        self.encoders = problem.feature_encoders(data_dir)
        self.input_encoder = self.encoders.get("targets" if self.is_language_model else "inputs")
        self.input_reader = unreadable_text.TextReader(self.input_encoder)
        self.settings = settings_lib.resolve(dhp, model)
        self.max_input_length = self.settings.max_input_length
        self.top_beams = self.settings.outputs_per_input
        targets = modality.get("targets")
        if dhp.partial_targets and targets != problem_lib.Modality.SYMBOL:
            raise DecodeError(f"partial_targets=true forces a target prefix, which needs text "
                              f"targets; {problem.name} has {targets} targets: leave it out.")
        self._infer = None
        self._file_pass = 0  # the pass of decode_file's chunk being decoded (num_decodes)

    # -------------------------------------------------------------- the model
    def _infer_fn(self):
        """The batch decode (`infer_fn`) traced once for any batch and input length:
        (inputs, decode_length (scalar, or [B] per row), target prefixes [B, P],
        first sample number)."""
        if self._infer is None:
            import tensorflow as tf

            from t2t.decoding import infer as infer_lib

            model, infer_args = self.model, self.settings.infer_args()
            infer_fn = self.infer_fn or infer_lib.infer
            feature = "prompt" if self.is_language_model else "inputs"
            with_prefix, passes = self._with_prefix, self.settings.num_decodes > 1

            def infer(inputs, decode_length, prefixes, first_sample):
                features = {feature: inputs, **({"prompt": prefixes} if with_prefix else {})}
                extra = {"first_sample": first_sample} if passes else {}
                return infer_fn(model, features, decode_length, **infer_args, **extra)

            signature = None
            if self._ids_in:
                ids = tf.TensorSpec([None, None], tf.int32)
                lengths = tf.TensorSpec([None] if self._per_row_lengths else [], tf.int32)
                signature = [ids, lengths, ids, tf.TensorSpec([], tf.int32)]
            self._infer = tf.function(infer, input_signature=signature, reduce_retracing=True)
        return self._infer

    @property
    def _with_prefix(self) -> bool:
        """Whether inputs come with target prefixes (partial_targets, seq2seq)."""
        return self.settings.partial_targets and not self.is_language_model

    @property
    def _per_row_lengths(self) -> bool:
        """Whether force_decode_length gives each row its own length (text inputs without
        max_new_tokens: the row's input length + extra_length)."""
        return (self.settings.force_decode_length and not self.is_language_model
                and self.inputs_modality == problem_lib.Modality.SYMBOL
                and not self.settings.max_new_tokens)

    def target_text(self, ids: np.ndarray) -> str:
        """Output ids as text (class name, or text up to EOS): what results hold."""
        return settings_lib.target_text(ids, self.encoders.get("targets"), self.is_class_label)

    @property
    def _ids_in(self) -> bool:
        """Whether inputs are id sequences padded with 0 (tokens, or audio samples)."""
        return self.inputs_modality in (problem_lib.Modality.SYMBOL, problem_lib.Modality.AUDIO)

    def _run_batch(self, batch: list[np.ndarray], prefixes: list[np.ndarray] | None = None,
                   decode_pass: int = 0) -> list[DecodeResult]:
        """Decodes one batch of prepared inputs (and target prefixes); decode_pass k
        samples with sample numbers from k * num_samples."""
        if self._ids_in:
            longest = max(len(x) for x in batch)
            inputs = np.full([len(batch), longest], PAD_ID, np.int32)
            for row, ids in enumerate(batch):
                inputs[row, : len(ids)] = ids
            if self.inputs_modality == problem_lib.Modality.AUDIO:
                longest = audio_inputs.decode_budget(longest, self.problem_hparams.audio_sample_rate)
        else:
            longest = 0
            inputs = np.stack(batch)
        new_tokens = self.settings.new_tokens(0 if self.is_language_model else longest)
        decode_length = (np.asarray([len(x) + self.settings.extra_length for x in batch],
                                    np.int32) if self._per_row_lengths else np.int32(new_tokens))
        prompts = input_records.pad_rows(prefixes or [], len(batch))
        first_sample = np.int32(decode_pass * self.settings.num_samples)
        result = self._infer_fn()(inputs, decode_length, prompts, first_sample)
        outputs, scores = result["outputs"].numpy(), result["scores"].numpy()
        if scores.ndim == 1:  # one beam: [B, L] and [B]
            outputs, scores = outputs[:, None], scores[:, None]
        decoded = []
        for row in range(len(batch)):
            shown = batch[row] if self.is_language_model else (prefixes or [[]] * len(batch))[row]
            prefix = list(shown) if self.settings.return_prompt else []
            beams = [(self._output_text(prefix, outputs[row, k]), float(scores[row, k]))
                     for k in range(outputs.shape[1])]
            decoded.append(DecodeResult(text=beams[0][0], score=beams[0][1], beams=beams))
        return decoded

    def _output_text(self, prompt: list[int], ids: np.ndarray) -> str:
        """The text of prompt + output ids up to EOS (decoded together: a byte or piece
        split across the two joins up)."""
        if not prompt:
            return self.target_text(ids)
        return self.target_text(np.asarray([*prompt, *text_encoder.strip_extraneous(ids)]))

    def decode_features(self, inputs: Sequence[np.ndarray],
                        prefixes: Sequence[np.ndarray] | None = None,
                        decode_pass: int = 0) -> list[DecodeResult]:
        """Decodes prepared inputs (token ids ending in EOS, or images; with
        partial_targets, their target prefixes' ids), in their order; decode_pass: see
        _run_batch.

        They are sorted by length, longest first, so each batch pads little."""
        results: list[DecodeResult | None] = [None] * len(inputs)
        order = sorted(range(len(inputs)), key=lambda i: -len(inputs[i]))
        size = self.decode_hparams.batch_size
        for start in range(0, len(order), size):
            indices = order[start : start + size]
            batch_prefixes = None if prefixes is None else [prefixes[i] for i in indices]
            decoded = self._run_batch([inputs[i] for i in indices], batch_prefixes, decode_pass)
            for i, result in zip(indices, decoded, strict=True):
                results[i] = result
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------- text
    def encode_text(self, text: str, line_number: int | None = None) -> np.ndarray:
        """Token ids of one input line, cut to max_input_length, with EOS appended; a
        language model's prompt: without EOS, keeping its last max_input_length ids; an
        audio file's PCM ids or an image file's pixels (a line is its path:
        t2t.decoding.audio_inputs, t2t.decoding.image_inputs)."""
        where = f"line {line_number}" if line_number is not None else "input"
        if self.inputs_modality == problem_lib.Modality.AUDIO:  # a WAV/FLAC path
            return audio_inputs.read_input(text, self.problem_hparams.audio_sample_rate, where)
        if self.inputs_modality == problem_lib.Modality.IMAGE:  # a PNG/JPEG path
            return image_inputs.read_input(text, self.problem_hparams.image_shape, where)
        if self.inputs_modality != problem_lib.Modality.SYMBOL:
            raise DecodeError(
                f"{self.problem.name} has {self.inputs_modality} inputs: only text inputs can "
                f"be decoded from text (use --eval_steps to decode its dev set)."
            )
        encoder = self.input_encoder
        try:
            unreadable = self.input_reader.unreadable(text)  # as t2t-serve refuses it
            if unreadable is not None:
                raise ValueError(unreadable.message)
            ids = encoder.encode(text) if encoder is not None else [int(w) for w in text.split()]
        except ValueError as e:
            logging.warning("%s cannot be encoded (%s): decoded as an empty input.", where, e)
            ids = []
        if self.is_language_model:
            return np.asarray(self._cut_prompt(ids, where), np.int32)
        if not ids:
            logging.warning("%s is empty: decoded as an empty input.", where)
        elif len(ids) > self.max_input_length:
            logging.warning("%s has %d tokens: cut to the first %d (max_input_length).",
                            where, len(ids), self.max_input_length)
            ids = ids[: self.max_input_length]
        return np.asarray([*ids, EOS_ID], np.int32)

    def _cut_prompt(self, ids: list[int], where: str) -> list[int]:
        """A prompt's last max_input_length ids (what the continuation depends on most)."""
        if len(ids) > self.max_input_length:
            logging.warning("%s has %d tokens: the prompt keeps its last %d (max_input_length).",
                            where, len(ids), self.max_input_length)
            return ids[-self.max_input_length:]
        return ids

    def encode_prefix(self, text: str, where: str) -> np.ndarray:
        """A target prefix's ids (no EOS), cut to its first max_input_length ids."""
        encoder = self.encoders.get("targets")
        try:
            ids = encoder.encode(text) if encoder is not None else [int(w) for w in text.split()]
        except ValueError as e:
            logging.warning("%s: the target prefix cannot be encoded (%s): none forced.", where, e)
            ids = []
        if len(ids) > self.max_input_length:
            logging.warning("%s: the target prefix has %d tokens: cut to the first %d "
                            "(max_input_length).", where, len(ids), self.max_input_length)
        return np.asarray(ids[: self.max_input_length], np.int32)

    def decode_texts(self, lines: Sequence[str], first_line_number: int = 1,
                     decode_pass: int = 0) -> list[DecodeResult]:
        """Decodes text inputs ('INPUT<TAB>TARGET PREFIX' with partial_targets); results
        in the order of `lines` (warnings count lines from `first_line_number`)."""
        numbers = range(first_line_number, first_line_number + len(lines))
        if not self._with_prefix:
            encoded = [self.encode_text(line, n) for n, line in zip(numbers, lines, strict=True)]
            return self.decode_features(encoded, None, decode_pass)
        pairs = [input_records.split_target_prefix(line) for line in lines]
        encoded = [self.encode_text(source, n)
                   for n, (source, _) in zip(numbers, pairs, strict=True)]
        prefixes = [self.encode_prefix(prefix, f"line {n}")
                    for n, (_, prefix) in zip(numbers, pairs, strict=True)]
        return self.decode_features(encoded, prefixes, decode_pass)

    def decode_file(self, input_path: str, output_path: str,
                    part: tuple[int, int] | None = None) -> int:
        """Decodes each record of `input_path` (its lines, or the pieces between the
        delimiter; with part=(k, n) only the k-th of n contiguous parts:
        input_records.iter_record_chunks) into one line of `output_path`, num_decodes
        passes one after another; returns the number of lines written. See
        `format_result` for the format.

        Resumable (t2t.decoding.output_file.ResumableOutput): every RESUME_CHUNK_LINES
        lines are appended to OUTPUT.partial and recorded in OUTPUT.partial.json (lines
        and bytes done, the input's sha256, the decode settings). A re-run after a kill
        continues after the last recorded chunk (same chunks, so the output equals an
        uninterrupted run's); a changed input or changed settings start over, with a
        warning. OUTPUT appears only when complete.
        """
        start = time.monotonic()
        settings = self._settings_key() + (f" part={part}" if part else "")
        with output_file.ResumableOutput(output_path, input_path, settings) as out:
            self._write_chunks(input_path, part, out)
        elapsed = time.monotonic() - start
        logging.info("Decoded %d lines of %s into %s in %.1f s.", out.lines, input_path,
                     output_path, elapsed)
        return out.lines

    def _write_chunks(self, input_path: str, part: tuple[int, int] | None,
                      out: output_file.ResumableOutput) -> None:
        """Decodes the chunks `out` does not hold yet into it, committing each."""
        for decode_pass in range(self.settings.num_decodes):
            for first, chunk in input_records.iter_record_chunks(
                    input_path, self.decode_hparams.record_delimiter, RESUME_CHUNK_LINES, part):
                if out.decoded_before(len(chunk)):
                    continue
                self._file_pass = decode_pass
                out.commit(self._decode_chunk(chunk, first, out.file))

    def _settings_key(self) -> str:
        """What the decodes depend on besides the input: a resumed decode must match."""
        checkpoint = getattr(self.model, "checkpoint_path", None)
        index = f"{checkpoint}.index" if checkpoint else ""
        stamp = os.stat(index).st_mtime_ns if index and os.path.exists(index) else None
        combine = getattr(self.model, "combine", None)  # an ensemble's combination
        return (f"problem={self.problem.name} model={type(self.model).__name__} "
                f"checkpoint={checkpoint} (index mtime {stamp}) "
                f"{f'combine={combine} ' if combine else ''}"
                f"decode_hparams={self.decode_hparams.to_string()} "
                f"chunk_lines={RESUME_CHUNK_LINES}")

    def _decode_chunk(self, lines: list[str], first_line_number: int, f: IO[bytes]) -> int:
        text = "".join(format_result(result, self.decode_hparams) + "\n"
                       for result in self.decode_texts(lines, first_line_number, self._file_pass))
        f.write(text.encode("utf-8"))
        if first_line_number > 1 or len(lines) == RESUME_CHUNK_LINES:
            logging.info("Decoded %d lines.", first_line_number + len(lines) - 1)
        return len(lines)

    def interactive(self, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
                    prompt: str | None = None) -> int:
        """Answers each line read from stdin until EOF or "q"; returns the count
        (t2t.decoding.interactive)."""
        return interactive.answer_lines(
            lambda line, number, decode_pass: self.decode_texts([line], number, decode_pass)[0],
            self.decode_hparams, self.settings.num_decodes, self.settings.num_samples,
            stdin, stdout, prompt)

    # ---------------------------------------------------------------- dev set
    def _decode_feature(self, name: str, value: np.ndarray) -> str:
        modality = self.problem_hparams.modality.get(name)
        if modality == problem_lib.Modality.IMAGE:
            return f"<image {'x'.join(str(d) for d in value.shape)}>"
        if modality == problem_lib.Modality.CLASS_LABEL:
            return self.target_text(value)
        if modality == problem_lib.Modality.REAL:
            return " ".join(f"{v:.6g}" for v in np.asarray(value, np.float64).reshape(-1))
        encoder = self.encoders.get(name)
        if encoder is None:
            return " ".join(str(i) for i in text_encoder.strip_extraneous(value))
        return encoder.decode(value, strip_extraneous=True)

    def decode_dev_set(self, num_batches: int, split: str | None = None
                       ) -> list[tuple[str, str, str]]:
        """(inputs, targets, outputs) texts of the first num_batches * batch_size
        examples of `split` (default dev; all of them when num_batches <= 0), in the
        data's order; with shards > 1 of the examples i with i % shards == shard_id; with
        num_decodes > 1, pass after pass. A language model continues the first half of
        each example (its "inputs"); "targets" is the true second half."""
        if split is not None:
            self.problem.check_split(split)  # UnknownSplitError naming the splits
        if self._with_prefix:
            raise DecodeError("partial_targets=true reads each target prefix from an "
                              "'INPUT<TAB>PREFIX' line (--decode_from_file or "
                              "--decode_interactive); the dev set has none: leave it out.")
        dataset = self.problem.dataset(problem_lib.EVAL, self.data_dir, deterministic=True,
                                       split=split)
        if self.decode_hparams.shards > 1:
            dataset = dataset.shard(self.decode_hparams.shards, self.decode_hparams.shard_id)
        if num_batches > 0:
            dataset = dataset.take(num_batches * self.decode_hparams.batch_size)
        inputs, targets = [], []
        symbol = self.inputs_modality == problem_lib.Modality.SYMBOL
        for example in dataset.as_numpy_iterator():
            if self.is_language_model:
                ids = text_encoder.strip_extraneous(np.asarray(example["targets"]))
                half = max(1, len(ids) // 2)
                inputs.append(np.asarray(self._cut_prompt(list(ids[:half]), "example"), np.int32))
                targets.append(np.asarray([*ids[half:], EOS_ID], np.int32))
                continue
            x = np.asarray(example["inputs"])
            if symbol:
                ids = text_encoder.strip_extraneous(x)
                if len(ids) > self.max_input_length:
                    ids = ids[: self.max_input_length]
                x = np.asarray([*ids, EOS_ID], np.int32)
            inputs.append(x)
            targets.append(np.asarray(example["targets"]))
        prompt_feature = "targets" if self.is_language_model else "inputs"
        shown = [(self._decode_feature(prompt_feature, x), self._decode_feature("targets", t))
                 for x, t in zip(inputs, targets, strict=True)]
        return [(x, t, r.text) for decode_pass in range(self.settings.num_decodes)
                for (x, t), r in zip(shown, self.decode_features(inputs, None, decode_pass),
                                     strict=True)]
