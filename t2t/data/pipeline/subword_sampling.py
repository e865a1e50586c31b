"""Subword regularization (Kudo 2018): a new SentencePiece segmentation of the text each
time a training example is read; evaluation and decoding keep the best segmentation.

The stored examples hold the ids of the best segmentation (t2t-datagen). In the TRAIN
input pipeline (`input_pipeline.input_dataset`) `resample_dataset` turns them back into
text and segments it again by sampling, in-graph, for every feature whose encoder is a
`SentencePieceEncoder`:

    ids -> runs of text ids between control ids (PAD 0, EOS 1) -> detokenize
        -> tokenize with sampling -> ids, control ids kept where they were

hparams (basic_params1): `subword_sampling_alpha` (0: off; SentencePiece's alpha, the
exponent of P(segmentation)^alpha: smaller is flatter, e.g. 0.1) and
`subword_sampling_nbest`:

* -1: sample from the whole lattice (forward-filtering backward-sampling, tensorflow_text's
  `SentencepieceTokenizer(nbest_size=-1)`). Fast (~17 us a sentence here), but that op
  takes no seed: the segmentations differ from run to run even with --deterministic.
* N > 1: sample among the N best segmentations with P ~ exp(alpha * score), as
  SentencePiece does, with stateless draws seeded from the input seed (t2t-trainer
  --deterministic --random_seed=S): runs repeat exactly. Slower (N=8: ~90 us a sentence; N=64: ~0.5 ms).

A BPE model samples by BPE-dropout (nbest -1, alpha = the probability of dropping a
merge). A run holding the unknown id (2) is left as stored: its text cannot be recovered.
Text runs of user-defined symbols (additional_reserved_tokens) survive the round trip: the
sampler may split such a symbol into pieces (unknown ones among them; ~1 in 5000 sentences at
alpha 0.2), and a sampled run that holds an unknown id or another count of user-defined
symbols than the stored run keeps the stored segmentation.
Sampled segmentations are longer (on English docstring sentences, alpha 0.1 over the
whole lattice: ~1.6x the ids; alpha 0.1 among the 8 best: ~1.07x). The TRAIN length
filter runs after this step and drops examples over max_length: leave room for them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from absl import logging

from t2t.data.encoders.sentencepiece_encoder import SPACE_SYMBOL, SentencePieceEncoder
from t2t.hparams.hparams import HParamsError
from t2t.utils.lazy_import import lazy_module

__all__ = ["SamplingSettings", "SegmentResampler", "SubwordSamplingError", "resample_dataset",
           "resample_fn"]

tf = lazy_module("tensorflow")
tf_text = lazy_module("tensorflow_text")

ALPHA = "subword_sampling_alpha"
NBEST = "subword_sampling_nbest"
TEXT_FEATURES = ("inputs", "targets")
WINDOW_SIZE = 256  # examples resampled per tf.data call (a call costs ~10-30 us)

# sentencepiece_model_pb2 enums: ModelProto.SentencePiece.Type and TrainerSpec.ModelType.
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4
_UNIGRAM, _BPE = 1, 2


class SubwordSamplingError(HParamsError):
    """Subword sampling asked of a problem or model that cannot do it (a bad value, a
    vocabulary that is not SentencePiece)."""


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """alpha: SentencePiece's smoothing (0: the best segmentation, no sampling).
    nbest: -1 samples from the whole lattice; N > 1 among the N best segmentations."""

    alpha: float
    nbest: int = -1

    def __post_init__(self):
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise SubwordSamplingError(
                f"{ALPHA}={self.alpha}: use a finite alpha >= 0 (0 turns sampling off; "
                f"Kudo 2018 used 0.1-0.5).")
        if self.alpha > 0 and (self.nbest in (0, 1) or self.nbest < -1):
            raise SubwordSamplingError(
                f"{NBEST}={self.nbest}: use -1 (sample from the whole lattice) or N > 1 "
                f"(sample among the N best); {ALPHA}=0 turns sampling off.")

    @property
    def sampling(self) -> bool:
        return self.alpha > 0

    @classmethod
    def from_hparams(cls, hparams: Any) -> SamplingSettings:
        """The settings of a model's hparams; sets without them (not derived from
        basic_params1, e.g. a Tensor2Tensor user's own) sample nothing."""
        alpha = getattr(hparams, ALPHA, None)
        if alpha is None:
            return cls(0.0)
        return cls(float(alpha), int(getattr(hparams, NBEST)))


class SegmentResampler:
    """Segments the text of SentencePiece ids again, in-graph (see the module doc).

    `resampler(ids, seed)`: ids int32 RaggedTensor [batch, (length)] -> the same text
    segmented again, [batch, (new length)]; seed int [2] (used by nbest > 1 only).
    With alpha 0 it gives the best segmentation: the ids t2t-datagen stored.
    """

    def __init__(self, model_proto: bytes, settings: SamplingSettings, name: str = "model"):
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(model_proto)
        self.settings = settings
        model_type = proto.trainer_spec.model_type
        if settings.sampling and model_type not in (_UNIGRAM, _BPE):
            kind = sentencepiece_model_pb2.TrainerSpec.ModelType.Name(model_type)
            raise SubwordSamplingError(
                f"the SentencePiece {name} is a {kind} model, which has one segmentation "
                f"only: subword sampling needs a unigram (or BPE) model; set {ALPHA}=0.")
        if settings.sampling and model_type == _BPE and settings.nbest != -1:
            raise SubwordSamplingError(
                f"the SentencePiece {name} is a BPE model: it samples by BPE-dropout "
                f"only; set {NBEST}=-1 (alpha is then the merge drop probability).")
        pieces = proto.pieces
        self.vocab_size = len(pieces)
        self._control = tf.constant([p.type == _CONTROL for p in pieces], tf.bool)
        self._unknown = tf.constant([p.type == _UNKNOWN for p in pieces], tf.bool)
        self._user_defined = tf.constant([p.type == _USER_DEFINED for p in pieces], tf.int32)
        self._word_start = tf.constant([p.piece.startswith(SPACE_SYMBOL) for p in pieces])
        self._scores = tf.constant([p.score for p in pieces], tf.float32)
        self._dummy_prefix = bool(proto.normalizer_spec.add_dummy_prefix)
        self._best = tf_text.SentencepieceTokenizer(model_proto)
        self._sampler = None
        if settings.sampling and settings.nbest == -1:
            self._sampler = tf_text.SentencepieceTokenizer(
                model_proto, nbest_size=-1, alpha=settings.alpha)
        elif settings.sampling:
            self._sampler = tf_text.SentencepieceTokenizer(
                model_proto, nbest_size=settings.nbest, return_nbest=True)

    def __call__(self, ids: Any, seed: Any = None) -> Any:
        """ids int RaggedTensor [batch, (length)] -> [batch, (new length)], same dtype."""
        flat, rows = ids.flat_values, ids.value_rowids()
        in_range = (flat >= 0) & (flat < self.vocab_size)
        safe = tf.where(in_range, flat, 0)
        control = tf.gather(self._control, safe) | ~in_range
        # A segment is a control id alone, or a run of text ids within one example.
        start = (control | (rows != _shift(rows, -1)) | _shift(control, True))
        segment = tf.cumsum(tf.cast(start, tf.int32)) - 1
        segments = tf.RaggedTensor.from_value_rowids(flat, segment).with_row_splits_dtype(tf.int64)
        num_segments = segments.nrows(out_type=tf.int32)
        first = tf.boolean_mask(safe, start)
        has_unknown = tf.math.unsorted_segment_max(
            tf.cast(tf.gather(self._unknown, safe), tf.int32), segment, num_segments) > 0
        resegmentable = ~tf.boolean_mask(control, start) & ~has_unknown
        if self._dummy_prefix:  # a run not starting a word is a cut text: keep it
            resegmentable &= tf.gather(self._word_start, first)
        picked = tf.cast(tf.where(resegmentable)[:, 0], tf.int32)
        texts = self._best.detokenize(tf.gather(segments, picked))
        nonempty = tf.strings.length(texts) > 0
        picked, texts = tf.boolean_mask(picked, nonempty), tf.boolean_mask(texts, nonempty)
        new = self._tokenize(texts, seed)
        # A sampled run that split a user-defined symbol (into unknown pieces, or known ones)
        # keeps its stored ids: the symbol must stay one id.
        kept = (~tf.reduce_any(tf.gather(self._unknown, new), axis=1)
                & (tf.reduce_sum(tf.gather(self._user_defined, new), axis=1)
                   == tf.reduce_sum(tf.gather(self._user_defined,
                                              tf.gather(segments, picked)), axis=1)))
        picked, new = tf.boolean_mask(picked, kept), tf.ragged.boolean_mask(new, kept)
        new = tf.cast(new, flat.dtype)
        combined = tf.concat([segments, new.with_row_splits_dtype(tf.int64)], axis=0)
        replace = num_segments + tf.range(tf.size(picked))
        order = tf.tensor_scatter_nd_update(tf.range(num_segments), picked[:, None], replace)
        per_example = tf.math.bincount(tf.boolean_mask(tf.cast(rows, tf.int32), start),
                                       minlength=ids.nrows(out_type=tf.int32), dtype=tf.int64)
        out = tf.RaggedTensor.from_row_lengths(tf.gather(combined, order), per_example)
        return out.merge_dims(1, 2).with_row_splits_dtype(ids.row_splits.dtype)

    def _tokenize(self, texts: Any, seed: Any) -> Any:
        """texts string [n] -> ids int32 ragged [n, (length)]: sampled, or the best."""
        if self._sampler is None:
            return self._best.tokenize(texts)
        if self.settings.nbest == -1:
            return self._sampler.tokenize(texts)
        nbest = self.settings.nbest
        hypotheses = tf.map_fn(  # [n, (k <= nbest), (length)]: per text, as k varies
            lambda text: self._sampler.tokenize(text[None]), texts,
            fn_output_signature=tf.RaggedTensorSpec([None, None], tf.int32, 1),
            parallel_iterations=16)
        scores = tf.reduce_sum(tf.gather(self._scores, hypotheses), axis=-1)  # [n, (k)]
        logits = self.settings.alpha * scores.to_tensor(-math.inf, shape=[None, nbest])
        if seed is None:
            seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
        choice = tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]
        choice = tf.minimum(choice, tf.cast(hypotheses.row_lengths(), tf.int32) - 1)
        rows = tf.cast(hypotheses.row_starts(), tf.int32) + choice
        return tf.gather(hypotheses.values, rows)


def _shift(values: Any, fill: Any) -> Any:
    """values [n] moved one place right, `fill` first: element i is values[i - 1]."""
    fill = tf.constant([fill], values.dtype)
    return tf.concat([fill, values], 0)[: tf.size(values)]


def _vocab_description(problem: Any, encoders: Mapping[str, Any], names: list[str]) -> str:
    kinds = sorted({getattr(encoders[n], "type_name", type(encoders[n]).__name__) for n in names})
    vocab_type = getattr(problem, "vocab_type", None)
    declared = f" (vocab_type={vocab_type!r})" if vocab_type else ""
    return f"a {'/'.join(repr(kind) for kind in kinds)} vocabulary{declared}"


def _sentencepiece_features(problem: Any, data_dir: str, settings: SamplingSettings
                            ) -> dict[str, SentencePieceEncoder]:
    """The text features to resample; SubwordSamplingError when there are none."""
    encoders = problem.feature_encoders(data_dir)
    text = [n for n in TEXT_FEATURES if n in encoders and encoders[n] is not None
            and getattr(encoders[n], "type_name", "") != "class_label"]
    chosen = {n: encoders[n] for n in text if isinstance(encoders[n], SentencePieceEncoder)}
    if not chosen:
        what = (_vocab_description(problem, encoders, text) if text
                else "no text features (inputs/targets with a text encoder)")
        raise SubwordSamplingError(
            f"problem {problem.name!r} has {what}; {ALPHA}={settings.alpha} needs a "
            f"SentencePiece vocabulary (vocab_type 'subword'): set {ALPHA}=0.")
    skipped = [n for n in text if n not in chosen]
    if skipped:
        logging.info("Subword sampling leaves %s of %s as stored: %s.", ", ".join(skipped),
                     problem.name, _vocab_description(problem, encoders, skipped))
    return chosen


def resample_fn(problem: Any, data_dir: str, hparams: Any) -> Callable[..., Any] | None:
    """`fn(example, seed=None) -> example` with the SentencePiece text features segmented
    again by sampling (see the module doc), or None when `hparams` sample nothing.

    `example`: feature dict of one example (ids int32 [length]) or of a batch (ragged
    [batch, (length)]); `seed`: int [2] for nbest > 1 (None: an unseeded draw).
    Raises SubwordSamplingError (before any data is read) for a problem whose text is
    not SentencePiece, or settings that cannot work.
    """
    settings = SamplingSettings.from_hparams(hparams)
    if not settings.sampling:
        return None
    features = _sentencepiece_features(problem, data_dir, settings)
    by_model: dict[bytes, SegmentResampler] = {}
    resamplers = {}
    for name, encoder in features.items():
        if encoder.model_proto not in by_model:
            by_model[encoder.model_proto] = SegmentResampler(
                encoder.model_proto, settings, encoder.model_file or f"model of {name}")
        resamplers[name] = by_model[encoder.model_proto]
    if settings.nbest == -1:
        logging.info("Subword sampling (alpha %g, whole lattice) of %s: tensorflow_text's "
                     "sampler takes no seed, so segmentations differ from run to run "
                     "(set %s=N > 1 for repeatable runs).", settings.alpha,
                     "/".join(resamplers), NBEST)

    def resample(example: dict[str, Any], seed: Any = None) -> dict[str, Any]:
        out = dict(example)
        for index, (name, resampler) in enumerate(resamplers.items()):
            if name not in example:
                continue
            ids = example[name]
            single = not isinstance(ids, tf.RaggedTensor)
            batch = tf.RaggedTensor.from_tensor(ids[None]) if single else ids
            feature_seed = None if seed is None else tf.cast(seed, tf.int64) + [0, index]
            new = resampler(batch, feature_seed)
            out[name] = new[0] if single else new
        return out

    return resample


def resample_dataset(dataset: Any, problem: Any, data_dir: str, hparams: Any,
                     seed: int | None = None, *, window_size: int = WINDOW_SIZE) -> Any:
    """`dataset` (unbatched examples) with every example segmented again as it is read
    (`resample_fn`), in windows of `window_size`; unchanged when hparams sample nothing.

    seed: the draws of nbest > 1 (None: unseeded). Each window gets its own seed from
    `tf.data.Dataset.random(seed)`, so a repeated example is segmented anew each epoch.
    """
    resample = resample_fn(problem, data_dir, hparams)
    if resample is None:
        return dataset
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    windows = tf.data.Dataset.zip(dataset.ragged_batch(window_size), seeds)
    # Unbatched rows of a RaggedTensor are typed RaggedTensorSpec([None], ragged_rank=0),
    # which padded_batch refuses; passing through a map makes them Tensors again.
    return windows.map(resample, num_parallel_calls=tf.data.AUTOTUNE).unbatch().map(
        dict, num_parallel_calls=tf.data.AUTOTUNE)
