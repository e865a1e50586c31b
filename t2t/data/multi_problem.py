"""Several problems trained as one (Tensor2Tensor's MultiProblem).

A MultiProblem lists registered problems, its tasks, the first being the primary one.
They share one vocabulary: their own when they agree, where one task's token list may
extend another's (ids of the common tokens equal), which the longest then serves; two
vocabularies that disagree on an id are refused, naming both tasks and the id. Each
example gets its task's token in front of its inputs (Tensor2Tensor's task id: id
`shared vocab size + task index`), so one model learns which task it is asked.

Training reads a mixture of the tasks' train splits (`multiproblem_mixing_schedule`):
  constant      each task in proportion to `multiproblem_per_task_threshold`
                ("3;1": three of the first for one of the second; empty: equal)
  proportional  each task in proportion to its number of train examples
  pretrain      the primary task alone for `multiproblem_schedule_max_examples`
                examples, then the constant mixture
Evaluation reads each task's dev split as its own problem (`task_views()`), so that
metrics are reported per task.

On the command line a multi-problem is the tasks' names joined by "+", e.g.
`--problem=algorithmic_reverse_binary40_test+algorithmic_addition_binary40_test`;
in Python, a subclass lists them:

    @registry.register_problem
    class ReverseAndAddition(MultiProblem):
        task_names = ("algorithmic_reverse_binary40_test",
                      "algorithmic_addition_binary40_test")
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from t2t import registry
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.data.generation import generator_utils
from t2t.utils.lazy_import import lazy_module

tf = lazy_module("tensorflow")

TASK_SEPARATOR = "+"
MIXING_SCHEDULES = ("constant", "proportional", "pretrain")
_SEQUENCE_FEATURES = ("inputs", "targets")


class VocabularyMismatchError(ValueError):
    """Two tasks of a multi-problem whose vocabularies cannot be shared."""


class TaskChoiceError(ValueError):
    """--decode_task missing for a multi-problem, or given for another problem."""


def _tokens(encoder: Any) -> tuple[str, list[str]] | None:
    """(kind, token list) of an encoder whose ids are positions in a token list."""
    description = encoder.describe()
    if description["type"] == "token" and not description.get("reverse"):
        return "token", list(description["vocab"])
    if description["type"] == "character":
        return "character", list(description["chars"])
    return None


def shared_encoder(feature: str, encoders: Sequence[tuple[str, Any]]) -> Any:
    """One encoder for `feature` of every task in `encoders` ([(task name, encoder)]).

    Equal encoders are shared as they are; token or character vocabularies where each
    is a prefix of the longest are served by the longest. Anything else raises
    VocabularyMismatchError naming the two tasks and the first id they disagree on."""
    first_name, first = encoders[0]
    longest_name, longest = encoders[0]
    for name, encoder in encoders[1:]:
        if encoder.describe() == longest.describe():
            continue
        ours, theirs = _tokens(longest), _tokens(encoder)
        if ours is not None and theirs is not None and ours[0] == theirs[0]:
            short, long_ = sorted((ours[1], theirs[1]), key=len)
            if long_[: len(short)] == short:
                if len(theirs[1]) > len(ours[1]):
                    longest_name, longest = name, encoder
                continue
            at = next(i for i, (a, b) in enumerate(zip(short, long_, strict=False)) if a != b)
            raise VocabularyMismatchError(
                f"The {feature} vocabularies of {longest_name!r} and {name!r} differ at id "
                f"{at} ({ours[1][at]!r} against {theirs[1][at]!r}): a multi-problem needs "
                f"one vocabulary. Give the tasks the same vocabulary (e.g. one vocab file "
                f"built over all their text), or train them apart.")
        raise VocabularyMismatchError(
            f"The {feature} encoders of {first_name!r} ({first.describe()['type']}) and "
            f"{name!r} ({encoder.describe()['type']}) are not one vocabulary: a "
            f"multi-problem needs one. Give the tasks the same vocabulary (e.g. one vocab "
            f"file or SentencePiece model built over all their text), or train them apart.")
    return longest


def mixing_weights(schedule: str, num_tasks: int, per_task_threshold: str = "",
                   train_sizes: Sequence[int] | None = None) -> list[float]:
    """The mixture's probability of each task (after any pretraining phase)."""
    if schedule not in MIXING_SCHEDULES:
        matches = registry.close_matches(schedule, MIXING_SCHEDULES)
        raise ValueError(f"Unknown multiproblem_mixing_schedule {schedule!r}: use one of "
                         f"{', '.join(MIXING_SCHEDULES)}"
                         + (f". Did you mean: {', '.join(matches)}?" if matches else "."))
    if schedule == "proportional":
        if not train_sizes or min(train_sizes) <= 0:
            raise ValueError(f"The proportional mixing schedule needs each task's train "
                             f"size; got {list(train_sizes or [])}.")
        weights = [float(n) for n in train_sizes]
    elif per_task_threshold:
        try:  # ";" on the command line, where --hparams splits at ","
            weights = [float(w) for w in re.split(r"[;,]", per_task_threshold)]
        except ValueError:
            weights = []
        if len(weights) != num_tasks or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(
                f"multiproblem_per_task_threshold={per_task_threshold!r} must give {num_tasks} "
                f"non-negative weights, not all 0, separated by ';' (e.g. "
                f"{';'.join(['1'] * num_tasks)}).")
    else:
        weights = [1.0] * num_tasks
    total = sum(weights)
    return [w / total for w in weights]


class MultiProblem(problem_lib.Problem):
    """Several registered problems as one; `task_names` lists them (primary first)."""

    task_names: Sequence[str] = ()

    def __init__(self, was_reversed: bool = False, task_names: Sequence[str] | None = None):
        if was_reversed:
            raise registry.BadProblemNameError(
                f"A multi-problem is not reversed as a whole: reverse its tasks "
                f"({TASK_SEPARATOR.join(n + registry.REVERSE_SUFFIX for n in self._names(task_names))}).")
        super().__init__(False)
        names = list(self._names(task_names))
        if "" in names:
            raise ValueError(f"{TASK_SEPARATOR.join(names)!r} has an empty task name: join two "
                             f"or more problem names with {TASK_SEPARATOR}.")
        if len(names) < 2:
            raise ValueError(f"A multi-problem needs two tasks or more; got {names}.")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"A multi-problem lists {', '.join(twice)} twice: name each task once.")
        self.task_list = [registry.problem(name) for name in names]
        nested = [t.name for t in self.task_list if isinstance(t, MultiProblem)]
        if nested:
            raise ValueError(f"A multi-problem's tasks cannot be multi-problems: {nested}.")
        self._given_names = task_names

    def _names(self, task_names: Sequence[str] | None) -> Sequence[str]:
        return list(task_names) if task_names is not None else list(type(self).task_names)

    @property
    def base_name(self) -> str:
        if self._given_names is not None:
            return TASK_SEPARATOR.join(t.name for t in self.task_list)
        return super().base_name

    @property
    def splits(self) -> Sequence[problem_lib.SplitSpec]:
        """The splits every task has (the primary task's shard counts)."""
        common = set.intersection(*({s.name for s in t.splits} for t in self.task_list))
        return [s for s in self.task_list[0].splits if s.name in common]

    # ------------------------------------------------------------ generation
    def generate_data(self, data_dir: str, tmp_dir: str, *, mirror: str | None = None,
                      max_cases: int | None = None, num_shards: int | None = None,
                      progress: bool = True) -> dict[str, generator_utils.SplitSummary]:
        """Each task's data, under its own file names ("TASK/SPLIT" -> summary)."""
        summaries = {}
        for task in self.task_list:
            written = task.generate_data(data_dir, os.path.join(tmp_dir, task.dataset_filename()),
                                         mirror=mirror, max_cases=max_cases,
                                         num_shards=num_shards, progress=progress)
            summaries.update({f"{task.name}/{split}": s for split, s in written.items()})
        return summaries

    def written_summary(self, data_dir: str) -> dict[str, generator_utils.SplitSummary]:
        return {f"{task.name}/{split}": summary for task in self.task_list
                for split, summary in task.written_summary(data_dir).items()}

    def data_files(self, data_dir: str, split: str) -> list[str]:
        return [f for task in self.task_list for f in task.data_files(data_dir, split)]

    # --------------------------------------------------------------- features
    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        per_task = [(t.name, t.feature_encoders(data_dir)) for t in self.task_list]
        features = [f for f in _SEQUENCE_FEATURES if f in per_task[0][1]]
        for name, encoders in per_task[1:]:
            if sorted(f for f in encoders if f in _SEQUENCE_FEATURES) != sorted(features):
                raise VocabularyMismatchError(
                    f"{per_task[0][0]!r} has the features {features} and {name!r} has "
                    f"{sorted(encoders)}: a multi-problem's tasks must all have inputs "
                    f"and targets, or all targets only.")
        return {f: shared_encoder(f, [(name, enc[f]) for name, enc in per_task])
                for f in features}

    def shared_vocab_size(self, data_dir: str | None) -> int:
        """The shared vocabulary's size; task ids follow it."""
        encoders = self.feature_encoders(data_dir)
        return max(e.vocab_size for e in encoders.values())

    def task_id(self, index: int, data_dir: str | None) -> int:
        """The id of task `index`'s token (Tensor2Tensor: vocab size + task index)."""
        return self.shared_vocab_size(data_dir) + index

    def problem_hparams(self, data_dir: str | None) -> problem_lib.ProblemHParams:
        import dataclasses

        hps = [t.hparams(data_dir) for t in self.task_list]
        for task, hp in zip(self.task_list[1:], hps[1:], strict=True):
            if hp.modality != hps[0].modality:
                raise ValueError(
                    f"The tasks {self.task_list[0].name!r} ({hps[0].modality}) and "
                    f"{task.name!r} ({hp.modality}) have other modalities: a multi-problem's "
                    f"tasks must have the same features.")
        size = self.shared_vocab_size(data_dir) + len(self.task_list)
        return dataclasses.replace(
            hps[0], vocab_size={f: size for f in hps[0].vocab_size}, was_reversed=False,
            stop_at_eos=any(hp.stop_at_eos for hp in hps))

    def eval_metrics(self) -> list[str]:
        return self.task_list[0].eval_metrics()

    def max_length(self, model_hparams: Any) -> int:
        return self.task_list[0].max_length(model_hparams)

    # -------------------------------------------------------------- reading
    def mixture(self, hparams: Any, data_dir: str) -> list[float]:
        """Each task's share of the training mixture (after pretraining, if any)."""
        schedule = getattr(hparams, "multiproblem_mixing_schedule", "constant")
        sizes = None
        if schedule == "proportional":
            sizes = [t.written_summary(data_dir)[problem_lib.TRAIN_SPLIT].examples
                     for t in self.task_list]
        return mixing_weights(schedule, len(self.task_list),
                              getattr(hparams, "multiproblem_per_task_threshold", ""), sizes)

    def task_views(self) -> list[TaskView]:
        """Each task as a problem of its own that reads with the shared vocabulary and
        its task token (for per-task evaluation and decoding)."""
        return [TaskView(self, index) for index in range(len(self.task_list))]

    def task_view(self, name: str) -> TaskView:
        """The task named `name` (see task_views); unknown names list the tasks."""
        names = [t.name for t in self.task_list]
        if name not in names:
            matches = registry.close_matches(name, names)
            raise registry.UnknownNameError(
                f"{self.name!r} has no task {name!r}: its tasks are {', '.join(names)}"
                + (f". Did you mean: {', '.join(matches)}?" if matches else "."))
        return TaskView(self, names.index(name))

    def dataset(self, mode: str, data_dir: str, *, hparams: Any = None, seed: int | None = None,
                **kwargs: Any) -> tf.data.Dataset:
        """TRAIN: the tasks' examples mixed (an endless dataset); EVAL and PREDICT: each
        task's split after the other's."""
        views = self.task_views()
        datasets = [v.dataset(mode, data_dir, hparams=hparams, seed=seed, **kwargs)
                    for v in views]
        if mode != problem_lib.TRAIN:
            combined = datasets[0]
            for other in datasets[1:]:
                combined = combined.concatenate(other)
            return combined
        return _mix([d.repeat() for d in datasets], self.mixture(hparams, data_dir),
                    _pretrain_examples(hparams), seed)


def _pretrain_examples(hparams: Any) -> int:
    if getattr(hparams, "multiproblem_mixing_schedule", "constant") != "pretrain":
        return 0
    return int(getattr(hparams, "multiproblem_schedule_max_examples", 0))


def _mix(datasets: list[Any], weights: list[float], pretrain_examples: int,
         seed: int | None) -> Any:
    """Example i comes from task 0 while i < pretrain_examples, then from task k with
    probability weights[k]; the choices depend only on (seed, i), so a run resumed from
    its input position continues the same sequence."""
    logits = tf.math.log(tf.constant([weights], tf.float32))
    base_seed = 0 if seed is None else int(seed)

    def choose(index):
        drawn = tf.random.stateless_categorical(
            logits, 1, seed=tf.stack([tf.constant(base_seed, tf.int64), index]),
            dtype=tf.int64)[0, 0]
        return tf.where(index < pretrain_examples, tf.constant(0, tf.int64), drawn)

    choices = tf.data.Dataset.counter().map(choose)
    return tf.data.Dataset.choose_from_datasets(datasets, choices)


class TaskView(problem_lib.Problem):
    """One task of a multi-problem, read with the shared vocabulary and its task token
    in front of the inputs (or of the targets, for a task without inputs)."""

    def __init__(self, multi: MultiProblem, index: int):
        super().__init__(False)
        self.multi, self.index = multi, index
        self.task = multi.task_list[index]
        self.batch_size_means_tokens = self.task.batch_size_means_tokens
        self.sequence_features = ("inputs", "targets")

    @property
    def base_name(self) -> str:
        return self.task.name

    @property
    def splits(self) -> Sequence[problem_lib.SplitSpec]:
        return self.task.splits

    def dataset_filename(self) -> str:
        return self.task.dataset_filename()

    def data_files(self, data_dir: str, split: str) -> list[str]:
        return self.task.data_files(data_dir, split)

    def written_summary(self, data_dir: str) -> dict[str, generator_utils.SplitSummary]:
        return self.task.written_summary(data_dir)

    def build_encoders(self, data_dir: str | None) -> dict[str, Any]:
        shared = self.multi.feature_encoders(data_dir)
        feature = "inputs" if "inputs" in shared else "targets"
        task_id = self.multi.task_id(self.index, data_dir)
        return {**shared, feature: text_encoder.TaskTokenEncoder(shared[feature], task_id,
                                                    len(self.multi.task_list))}

    def problem_hparams(self, data_dir: str | None) -> problem_lib.ProblemHParams:
        return self.multi.hparams(data_dir)

    def eval_metrics(self) -> list[str]:
        return self.task.eval_metrics()

    def max_length(self, model_hparams: Any) -> int:
        return self.task.max_length(model_hparams)

    def dataset(self, mode: str, data_dir: str, **kwargs: Any) -> tf.data.Dataset:
        has_inputs = "inputs" in self.multi.feature_encoders(data_dir)
        task_id = self.multi.task_id(self.index, data_dir)
        feature = "inputs" if has_inputs else "targets"

        def add_task_token(example):
            token = tf.constant([task_id], example[feature].dtype)
            return {**example, feature: tf.concat([token, example[feature]], 0)}

        return self.task.dataset(mode, data_dir, **kwargs).map(
            add_task_token, num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=kwargs.get("deterministic", False))


def select_task(problem: problem_lib.Problem, task: str | None,
                flag: str = "--decode_task") -> problem_lib.Problem:
    """The problem a decoder or exporter works on: a multi-problem's task `task` (its
    TaskView), or `problem` itself when it is not a multi-problem and `task` is None."""
    if isinstance(problem, MultiProblem):
        if not task:
            names = ", ".join(t.name for t in problem.task_list)
            raise TaskChoiceError(f"{problem.name!r} is a multi-problem: choose the task with "
                             f"{flag}=NAME (one of {names}).")
        return problem.task_view(task)
    if task:
        raise TaskChoiceError(f"{flag}={task!r} chooses a task of a multi-problem; {problem.name!r} "
                         f"is not one (drop {flag}).")
    return problem


# "A+B" names a multi-problem of A and B (registry.problem builds it).
registry.register_problem_combinator(
    TASK_SEPARATOR, lambda name: MultiProblem(task_names=name.split(TASK_SEPARATOR)),
    lambda name: MultiProblem)
