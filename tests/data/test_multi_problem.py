"""Multi-problems: the shared vocabulary, task tokens, the training mixture, per-task
reading and the errors for tasks that cannot be trained together."""

import collections

import numpy as np
import pytest

from t2t import registry
from t2t.data import multi_problem
from t2t.data import problem as problem_lib
from t2t.data.encoders import text_encoder
from t2t.data.multi_problem import MultiProblem, VocabularyMismatchError
from t2t.hparams.basic import create_hparams

REVERSE = "algorithmic_reverse_binary40_test"
ADDITION = "algorithmic_addition_binary40_test"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("multi"))
    registry.problem(f"{REVERSE}+{ADDITION}").generate_data(path, path + "/tmp", progress=False)
    return path


class ReverseAndAddition(MultiProblem):
    task_names = (REVERSE, ADDITION)


def test_the_command_line_name_and_a_subclass_are_the_same_problem(data_dir):
    named = registry.problem(f"{REVERSE}+{ADDITION}")
    assert named.name == f"{REVERSE}+{ADDITION}"
    assert registry.problem_class(named.name) is MultiProblem
    assert [t.name for t in ReverseAndAddition().task_list] == [REVERSE, ADDITION]
    assert named.hparams(data_dir) == ReverseAndAddition().hparams(data_dir)


def test_the_longer_vocabulary_is_shared_and_task_ids_follow_it(data_dir):
    multi = ReverseAndAddition()
    # Reversal's tokens ("0", "1") are the first of addition's ("0", "1", "2": the "+").
    encoders = multi.feature_encoders(data_dir)
    assert encoders["inputs"].describe() == registry.problem(ADDITION).feature_encoders(
        data_dir)["inputs"].describe()
    assert multi.shared_vocab_size(data_dir) == 5  # 2 reserved ids + 3 tokens
    assert [multi.task_id(i, data_dir) for i in range(2)] == [5, 6]
    hparams = multi.hparams(data_dir)
    assert hparams.vocab_size == {"inputs": 7, "targets": 7}
    assert hparams.modality == registry.problem(REVERSE).hparams(data_dir).modality


def test_each_task_reads_its_own_examples_behind_its_token(data_dir):
    multi = ReverseAndAddition()
    for view, task_id in zip(multi.task_views(), (5, 6), strict=True):
        plain = list(view.task.dataset(problem_lib.EVAL, data_dir, deterministic=True)
                     .as_numpy_iterator())
        tagged = list(view.dataset(problem_lib.EVAL, data_dir, deterministic=True)
                      .as_numpy_iterator())
        assert len(tagged) == len(plain) > 0
        for a, b in zip(plain, tagged, strict=True):
            assert b["inputs"].tolist() == [task_id, *a["inputs"].tolist()]
            assert b["targets"].tolist() == a["targets"].tolist()
        encoder = view.feature_encoders(data_dir)["inputs"]
        assert encoder.encode("1 0") == [task_id, 3, 2]
        assert encoder.decode([task_id, 3, 2]) == "1 0" and encoder.vocab_size == 7
    everything = list(multi.dataset(problem_lib.EVAL, data_dir).as_numpy_iterator())
    assert len(everything) == sum(
        len(list(v.task.dataset(problem_lib.EVAL, data_dir))) for v in multi.task_views())
    assert multi.task_view(ADDITION).index == 1


def _first_tokens(multi, data_dir, hparams, count, seed=3):
    dataset = multi.dataset(problem_lib.TRAIN, data_dir, hparams=hparams, seed=seed,
                            deterministic=True)
    return [int(ex["inputs"][0]) for ex in dataset.take(count).as_numpy_iterator()]


def test_the_constant_mixture_follows_the_given_weights_and_repeats(data_dir):
    multi = ReverseAndAddition()
    hparams = create_hparams("transformer_test", "multiproblem_per_task_threshold=3;1")
    tokens = _first_tokens(multi, data_dir, hparams, 2000)
    counts = collections.Counter(tokens)
    assert set(counts) == {5, 6}
    assert abs(counts[5] / 2000 - 0.75) < 0.04
    assert tokens == _first_tokens(multi, data_dir, hparams, 2000)  # same seed, same order
    equal = collections.Counter(_first_tokens(multi, data_dir, create_hparams("transformer_test"),
                                              2000))
    assert abs(equal[5] / 2000 - 0.5) < 0.04


def test_proportional_and_pretrain_mixtures(data_dir):
    multi = ReverseAndAddition()
    sizes = [multi.task_list[i].written_summary(data_dir)["train"].examples for i in range(2)]
    hparams = create_hparams("transformer_test", "multiproblem_mixing_schedule=proportional")
    assert multi.mixture(hparams, data_dir) == pytest.approx([s / sum(sizes) for s in sizes])
    pretrain = create_hparams("transformer_test", "multiproblem_mixing_schedule=pretrain,"
                                                  "multiproblem_schedule_max_examples=300")
    tokens = _first_tokens(multi, data_dir, pretrain, 1000)
    assert set(tokens[:300]) == {5}  # the primary task alone first
    assert 0.35 < np.mean(np.array(tokens[300:]) == 6) < 0.65  # then both


def test_the_trainer_pipeline_batches_the_mixture(data_dir):
    from t2t.data.pipeline import input_pipeline

    hparams = create_hparams("transformer_test", "batch_size=256")
    batch = next(iter(input_pipeline.input_dataset(ReverseAndAddition(), problem_lib.TRAIN,
                                                   data_dir, hparams)))
    first = batch["inputs"].numpy()[:, 0]
    assert set(first.tolist()) <= {5, 6} and len(set(first.tolist())) == 2


@pytest.mark.parametrize("name, message", [
    (f"{REVERSE}+algorithmic_addition_binary4", "Did you mean: algorithmic_addition_binary40"),
    (f"{REVERSE}+{REVERSE}", f"lists {REVERSE} twice"),
    (REVERSE + "+", "has an empty task name"),
    (REVERSE, None),  # one task: a plain problem
])
def test_bad_task_lists_are_refused(name, message):
    if message is None:
        assert not isinstance(registry.problem(name), MultiProblem)
        with pytest.raises(ValueError, match="needs two tasks or more"):
            MultiProblem(task_names=[name])
        return
    with pytest.raises((registry.UnknownNameError, ValueError), match=message):
        registry.problem(name)


def test_bad_mixing_settings_are_refused(data_dir):
    multi = ReverseAndAddition()
    with pytest.raises(ValueError, match=r"'constnat'.*Did you mean: constant"):
        multi.mixture(create_hparams("transformer_test",
                                     "multiproblem_mixing_schedule=constnat"), data_dir)
    with pytest.raises(ValueError, match=r"must give 2 non-negative weights"):
        multi.mixture(create_hparams("transformer_test", "multiproblem_per_task_threshold=1"),
                      data_dir)
    with pytest.raises(registry.UnknownNameError, match=rf"no task 'reverse'.*tasks are {REVERSE}"):
        multi.task_view("reverse")


def test_vocabularies_that_disagree_are_refused_naming_the_tasks_and_the_id():
    binary = text_encoder.TokenTextEncoder(["0", "1"])
    decimal = text_encoder.TokenTextEncoder([str(i) for i in range(10)])
    assert multi_problem.shared_encoder("inputs", [("b", binary), ("d", decimal)]) is decimal
    swapped = text_encoder.TokenTextEncoder(["1", "0"])
    with pytest.raises(VocabularyMismatchError,
                       match=r"inputs vocabularies of 'b' and 's' differ at id 2 \('0' "
                             r"against '1'\)"):
        multi_problem.shared_encoder("inputs", [("b", binary), ("s", swapped)])
    with pytest.raises(VocabularyMismatchError, match=r"'b' \(token\) and 'y' \(byte\)"):
        multi_problem.shared_encoder("targets", [("b", binary),
                                                 ("y", text_encoder.ByteTextEncoder())])


def test_packed_rows_start_each_example_with_its_task_token(data_dir):
    from t2t.data.pipeline import input_pipeline

    hparams = create_hparams("transformer_test", "batch_size=256,pack_dataset=true")
    batch = next(iter(input_pipeline.input_dataset(ReverseAndAddition(), problem_lib.TRAIN,
                                                   data_dir, hparams)))
    inputs, position = batch["inputs"].numpy(), batch["inputs_position"].numpy()
    segments = batch["inputs_segmentation"].numpy()
    starts = (position == 0) & (segments > 0)
    assert segments.max() > 1  # several examples share a row
    assert set(inputs[starts].tolist()) == {5, 6}  # every example begins with a task token
    assert not np.isin(inputs[~starts], [5, 6]).any()  # and nowhere else
