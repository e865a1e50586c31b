"""Decoding with an ensemble: several checkpoints (of one run, or of runs of the same
problem and target vocabulary) decoding as one model.

    ensemble = load_ensemble(problem, ["RUN/ckpt-8000", "RUN/ckpt-9000", "RUN2"], data_dir)
    infer.infer(ensemble, {"inputs": ids}, decode_length=20, beam_size=4, alpha=0.6)
    Decoder(problem, ensemble, data_dir, decode_hparams)      # t2t-decoder, t2t-exporter

`EnsembleModel` presents the step interface of one model (t2t.models.step_interface),
so greedy decoding, sampling, beam search, the Decoder, scoring and the SavedModel
export run on it unchanged. At each step every member scores the next token from its
own state, and the ensemble's log-probabilities combine theirs:

  "log_linear" (the default, OpenNMT-py's): the mean of the log-probabilities,
      (1/M) * sum_m log p_m, which the decoders renormalize (log_softmax) like any
      step's output: a normalized geometric mean;
  "linear" (fairseq's EnsembleModel, Sockeye's default): the log of the mean
      probability, log((1/M) * sum_m p_m) (a mixture: scores stay log-probabilities).

Temperature, top_k and top_p apply to the combined distribution. Each member keeps its
own incremental (cached) decoding state; the ensemble's state holds them all, and beam
search reorders them like one model's: members' slot-major caches (step_interface.SLOTS)
sit together under the ensemble's SLOTS, read through the one ancestry beam search keeps.

Members may differ in model and hparams (sizes) but must share the problem and the
target vocabulary; `load_ensemble` refuses a mismatch, naming both runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import tensorflow as tf
from absl import logging

from t2t.data import problem as problem_lib
from t2t.data.multi_problem import TASK_SEPARATOR
from t2t.decoding import decoder as decoder_lib
from t2t.decoding.decode_scores import DecodeError
from t2t.features import Modality
from t2t.hparams.hparams import HParams
from t2t.models.step_interface import ANCESTRY, SLOTS
from t2t.utils import step_files

LINEAR, LOG_LINEAR = "linear", "log_linear"
COMBINE_MODES = (LINEAR, LOG_LINEAR)
MEMBERS = "ensemble_members"  # the ensemble state's key for its members' states
# What a training run records in its folder (t2t.trainer.run_dir writes them).
RUN_FILE, HPARAMS_FILE = "run.json", "hparams.json"
# Members in --checkpoint_path=A:B are colon-separated; a URL's "scheme://" is not a split.
_MEMBER_SEPARATOR = re.compile(r":(?!//)")


class EnsembleError(DecodeError):
    """Members that cannot decode together (another problem or target vocabulary), or an
    ensemble asked for wrongly."""


# ------------------------------------------------------------------ combining
def check_combine(combine: str) -> None:
    if combine not in COMBINE_MODES:
        raise EnsembleError(f"combine={combine!r}: use one of {', '.join(COMBINE_MODES)} "
                            f"({LINEAR}: log of the mean probability, as fairseq; "
                            f"{LOG_LINEAR}: mean log-probability).")


def combine_log_probs(member_logits: Sequence[tf.Tensor], combine: str = LOG_LINEAR) -> tf.Tensor:
    """float32 [..., V]: the members' logits [..., V] (each normalized with log_softmax)
    combined: LINEAR log(mean_m p_m), or LOG_LINEAR mean_m log p_m."""
    check_combine(combine)
    log_probs = tf.stack([tf.nn.log_softmax(tf.cast(logits, tf.float32))
                          for logits in member_logits])
    if combine == LOG_LINEAR:
        return tf.reduce_mean(log_probs, axis=0)
    return tf.reduce_logsumexp(log_probs, axis=0) - math.log(len(member_logits))


def _ensemble_hparams(members: Sequence[Any]) -> HParams:
    """The first member's hparams, with max_length the smallest any member has (0: none):
    what decode settings (max_input_length) read of "the model's" hparams."""
    hparams = members[0].hparams.copy()
    lengths = [m.hparams.max_length for m in members
               if "max_length" in m.hparams and m.hparams.max_length]
    if "max_length" in hparams:
        hparams.set_hparam("max_length", min(lengths) if lengths else 0)
    return hparams


class EnsembleModel:
    """Several loaded models (same problem and target vocabulary) decoding as one.

    Presents what decoding needs of a model (step_interface.Decodable): problem_hparams,
    hparams, the step functions and a forward call, whose outputs are the combined
    log-probabilities (class labels, teacher-forced targets) or, for real-valued
    targets, the members' mean prediction.
    """

    def __init__(self, members: Sequence[Any], combine: str = LOG_LINEAR,
                 names: Sequence[str] | None = None):
        if not members:
            raise EnsembleError("An ensemble needs at least one member (a checkpoint).")
        check_combine(combine)
        names = list(names) if names is not None else [
            getattr(m, "checkpoint_path", None) or f"member {i}" for i, m in enumerate(members)]
        if len(names) != len(members):
            raise EnsembleError(f"{len(names)} names for {len(members)} ensemble members: "
                                f"give one name per member.")
        first = members[0].problem_hparams
        for name, member in zip(names[1:], members[1:], strict=True):
            php = member.problem_hparams
            if (php.modality.get("targets"), php.vocab_size.get("targets")) != (
                    first.modality.get("targets"), first.vocab_size.get("targets")):
                raise EnsembleError(
                    f"Ensemble members {names[0]} ({first.modality.get('targets')} targets, "
                    f"vocabulary {first.vocab_size.get('targets')}) and {name} "
                    f"({php.modality.get('targets')}, {php.vocab_size.get('targets')}) do "
                    f"not share the targets: ensemble models of one problem and vocabulary.")
        self.members, self.combine, self.names = list(members), combine, names
        self.problem_hparams = first
        self.hparams = _ensemble_hparams(self.members)
        self.checkpoint_path = ":".join(names)  # what a resumed decode must match

    def __len__(self) -> int:
        return len(self.members)

    @property
    def has_decode_cache(self) -> bool:
        """Whether any member decodes incrementally (the others re-run their prefix)."""
        return any(m.has_decode_cache for m in self.members)

    @property
    def variables(self) -> list[Any]:
        """Every member's variables (what an export saves), member by member."""
        return [v for m in self.members for v in m.variables]

    def describe(self) -> dict[str, Any]:
        """JSON-able: the combination and each member's checkpoint and model class."""
        return {"combine": self.combine,
                "members": [{"checkpoint": name, "model": type(m).__name__}
                            for name, m in zip(self.names, self.members, strict=True)]}

    # -------------------------------------------------------------- forward
    def __call__(self, features: dict[str, tf.Tensor], training: bool | None = None
                 ) -> tuple[tf.Tensor, dict]:
        """(combined log-probabilities float32 [..., V], {}); real-valued targets: (the
        members' mean prediction, {}). Always in inference mode (no dropout)."""
        outputs = [member(features, training=False)[0] for member in self.members]
        if self.problem_hparams.modality.get("targets") == Modality.REAL:
            return tf.reduce_mean(tf.stack([tf.cast(o, tf.float32) for o in outputs]), 0), {}
        return combine_log_probs(outputs, self.combine), {}

    # ------------------------------------------------------------- decoding
    def decode_init(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor) -> dict:
        """Every member's uncached state."""
        return self._state([m.decode_init(features, decode_length) for m in self.members])

    def decode_init_cached(self, features: dict[str, tf.Tensor], decode_length: tf.Tensor
                           ) -> dict:
        """Every member's cached state (uncached for a member without a cache)."""
        return self._state([
            m.decode_init_cached(features, decode_length) if m.has_decode_cache
            else m.decode_init(features, decode_length) for m in self.members])

    def decode_step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict
                    ) -> tuple[tf.Tensor, dict]:
        """Combined log-probabilities [N, V] at `index`, every member re-run on its prefix."""
        return self._step(previous_ids, index, state, cached=False)

    def decode_step_cached(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict
                           ) -> tuple[tf.Tensor, dict]:
        """Combined log-probabilities [N, V] at `index`, from each member's cache."""
        return self._step(previous_ids, index, state, cached=True)

    @staticmethod
    def _state(member_states: list[Any]) -> dict:
        """{MEMBERS: each member's state but its slot-major caches} and, when a member
        has some, {SLOTS: {"member_I": its caches}}: beam search reorders the first
        and never the second, as for one model."""
        rests, slots = [], {}
        for i, state in enumerate(member_states):
            if isinstance(state, dict) and SLOTS in state:
                slots[f"member_{i}"] = state[SLOTS]
                state = {k: v for k, v in state.items() if k != SLOTS}
            rests.append(state)
        return {MEMBERS: tuple(rests), **({SLOTS: slots} if slots else {})}

    def _step(self, previous_ids: tf.Tensor, index: tf.Tensor, state: dict, cached: bool
              ) -> tuple[tf.Tensor, dict]:
        slots, ancestry = state.get(SLOTS, {}), state.get(ANCESTRY)
        logits, rests, new_slots = [], [], {}
        for i, (member, rest) in enumerate(zip(self.members, state[MEMBERS], strict=True)):
            key = f"member_{i}"
            member_state = rest
            if key in slots:
                member_state = {**rest, SLOTS: slots[key]}
                if ancestry is not None:
                    member_state[ANCESTRY] = ancestry
            step = (member.decode_step_cached if cached and member.has_decode_cache
                    else member.decode_step)
            member_logits, member_state = step(previous_ids, index, member_state)
            if key in slots:
                new_slots[key] = member_state[SLOTS]
                member_state = {k: v for k, v in member_state.items()
                                if k not in (SLOTS, ANCESTRY)}
            logits.append(member_logits)
            rests.append(member_state)
        new_state = {**state, MEMBERS: tuple(rests)}
        if slots:
            new_state[SLOTS] = new_slots
        return combine_log_probs(logits, self.combine), new_state


# -------------------------------------------------------------- naming members
def split_members(checkpoint_paths: str) -> list[str]:
    """"A:B:C" -> ["A", "B", "C"] (fairseq's --path form); "gs://b/run" stays whole."""
    members = _MEMBER_SEPARATOR.split(checkpoint_paths)
    if any(not m.strip() for m in members):
        raise EnsembleError(f"--checkpoint_path={checkpoint_paths!r} names an empty member: "
                            f"separate checkpoints or run folders with single colons (A:B).")
    return members


def last_checkpoints(run_dir: str, n: int) -> list[str]:
    """The newest `n` checkpoint prefixes of a run folder, oldest first (fewer, with a
    warning, when fewer are kept); EnsembleError when n < 1, DecodeError when none."""
    if n < 1:
        raise EnsembleError(f"ensemble of the last {n} checkpoints: give N >= 1.")
    latest = decoder_lib.resolve_checkpoint(run_dir)  # DecodeError naming the folder
    folder = run_dir if "://" in run_dir else os.path.abspath(os.path.expanduser(run_dir))
    paths = [found.path for found in step_files.list_checkpoints(folder)] or [latest]
    if len(paths) < n:
        logging.warning("%s keeps %d checkpoint(s), fewer than the %d asked for: the "
                        "ensemble has those.", run_dir, len(paths), n)
    return paths[-n:]


# -------------------------------------------------------------- loading members
@dataclasses.dataclass(frozen=True)
class MemberRecord:
    """A member as found on disk: its checkpoint prefix, and what the run folder holding
    it recorded (run.json: problem, model, data_dir, problem_hparams; hparams.json)."""

    checkpoint: str
    run_dir: str
    run: dict[str, Any]
    hparams: dict[str, Any] | None


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EnsembleError(f"{path} cannot be read ({e}): fix or remove it.") from None


def find_member(path: str) -> MemberRecord:
    """A member given as a checkpoint prefix (RUN/ckpt-N) or a run folder (its latest)."""
    path = os.path.expanduser(path)
    checkpoint = decoder_lib.resolve_checkpoint(path)
    run_dir = path if os.path.isdir(path) else os.path.dirname(checkpoint)
    run = _read_json(os.path.join(run_dir, RUN_FILE))
    hparams = _read_json(os.path.join(run_dir, HPARAMS_FILE))
    return MemberRecord(checkpoint, run_dir, run if isinstance(run, dict) else {},
                        hparams if isinstance(hparams, dict) else None)


def _vocabulary_fingerprint(problem: problem_lib.Problem, data_dir: str | None) -> str | None:
    """sha256 of the target vocabulary in `data_dir` (every id's string), or None when
    the targets have no encoder with a fixed size (images, real values)."""
    encoder = problem.feature_encoders(data_dir).get("targets")
    if encoder is None:
        return None
    try:
        size = encoder.vocab_size
    except NotImplementedError:
        return None
    if problem.hparams(data_dir).modality.get("targets") not in (Modality.SYMBOL,
                                                                 Modality.CLASS_LABEL):
        return f"size {size}"
    text = "\0".join(encoder.decode_list(range(size)))
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def _check_problems(problem: problem_lib.Problem, records: Sequence[MemberRecord]) -> None:
    named = [r for r in records if r.run.get("problem")]
    for record in named[1:]:
        if record.run["problem"] != named[0].run["problem"]:
            raise EnsembleError(
                f"Ensemble members {named[0].run_dir} (problem {named[0].run['problem']!r}) "
                f"and {record.run_dir} (problem {record.run['problem']!r}) were trained on "
                f"different problems: ensemble runs of one problem (same target vocabulary).")
    recorded = named[0].run["problem"] if named else None
    if recorded and TASK_SEPARATOR not in recorded and recorded != problem.name:
        raise EnsembleError(
            f"Ensemble member {named[0].run_dir} was trained on problem {recorded!r}, not "
            f"{problem.name!r} (the problem decoded): give --problem={recorded} or members "
            f"trained on {problem.name}.")


def _recorded_vocab_size(record: MemberRecord) -> int | None:
    return ((record.run.get("problem_hparams") or {}).get("vocab_size") or {}).get("targets")


def _check_vocabularies(problem: problem_lib.Problem, data_dir: str | None,
                        records: Sequence[MemberRecord]) -> None:
    """Same target vocabulary size (recorded in run.json) and contents (each member's
    recorded data_dir, where it still exists) for all members and the data decoded with."""
    expected = problem.hparams(data_dir).vocab_size.get("targets")
    sized = [(r, _recorded_vocab_size(r)) for r in records if _recorded_vocab_size(r)]
    for record, size in sized[1:]:
        if size != sized[0][1]:
            raise EnsembleError(
                f"Ensemble members {sized[0][0].run_dir} ({sized[0][1]} target symbols) and "
                f"{record.run_dir} ({size}) do not share the target vocabulary: ensemble "
                f"runs trained on the same data.")
    # (a multi-problem's run records the whole problem's sizes, not its task's)
    if (sized and expected is not None and sized[0][1] != expected
            and sized[0][0].run.get("problem") == problem.name):
        raise EnsembleError(
            f"Ensemble member {sized[0][0].run_dir} predicts {sized[0][1]} target symbols; "
            f"the data in {data_dir} has {expected}: give the --data_dir it was trained on "
            f"({sized[0][0].run.get('data_dir')}).")
    fingerprints: dict[str, str | None] = {}

    def fingerprint(folder: str | None) -> str | None:
        key = os.path.abspath(folder) if folder else ""
        if key not in fingerprints:
            fingerprints[key] = _vocabulary_fingerprint(problem, folder)
        return fingerprints[key]

    known = [(r, fingerprint(r.run["data_dir"])) for r in records
             if r.run.get("data_dir") and os.path.isdir(r.run["data_dir"])]
    for record, value in known[1:]:
        if value != known[0][1]:
            raise EnsembleError(
                f"Ensemble members {known[0][0].run_dir} and {record.run_dir} were trained "
                f"with different target vocabularies ({known[0][0].run['data_dir']} and "
                f"{record.run['data_dir']}): ensemble runs trained on the same data.")
    if known and known[0][1] != fingerprint(data_dir):
        raise EnsembleError(
            f"Ensemble member {known[0][0].run_dir} was trained with the target vocabulary "
            f"in {known[0][0].run['data_dir']}, which differs from the one in {data_dir}: "
            f"give --data_dir={known[0][0].run['data_dir']}.")


def check_members(problem: problem_lib.Problem, data_dir: str | None,
                  records: Sequence[MemberRecord]) -> None:
    """EnsembleError, naming both runs, unless every member was trained on `problem`
    with the target vocabulary of `data_dir`."""
    _check_problems(problem, records)
    _check_vocabularies(problem, data_dir, records)


def load_ensemble(
    problem: problem_lib.Problem,
    members: Sequence[str],
    data_dir: str | None,
    *,
    model_name: str | None = None,
    hparams: HParams | None = None,
    combine: str = LOG_LINEAR,
) -> EnsembleModel:
    """The ensemble of `members` (checkpoint prefixes or run folders, each its latest
    checkpoint), loaded in PREDICT mode.

    A member's model and hparams are what its folder recorded (run.json's "model",
    hparams.json), else `model_name` and `hparams`. EnsembleError when members were
    trained on another problem or target vocabulary (check_members), DecodeError when
    a checkpoint is missing or does not fit its model.
    """
    check_combine(combine)
    if not members:
        raise EnsembleError("An ensemble needs at least one member (a checkpoint).")
    records = [find_member(m) for m in members]
    check_members(problem, data_dir, records)
    models = []
    for record in records:
        name = record.run.get("model") or model_name
        member_hparams = HParams(**record.hparams) if record.hparams is not None else hparams
        if not name or member_hparams is None:
            raise EnsembleError(
                f"Ensemble member {record.checkpoint}: {record.run_dir} holds no {RUN_FILE}/"
                f"{HPARAMS_FILE} naming its model and hparams: give them (t2t-decoder: "
                f"--model and --hparams_set).")
        models.append(decoder_lib.load_model(problem, name, member_hparams, data_dir,
                                             record.checkpoint))
    logging.info("Ensemble (%s) of %d members: %s", combine, len(models),
                 ", ".join(r.checkpoint for r in records))
    return EnsembleModel(models, combine, names=[r.checkpoint for r in records])
